//! The in-memory object store: serialized objects per resource, one global resourceVersion, a
//! bounded event history for watch resumption, and a broadcast of every change to watchers.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

mod records;

pub use records::{
    Event, EventType, GcSignal, Mutation, ObjKey, Outcome, Page, Removal, Stored, Subscription,
};

use crate::error::ApiError;

struct Inner {
    rv: u64,
    tables: HashMap<Arc<str>, BTreeMap<ObjKey, Stored>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Watches may resume from any version >= this one.
    compacted: u64,
    /// owner uid -> dependents.
    dependents: HashMap<String, Vec<(Arc<str>, ObjKey)>>,
}

/// The store; cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    removals: mpsc::UnboundedSender<GcSignal>,
}

impl Store {
    /// A new store with a history window of `history_limit` events and a watch broadcast buffer
    /// of `watch_buffer` events; removals are reported on the returned channel.
    pub fn new(
        history_limit: usize,
        watch_buffer: usize,
    ) -> (Self, mpsc::UnboundedReceiver<GcSignal>) {
        let (events, _) = broadcast::channel(watch_buffer.max(16));
        let (removals, rx) = mpsc::unbounded_channel();
        let store = Store {
            inner: Mutex::new(Inner {
                rv: 1,
                tables: HashMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted: 1,
                dependents: HashMap::new(),
            }),
            events,
            removals,
        };
        (store, rx)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, table: &str, ns: &str, name: &str) -> Option<Stored> {
        let inner = self.lock();
        inner
            .tables
            .get(table)?
            .get(&ObjKey::new(ns, name))
            .cloned()
    }

    /// Whether the history still covers `rv` (a watch may resume from it).
    pub fn check_window(&self, rv: u64) -> Result<(), ApiError> {
        let compacted = self.lock().compacted;
        if rv < compacted {
            return Err(ApiError::Gone(format!(
                "too old resource version: {rv} ({compacted})"
            )));
        }
        Ok(())
    }

