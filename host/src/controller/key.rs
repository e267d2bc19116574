//! The key a controller queues: an object's namespace and name.
//!
//! A key is on the hot path of every queue operation (one hash per `add`, one per `done`, a clone
//! per `add`), so it holds `namespace/name` with its hash computed once, and a short key (up to
//! 47 bytes, which covers most real ones) holds its text in place: cloning it is a copy of
//! 80 bytes, with no shared reference count for the threads of a queue to contend on (the
//! producer cloning a key as a worker drops another clone of it moved that count's cache line
//! between cores on every operation). A longer key shares one allocation among its clones.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// Where a cluster-scoped key's namespace would end: no `/` in its text.
const CLUSTER: usize = usize::MAX;

/// The longest `namespace/name` a key holds in place, chosen so that a key is 80 bytes.
const INLINE: usize = 47;

/// `namespace/name`, or `name` for cluster-scoped objects (SEMANTICS rule 14). Cheap to clone.
///
/// One flat struct rather than an enum of the two forms: a clone of a short key is then one plain
/// copy, where an enum's variant-wise copies made the single-task queue cycle (`benches/peers`
/// workload A) about 40 % slower.
#[derive(Clone)]
pub struct ObjectKey {
    /// The text when it is longer than [`INLINE`] bytes.
    shared: Option<Arc<str>>,
    /// The first `len` bytes are the text when `shared` is `None`.
    inline: [u8; INLINE],
    len: u8,
    /// The byte offset of the `/` after the namespace, or [`CLUSTER`].
    split: usize,
    /// The hash of the namespace and name, seeded once per process, so that names chosen to
    /// collide in one process do not collide in another.
    hash: u64,
}

/// The seed of every key's hash in this process.
fn seed() -> &'static foldhash::fast::RandomState {
    static SEED: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    SEED.get_or_init(foldhash::fast::RandomState::default)
}

impl ObjectKey {
    /// The key of an object in `namespace` (`None`: cluster-scoped).
    #[must_use]
    pub fn in_namespace(namespace: Option<&str>, name: &str) -> Self {
        let hash = seed().hash_one((namespace, name));
        let (parts, split) = match namespace {
            Some(namespace) => ([namespace, "/", name], namespace.len()),
            None => (["", "", name], CLUSTER),
        };
        let len: usize = parts.iter().map(|part| part.len()).sum();
        let mut key = Self {
            shared: None,
            inline: [0; INLINE],
            len: 0,
            split,
            hash,
        };
        match u8::try_from(len) {
            Ok(short) if len <= INLINE => {
                let mut at = 0;
                for part in parts {
                    key.inline[at..at + part.len()].copy_from_slice(part.as_bytes());
                    at += part.len();
                }
                key.len = short;
            }
            _ => key.shared = Some(parts.concat().into()),
        }
        key
    }

    /// The key of a namespaced object.
    #[must_use]
    pub fn namespaced(namespace: &str, name: &str) -> Self {
        Self::in_namespace(Some(namespace), name)
    }

    /// The key of a cluster-scoped object.
    #[must_use]
    pub fn cluster(name: &str) -> Self {
        Self::in_namespace(None, name)
    }

    /// Parses `namespace/name` or `name`.
    #[must_use]
    pub fn parse(key: &str) -> Self {
        match key.split_once('/') {
            Some((namespace, name)) => Self::namespaced(namespace, name),
            None => Self::cluster(key),
        }
    }

    /// The namespace; `None` for cluster-scoped objects.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        (self.split != CLUSTER).then(|| &self.as_str()[..self.split])
    }

    /// The object's name.
    #[must_use]
    pub fn name(&self) -> &str {
        let text = self.as_str();
        if self.split == CLUSTER {
            text
        } else {
            &text[self.split + 1..]
        }
    }

    /// `namespace/name`, or `name`: what [`Display`](fmt::Display) prints, without allocating.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match &self.shared {
            Some(text) => text,
            // Whole `str`s copied end to end: valid UTF-8, which the check confirms in a few
            // nanoseconds (the queue compares bytes and never asks).
            None => std::str::from_utf8(&self.inline[..usize::from(self.len)])
                .expect("copied from strs"),
        }
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        // Unused inline bytes are zero, and a key is shared exactly when its text is too long to
        // be inline: comparing the whole arrays is a few vector compares, with no call.
        self.hash == other.hash
            && self.split == other.split
            && self.len == other.len
            && self.inline == other.inline
            && match (&self.shared, &other.shared) {
                (None, None) => true,
                (Some(one), Some(other)) => Arc::ptr_eq(one, other) || one == other,
                _ => false,
            }
    }
}

