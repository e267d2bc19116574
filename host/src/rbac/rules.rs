//! The RBAC rules plugin manifests need, merged by place, and their YAML objects.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;
use kube::core::{ApiResource, GroupVersionKind};

use crate::manifest::{Manifest, Verb};
use crate::runtime::KindRef;

pub(super) const READ: [&str; 3] = ["get", "list", "watch"];
pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Where a rule applies: cluster-wide (the ClusterRole) or in one namespace (a Role).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// Every namespace and cluster-scoped objects.
    Cluster,
    /// One namespace.
    Namespace(String),
}

/// The resource name of a kind and whether it was guessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plural {
    /// The plural, e.g. `deployments`.
    pub plural: String,
    /// Derived from the kind's name for a kind outside the built-in groups: may be wrong.
    pub guessed: bool,
}

/// Every rule the plugins need: for each place, resources (`(group, resource)`) and verbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules(pub BTreeMap<Place, BTreeMap<(String, String), BTreeSet<&'static str>>>);

impl Rules {
    fn add(&mut self, place: &Place, group: &str, resource: &str, verbs: &[&'static str]) {
        self.0
            .entry(place.clone())
            .or_default()
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .extend(verbs);
    }

    /// The rules `manifest` needs, with each kind's plural from `plural`.
    pub fn add_manifest(&mut self, manifest: &Manifest, plural: &dyn Fn(&KindRef) -> String) {
        self.add_reads(manifest, plural);
        self.add_writes(manifest, plural);
    }

    /// Reading what `manifest` caches: the host's informers list and watch, and a plugin's
    /// ServiceAccount needs them for its cached reads to be answered.
    pub fn add_reads(&mut self, manifest: &Manifest, plural: &dyn Fn(&KindRef) -> String) {
        let watched = watched(manifest);
        let kinds = std::iter::once(&manifest.for_kind).chain(&manifest.owns);
        for kind in kinds.chain(&manifest.cache) {
            self.add(&watched, group(kind), &plural(kind), &READ);
        }
    }

    /// What the calls of `manifest`'s plugin need: its Events and its grants.
    pub fn add_writes(&mut self, manifest: &Manifest, plural: &dyn Fn(&KindRef) -> String) {
        self.add(&watched(manifest), "events.k8s.io", "events", &["create"]);
        for grant in &manifest.grants {
            let places: Vec<Place> = match &grant.namespaces {
                None => vec![Place::Cluster],
                Some(namespaces) => namespaces.iter().cloned().map(Place::Namespace).collect(),
            };
            let verbs: Vec<&'static str> = grant.verbs.iter().map(|verb| verb.as_str()).collect();
            let mut on_object = verbs.clone();
            if grant.verbs.contains(&Verb::Patch) {
                on_object.push(Verb::Create.as_str());
            }
            let resource = plural(&grant.kind);
            for place in &places {
                self.add(place, group(&grant.kind), &resource, &on_object);
                for subresource in &grant.subresources {
                    let sub = format!("{resource}/{subresource}");
                    self.add(place, group(&grant.kind), &sub, &verbs);
                }
            }
        }
    }

    /// Leaves out of each namespace what the cluster-wide rules already give, and drops places
    /// left without rules.
    pub(super) fn prune(&mut self) {
        let cluster = self.0.get(&Place::Cluster).cloned().unwrap_or_default();
        for (place, resources) in &mut self.0 {
            if *place == Place::Cluster {
                continue;
            }
            for (resource, verbs) in resources.iter_mut() {
                if let Some(everywhere) = cluster.get(resource) {
                    verbs.retain(|verb| !everywhere.contains(verb));
                }
            }
            resources.retain(|_, verbs| !verbs.is_empty());
        }
        self.0.retain(|_, resources| !resources.is_empty());
    }

    /// The policy rules of `place`: one per API group and set of verbs, sorted.
    #[must_use]
    pub fn policy_rules(&self, place: &Place) -> Vec<PolicyRule> {
        let mut merged: BTreeMap<(&str, &BTreeSet<&str>), Vec<String>> = BTreeMap::new();
        for ((group, resource), verbs) in self.0.get(place).into_iter().flatten() {
            merged
                .entry((group.as_str(), verbs))
                .or_default()
                .push(resource.clone());
        }
        let mut rules: Vec<PolicyRule> = merged
            .into_iter()
            .map(|((group, verbs), resources)| PolicyRule {
                api_groups: Some(vec![group.to_owned()]),
                resources: Some(resources),
                verbs: verbs.iter().map(|verb| (*verb).to_owned()).collect(),
                ..PolicyRule::default()
            })
            .collect();
        rules.sort_by(|a, b| (&a.api_groups, &a.resources).cmp(&(&b.api_groups, &b.resources)));
        rules
    }
}

/// Where `manifest`'s plugin watches: its `namespace`, or the cluster.
fn watched(manifest: &Manifest) -> Place {
    manifest
        .namespace
        .as_ref()
        .map_or(Place::Cluster, |namespace| {
            Place::Namespace(namespace.clone())
        })
}

pub(super) fn group(kind: &KindRef) -> &str {
    kind.api_version
        .split_once('/')
        .map_or("", |(group, _)| group)
}

/// The plural kube-rs and client-go derive from a kind's name, and whether that is a guess
/// (outside the built-in groups: the core group, dotless groups and `*.k8s.io`).
#[must_use]
pub fn derived_plural(kind: &KindRef) -> Plural {
    let group = group(kind);
    let version = kind
        .api_version
        .rsplit_once('/')
        .map_or(kind.api_version.as_str(), |(_, version)| version);
    let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
    Plural {
        plural: ApiResource::from_gvk(&gvk).plural,
        guessed: group.contains('.') && !group.ends_with(".k8s.io") && group != "k8s.io",
    }
}

/// The YAML documents for `rules`: a ClusterRole and ClusterRoleBinding for the cluster-wide
/// rules, a Role and RoleBinding per namespace, all named `name`, bound to `subject`
/// (namespace, name of a service account).
#[must_use]
pub fn render(rules: &Rules, name: &str, subject: &(String, String)) -> Vec<String> {
    let mut documents = Vec::new();
    for place in rules.0.keys() {
        let policy = Some(rules.policy_rules(place));
        match place {
            Place::Cluster => {
                documents.push(yaml(&ClusterRole {
                    metadata: meta(name, None),
                    rules: policy,
                    ..ClusterRole::default()
                }));
                documents.push(yaml(&ClusterRoleBinding {
                    metadata: meta(name, None),
                    role_ref: role_ref("ClusterRole", name),
                    subjects: Some(vec![service_account_subject(subject)]),
                }));
            }
            Place::Namespace(namespace) => {
                documents.extend(role(name, namespace, policy, subject));
            }
        }
    }
    documents
}

/// A Role with `rules` in `namespace` and its RoleBinding to `subject`.
pub(super) fn role(
    name: &str,
    namespace: &str,
    rules: Option<Vec<PolicyRule>>,
    subject: &(String, String),
) -> [String; 2] {
    [
        yaml(&Role {
            metadata: meta(name, Some(namespace)),
            rules,
        }),
        yaml(&RoleBinding {
            metadata: meta(name, Some(namespace)),
            role_ref: role_ref("Role", name),
            subjects: Some(vec![service_account_subject(subject)]),
        }),
    ]
}

pub(super) fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(ToOwned::to_owned),
        labels: Some([("app.kubernetes.io/part-of".into(), "reconcile-host".into())].into()),
        ..ObjectMeta::default()
    }
}

