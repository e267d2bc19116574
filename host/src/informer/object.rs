//! Cached objects: the JSON text as received (without `metadata.managedFields`, see `strip`)
//! plus the few fields the host reads.
//!
//! A `DynamicObject` parsed into a `serde_json::Value` tree costs about 3.9× its JSON size. The
//! host reads only name, namespace, resourceVersion, generation, labels and ownerReferences, and
//! hands guests the object as JSON text, so the cache keeps exactly that: the text, unparsed,
//! and those fields.
//!
//! A real API server leaves `apiVersion` and `kind` out of the items of a list (watch events
//! carry them), so the same object would reach a guest with or without them depending on how it
//! came into the cache. [`WireObject::with_type_of`] adds them where they are missing, so guests
//! always get a complete object they can hand back to `client.replace` or turn into a reference.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::{ApiResource, DynamicResourceScope};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::controller::ObjectKey;

/// An object as the watcher decodes it: its JSON text and a trimmed `ObjectMeta`. It only
/// lives between decoding and [`CachedObject::from`]; kube's watcher needs a `Resource`.
#[derive(Clone, Debug)]
pub struct WireObject {
    json: Box<str>,
    meta: ObjectMeta,
    /// Whether the text has an `apiVersion` field.
    has_api_version: bool,
    /// Whether the text has a `kind` field.
    has_kind: bool,
}

/// The metadata fields the host reads; everything else stays in the JSON text, but for
/// `managedFields`, which the cache leaves out (see `strip`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TrimmedMeta<'a> {
    #[serde(borrow)]
    managed_fields: Option<&'a RawValue>,
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    metadata: TrimmedMeta<'a>,
    #[serde(rename = "apiVersion")]
    api_version: Option<serde::de::IgnoredAny>,
    kind: Option<serde::de::IgnoredAny>,
}

impl WireObject {
    /// Decodes `json`, reading only the metadata fields the host needs.
    ///
    /// # Errors
    /// When `json` is not an object with well-formed metadata.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let Envelope {
            metadata: m,
            api_version,
            kind,
        } = serde_json::from_str(json)?;
        let json: Box<str> = match m.managed_fields {
            Some(fields) => super::strip::without_member(json, fields.get(), "managedFields")
                .map_or_else(|| json.into(), String::into_boxed_str),
            None => json.into(),
        };
        Ok(Self {
            json,
            has_api_version: api_version.is_some(),
            has_kind: kind.is_some(),
            meta: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                generation: m.generation,
                labels: m.labels,
                owner_references: m.owner_references,
                ..ObjectMeta::default()
            },
        })
    }

    /// The object with the `apiVersion` and `kind` of `resource` written into its text where it
    /// lacks them (a real API server's list items); an object that has them is left as it is.
    #[must_use]
    pub fn with_type_of(mut self, resource: &ApiResource) -> Self {
        if self.has_api_version && self.has_kind {
            return self;
        }
        let Some(rest) = self.json.trim_start().strip_prefix('{') else {
            return self; // not an object: from_json would have refused it
        };
        let quoted = |text: &str| serde_json::Value::from(text).to_string();
        let mut fields = Vec::with_capacity(2);
        if !self.has_api_version {
            fields.push(format!("\"apiVersion\":{}", quoted(&resource.api_version)));
        }
        if !self.has_kind {
            fields.push(format!("\"kind\":{}", quoted(&resource.kind)));
        }
        let separator = if rest.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        self.json = format!("{{{}{separator}{rest}", fields.join(",")).into();
        self.has_api_version = true;
        self.has_kind = true;
        self
    }
}

impl<'de> Deserialize<'de> for WireObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <Box<RawValue>>::deserialize(deserializer)?;
        Self::from_json(raw.get()).map_err(serde::de::Error::custom)
    }
}

impl kube::Resource for WireObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// An owner reference, reduced to what key mapping needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The owner's `apiVersion`.
    pub api_version: Box<str>,
    /// The owner's kind.
    pub kind: Box<str>,
    /// The owner's name (same namespace as the owned object).
    pub name: Box<str>,
    /// Whether this owner is the managing controller.
    pub controller: bool,
}

