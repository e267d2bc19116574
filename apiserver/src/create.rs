//! `POST`: names (`generateName` too), namespaces, the fields the server sets, kind-specific
//! defaults, and CRDs accepted and their kinds served.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::cluster::{CRDS, Cluster, NAMESPACES, WriteOptions, meta_mut, str_at};
use crate::defaults;
use crate::error::ApiError;
use crate::events;
use crate::generation;
use crate::metadata;
use crate::patch;
use crate::resources::{Resource, crd_resources};
use crate::store::Mutation;
use crate::util::{name_suffix, new_uid, now_rfc3339};
use crate::validation;

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
                Some(prefix) if !prefix.is_empty() => {
                    let name = format!("{}{}", generate_name_base(prefix), name_suffix());
                    generate_name_check(res, prefix, &name)?;
                    name
                }
                _ => {
                    return Err(ApiError::invalid(
                        &res.kind,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            },
        };
        let problems = metadata::name_problems(res, &name);
        if !problems.is_empty() {
            let problems = problems
                .iter()
                .map(|why| format!("metadata.name: Invalid value: \"{name}\": {why}"))
                .collect();
            return Err(ApiError::invalid_all(&res.kind, &name, problems));
        }
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
        // Upstream's storage refuses a create that carries a resourceVersion (a 500 with no
        // reason); a dry run never reaches it, and apply creates from the live-object path.
        let sent_rv = meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv != 0);
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
        crate::typed::check(res, &obj)?;
        let crd = self.prepare_special_create(res, &mut obj)?;
        defaults::apply(res, &mut obj);
        validation::normalize(res, &mut obj);
        validation::validate(res, &obj)?;
        if sent_rv && !opts.dry_run && !opts.applied {
            return Err(ApiError::Unclassified(format!(
                "resourceVersion should not be set on objects to be created (the {} `{name}` \
                 carries one); send the create without metadata.resourceVersion",
                res.kind
            )));
        }
        if !opts.applied {
            patch::record_update_with(
                None,
                &mut obj,
                &opts.field_manager,
                &now,
                res.schema.clone(),
            );
        }
        defaults::allocate(res, &mut obj, None);
        if *res.table() == *NAMESPACES {
            obj["status"] = json!({"phase": "Active"});
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        if res.crd.is_none() && res.group.is_empty() && res.kind == "ResourceQuota" {
            // Upstream empties a new quota's status (its controller fills it in), and an empty
            // status is written out as `{}`.
            obj["status"] = json!({});
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
}

/// Refuses a `generateName` that is no name's start, as upstream does: the prefix with a trailing
/// `-` read as a letter must itself be a valid name (`web.` is not: a name cannot end in `.`).
/// The error names the object by the name generated, `name`.
fn generate_name_check(res: &Resource, prefix: &str, name: &str) -> Result<(), ApiError> {
    let masked = match prefix.strip_suffix('-') {
        Some(rest) => format!("{rest}a"),
        None => prefix.to_owned(),
    };
    let problems = metadata::name_problems(res, &masked);
    if problems.is_empty() {
        return Ok(());
    }
    let problems = problems
        .iter()
        .map(|why| format!("metadata.generateName: Invalid value: \"{prefix}\": {why}"))
        .collect();
    Err(ApiError::invalid_all(&res.kind, name, problems))
}

/// The most characters of a `generateName` prefix kept: with the 5 random characters the name
/// is at most 63 (upstream's `maxGeneratedNameLength`).
const MAX_GENERATED_PREFIX: usize = 58;

/// The `generateName` prefix, cut to [`MAX_GENERATED_PREFIX`] bytes as upstream's name generator
/// cuts it (at a character boundary; a longer non-ASCII prefix is no valid name anyway).
fn generate_name_base(prefix: &str) -> &str {
    let mut end = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    &prefix[..end]
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