impl Eq for ObjectKey {}

impl Hash for ObjectKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// By namespace (cluster-scoped first), then name.
impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.namespace(), self.name()).cmp(&(other.namespace(), other.name()))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_print_and_parse_as_namespace_slash_name() {
        let namespaced = ObjectKey::namespaced("default", "web");
        assert_eq!(namespaced.to_string(), "default/web");
        assert_eq!(ObjectKey::parse("default/web"), namespaced);
        let cluster = ObjectKey::cluster("node-1");
        assert_eq!(cluster.to_string(), "node-1");
        assert_eq!(ObjectKey::parse("node-1"), cluster);
    }

    #[test]
    fn namespace_and_name_come_back_as_given() {
        let namespaced = ObjectKey::namespaced("default", "web");
        assert_eq!(namespaced.namespace(), Some("default"));
        assert_eq!(namespaced.name(), "web");
        let cluster = ObjectKey::cluster("node-1");
        assert_eq!(cluster.namespace(), None);
        assert_eq!(cluster.name(), "node-1");
        assert_eq!(
            ObjectKey::in_namespace(Some("a"), "b"),
            ObjectKey::namespaced("a", "b")
        );
        assert_eq!(ObjectKey::in_namespace(None, "b"), ObjectKey::cluster("b"));
    }

    #[test]
    fn equal_keys_built_apart_are_equal_and_hash_alike() {
        let one = ObjectKey::namespaced("default", "web");
        let other = ObjectKey::namespaced("default", "web");
        assert_eq!(one, other);
        let set: HashSet<ObjectKey> = [one, other].into_iter().collect();
        assert_eq!(set.len(), 1);
        let long = "n".repeat(INLINE);
        let (one, other) = (
            ObjectKey::namespaced("default", &long),
            ObjectKey::namespaced("default", &long),
        );
        assert!(matches!(
            (&one.shared, &other.shared),
            (Some(a), Some(b)) if !Arc::ptr_eq(a, b)
        ));
        assert_eq!(one, other);
        assert_eq!(one.clone(), other);
    }

    #[test]
    fn keys_up_to_the_inline_length_are_held_in_place_and_longer_ones_shared() {
        assert_eq!(std::mem::size_of::<ObjectKey>(), 80);
        for (namespace, name) in [
            (Some("default"), "web"),
            (Some("ns"), &"n".repeat(INLINE - 3)[..]),
            (Some("ns"), &"n".repeat(INLINE - 2)[..]),
            (Some(&"s".repeat(300)[..]), "web"),
            (None, &"n".repeat(INLINE)[..]),
            (None, &"n".repeat(INLINE + 1)[..]),
            (Some("kube-system"), &"é".repeat(40)[..]),
            (None, ""),
        ] {
            let key = ObjectKey::in_namespace(namespace, name);
            let text = namespace.map_or(name.to_owned(), |ns| format!("{ns}/{name}"));
            assert_eq!(key.shared.is_none(), text.len() <= INLINE, "{text}");
            assert_eq!((key.namespace(), key.name()), (namespace, name));
            assert_eq!(key.as_str(), text);
            assert_eq!(key.to_string(), text);
            assert_eq!(ObjectKey::parse(&text), key);
            assert_eq!(key.clone(), key);
        }
    }

    #[test]
    fn keys_differing_in_namespace_or_scope_differ() {
        // The same text split differently, and a cluster-scoped name that looks namespaced.
        let keys = [
            ObjectKey::namespaced("a", "b/c"),
            ObjectKey::namespaced("a/b", "c"),
            ObjectKey::cluster("a/b/c"),
            ObjectKey::namespaced("", "web"),
            ObjectKey::cluster("web"),
            ObjectKey::cluster("/web"),
        ];
        for (i, left) in keys.iter().enumerate() {
            for (j, right) in keys.iter().enumerate() {
                assert_eq!(left == right, i == j, "{left:?} against {right:?}");
            }
        }
        let set: HashSet<&ObjectKey> = keys.iter().collect();
        assert_eq!(set.len(), keys.len());
    }

    #[test]
    fn keys_order_by_namespace_then_name_with_cluster_scoped_first() {
        let mut keys = [
            ObjectKey::namespaced("b", "a"),
            ObjectKey::namespaced("a", "z"),
            ObjectKey::cluster("zz"),
            ObjectKey::namespaced("a", "b"),
        ];
        keys.sort();
        let printed: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(printed, ["zz", "a/b", "a/z", "b/a"]);
    }
}