/// An object in the cache: the JSON text as received and the fields the host reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedObject {
    json: Box<str>,
    name: Box<str>,
    namespace: Option<Box<str>>,
    resource_version: Box<str>,
    generation: Option<i64>,
    labels: Box<[(Box<str>, Box<str>)]>,
    owners: Box<[Owner]>,
}

impl From<WireObject> for CachedObject {
    fn from(wire: WireObject) -> Self {
        let meta = wire.meta;
        Self {
            json: wire.json,
            name: meta.name.unwrap_or_default().into(),
            namespace: meta.namespace.map(Into::into),
            resource_version: meta.resource_version.unwrap_or_default().into(),
            generation: meta.generation,
            labels: meta
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            owners: meta
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|o| Owner {
                    api_version: o.api_version.into(),
                    kind: o.kind.into(),
                    name: o.name.into(),
                    controller: o.controller.unwrap_or(false),
                })
                .collect(),
        }
    }
}

impl CachedObject {
    /// Decodes `json` (see [`WireObject::from_json`]).
    ///
    /// # Errors
    /// When `json` is not an object with well-formed metadata.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        WireObject::from_json(json).map(Self::from)
    }

    /// The object as the API server sent it, without `metadata.managedFields`, with
    /// `apiVersion` and `kind` added if the server left them out (see
    /// [`WireObject::with_type_of`]).
    #[must_use]
    pub fn json(&self) -> &str {
        &self.json
    }

    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`; `None` for cluster-scoped objects.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `metadata.resourceVersion`.
    #[must_use]
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// `metadata.generation`.
    #[must_use]
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// `metadata.labels`, sorted by key.
    #[must_use]
    pub fn labels(&self) -> &[(Box<str>, Box<str>)] {
        &self.labels
    }

    /// `metadata.ownerReferences`.
    #[must_use]
    pub fn owners(&self) -> &[Owner] {
        &self.owners
    }

    /// The key this object is queued under.
    #[must_use]
    pub fn key(&self) -> ObjectKey {
        ObjectKey::in_namespace(self.namespace.as_deref(), &self.name)
    }

    /// The key of the controlling owner of kind `kind` (`apiVersion` `api_version`), if any:
    /// the owner reference with `controller: true` (SEMANTICS rule 15).
    #[must_use]
    pub fn controller_key(&self, api_version: &str, kind: &str) -> Option<ObjectKey> {
        let owner = self.owners.iter().find(|o| o.controller)?;
        (same_group(&owner.api_version, api_version) && &*owner.kind == kind)
            .then(|| ObjectKey::in_namespace(self.namespace.as_deref(), &owner.name))
    }

    /// Heap and inline bytes this object holds, for memory accounting.
    #[must_use]
    pub fn footprint(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.json.len()
            + self.name.len()
            + self.namespace.as_deref().map_or(0, str::len)
            + self.resource_version.len()
            + self
                .labels
                .iter()
                .map(|(k, v)| std::mem::size_of::<(Box<str>, Box<str>)>() + k.len() + v.len())
                .sum::<usize>()
            + self
                .owners
                .iter()
                .map(|o| {
                    std::mem::size_of::<Owner>() + o.api_version.len() + o.kind.len() + o.name.len()
                })
                .sum::<usize>()
    }
}

/// Owner references name a group version; an object of the same group at another version is
/// the same object (`apps/v1` and `apps/v1beta2` Deployments).
fn same_group(a: &str, b: &str) -> bool {
    let group = |api_version: &str| {
        api_version
            .rsplit_once('/')
            .map_or("", |(g, _)| g)
            .to_owned()
    };
    group(a) == group(b)
}

#[cfg(test)]
mod tests {
    use kube::core::{ObjectList, WatchEvent};

    use super::*;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"default","uid":"u1","resourceVersion":"42","generation":3,"labels":{"app":"web","tier":"front"},"annotations":{"big":"not parsed"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u0","controller":true},{"apiVersion":"v1","kind":"ConfigMap","name":"cfg","uid":"u2"}]},"spec":{"containers":[{"name":"web","image":"nginx"}]}}"#;

    #[test]
    fn the_json_text_is_kept_byte_for_byte_and_metadata_is_read() {
        let object = CachedObject::from_json(POD).unwrap();
        assert_eq!(object.json(), POD);
        assert_eq!(object.name(), "web-1");
        assert_eq!(object.namespace(), Some("default"));
        assert_eq!(object.resource_version(), "42");
        assert_eq!(object.generation(), Some(3));
        let labels: Vec<_> = object.labels().iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(labels, [("app", "web"), ("tier", "front")]);
        assert_eq!(object.key(), ObjectKey::namespaced("default", "web-1"));
    }

    #[test]
    fn the_controlling_owner_of_the_reconciled_kind_gives_the_key() {
        let object = CachedObject::from_json(POD).unwrap();
        assert_eq!(
            object.controller_key("apps/v1", "ReplicaSet"),
            Some(ObjectKey::namespaced("default", "web"))
        );
        assert_eq!(object.controller_key("apps/v1", "Deployment"), None);
        assert_eq!(
            object.controller_key("v1", "ConfigMap"),
            None,
            "a non-controller owner does not count"
        );
    }

    #[test]
    fn objects_decode_inside_kube_lists_and_watch_events() {
        let list = format!(r#"{{"metadata":{{"resourceVersion":"50"}},"items":[{POD}]}}"#);
        let list: ObjectList<WireObject> = serde_json::from_str(&list).unwrap();
        assert_eq!(CachedObject::from(list.items[0].clone()).json(), POD);
        let event = format!(r#"{{"type":"MODIFIED","object":{POD}}}"#);
        let WatchEvent::Modified(wire) =
            serde_json::from_str::<WatchEvent<WireObject>>(&event).unwrap()
        else {
            panic!("not a MODIFIED event");
        };
        assert_eq!(CachedObject::from(wire).json(), POD);
    }

    #[test]
    fn list_items_without_api_version_and_kind_get_those_of_the_listed_kind() {
        let pod = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        // A real API server's list: the items carry no apiVersion and kind.
        let untyped = POD.replacen(r#""apiVersion":"v1","kind":"Pod","#, "", 1);
        let list = format!(r#"{{"metadata":{{"resourceVersion":"50"}},"items":[{untyped}]}}"#);
        let list: ObjectList<WireObject> = serde_json::from_str(&list).unwrap();
        let object = CachedObject::from(list.items[0].clone().with_type_of(&pod));
        assert_eq!(object.json(), POD);
        assert_eq!(object.name(), "web-1");

        // Objects that have both are kept byte for byte; one missing is added alone.
        let typed = WireObject::from_json(POD).unwrap().with_type_of(&pod);
        assert_eq!(CachedObject::from(typed).json(), POD);
        let no_kind = POD.replacen(r#""kind":"Pod","#, "", 1);
        let added = WireObject::from_json(&no_kind).unwrap().with_type_of(&pod);
        let value: serde_json::Value =
            serde_json::from_str(CachedObject::from(added).json()).unwrap();
        assert_eq!(
            value,
            serde_json::from_str::<serde_json::Value>(POD).unwrap()
        );

        let empty = WireObject::from_json(" {}").unwrap().with_type_of(&pod);
        assert_eq!(
            CachedObject::from(empty).json(),
            r#"{"apiVersion":"v1","kind":"Pod"}"#
        );
    }

    #[test]
    fn bad_metadata_is_an_error_not_a_default() {
        let error = CachedObject::from_json(r#"{"metadata":{"generation":"three"}}"#).unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");
    }

    #[test]
    fn cluster_scoped_objects_have_name_keys() {
        let object =
            CachedObject::from_json(r#"{"metadata":{"name":"node-1","resourceVersion":"1"}}"#)
                .unwrap();
        assert_eq!(object.key().to_string(), "node-1");
        assert_eq!(object.namespace(), None);
    }

    #[test]
    fn the_cache_keeps_no_managed_fields_and_nothing_else_changes() {
        let text = r#"{"metadata":{"name":"a","managedFields":[{"manager":"m"}],"labels":{"x":"y"}},"data":{"managedFields":"stays"}}"#;
        let cached: serde_json::Value =
            serde_json::from_str(CachedObject::from_json(text).unwrap().json()).unwrap();
        assert_eq!(
            cached,
            serde_json::json!({"metadata": {"name": "a", "labels": {"x": "y"}},
                               "data": {"managedFields": "stays"}})
        );
        let plain = r#"{"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {}}"#;
        assert_eq!(
            CachedObject::from_json(plain).unwrap().json(),
            plain,
            "byte for byte"
        );
    }
}
