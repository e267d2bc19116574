//! `PUT` of an object or its status, and the update path it shares with PATCH: the fields the
//! server owns, the status rule, generation, finalizers and no-op writes.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::cluster::{CRDS, Cluster, NAMESPACES, Part, WriteOptions, meta_mut, str_at};
use crate::defaults;
use crate::error::ApiError;
use crate::events;
use crate::generation;
use crate::patch;
use crate::resources::{Resource, crd_resources};
use crate::store::{Mutation, Outcome};
use crate::util::now_rfc3339;
use crate::validation;

impl Cluster {
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
        check_namespace(res, ns, &obj)?;
        let sent_uid = str_at(&obj, "/metadata/uid")
            .filter(|u| !u.is_empty())
            .map(str::to_string);
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
                check_uid(res, name, current, sent_uid.as_deref())?;
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
                    // An apply through /status recorded its applier's fields: keep them.
                    if opts.applied
                        && let Some(managed) = candidate.pointer_mut("/metadata/managedFields")
                    {
                        meta_mut(&mut next).insert("managedFields".into(), managed.take());
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
            crate::typed::check(res, &next)?;
            keep_server_fields(&current, &mut next, res);
            defaults::apply(res, &mut next);
            // Kept from the stored object, so unchanged and not newly owned by this writer.
            defaults::allocate(res, &mut next, Some(&current));
            validation::normalize(res, &mut next);
            validation::validate_update(res, &current, &next)?;
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
                patch::record_update_with(
                    Some(&current),
                    &mut next,
                    &opts.field_manager,
                    &now,
                    res.schema.clone(),
                );
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

/// A body naming another namespace than the URL is refused (upstream's `checkName`); one
/// naming none is written to the URL's.
pub(crate) fn check_namespace(res: &Resource, ns: &str, obj: &Value) -> Result<(), ApiError> {
    match str_at(obj, "/metadata/namespace") {
        Some(n) if res.namespaced && !n.is_empty() && n != ns => {
            Err(ApiError::BadRequest(format!(
                "the namespace of the object ({n}) does not match the namespace on the request \
                 ({ns}); send it to /namespaces/{n}/... or drop metadata.namespace"
            )))
        }
        _ => Ok(()),
    }
}

/// A uid in the body is a precondition (upstream's `DefaultUpdatedObjectInfo`): another
/// object's uid is 409 Conflict.
fn check_uid(
    res: &Resource,
    name: &str,
    current: &Value,
    sent: Option<&str>,
) -> Result<(), ApiError> {
    let have = str_at(current, "/metadata/uid").unwrap_or_default();
    match sent {
        Some(uid) if uid != have => Err(ApiError::Conflict {
            resource: res.group_resource(),
            name: name.to_string(),
            message: format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}; \
                 metadata.uid cannot change: drop it or send the live object's uid"
            ),
        }),
        _ => Ok(()),
    }
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
