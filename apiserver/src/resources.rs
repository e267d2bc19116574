//! The resource table: which kinds are served, under which group/version/plural, with which
//! scope and verbs; built-ins plus the kinds that CustomResourceDefinitions add.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// One served resource (one group/version/plural).
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// API group, empty for the core group.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Whether a `/status` subresource is served.
    pub status: bool,
    /// Where the `/scale` subresource reads and writes, when it is served.
    pub scale: Option<ScalePaths>,
    /// Discovery's `storageVersionHash` (of the version objects are stored in); `None` for the
    /// kinds without storage (the reviews).
    pub storage_hash: Option<String>,
    /// Served verbs.
    pub verbs: Vec<&'static str>,
    /// Added by a CRD (its name), not built in.
    pub crd: Option<String>,
    /// A CRD version's `additionalPrinterColumns` (`name`, `type`, `format`, `description`,
    /// `priority`, `jsonPath`), as written; empty: the Name and Age columns.
    pub columns: Vec<Value>,
    /// A CRD version's `schema.openAPIV3Schema`, which prunes and defaults its objects
    /// ([`crate::structural`]); `None` for built-in kinds.
    pub schema: Option<std::sync::Arc<Value>>,
}

impl Resource {
    /// Whether a `PUT` without `metadata.resourceVersion` overwrites (most built-in kinds), or is
    /// refused with 422, as upstream's strategies say: Leases (an election must not be won
    /// blindly) and custom resources.
    #[must_use]
    pub fn allows_unconditional_update(&self) -> bool {
        self.crd.is_none() && !(self.group == "coordination.k8s.io" && self.plural == "leases")
    }

    /// The store table: `plural` for the core group, else `plural.group` (version-independent).
    /// `events.k8s.io` Events share the core Events' table, as upstream (see `crate::events`).
    pub fn table(&self) -> Arc<str> {
        if self.is_events_v1() {
            return Arc::from("events");
        }
        Arc::from(self.group_resource())
    }