    /// Lists objects of `table` (in `ns` when given) after key `after`, keeping those for which
    /// `keep` is true, at most `limit` of them (0 = all).
    pub fn list(
        &self,
        table: &str,
        ns: Option<&str>,
        after: Option<&ObjKey>,
        limit: usize,
        keep: &dyn Fn(&Bytes) -> bool,
    ) -> Page {
        let inner = self.lock();
        let mut page = Page {
            rv: inner.rv,
            items: Vec::new(),
            next: None,
            remaining: 0,
        };
        let Some(map) = inner.tables.get(table) else {
            return page;
        };
        use std::ops::Bound;
        let lower = match (after, ns) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included(ObjKey::new(ns, "")),
            (None, None) => Bound::Unbounded,
        };
        for (key, stored) in map.range((lower, Bound::Unbounded)) {
            if let Some(ns) = ns
                && key.ns != ns
            {
                break;
            }
            if !keep(&stored.bytes) {
                continue;
            }
            if limit > 0 && page.items.len() >= limit {
                page.remaining += 1;
                continue;
            }
            page.items.push((key.clone(), stored.bytes.clone()));
        }
        if page.remaining > 0 {
            page.next = page.items.last().map(|(k, _)| k.clone());
        }
        page
    }

    /// Names of the objects of `table` in namespace `ns`.
    pub fn keys_in(&self, table: &str, ns: Option<&str>) -> Vec<ObjKey> {
        let inner = self.lock();
        inner
            .tables
            .get(table)
            .map(|m| {
                m.keys()
                    .filter(|k| ns.is_none_or(|ns| k.ns == ns))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tables that hold at least one object.
    pub fn tables(&self) -> Vec<Arc<str>> {
        let inner = self.lock();
        inner
            .tables
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Dependents of the object with `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<(Arc<str>, ObjKey)> {
        self.lock().dependents.get(uid).cloned().unwrap_or_default()
    }

    /// Atomically reads the object, lets `f` decide, and applies its decision. `f` receives the
    /// current object (parsed) and the resourceVersion the change will get.
    pub fn mutate(
        &self,
        table: &Arc<str>,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<Value>, u64) -> Result<Mutation, ApiError>,
    ) -> Result<Outcome, ApiError> {
        let mut inner = self.lock();
        let key = ObjKey::new(ns, name);
        let current = inner
            .tables
            .get(table)
            .and_then(|m| m.get(&key))
            .map(|s| serde_json::from_slice::<Value>(&s.bytes))
            .transpose()
            .map_err(|e| ApiError::Internal(format!("stored object is not JSON: {e}")))?;
        let existed = current.is_some();
        let next_rv = inner.rv + 1;
        match f(current, next_rv)? {
            Mutation::Keep(v) => Ok(Outcome {
                bytes: to_bytes(&v)?,
                deleted: false,
            }),
            Mutation::Put(mut v) => {
                set_rv(&mut v, next_rv);
                let bytes = to_bytes(&v)?;
                let kind = if existed {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                self.commit(&mut inner, table, key, Some(&v), bytes.clone(), kind);
                Ok(Outcome {
                    bytes,
                    deleted: false,
                })
            }
            Mutation::Delete(mut v) => {
                set_rv(&mut v, next_rv);
                let bytes = to_bytes(&v)?;
                self.commit(
                    &mut inner,
                    table,
                    key,
                    Some(&v),
                    bytes.clone(),
                    EventType::Deleted,
                );
                Ok(Outcome {
                    bytes,
                    deleted: true,
                })
            }
        }
    }

    /// Inserts many objects at once (no HTTP, one lock); each must already carry its metadata
    /// except `resourceVersion`, which is assigned here. Returns the last version assigned.
    pub fn bulk_put(
        &self,
        table: &Arc<str>,
        objects: Vec<(ObjKey, Value)>,
    ) -> Result<u64, ApiError> {
        let mut inner = self.lock();
        for (key, mut v) in objects {
            let rv = inner.rv + 1;
            set_rv(&mut v, rv);
            let bytes = to_bytes(&v)?;
            let existed = inner
                .tables
                .get(table)
                .is_some_and(|m| m.contains_key(&key));
            let kind = if existed {
                EventType::Modified
            } else {
                EventType::Added
            };
            self.commit(&mut inner, table, key, Some(&v), bytes, kind);
        }
        Ok(inner.rv)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        table: &Arc<str>,
        key: ObjKey,
        value: Option<&Value>,
        bytes: Bytes,
        kind: EventType,
    ) {
        inner.rv += 1;
        let rv = inner.rv;
        let owners = value.and_then(owner_uids);
        let map = inner.tables.entry(table.clone()).or_default();
        let old = if kind == EventType::Deleted {
            map.remove(&key)
        } else {
            map.insert(
                key.clone(),
                Stored {
                    bytes: bytes.clone(),
                    owners: owners.clone(),
                },
            )
        };
        let prev = match kind {
            EventType::Modified => old.as_ref().map(|o| o.bytes.clone()),
            _ => None,
        };
        let old_owners = old.and_then(|o| o.owners);
        let owners_added = kind != EventType::Deleted
            && owners.as_ref().is_some_and(|new| {
                new.iter()
                    .any(|uid| !old_owners.as_ref().is_some_and(|old| old.contains(uid)))
            });
        if let Some(old_owners) = old_owners {
            for uid in old_owners.iter() {
                if let Some(deps) = inner.dependents.get_mut(uid) {
                    deps.retain(|(t, k)| !(t == table && *k == key));
                    if deps.is_empty() {
                        inner.dependents.remove(uid);
                    }
                }
            }
        }
        if kind != EventType::Deleted
            && let Some(owners) = owners
        {
            for uid in owners.iter() {
                inner
                    .dependents
                    .entry(uid.clone())
                    .or_default()
                    .push((table.clone(), key.clone()));
            }
        }
        let event = Arc::new(Event {
            rv,
            table: table.clone(),
            ns: key.ns.clone(),
            kind,
            bytes,
            prev,
        });
        inner.history.push_back(event.clone());
        while inner.history.len() > inner.history_limit {
            if let Some(e) = inner.history.pop_front() {
                inner.compacted = e.rv;
            }
        }
        // Sent under the lock so that watch registration sees a gap-free sequence.
        let _ = self.events.send(event);
        if kind == EventType::Deleted {
            let uid = value
                .and_then(|v| v.pointer("/metadata/uid"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let _ = self.removals.send(GcSignal::Removed(Removal {
                table: table.clone(),
                ns: key.ns,
                name: key.name,
                uid,
            }));
        } else if owners_added {
            let _ = self.removals.send(GcSignal::Owned {
                table: table.clone(),
                key,
            });
        }
    }

    /// Registers a watcher: returns the history events after `rv` (when given) and a receiver
    /// for every later change, with no gap and no duplicate between the two.
    pub fn subscribe(&self, from_rv: Option<u64>) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let rx = self.events.subscribe();
        let Some(from) = from_rv else {
            return Ok((Vec::new(), rx));
        };
        if from < inner.compacted {
            return Err(ApiError::Gone(format!(
                "too old resource version: {from} ({})",
                inner.compacted
            )));
        }
        let replay = inner
            .history
            .iter()
            .filter(|e| e.rv > from)
            .cloned()
            .collect();
        Ok((replay, rx))
    }

    /// The version a bookmark may carry: the current version when `rx` has nothing pending
    /// (so every change up to it was delivered), else `None`.
    pub fn bookmark_rv(&self, rx: &broadcast::Receiver<Arc<Event>>) -> Option<u64> {
        let inner = self.lock();
        rx.is_empty().then_some(inner.rv)
    }

    /// Drops the whole history: watches from any version older than now get 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// Number of stored objects and an estimate of the bytes they take (object bytes, keys and
    /// per-entry bookkeeping; the history shares the object bytes).
    pub fn stored_size(&self) -> (usize, usize) {
        let inner = self.lock();
        let mut count = 0;
        let mut bytes = 0;
        for map in inner.tables.values() {
            for (k, s) in map {
                count += 1;
                bytes += s.bytes.len()
                    + k.ns.capacity()
                    + k.name.capacity()
                    + std::mem::size_of::<(ObjKey, Stored)>()
                    + 32; // Bytes shared header + B-tree node share
            }
        }
        (count, bytes)
    }
}

fn set_rv(v: &mut Value, rv: u64) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn to_bytes(v: &Value) -> Result<Bytes, ApiError> {
    serde_json::to_vec(v)
        .map(|mut b| {
            // The serializer over-allocates; stored objects keep only what they use.
            b.shrink_to_fit();
            Bytes::from(b)
        })
        .map_err(|e| ApiError::Internal(format!("failed to serialize object: {e}")))
}

fn owner_uids(v: &Value) -> Option<Box<[String]>> {
    let refs = v.pointer("/metadata/ownerReferences")?.as_array()?;
    let uids: Vec<String> = refs
        .iter()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
        .collect();
    (!uids.is_empty()).then(|| uids.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, table: &Arc<str>, name: &str) -> Outcome {
        store
            .mutate(table, "default", name, |_, _| {
                Ok(Mutation::Put(json!({"metadata": {"name": name}})))
            })
            .expect("put")
    }

    #[test]
    fn every_write_gets_a_strictly_greater_resource_version() {
        let (store, _rx) = Store::new(100, 100);
        let t: Arc<str> = Arc::from("configmaps");
        let a = put(&store, &t, "a");
        let b = put(&store, &t, "a");
        let rv = |o: &Outcome| {
            let v: Value = serde_json::from_slice(&o.bytes).unwrap();
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert!(rv(&b) > rv(&a));
        assert_eq!(store.current_rv(), rv(&b));
    }

    #[test]
    fn history_window_drops_old_versions_and_reports_gone() {
        let (store, _rx) = Store::new(2, 100);
        let t: Arc<str> = Arc::from("configmaps");
        let first = store.current_rv();
        for i in 0..5 {
            put(&store, &t, &format!("o{i}"));
        }
        assert!(matches!(
            store.subscribe(Some(first)),
            Err(ApiError::Gone(_))
        ));
        let (replay, _) = store
            .subscribe(Some(store.current_rv() - 1))
            .expect("in window");
        assert_eq!(replay.len(), 1);
    }

    #[test]
    fn dependents_index_follows_owner_references() {
        let (store, _rx) = Store::new(10, 10);
        let t: Arc<str> = Arc::from("configmaps");
        store
            .mutate(&t, "default", "child", |_, _| {
                Ok(Mutation::Put(json!({"metadata": {"name": "child",
                    "ownerReferences": [{"uid": "u1", "name": "p", "kind": "ConfigMap", "apiVersion": "v1"}]}})))
            })
            .unwrap();
        assert_eq!(store.dependents("u1").len(), 1);
        store
            .mutate(&t, "default", "child", |cur, _| {
                Ok(Mutation::Delete(cur.unwrap()))
            })
            .unwrap();
        assert!(store.dependents("u1").is_empty());
    }
}
