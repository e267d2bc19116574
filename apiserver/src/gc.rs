//! Background garbage collection: dependents of deleted owners (by `ownerReferences`), the
//! contents of terminating namespaces, and the custom resources of deleted CRDs.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::cluster::{CRDS, Cluster, GcTask, NAMESPACES};
use crate::delete::{FOREGROUND, deletion};
use crate::store::{GcSignal, Mutation, ObjKey, Removal};

/// Runs until `cancel` fires.
pub(crate) async fn run(
    cluster: Arc<Cluster>,
    mut removals: UnboundedReceiver<GcSignal>,
    mut tasks: UnboundedReceiver<GcTask>,
    cancel: CancellationToken,
) {
    let mut namespaces: HashSet<String> = HashSet::new();
    let mut foreground: Vec<(Arc<str>, ObjKey, String)> = Vec::new();
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            Some(task) = tasks.recv() => match task {
                GcTask::Namespace(ns) => {
                    delete_namespace_contents(&cluster, &ns);
                    namespaces.insert(ns.clone());
                    if finish_namespace(&cluster, &ns) {
                        namespaces.remove(&ns);
                    }
                }
                GcTask::Foreground { table, key, uid } => {
                    for (dep_table, dep_key) in cluster.store.dependents(&uid) {
                        let _ = cluster.store.mutate(&dep_table, &dep_key.ns, &dep_key.name, |cur, _| {
                            Ok(cur.map_or(Mutation::Keep(Value::Null), |v| deletion(v, false)))
                        });
                    }
                    foreground.push((table, key, uid));
                    foreground.retain(|(t, k, u)| !finish_foreground(&cluster, t, k, u));
                }
            },
            Some(signal) = removals.recv() => {
                let removal = match signal {
                    GcSignal::Removed(removal) => removal,
                    GcSignal::Owned { table, key } => {
                        collect_dependent(&cluster, &table, &key);
                        continue;
                    }
                };
                on_removal(&cluster, &removal);
                foreground.retain(|(t, k, u)| !finish_foreground(&cluster, t, k, u));
                if namespaces.contains(&removal.ns) && finish_namespace(&cluster, &removal.ns) {
                    namespaces.remove(&removal.ns);
                }
            }
            else => break,
        }
    }
}

fn on_removal(cluster: &Cluster, removal: &Removal) {
    if *removal.table == *CRDS {
        cluster.registry.remove_crd(&removal.name);
        let table: Arc<str> = Arc::from(removal.name.as_str());
        for key in cluster.store.keys_in(&table, None) {
            let _ = cluster.store.mutate(&table, &key.ns, &key.name, |cur, _| {
                Ok(cur.map_or(Mutation::Keep(Value::Null), Mutation::Delete))
            });
        }
    }
    if removal.uid.is_empty() {
        return;
    }
    for (table, key) in cluster.store.dependents(&removal.uid) {
        collect_dependent(cluster, &table, &key);
    }
}

/// Drops owner references whose owner is gone; deletes the dependent when none remain.
fn collect_dependent(cluster: &Cluster, table: &Arc<str>, key: &ObjKey) {
    // Owner lookups take the store lock, so they happen before the mutation.
    let Some(stored) = cluster.store.get(table, &key.ns, &key.name) else {
        return;
    };
    let Ok(obj) = serde_json::from_slice::<Value>(&stored.bytes) else {
        return;
    };
    let solid_uids: Vec<String> = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| owner_exists(cluster, r, &key.ns))
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
        .collect();
    let _ = cluster.store.mutate(table, &key.ns, &key.name, |cur, _| {
        let Some(mut obj) = cur else {
            return Ok(Mutation::Keep(Value::Null));
        };
        let refs = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let solid: Vec<Value> = refs
            .iter()
            .filter(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|u| solid_uids.iter().any(|s| s == u))
            })
            .cloned()
            .collect();
        if solid.is_empty() {
            return Ok(deletion(obj, false));
        }
        if solid.len() == refs.len() {
            return Ok(Mutation::Keep(obj));
        }
        obj["metadata"]["ownerReferences"] = Value::Array(solid);
        Ok(Mutation::Put(obj))
    });
}

fn owner_exists(cluster: &Cluster, owner: &Value, dependent_ns: &str) -> bool {
    let field = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or_default();
    let Some(res) = cluster
        .registry
        .find_kind(field("apiVersion"), field("kind"))
    else {
        return false;
    };
    let ns = if res.namespaced { dependent_ns } else { "" };
    cluster
        .store
        .get(&res.table(), ns, field("name"))
        .and_then(|s| serde_json::from_slice::<Value>(&s.bytes).ok())
        .is_some_and(|v| v.pointer("/metadata/uid").and_then(Value::as_str) == Some(field("uid")))
}

/// Drops the `foregroundDeletion` finalizer once the owner has no dependents; true when done.
fn finish_foreground(cluster: &Cluster, table: &Arc<str>, key: &ObjKey, uid: &str) -> bool {
    if !cluster.store.dependents(uid).is_empty() {
        return false;
    }
    let _ = cluster.store.mutate(table, &key.ns, &key.name, |cur, _| {
        let Some(mut obj) = cur else {
            return Ok(Mutation::Keep(Value::Null));
        };
        if let Some(list) = obj
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f != FOREGROUND);
        }
        let done = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        Ok(if done {
            Mutation::Delete(obj)
        } else {
            Mutation::Put(obj)
        })
    });
    true
}

fn delete_namespace_contents(cluster: &Cluster, ns: &str) {
    for table in cluster.store.tables() {
        if *table == *NAMESPACES {
            continue;
        }
        for key in cluster.store.keys_in(&table, Some(ns)) {
            let _ = cluster.store.mutate(&table, &key.ns, &key.name, |cur, _| {
                Ok(cur.map_or(Mutation::Keep(Value::Null), |v| deletion(v, false)))
            });
        }
    }
}

/// Removes a terminating namespace once it is empty and has no finalizers; true when gone.
fn finish_namespace(cluster: &Cluster, ns: &str) -> bool {
    let empty = cluster
        .store
        .tables()
        .iter()
        .filter(|t| ***t != *NAMESPACES)
        .all(|t| cluster.store.keys_in(t, Some(ns)).is_empty());
    if !empty {
        return false;
    }
    let table: Arc<str> = Arc::from(NAMESPACES);
    let outcome = cluster.store.mutate(&table, "", ns, |cur, _| {
        let Some(obj) = cur else {
            return Ok(Mutation::Keep(Value::Null));
        };
        let finalized = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if obj.pointer("/metadata/deletionTimestamp").is_some() && finalized {
            Ok(Mutation::Delete(obj))
        } else {
            Ok(Mutation::Keep(obj))
        }
    });
    outcome.is_ok_and(|o| o.deleted)
}