    /// Whether this is the `events.k8s.io` view of the Events storage (converted by
    /// `crate::events`).
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    /// `plural` or `plural.group`, as error messages name a resource.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `v1` or `group/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The discovery (`APIResource`) entries for this resource and its status subresource.
    pub fn discovery(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs,
        });
        if let Some(hash) = &self.storage_hash {
            main["storageVersionHash"] = hash.clone().into();
        }
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut out = vec![main];
        if self.status {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.scale.is_some() {
            out.push(json!({
                "name": format!("{}/scale", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

/// Upstream's `storageVersionHash`: the first 8 bytes of SHA-256 of `group/version/kind`, in
/// base64.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    crate::util::base64(&digest[..8])
}

/// Where a kind keeps what its `/scale` subresource shows, as JSON pointers: upstream's
/// `spec.replicas`, `status.replicas` and the selector of built-in workloads, a CRD's
/// `subresources.scale` paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas, e.g. `/spec/replicas`.
    pub spec_replicas: String,
    /// The observed replicas, e.g. `/status/replicas`.
    pub status_replicas: String,
    /// The label selector: a string, a `LabelSelector` or a label map (built-in kinds); none
    /// when the CRD names no `labelSelectorPath`.
    pub selector: Option<String>,
}

impl ScalePaths {
    fn builtin() -> Self {
        ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
        }
    }

    /// From a CRD version's `subresources.scale` (`.spec.replicas` paths become pointers).
    fn of_crd(scale: &Value) -> Option<Self> {
        let pointer = |key: &str| {
            scale
                .get(key)
                .and_then(Value::as_str)
                .map(|path| path.replace('.', "/"))
        };
        Some(ScalePaths {
            spec_replicas: pointer("specReplicasPath")?,
            status_replicas: pointer("statusReplicasPath")?,
            selector: pointer("labelSelectorPath"),
        })
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A custom resource's verbs in the order a real server lists them (its CRD handler's order).
const CRD_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// The create-only review kinds (served by `crate::auth::reviews`, nothing stored):
/// `(group, plural, kind, namespaced)`.
const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
];

/// The review kinds of [`REVIEWS`] as resources with the one verb `create`.
fn reviews() -> impl Iterator<Item = Resource> {
    REVIEWS
        .iter()
        .map(|&(group, plural, kind, namespaced)| Resource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced,
            status: false,
            scale: None,
            storage_hash: None,
            verbs: vec!["create"],
            crd: None,
            columns: Vec::new(),
            schema: None,
        })
}

/// The built-in resources: every kind of [`crate::builtins::all`] with its
/// [`crate::builtins::extras`], and the review kinds.
pub fn builtins() -> Vec<Resource> {
    crate::builtins::all()
        .into_iter()
        .map(|k| {
            let extras = crate::builtins::extras(k.group, k.plural);
            Resource {
                group: k.group.into(),
                version: k.version.into(),
                plural: k.plural.into(),
                singular: k.kind.to_lowercase(),
                kind: k.kind.into(),
                short_names: extras.short_names.iter().map(|s| s.to_string()).collect(),
                categories: extras.categories.iter().map(|s| s.to_string()).collect(),
                namespaced: k.namespaced,
                status: extras.subresources.contains(&"status"),
                scale: extras
                    .subresources
                    .contains(&"scale")
                    .then(ScalePaths::builtin),
                storage_hash: crate::builtins::storage_version(k.group, k.plural, k.version)
                    .map(|version| storage_version_hash(k.group, version, k.kind)),
                verbs: extras.verbs.unwrap_or(ALL_VERBS).to_vec(),
                crd: None,
                columns: Vec::new(),
                schema: None,
            }
        })
        .chain(reviews())
        .collect()
}

/// A served API group with its versions, preferred first.
#[derive(Debug, Clone)]
pub struct Group {
    /// Group name, empty for core.
    pub name: String,
    /// Versions, preferred first.
    pub versions: Vec<String>,
}

/// The live resource table; CRDs add and remove entries.
#[derive(Debug)]
pub struct Registry {
    resources: RwLock<Vec<Arc<Resource>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            resources: RwLock::new(builtins().into_iter().map(Arc::new).collect()),
        }
    }
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Resource>>> {
        self.resources.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks up `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// Looks up a kind by `apiVersion` and `kind` (for owner references).
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<Resource>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.read()
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
    }

    /// Every resource served, in registration order.
    pub fn all(&self) -> Vec<Arc<Resource>> {
        self.read().clone()
    }

    /// The resources of `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<Resource>> {
        self.read()
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// The non-core groups in first-registration order, with their versions.
    pub fn groups(&self) -> Vec<Group> {
        let mut groups: Vec<Group> = Vec::new();
        for r in self.read().iter().filter(|r| !r.group.is_empty()) {
            match groups.iter_mut().find(|g| g.name == r.group) {
                Some(g) if !g.versions.contains(&r.version) => g.versions.push(r.version.clone()),
                Some(_) => {}
                None => groups.push(Group {
                    name: r.group.clone(),
                    versions: vec![r.version.clone()],
                }),
            }
        }
        groups
    }

    /// Serves the kinds a CRD defines (replacing what it served before).
    pub fn install_crd(&self, crd_name: &str, resources: Vec<Resource>) {
        let mut all = self.resources.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|r| r.crd.as_deref() != Some(crd_name));
        all.extend(resources.into_iter().map(Arc::new));
    }

    /// Stops serving the kinds of a CRD.
    pub fn remove_crd(&self, crd_name: &str) {
        let mut all = self.resources.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|r| r.crd.as_deref() != Some(crd_name));
    }
}

