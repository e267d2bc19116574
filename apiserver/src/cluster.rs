//! The object semantics of a real API server on top of the store: create, get, update (shared by
//! PUT and PATCH), the status subresource, generation, and CRDs making their kinds served.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::defaults;
use crate::error::ApiError;
use crate::events;
use crate::faults::Faults;
use crate::generation;
use crate::patch;
use crate::resources::{Registry, Resource, crd_resources};
use crate::store::{Mutation, Outcome, Store};
use crate::util::{name_suffix, new_uid, now_rfc3339, validate_subdomain};
use crate::validation;

/// The table of namespaces.
pub const NAMESPACES: &str = "namespaces";
/// The table of CRDs.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main endpoint: everything but `status` when a status subresource exists.
    Main,
    /// The `/status` subresource: only `status`.
    Status,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager`, or a name derived from the user agent.
    pub field_manager: String,
    /// The object's managedFields were already computed by server-side apply.
    pub applied: bool,
}

/// A patch request.
#[derive(Debug, Clone)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`, with `force`.
    Apply {
        /// `force=true`.
        force: bool,
    },
}

/// A patch: its type (from `Content-Type`) and its parsed body.
#[derive(Debug, Clone)]
pub struct PatchRequest {
    /// The patch type.
    pub kind: PatchKind,
    /// The patch document.
    pub body: Value,
}

/// `DeleteOptions` that change behaviour.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `Orphan`, `Background` (default) or `Foreground`.
    pub propagation: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `orphanDependents: false` was sent: a deletion left pending answers 202, as upstream.
    pub cascade_requested: bool,
}

/// Work a deletion hands to the garbage collector.
#[derive(Debug, Clone)]
pub(crate) enum GcTask {
    /// A namespace started terminating: delete its contents, then it.
    Namespace(String),
    /// A foreground deletion: delete the owner's dependents, then drop its
    /// `foregroundDeletion` finalizer.
    Foreground {
        /// Table of the owner.
        table: Arc<str>,
        /// The owner's key.
        key: crate::store::ObjKey,
        /// The owner's uid.
        uid: String,
    },
}

/// The shared state of a running server.
pub struct Cluster {
    /// Object storage.
    pub store: Arc<Store>,
    /// Served resources.
    pub registry: Arc<Registry>,
    /// Fault injection.
    pub faults: Faults,
    /// Configuration.
    pub config: Config,
    /// Work for the garbage collector that a deletion starts.
    pub(crate) gc: tokio::sync::mpsc::UnboundedSender<GcTask>,
}

pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

pub(crate) fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

/// The object without the fields every write rewrites, to detect no-op updates.
fn comparable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        // Like Kubernetes, only the timestamps of managedFields entries do not make a write:
        // a change of ownership alone (a second manager applying an equal value) does.
        if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("time");
            }
        }
    }
    v
}

