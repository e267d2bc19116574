//! [`Request`]: the key to reconcile and the object the host's cache holds for it.

use serde::de::DeserializeOwned;

use crate::bindings;
use crate::bindings::kube::reconcile::types::{Kind, ObjectRef};
use crate::error::{Context, Error};

/// One reconcile: which object to look at, the object as the host's cache holds it now (as JSON
/// text, parsed only when asked), and how many times in a row this key has failed.
///
/// Reconcilers are level-based: the request says which object to look at, never what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    raw: bindings::Request,
}

impl Request {
    /// A request, as the host would send it (for tests).
    #[must_use]
    pub fn new(target: ObjectRef, object: Option<String>, requeues: u32) -> Self {
        Self {
            raw: bindings::Request {
                target,
                object,
                requeues,
            },
        }
    }

    /// The kind, namespace and name of the object to reconcile (the plugin's `for` kind).
    #[must_use]
    pub fn target(&self) -> &ObjectRef {
        &self.raw.target
    }

    /// The target's kind.
    #[must_use]
    pub fn kind(&self) -> &Kind {
        &self.raw.target.kind
    }

    /// The target's namespace; `None` for cluster-scoped kinds.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.raw.target.namespace.as_deref()
    }

    /// The target's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.raw.target.name
    }

    /// How many times in a row this key has been retried with backoff (after a failure or a
    /// `requeue` answer); 0 after `done` or `requeue-after`.
    #[must_use]
    pub fn requeues(&self) -> u32 {
        self.raw.requeues
    }

    /// The cached object as JSON text, unparsed; `None` when it no longer exists.
    #[must_use]
    pub fn json(&self) -> Option<&str> {
        self.raw.object.as_deref()
    }

    /// Whether the object no longer exists (it was deleted and any finalizers have run).
    #[must_use]
    pub fn is_gone(&self) -> bool {
        self.raw.object.is_none()
    }

    /// The cached object parsed as `T` — a k8s-openapi type, a struct of your own with only the
    /// fields you read, or `serde_json::Value`; `None` when it no longer exists. It is parsed
    /// on each call; nothing is parsed unless asked.
    ///
    /// # Errors
    ///
    /// When the object does not parse as `T`.
    pub fn object<T: DeserializeOwned>(&self) -> Result<Option<T>, Error> {
        self.raw
            .object
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .with_context(|| {
                format!(
                    "the cached object {} does not parse as {}",
                    self.raw.target,
                    std::any::type_name::<T>()
                )
            })
    }

    /// The request as the WIT record.
    #[must_use]
    pub fn into_raw(self) -> bindings::Request {
        self.raw
    }
}

impl From<bindings::Request> for Request {
    fn from(raw: bindings::Request) -> Self {
        Self { raw }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::Value;

    use super::*;

    fn target() -> ObjectRef {
        ObjectRef::namespaced(Kind::new("v1", "ConfigMap"), "default", "settings")
    }

    #[test]
    fn accessors_read_the_wit_record() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"}}"#;
        let request = Request::new(target(), Some(json.into()), 3);
        assert_eq!(request.target(), &target());
        assert_eq!(request.kind(), &Kind::new("v1", "ConfigMap"));
        assert_eq!(request.namespace(), Some("default"));
        assert_eq!(request.name(), "settings");
        assert_eq!(request.requeues(), 3);
        assert_eq!(request.json(), Some(json));
        assert!(!request.is_gone());
    }

    #[test]
    fn object_parses_into_the_asked_type() {
        #[derive(Deserialize)]
        struct Partial {
            data: std::collections::BTreeMap<String, String>,
        }
        let request = Request::new(target(), Some(r#"{"data":{"a":"1"}}"#.into()), 0);
        let partial: Partial = request.object().unwrap().unwrap();
        assert_eq!(partial.data["a"], "1");
        let value: Value = request.object().unwrap().unwrap();
        assert_eq!(value["data"]["a"], "1");
    }

    #[test]
    fn object_of_a_deleted_object_is_none() {
        let request = Request::new(target(), None, 0);
        assert!(request.is_gone());
        assert_eq!(request.object::<Value>().unwrap(), None);
    }

    #[test]
    fn object_that_does_not_parse_names_the_object() {
        let request = Request::new(target(), Some(r#"{"data": 1}"#.into()), 0);
        let error = request
            .object::<std::collections::BTreeMap<String, String>>()
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the cached object v1 ConfigMap default/settings does not parse as "),
            "{error}"
        );
    }
}
