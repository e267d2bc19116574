//! An informer's cache: objects by key, changed only by the informer's watch task.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use parking_lot::RwLock;

use super::change::Change;
use super::object::CachedObject;
use crate::controller::ObjectKey;

type Map = HashMap<ObjectKey, Arc<CachedObject>, foldhash::fast::RandomState>;

/// Cached objects by key. Reads never wait on the API server.
#[derive(Debug, Default)]
pub struct Store {
    objects: RwLock<Map>,
}

impl Store {
    /// A store holding `objects`, filled without an informer: for running a reconcile against
    /// fixture files. An object replaces an earlier one with the same namespace and name.
    #[must_use]
    pub fn from_objects(objects: impl IntoIterator<Item = CachedObject>) -> Self {
        let objects = objects
            .into_iter()
            .map(|object| (object.key(), Arc::new(object)))
            .collect();
        Self {
            objects: RwLock::new(objects),
        }
    }

    /// The object cached under `key`.
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.objects.read().get(key).cloned()
    }

    /// Every cached object, in no particular order.
    #[must_use]
    pub fn list(&self) -> Vec<Arc<CachedObject>> {
        self.objects.read().values().cloned().collect()
    }

    /// How many objects are cached.
    #[must_use]
    pub fn len(&self) -> usize {
        self.objects.read().len()
    }

    /// True when nothing is cached.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the cached objects themselves (see [`CachedObject::footprint`]).
    #[must_use]
    pub fn footprint(&self) -> usize {
        self.objects.read().values().map(|o| o.footprint()).sum()
    }

    /// Caches `object`, then reports the change (none when its resourceVersion is unchanged).
    pub(super) fn apply(&self, object: Arc<CachedObject>, mut deliver: impl FnMut(Change<'_>)) {
        let old = self
            .objects
            .write()
            .insert(object.key(), Arc::clone(&object));
        match old {
            None => deliver(Change::Added(&object)),
            Some(old) if old.resource_version() != object.resource_version() => {
                deliver(Change::Updated {
                    old: &old,
                    new: &object,
                });
            }
            Some(_) => {}
        }
    }

    /// Forgets `object`, then reports it deleted.
    pub(super) fn delete(&self, object: &Arc<CachedObject>, mut deliver: impl FnMut(Change<'_>)) {
        self.objects.write().remove(&object.key());
        deliver(Change::Deleted(object));
    }

    /// Replaces the whole cache with a fresh list, then reports the difference: objects new to
    /// the cache, objects whose resourceVersion changed, and objects no longer listed.
    pub(super) fn replace(
        &self,
        listed: Vec<Arc<CachedObject>>,
        mut deliver: impl FnMut(Change<'_>),
    ) {
        let mut fresh = Map::default();
        for object in listed {
            fresh.insert(object.key(), object);
        }
        let mut old = std::mem::replace(&mut *self.objects.write(), fresh.clone());
        for (key, object) in &fresh {
            match old.entry(key.clone()) {
                Entry::Vacant(_) => deliver(Change::Added(object)),
                Entry::Occupied(previous) => {
                    let previous = previous.remove();
                    if previous.resource_version() != object.resource_version() {
                        deliver(Change::Updated {
                            old: &previous,
                            new: object,
                        });
                    }
                }
            }
        }
        for gone in old.values() {
            deliver(Change::Deleted(gone));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, rv: &str) -> Arc<CachedObject> {
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        );
        Arc::new(CachedObject::from_json(&json).unwrap())
    }

    fn record(changes: &mut Vec<String>) -> impl FnMut(Change<'_>) + '_ {
        |change| {
            changes.push(match change {
                Change::Added(o) => format!("added {}@{}", o.name(), o.resource_version()),
                Change::Updated { old, new } => format!(
                    "updated {}@{}->{}",
                    new.name(),
                    old.resource_version(),
                    new.resource_version()
                ),
                Change::Deleted(o) => format!("deleted {}", o.name()),
                Change::Resync(o) => format!("resync {}", o.name()),
            });
        }
    }

    #[test]
    fn apply_reports_adds_and_updates_and_skips_unchanged_versions() {
        let store = Store::default();
        let mut changes = Vec::new();
        store.apply(object("a", "1"), record(&mut changes));
        store.apply(object("a", "2"), record(&mut changes));
        store.apply(object("a", "2"), record(&mut changes));
        assert_eq!(changes, ["added a@1", "updated a@1->2"]);
        assert_eq!(
            store
                .get(&ObjectKey::namespaced("ns", "a"))
                .unwrap()
                .resource_version(),
            "2"
        );
    }

    #[test]
    fn a_relist_reports_exactly_what_changed_while_the_watch_was_away() {
        let store = Store::default();
        let mut changes = Vec::new();
        for (name, rv) in [("same", "1"), ("changed", "2"), ("gone", "3")] {
            store.apply(object(name, rv), |_| {});
        }
        store.replace(
            vec![
                object("same", "1"),
                object("changed", "5"),
                object("new", "6"),
            ],
            record(&mut changes),
        );
        changes.sort();
        assert_eq!(
            changes,
            ["added new@6", "deleted gone", "updated changed@2->5"]
        );
        assert_eq!(store.len(), 3);
        assert!(store.get(&ObjectKey::namespaced("ns", "gone")).is_none());
    }

    #[test]
    fn a_store_from_objects_holds_each_key_once_with_the_last_object_given() {
        let store = Store::from_objects(
            [object("a", "1"), object("b", "1"), object("a", "2")]
                .into_iter()
                .map(Arc::unwrap_or_clone),
        );
        assert_eq!(store.len(), 2);
        let a = store.get(&ObjectKey::namespaced("ns", "a")).unwrap();
        assert_eq!(a.resource_version(), "2");
        assert!(Store::from_objects([]).is_empty());
    }

    #[test]
    fn the_cache_is_updated_before_the_change_is_reported() {
        let store = Store::default();
        let key = ObjectKey::namespaced("ns", "a");
        store.apply(object("a", "1"), |_| {
            assert_eq!(store.get(&key).unwrap().resource_version(), "1");
        });
        store.delete(&object("a", "2"), |_| assert!(store.get(&key).is_none()));
    }
}