pub(super) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some(RBAC_GROUP.to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

pub(super) fn service_account_subject((namespace, name): &(String, String)) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        namespace: Some(namespace.clone()),
        name: name.clone(),
        api_group: Some(String::new()),
    }
}

pub(super) fn yaml<T: serde::Serialize>(value: &T) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_default()
}

/// A ClusterRole with `rules` and its ClusterRoleBinding to `subject`.
pub(super) fn cluster_role(
    name: &str,
    rules: Vec<PolicyRule>,
    subject: &(String, String),
) -> [String; 2] {
    [
        yaml(&ClusterRole {
            metadata: meta(name, None),
            rules: Some(rules),
            ..ClusterRole::default()
        }),
        yaml(&ClusterRoleBinding {
            metadata: meta(name, None),
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(vec![service_account_subject(subject)]),
        }),
    ]
}

/// The rules of a host that loads ReconcilerPlugin and NamespacedReconcilerPlugin objects: read
/// them, write their status, record Events on them.
#[must_use]
pub fn plugin_object_rules() -> Vec<PolicyRule> {
    let rule = |resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec!["reconcile-host.dev".to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|verb| (*verb).to_owned()).collect(),
        ..PolicyRule::default()
    };
    vec![
        rule("reconcilerplugins", &["get", "list", "watch"]),
        rule("reconcilerplugins/status", &["get", "patch", "update"]),
        rule("namespacedreconcilerplugins", &["get", "list", "watch"]),
        rule(
            "namespacedreconcilerplugins/status",
            &["get", "patch", "update"],
        ),
        // Events on the objects when a plugin's reconciles start or stop failing.
        PolicyRule {
            api_groups: Some(vec!["events.k8s.io".to_owned()]),
            resources: Some(vec!["events".to_owned()]),
            verbs: vec!["create".to_owned()],
            ..PolicyRule::default()
        },
    ]
}

fn leases(verbs: &[&str], names: Option<Vec<String>>) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
        resources: Some(vec!["leases".to_owned()]),
        resource_names: names,
        verbs: verbs.iter().map(|verb| (*verb).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The host's own Lease rules: `create` of Leases, `get` and `update` of `lease_name` (what
/// its leader election calls).
#[must_use]
pub fn lease_rules(lease_name: &str) -> Vec<PolicyRule> {
    // `create` cannot be limited to a name: the API server does not know it before the object.
    vec![
        leases(&["create"], None),
        leases(&["get", "update"], Some(vec![lease_name.to_owned()])),
    ]
}

/// Sharded mode's Lease rules: each replica creates, renews and deletes a Lease named after its
/// identity, lists the ring's, and deletes those nobody renews; no name is known in advance.
#[must_use]
pub fn membership_lease_rules() -> Vec<PolicyRule> {
    vec![leases(&["create", "get", "list", "update", "delete"], None)]
}
