//! Conveniences on [`Kind`] and [`ObjectRef`], the WIT records that name kinds and objects.

use std::fmt;

use serde_json::Value;

use crate::bindings::kube::reconcile::types::{Kind, ObjectRef};
use crate::error::{Context, Error};

impl Kind {
    /// A kind from its `apiVersion` (`"v1"`, `"apps/v1"`) and name (`"Deployment"`).
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// The kind of a k8s-openapi type: `Kind::of::<ConfigMap>()`.
    #[cfg(feature = "k8s")]
    #[must_use]
    pub fn of<T: k8s_openapi::Resource>() -> Self {
        Self::new(T::API_VERSION, T::KIND)
    }

    /// The API group: `"apps"` for `apps/v1`, `""` for the core group (`v1`).
    #[must_use]
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The API version without the group: `"v1"` for `apps/v1`.
    #[must_use]
    pub fn version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }
}

impl fmt::Display for Kind {
    /// `apps/v1 Deployment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

impl ObjectRef {
    /// The object `name` in `namespace`.
    pub fn namespaced(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// The cluster-scoped object `name` (a Namespace, a ClusterRole, a CRD).
    pub fn cluster_scoped(kind: Kind, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: None,
            name: name.into(),
        }
    }

    /// The object of the same kind and namespace called `name`.
    #[must_use]
    pub fn with_name(&self, name: impl Into<String>) -> Self {
        Self {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: name.into(),
        }
    }

    /// The reference of a Kubernetes object in JSON form, from its `apiVersion`, `kind`,
    /// `metadata.name` and `metadata.namespace` (absent for cluster-scoped objects).
    ///
    /// # Errors
    ///
    /// When `apiVersion`, `kind` or `metadata.name` is missing or not a string.
    pub fn from_value(object: &Value) -> Result<Self, Error> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let api_version = text("/apiVersion").context("the object has no string `apiVersion`")?;
        let kind = text("/kind").context("the object has no string `kind`")?;
        let name = text("/metadata/name").context("the object has no string `metadata.name`")?;
        Ok(Self {
            kind: Kind::new(api_version, kind),
            namespace: text("/metadata/namespace").map(str::to_owned),
            name: name.to_owned(),
        })
    }

    /// Like [`ObjectRef::from_value`], from JSON text.
    ///
    /// # Errors
    ///
    /// When `json` is not JSON, or lacks `apiVersion`, `kind` or `metadata.name`.
    pub fn from_json(json: &str) -> Result<Self, Error> {
        let object: Value = serde_json::from_str(json).context("the object is not valid JSON")?;
        Self::from_value(&object)
    }

    /// The reference of a typed k8s-openapi object: `ObjectRef::of(&config_map)`.
    ///
    /// # Errors
    ///
    /// When the object has no `metadata.name`.
    #[cfg(feature = "k8s")]
    pub fn of<T>(object: &T) -> Result<Self, Error>
    where
        T: k8s_openapi::Resource
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    {
        let metadata = object.metadata();
        let name = metadata
            .name
            .clone()
            .with_context(|| format!("the {} has no `metadata.name`", T::KIND))?;
        Ok(Self {
            kind: Kind::of::<T>(),
            namespace: metadata.namespace.clone(),
            name,
        })
    }
}

impl fmt::Display for ObjectRef {
    /// `v1 ConfigMap default/settings`, or `v1 Namespace team-a` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn object_ref_from_a_namespaced_object() {
        let object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "1"},
            "spec": {}
        });
        let target = ObjectRef::from_value(&object).unwrap();
        assert_eq!(
            target,
            ObjectRef::namespaced(Kind::new("apps/v1", "Deployment"), "default", "web")
        );
        assert_eq!(target.to_string(), "apps/v1 Deployment default/web");
    }

    #[test]
    fn object_ref_from_a_cluster_scoped_object() {
        let target = ObjectRef::from_json(
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}"#,
        )
        .unwrap();
        assert_eq!(
            target,
            ObjectRef::cluster_scoped(Kind::new("v1", "Namespace"), "team-a")
        );
        assert_eq!(target.to_string(), "v1 Namespace team-a");
    }

    #[test]
    fn object_ref_names_the_missing_field() {
        let error =
            ObjectRef::from_value(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the object has no string `metadata.name`"
        );
        let error = ObjectRef::from_json("{").unwrap_err();
        assert!(format!("{error:#}").starts_with("the object is not valid JSON: "));
    }

    #[test]
    fn kind_splits_group_and_version() {
        let apps = Kind::new("apps/v1", "Deployment");
        assert_eq!((apps.group(), apps.version()), ("apps", "v1"));
        let core = Kind::new("v1", "ConfigMap");
        assert_eq!((core.group(), core.version()), ("", "v1"));
    }

    #[test]
    fn with_name_keeps_kind_and_namespace() {
        let source = ObjectRef::namespaced(Kind::new("v1", "ConfigMap"), "ns", "a");
        assert_eq!(
            source.with_name("a-seen"),
            ObjectRef::namespaced(Kind::new("v1", "ConfigMap"), "ns", "a-seen")
        );
    }

    #[cfg(feature = "k8s")]
    #[test]
    fn object_ref_of_a_typed_object() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        assert_eq!(
            ObjectRef::of(&config_map).unwrap(),
            ObjectRef::namespaced(Kind::new("v1", "ConfigMap"), "default", "settings")
        );
        assert!(ObjectRef::of(&ConfigMap::default()).is_err());
    }
}