impl Cluster {
    fn require_namespace(&self, res: &Resource, ns: &str) -> Result<(), ApiError> {
        if !res.namespaced {
            return Ok(());
        }
        let stored = self
            .store
            .get(NAMESPACES, "", ns)
            .ok_or_else(|| ApiError::not_found("namespaces", ns))?;
        let terminating = serde_json::from_slice::<Value>(&stored.bytes)
            .is_ok_and(|v| v.pointer("/metadata/deletionTimestamp").is_some());
        if terminating {
            return Err(ApiError::Forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated; \
                 wait for it to be gone and create it again"
            )));
        }
        Ok(())
    }

    /// Fills and checks `apiVersion` and `kind` against the resource.
    pub(crate) fn check_type(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} request must be a JSON object",
                res.kind
            )));
        }
        let api_version = res.api_version();
        match obj.get("kind").and_then(Value::as_str) {
            None | Some("") => obj["kind"] = json!(res.kind),
            Some(k) if k != res.kind => {
                return Err(ApiError::BadRequest(format!(
                    "the object kind `{k}` does not match the resource `{}`, which serves `{}`",
                    res.group_resource(),
                    res.kind
                )));
            }
            Some(_) => {}
        }
        match obj.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => obj["apiVersion"] = json!(api_version),
            Some(v) if v != api_version => {
                return Err(ApiError::BadRequest(format!(
                    "the object apiVersion `{v}` does not match the request path's `{api_version}`"
                )));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// `POST`: creates an object.
    pub fn create(
        &self,
        res: &Resource,
        ns: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Bytes, ApiError> {
        Self::check_type(res, &mut obj)?;
        if res.is_events_v1() {
            obj = events::to_core(obj);
        }
        self.require_namespace(res, ns)?;
        let meta = meta_mut(&mut obj);
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", name_suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        &res.kind,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            },
        };
        validate_subdomain(&name).map_err(|why| {
            ApiError::invalid(
                &res.kind,
                &name,
                format!("metadata.name: Invalid value: \"{name}\": {why}"),
            )
        })?;
        if res.namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::BadRequest(format!(
                        "the namespace of the provided object (`{n}`) does not match the namespace \
                         sent on the request (`{ns}`)"
                    )));
                }
                _ => {
                    meta.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let now = now_rfc3339();
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("creationTimestamp".into(), json!(now));
        match generation::on_create(res) {
            Some(g) => meta.insert("generation".into(), json!(g)),
            None => meta.remove("generation"),
        };
        for key in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(key);
        }
        if res.status
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        let crd = self.prepare_special_create(res, &mut obj)?;
        defaults::apply(res, &mut obj);
        validation::normalize(res, &mut obj);
        validation::validate(res, &obj)?;
        if !opts.applied {
            patch::record_update(None, &mut obj, &opts.field_manager, &now);
        }
        defaults::allocate(res, &mut obj, None);
        if *res.table() == *NAMESPACES {
            obj["status"] = json!({"phase": "Active"});
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        let table = res.table();
        let ns_key = if res.namespaced { ns } else { "" };
        let outcome = self.store.mutate(&table, ns_key, &name, |cur, _| {
            if cur.is_some() {
                return Err(ApiError::AlreadyExists {
                    resource: res.group_resource(),
                    name: name.clone(),
                });
            }
            Ok(if opts.dry_run {
                Mutation::Keep(obj)
            } else {
                Mutation::Put(obj)
            })
        })?;
        if let Some(resources) = crd
            && !opts.dry_run
        {
            self.registry.install_crd(&name, resources);
        }
        Ok(outcome.bytes)
    }

    /// Kind-specific defaults on create; returns the resources a CRD will serve.
    fn prepare_special_create(
        &self,
        res: &Resource,
        obj: &mut Value,
    ) -> Result<Option<Vec<Resource>>, ApiError> {
        if *res.table() == *NAMESPACES {
            // spec.finalizers and status.phase are set in `create` after the managed fields are
            // recorded: upstream's strategy sets them, unowned by the writer.
            if !obj
                .pointer("/metadata/labels")
                .is_some_and(Value::is_object)
            {
                obj["metadata"]["labels"] = json!({});
            }
            let name = str_at(obj, "/metadata/name")
                .unwrap_or_default()
                .to_string();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            return Ok(None);
        }
        if *res.table() == *"secrets"
            && obj
                .get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            obj["type"] = json!("Opaque");
        }
        if *res.table() == *CRDS {
            let name = str_at(obj, "/metadata/name")
                .unwrap_or_default()
                .to_string();
            let resources =
                crd_resources(obj).map_err(|m| ApiError::invalid(&res.kind, &name, m))?;
            obj["status"] = crd_status(obj);
            return Ok(Some(resources));
        }
        Ok(None)
    }

    /// `GET` of one object.
    pub fn get(&self, res: &Resource, ns: &str, name: &str) -> Result<Bytes, ApiError> {
        let ns = if res.namespaced { ns } else { "" };
        self.store
            .get(&res.table(), ns, name)
            .map(|s| s.bytes)
            .ok_or_else(|| ApiError::not_found(&res.group_resource(), name))
    }

    /// `PUT` of the object or its status.
    pub fn update(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        mut obj: Value,
        part: Part,
        opts: &WriteOptions,
    ) -> Result<Bytes, ApiError> {
        Self::check_type(res, &mut obj)?;
        match str_at(&obj, "/metadata/name") {
            Some(n) if n != name => {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object (`{n}`) does not match the name on the URL (`{name}`)"
                )));
            }
            _ => {}
        }
        let sent_rv = str_at(&obj, "/metadata/resourceVersion").map(str::to_string);
        if sent_rv.as_deref().is_none_or(str::is_empty) && !res.allows_unconditional_update() {
            return Err(ApiError::invalid(
                &res.group_resource(),
                name,
                "metadata.resourceVersion: Invalid value: 0: must be specified for an update",
            ));
        }
        self.write(
            res,
            ns,
            name,
            opts,
            move |current| {
                check_rv(res, name, current, sent_rv.as_deref())?;
                Ok(obj)
            },
            part,
        )
        .map(|o| o.bytes)
    }

    /// The shared update path: `change` builds the candidate from the live object, then the
    /// server-owned fields, the status rule, generation and finalizer completion are applied.
    pub(crate) fn write(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        opts: &WriteOptions,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
        part: Part,
    ) -> Result<Outcome, ApiError> {
        let ns_key = if res.namespaced { ns } else { "" };
        if res.namespaced && self.store.get(NAMESPACES, "", ns).is_none() {
            return Err(ApiError::not_found("namespaces", ns));
        }
        let table = res.table();
        let now = now_rfc3339();
        let outcome = self.store.mutate(&table, ns_key, name, |cur, _| {
            let current = cur.ok_or_else(|| ApiError::not_found(&res.group_resource(), name))?;
            let mut candidate = if res.is_events_v1() {
                events::to_core(change(&events::to_events_v1(current.clone()))?)
            } else {
                change(&current)?
            };
            if !candidate.is_object() {
                return Err(ApiError::invalid(
                    &res.kind,
                    name,
                    "the result must be a JSON object",
                ));
            }
            let mut next = match part {
                Part::Status => {
                    let mut next = current.clone();
                    match candidate.get_mut("status").map(Value::take) {
                        Some(status) => next["status"] = status,
                        None => {
                            if let Some(o) = next.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                    next
                }
                Part::Main => {
                    if res.status {
                        match current.get("status") {
                            Some(s) => candidate["status"] = s.clone(),
                            None => {
                                if let Some(o) = candidate.as_object_mut() {
                                    o.remove("status");
                                }
                            }
                        }
                    }
                    candidate
                }
            };
            keep_server_fields(&current, &mut next, res);
            defaults::apply(res, &mut next);
            // Kept from the stored object, so unchanged and not newly owned by this writer.
            defaults::allocate(res, &mut next, Some(&current));
            validation::normalize(res, &mut next);
            validation::validate(res, &next)?;
            no_new_finalizers_while_deleting(res, name, &current, &next)?;
            if *table == *CRDS {
                crd_resources(&next).map_err(|m| ApiError::invalid(&res.kind, name, m))?;
            }
            match generation::on_update(res, &current, &next, part == Part::Status) {
                Some(g) => {
                    meta_mut(&mut next).insert("generation".into(), json!(g));
                }
                None => {
                    meta_mut(&mut next).remove("generation");
                }
            }
            if comparable(&current) == comparable(&next) {
                return Ok(Mutation::Keep(current));
            }
            if !opts.applied {
                patch::record_update(Some(&current), &mut next, &opts.field_manager, &now);
            }
            let finalizers_done = next
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
            let deleting = next.pointer("/metadata/deletionTimestamp").is_some();
            Ok(match (opts.dry_run, deleting && finalizers_done) {
                (true, _) => {
                    // A dry run answers with what would be stored, at the current version.
                    if let Some(rv) = current.pointer("/metadata/resourceVersion") {
                        meta_mut(&mut next).insert("resourceVersion".into(), rv.clone());
                    }
                    Mutation::Keep(next)
                }
                (false, true) if *table != *NAMESPACES => Mutation::Delete(next),
                (false, _) => Mutation::Put(next),
            })
        })?;
        if *table == *CRDS
            && !opts.dry_run
            && !outcome.deleted
            && let Ok(v) = serde_json::from_slice::<Value>(&outcome.bytes)
            && let Ok(resources) = crd_resources(&v)
        {
            self.registry.install_crd(name, resources);
        }
        Ok(outcome)
    }
}

/// The status a CRD gets when it is accepted: names accepted, established, its storage
/// version recorded.
pub(crate) fn crd_status(crd: &Value) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let now = now_rfc3339();
    json!({
        "acceptedNames": names,
        "storedVersions": storage,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    })
}

