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
    /// Served verbs.
    pub verbs: Vec<&'static str>,
    /// Added by a CRD (its name), not built in.
    pub crd: Option<String>,
}

impl Resource {
    /// The store table: `plural` for the core group, else `plural.group` (version-independent).
    pub fn table(&self) -> Arc<str> {
        Arc::from(self.group_resource())
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
        out
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

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    short: &[&str],
    namespaced: bool,
    status: bool,
    all: bool,
) -> Resource {
    Resource {
        group: group.into(),
        version: "v1".into(),
        plural: plural.into(),
        singular: singular.into(),
        kind: kind.into(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if all { vec!["all".into()] } else { vec![] },
        namespaced,
        status,
        verbs: ALL_VERBS.to_vec(),
        crd: None,
    }
}

/// The built-in resources.
pub fn builtins() -> Vec<Resource> {
    let mut ns = builtin(
        "",
        "namespaces",
        "namespace",
        "Namespace",
        &["ns"],
        false,
        true,
        false,
    );
    ns.verbs = vec![
        "create", "delete", "get", "list", "patch", "update", "watch",
    ];
    vec![
        ns,
        builtin(
            "",
            "configmaps",
            "configmap",
            "ConfigMap",
            &["cm"],
            true,
            false,
            false,
        ),
        builtin("", "secrets", "secret", "Secret", &[], true, false, false),
        builtin("", "pods", "pod", "Pod", &["po"], true, true, true),
        builtin(
            "",
            "services",
            "service",
            "Service",
            &["svc"],
            true,
            true,
            true,
        ),
        builtin(
            "",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            &["sa"],
            true,
            false,
            false,
        ),
        builtin("", "events", "event", "Event", &["ev"], true, false, false),
        builtin(
            "apps",
            "deployments",
            "deployment",
            "Deployment",
            &["deploy"],
            true,
            true,
            true,
        ),
        builtin(
            "coordination.k8s.io",
            "leases",
            "lease",
            "Lease",
            &[],
            true,
            false,
            false,
        ),
        builtin(
            "policy",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            &["pdb"],
            true,
            true,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "roles",
            "role",
            "Role",
            &[],
            true,
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            &[],
            true,
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            &[],
            false,
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            &[],
            false,
            false,
            false,
        ),
        builtin(
            "events.k8s.io",
            "events",
            "event",
            "Event",
            &["ev"],
            true,
            false,
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            &["crd", "crds"],
            false,
            true,
            false,
        ),
    ]
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
            verbs: ALL_VERBS.to_vec(),
            crd: Some(name.to_string()),
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
        assert_eq!(reg.groups().last().unwrap().name, "example.com");
        reg.remove_crd("widgets.example.com");
        assert!(reg.find("example.com", "v1", "widgets").is_none());
    }
}
