//! A hash map whose growth never moves more than [`MOVE_AT_MOST`] entries at once, for the
//! delaying queue's waiting keys.
//!
//! A standard hash map grows by moving every entry into a table twice the size: at 55,000
//! waiting keys that is about 3 ms, spent under the lock the timer task needs to hand due keys
//! to the workers, so every key due meanwhile arrives late. This map grows by adding a *layer*
//! (a fresh table twice the size of the newest) and leaving the entries where they are. Only the
//! newest layer takes inserts; a key lives in exactly one layer; a lookup probes each layer with
//! the one hash. The waiting keys of a delaying queue come due and leave, so older layers drain:
//! an empty layer is dropped, and one drained down to a few entries is moved into the newest.
//! Small tables (below `MOVE_AT_MOST` entries) grow the ordinary way.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

/// The most entries one growth (or one absorption of a drained layer) moves.
const MOVE_AT_MOST: usize = 4096;

/// An older layer drained to this many entries is moved into the newest one, so long-waiting
/// keys do not keep layers (and the probes of every lookup) alive.
const ABSORB_AT: usize = MOVE_AT_MOST / 8;

pub(super) struct LayeredMap<K, V> {
    hasher: foldhash::fast::RandomState,
    /// Oldest first; only the last takes inserts. Never holds an empty layer but the last.
    layers: Vec<HashTable<(K, V)>>,
}

impl<K: Hash + Eq, V> Default for LayeredMap<K, V> {
    fn default() -> Self {
        Self {
            hasher: foldhash::fast::RandomState::default(),
            layers: Vec::new(),
        }
    }
}

impl<K: Hash + Eq, V> LayeredMap<K, V> {
    pub(super) fn len(&self) -> usize {
        self.layers.iter().map(HashTable::len).sum()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.layers
            .iter()
            .flat_map(|layer| layer.iter().map(|(k, _)| k))
    }

    /// The stored key and its value.
    pub(super) fn get_mut(&mut self, key: &K) -> Option<(&K, &mut V)> {
        let hash = self.hasher.hash_one(key);
        self.layers
            .iter_mut()
            .find_map(|layer| layer.find_mut(hash, |(k, _)| k == key))
            .map(|(k, v)| (&*k, v))
    }

    /// Inserts `key`, which no layer holds (the caller has looked with [`get_mut`](Self::get_mut)).
    pub(super) fn insert_new(&mut self, key: K, value: V) {
        let hash = self.hasher.hash_one(&key);
        debug_assert!(
            self.layers
                .iter()
                .all(|layer| layer.find(hash, |(k, _)| *k == key).is_none()),
            "insert_new of a key already held"
        );
        let hasher = &self.hasher;
        let rehash = |(k, _): &(K, V)| hasher.hash_one(k);
        let newest = match self.layers.last_mut() {
            Some(newest) if newest.capacity() > newest.len() => newest,
            Some(newest) if newest.len() < MOVE_AT_MOST => {
                newest.reserve(1, rehash);
                newest
            }
            Some(newest) => {
                let capacity = newest.len() * 2;
                self.layers.push(HashTable::with_capacity(capacity));
                self.layers.last_mut().expect("just pushed")
            }
            None => {
                self.layers.push(HashTable::new());
                self.layers.last_mut().expect("just pushed")
            }
        };
        newest.insert_unique(hash, (key, value), rehash);
    }

    /// Removes `key` if `remove` says its value should go, returning the stored key.
    pub(super) fn remove_if(&mut self, key: &K, remove: impl FnOnce(&V) -> bool) -> Option<K> {
        let hash = self.hasher.hash_one(key);
        let (at, entry) = self.layers.iter_mut().enumerate().find_map(|(at, layer)| {
            layer
                .find_entry(hash, |(k, _)| k == key)
                .ok()
                .map(|entry| (at, entry))
        })?;
        if !remove(&entry.get().1) {
            return None;
        }
        let ((key, _), _) = entry.remove();
        self.settle(at);
        Some(key)
    }

