//! Deletion: preconditions, finalizers and `deletionTimestamp`, namespaces that terminate,
//! and orphaning dependents.

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::cluster::{Cluster, DeleteOptions, GcTask, NAMESPACES, meta_mut, str_at};
use crate::error::ApiError;
use crate::resources::Resource;
use crate::store::{Mutation, ObjKey};
use crate::util::now_rfc3339;

/// The namespaces upstream's NamespaceLifecycle admission never lets go (403 Forbidden, dry
/// runs included).
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The finalizer of a foreground deletion.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let meta = meta_mut(obj);
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

impl Cluster {
    /// `DELETE` of one object. Returns the body (a Success Status when the object is gone, or
    /// with `dryRun` would be, else the object marked for deletion) and whether the object is
    /// gone.
    pub fn delete(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Bytes, bool), ApiError> {
        self.delete_with_object(res, ns, name, opts)
            .map(|(body, gone, _)| (body, gone))
    }

    /// [`Cluster::delete`], also returning the object as it was deleted or marked (what
    /// deletecollection lists).
    pub fn delete_with_object(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Bytes, bool, Bytes), ApiError> {
        let ns_key = if res.namespaced { ns } else { "" };
        let table = res.table();
        if *table == *NAMESPACES && IMMORTAL_NAMESPACES.contains(&name) {
            return Err(ApiError::ForbiddenObject {
                resource: res.group_resource(),
                name: name.to_string(),
                message: "this namespace may not be deleted".into(),
            });
        }
        let would_delete = std::cell::Cell::new(false);
        let uid = self
            .store
            .get(&table, ns_key, name)
            .and_then(|s| serde_json::from_slice::<Value>(&s.bytes).ok())
            .and_then(|v| str_at(&v, "/metadata/uid").map(str::to_string))
            .unwrap_or_default();
        let policy = opts.propagation.as_deref();
        if policy == Some("Orphan") && !opts.dry_run {
            self.orphan_dependents(&uid);
        }
        let foreground = policy == Some("Foreground")
            && !opts.dry_run
            && !self.store.dependents(&uid).is_empty();
        let is_namespace = *table == *NAMESPACES;
        let outcome = self.store.mutate(&table, ns_key, name, |cur, _| {
            let current = cur.ok_or_else(|| ApiError::not_found(&res.group_resource(), name))?;
            let conflict = |what: &str, want: &str, have: &str| ApiError::Conflict {
                resource: res.group_resource(),
                name: name.to_string(),
                message: format!(
                    "Precondition failed: {what} in precondition: {want}, {what} in object meta: \
                     {have}; fetch the object again and retry with its current {what}"
                ),
            };
            if let Some(uid) = &opts.uid {
                let have = str_at(&current, "/metadata/uid").unwrap_or_default();
                if uid != have {
                    return Err(conflict("UID", uid, have));
                }
            }
            if let Some(rv) = &opts.resource_version {
                let have = str_at(&current, "/metadata/resourceVersion").unwrap_or_default();
                if rv != have {
                    return Err(conflict("ResourceVersion", rv, have));
                }
            }
            let mut current = current;
            if foreground {
                add_finalizer(&mut current, FOREGROUND);
            }
            let decision = deletion(current, is_namespace);
            Ok(match (opts.dry_run, decision) {
                (true, Mutation::Delete(v)) => {
                    would_delete.set(true);
                    Mutation::Keep(v)
                }
                (true, Mutation::Put(v) | Mutation::Keep(v)) => Mutation::Keep(v),
                (false, d) => d,
            })
        })?;
        if is_namespace && !opts.dry_run {
            let _ = self.gc.send(GcTask::Namespace(name.to_string()));
        }
        if foreground && !outcome.deleted {
            let _ = self.gc.send(GcTask::Foreground {
                table: table.clone(),
                key: ObjKey::new(ns_key, name),
                uid,
            });
        }
        if (outcome.deleted || would_delete.get())
            && crate::builtins::returns_deleted_object(&res.group, &res.plural)
            && res.crd.is_none()
        {
            // These kinds' storages answer with the deleted object, as upstream's do.
            return Ok((outcome.bytes.clone(), outcome.deleted, outcome.bytes));
        }
        if outcome.deleted || would_delete.get() {
            let v: Value = serde_json::from_slice(&outcome.bytes).unwrap_or_default();
            let mut status = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "kind": res.plural, "uid": v.pointer("/metadata/uid")},
            });
            if !res.group.is_empty() {
                status["details"]["group"] = res.group.clone().into();
            }
            return Ok((
                Bytes::from(status.to_string()),
                outcome.deleted,
                outcome.bytes,
            ));
        }
        Ok((outcome.bytes.clone(), false, outcome.bytes))
    }

    /// Removes owner references to `uid` from its dependents (DeleteOptions Orphan).
    pub fn orphan_dependents(&self, uid: &str) {
        for (table, key) in self.store.dependents(uid) {
            let _ = self.store.mutate(&table, &key.ns, &key.name, |cur, _| {
                let Some(mut v) = cur else {
                    return Ok(Mutation::Keep(Value::Null));
                };
                if let Some(refs) = v
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                }
                Ok(Mutation::Put(v))
            });
        }
    }
}

/// What deleting `current` does: mark it (finalizers pending) or remove it.
pub fn deletion(mut current: Value, is_namespace: bool) -> Mutation {
    let pending = current
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if pending || is_namespace {
        if current.pointer("/metadata/deletionTimestamp").is_some() {
            return Mutation::Keep(current);
        }
        let meta = meta_mut(&mut current);
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        // Upstream sets a grace period on objects held by finalizers, none on a namespace.
        if !is_namespace {
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        if is_namespace {
            current["status"] = json!({"phase": "Terminating"});
        }
        return Mutation::Put(current);
    }
    Mutation::Delete(current)
}