pub(crate) fn check_rv(
    res: &Resource,
    name: &str,
    current: &Value,
    sent: Option<&str>,
) -> Result<(), ApiError> {
    let live = str_at(current, "/metadata/resourceVersion");
    match sent {
        Some(s) if !s.is_empty() && Some(s) != live => Err(ApiError::Conflict {
            resource: res.group_resource(),
            name: name.to_string(),
            message: "the object has been modified; please apply your changes to the latest \
                      version and try again"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// Copies the fields clients cannot change from the live object.
fn keep_server_fields(current: &Value, next: &mut Value, res: &Resource) {
    for key in ["kind", "apiVersion"] {
        if let Some(v) = current.get(key) {
            next[key] = v.clone();
        }
    }
    let meta = meta_mut(next);
    for key in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match current.pointer(&format!("/metadata/{key}")) {
            Some(v) => {
                meta.insert(key.into(), v.clone());
            }
            None => {
                meta.remove(key);
            }
        }
    }
    meta.remove("resourceVersion");
    let _ = res;
}

/// Upstream refuses to add finalizers to an object being deleted (422 on `metadata.finalizers`).
fn no_new_finalizers_while_deleting(
    res: &Resource,
    name: &str,
    current: &Value,
    next: &Value,
) -> Result<(), ApiError> {
    if current.pointer("/metadata/deletionTimestamp").is_none() {
        return Ok(());
    }
    let finalizers = |v: &Value| -> Vec<String> {
        v.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect()
    };
    let before = finalizers(current);
    let added: Vec<String> = finalizers(next)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    Err(ApiError::invalid(
        &res.kind,
        name,
        format!(
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being \
             deleted, found new finalizers []string{{{}}}",
            listed.join(", ")
        ),
    ))
}
