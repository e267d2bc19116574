//! The key a controller queues: an object's namespace and name.

use std::fmt;
use std::sync::Arc;

/// `namespace/name`, or `name` for cluster-scoped objects (SEMANTICS rule 14). Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<Arc<str>>,
    /// The object's name.
    pub name: Arc<str>,
}

impl ObjectKey {
    /// The key of a namespaced object.
    #[must_use]
    pub fn namespaced(namespace: &str, name: &str) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    #[must_use]
    pub fn cluster(name: &str) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// Parses `namespace/name` or `name`.
    #[must_use]
    pub fn parse(key: &str) -> Self {
        match key.split_once('/') {
            Some((namespace, name)) => Self::namespaced(namespace, name),
            None => Self::cluster(key),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_and_parse_as_namespace_slash_name() {
        let namespaced = ObjectKey::namespaced("default", "web");
        assert_eq!(namespaced.to_string(), "default/web");
        assert_eq!(ObjectKey::parse("default/web"), namespaced);
        let cluster = ObjectKey::cluster("node-1");
        assert_eq!(cluster.to_string(), "node-1");
        assert_eq!(ObjectKey::parse("node-1"), cluster);
    }
}