/// The resources a CRD object serves, or why it is invalid.
pub fn crd_resources(crd: &Value) -> Result<Vec<Resource>, String> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group: Required value")?;
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural: Required value")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind: Required value")?;
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group \
             (\"{plural}.{group}\")"
        ));
    }
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .ok_or("spec.scope: Required value: Cluster or Namespaced")?;
    let strings = |key: &str| -> Vec<String> {
        names
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or("spec.versions: Required value: must have at least one version")?;
    let mut out = Vec::new();
    // Objects are stored in the version marked `storage`.
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    for v in versions {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name: Required value")?;
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        out.push(Resource {
            group: group.into(),
            version: vname.into(),
            plural: plural.into(),
            singular: names
                .get("singular")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| kind.to_lowercase()),
            kind: kind.into(),
            short_names: strings("shortNames"),
            categories: strings("categories"),
            namespaced: scope == "Namespaced",
            status: v.pointer("/subresources/status").is_some(),
            scale: v
                .pointer("/subresources/scale")
                .and_then(ScalePaths::of_crd),
            storage_hash: Some(storage_version_hash(group, &storage_version, kind)),
            verbs: CRD_VERBS.to_vec(),
            crd: Some(name.to_string()),
            columns: v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            schema: v
                .pointer("/schema/openAPIV3Schema")
                .filter(|schema| schema.is_object())
                .cloned()
                .map(std::sync::Arc::new),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_have_the_scopes_of_a_real_server() {
        let reg = Registry::default();
        assert!(!reg.find("", "v1", "namespaces").unwrap().namespaced);
        assert!(reg.find("", "v1", "configmaps").unwrap().namespaced);
        assert!(
            reg.find("coordination.k8s.io", "v1", "leases")
                .unwrap()
                .namespaced
        );
        assert!(
            !reg.find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                .unwrap()
                .namespaced
        );
    }

    #[test]
    fn rbac_and_disruption_budget_kinds_are_served_with_their_scopes() {
        let reg = Registry::default();
        let rbac = "rbac.authorization.k8s.io";
        assert!(reg.find(rbac, "v1", "roles").unwrap().namespaced);
        assert!(reg.find(rbac, "v1", "rolebindings").unwrap().namespaced);
        assert!(!reg.find(rbac, "v1", "clusterroles").unwrap().namespaced);
        assert!(
            !reg.find(rbac, "v1", "clusterrolebindings")
                .unwrap()
                .namespaced
        );
        let pdb = reg.find_kind("policy/v1", "PodDisruptionBudget").unwrap();
        assert!(pdb.namespaced && pdb.status);
        assert_eq!(pdb.short_names, ["pdb"]);
    }

    #[test]
    fn every_ga_kind_of_k8s_openapi_is_served_with_upstream_names() {
        let reg = Registry::default();
        let quota = reg
            .find("", "v1", "resourcequotas")
            .expect("resourcequotas");
        assert!(quota.namespaced && quota.status);
        assert_eq!(quota.short_names, ["quota"]);
        assert_eq!(quota.singular, "resourcequota");
        let hpa = reg
            .groups()
            .into_iter()
            .find(|g| g.name == "autoscaling")
            .unwrap();
        assert_eq!(hpa.versions, ["v2", "v1"], "v2 is preferred, as upstream");
        for (group, plural, namespaced) in [
            ("", "nodes", false),
            ("", "persistentvolumeclaims", true),
            ("apps", "statefulsets", true),
            ("batch", "cronjobs", true),
            ("networking.k8s.io", "ingresses", true),
            ("storage.k8s.io", "storageclasses", false),
            ("apiregistration.k8s.io", "apiservices", false),
            ("resource.k8s.io", "resourceclaims", true),
        ] {
            let r = reg
                .find(
                    group,
                    if plural == "horizontalpodautoscalers" {
                        "v2"
                    } else {
                        "v1"
                    },
                    plural,
                )
                .unwrap_or_else(|| panic!("{group}/{plural} not served"));
            assert_eq!(r.namespaced, namespaced, "{group}/{plural}");
        }
        let ns = reg.find("", "v1", "namespaces").unwrap();
        assert!(!ns.verbs.contains(&"deletecollection"));
        assert!(reg.find("", "v1", "componentstatuses").unwrap().verbs == ["get", "list"]);
        assert!(
            !reg.read()
                .iter()
                .any(|r| r.version.contains("alpha") || r.version.contains("beta")),
            "alpha and beta versions are off by default upstream"
        );
    }

    #[test]
    fn crd_with_mismatched_name_is_rejected_with_the_expected_name() {
        let crd = json!({"metadata": {"name": "x.example.com"}, "spec": {"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let err = crd_resources(&crd).unwrap_err();
        assert!(err.contains("widgets.example.com"), "{err}");
    }

    #[test]
    fn installed_crd_is_served_until_removed() {
        let reg = Registry::default();
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]}});
        reg.install_crd("widgets.example.com", crd_resources(&crd).unwrap());
        let r = reg.find("example.com", "v1", "widgets").unwrap();
        assert!(r.status);
        assert_eq!(
            r.verbs[..2],
            ["delete", "deletecollection"],
            "upstream's order for CRDs"
        );
        assert_eq!(reg.groups().last().unwrap().name, "example.com");
        reg.remove_crd("widgets.example.com");
        assert!(reg.find("example.com", "v1", "widgets").is_none());
    }
}