    /// After a removal from layer `at`: drops it if it is an older layer left empty, or moves
    /// its entries into the newest if it is an older layer drained to [`ABSORB_AT`] and the
    /// newest has room for them without growing.
    fn settle(&mut self, at: usize) {
        let last = self.layers.len() - 1;
        if at == last {
            return;
        }
        let drained = self.layers[at].len();
        let room = self.layers[last].capacity() - self.layers[last].len();
        if drained == 0 {
            self.layers.remove(at);
        } else if drained <= ABSORB_AT && drained <= room {
            let hasher = &self.hasher;
            let old = self.layers.remove(at);
            let newest = self.layers.last_mut().expect("the newest layer stays");
            for entry in old {
                newest.insert_unique(hasher.hash_one(&entry.0), entry, |(k, _)| {
                    hasher.hash_one(k)
                });
            }
        }
    }

    #[cfg(test)]
    fn layers(&self) -> usize {
        self.layers.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// Inserts `key` as the delaying queue does: look first, insert if absent.
    fn put(map: &mut LayeredMap<u32, u32>, key: u32, value: u32) {
        match map.get_mut(&key) {
            Some((_, v)) => *v = value,
            None => map.insert_new(key, value),
        }
    }

    #[test]
    fn growth_past_the_move_bound_adds_a_layer_instead_of_moving_entries() {
        let mut map = LayeredMap::default();
        let keys = u32::try_from(MOVE_AT_MOST * 8).expect("small");
        for key in 0..keys {
            put(&mut map, key, key);
        }
        assert!(map.layers() > 1, "large growth adds layers");
        for layer in &map.layers[..map.layers.len() - 1] {
            assert_eq!(
                layer.len(),
                layer.capacity(),
                "an older layer is full when left"
            );
        }
        assert_eq!(map.len(), MOVE_AT_MOST * 8);
        for key in 0..keys {
            assert_eq!(map.get_mut(&key).map(|(_, v)| *v), Some(key));
        }
    }

    #[test]
    fn drained_older_layers_are_dropped_or_absorbed_into_the_newest() {
        let mut map = LayeredMap::default();
        let keys = u32::try_from(MOVE_AT_MOST * 4).expect("small");
        for key in 0..keys {
            put(&mut map, key, key);
        }
        let grown = map.layers();
        assert!(grown > 1);
        // Keys leave oldest first, as delayed keys come due.
        for key in 0..keys - 10 {
            assert_eq!(map.remove_if(&key, |_| true), Some(key));
        }
        assert_eq!(map.layers(), 1, "drained layers are gone");
        assert_eq!(map.len(), 10);
        // Long-waiting keys in an older layer move into the newest once it is drained.
        let mut map = LayeredMap::default();
        for key in 0..keys {
            put(&mut map, key, key);
        }
        let first = u32::try_from(map.layers[0].len()).expect("small");
        for key in 1..first {
            map.remove_if(&key, |_| true);
        }
        assert_eq!(map.layers(), grown - 1, "the one key left was absorbed");
        assert_eq!(map.get_mut(&0).map(|(_, v)| *v), Some(0));
    }

    #[test]
    fn remove_if_keeps_an_entry_its_predicate_refuses() {
        let mut map = LayeredMap::default();
        put(&mut map, 1, 10);
        assert_eq!(map.remove_if(&1, |v| *v == 11), None);
        assert_eq!(map.remove_if(&2, |_| true), None);
        assert_eq!(map.remove_if(&1, |v| *v == 10), Some(1));
        assert_eq!(map.len(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u32, u32),
        Remove(u32),
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Against std's map, over key ranges small and large enough to grow layers.
        #[test]
        fn behaves_like_a_hash_map(
            ops in prop::collection::vec(
                prop_oneof![
                    3 => (0..20_000u32, any::<u32>()).prop_map(|(k, v)| Op::Put(k, v)),
                    2 => (0..20_000u32).prop_map(Op::Remove),
                ],
                0..30_000,
            )
        ) {
            let mut map = LayeredMap::default();
            let mut model = HashMap::new();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        put(&mut map, k, v);
                        model.insert(k, v);
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(map.remove_if(&k, |_| true), model.remove(&k).map(|_| k));
                    }
                }
            }
            prop_assert_eq!(map.len(), model.len());
            let mut keys: Vec<u32> = map.keys().copied().collect();
            keys.sort_unstable();
            let mut expected: Vec<u32> = model.keys().copied().collect();
            expected.sort_unstable();
            prop_assert_eq!(keys, expected);
            for (k, v) in &model {
                prop_assert_eq!(map.get_mut(k).map(|(_, v)| *v), Some(*v));
            }
        }
    }
}
