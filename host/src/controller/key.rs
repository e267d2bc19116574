//! The key a controller queues: an object's namespace and name.
//!
//! A key is on the hot path of every queue operation (one hash per `add`, one per `done`, a clone
//! per `add`), so it is one shared allocation holding `namespace/name` with its hash computed once:
//! a clone is one reference-count increment, hashing writes one `u64`, and comparing two clones of
//! one key stops at the pointer.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// Where a cluster-scoped key's namespace would end: no `/` in its text.
const CLUSTER: usize = usize::MAX;

/// `namespace/name`, or `name` for cluster-scoped objects (SEMANTICS rule 14). Cheap to clone.
#[derive(Clone)]
pub struct ObjectKey {
    /// `namespace/name`, or `name`.
    text: Arc<str>,
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
        match namespace {
            Some(namespace) => {
                let mut text = String::with_capacity(namespace.len() + 1 + name.len());
                text.push_str(namespace);
                text.push('/');
                text.push_str(name);
                Self {
                    text: text.into(),
                    split: namespace.len(),
                    hash,
                }
            }
            None => Self {
                text: name.into(),
                split: CLUSTER,
                hash,
            },
        }
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
        (self.split != CLUSTER).then(|| &self.text[..self.split])
    }

    /// The object's name.
    #[must_use]
    pub fn name(&self) -> &str {
        if self.split == CLUSTER {
            &self.text
        } else {
            &self.text[self.split + 1..]
        }
    }

    /// `namespace/name`, or `name`: what [`Display`](fmt::Display) prints, without allocating.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.split == other.split
            && (Arc::ptr_eq(&self.text, &other.text) || self.text == other.text)
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
        f.write_str(&self.text)
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
        assert!(!Arc::ptr_eq(&one.text, &other.text));
        assert_eq!(one, other);
        let set: HashSet<ObjectKey> = [one, other].into_iter().collect();
        assert_eq!(set.len(), 1);
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
