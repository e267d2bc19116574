//! What the host needs to act as its plugins' ServiceAccounts: `impersonate` on exactly those
//! accounts (or, with constrained impersonation, `impersonate:serviceaccount` on them and
//! `impersonate-on:serviceaccount:<verb>` for only what their plugins do), and `create` on
//! SubjectAccessReviews to authorize their cached reads.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::rules::{Place, Rules, cluster_role, role};
use crate::manifest::ServiceAccountRef;

/// A Role per namespace of `accounts` letting `host` impersonate those accounts by name
/// (`constrained`: through constrained impersonation, limited to what each account's rules
/// allow), and a ClusterRole to create SubjectAccessReviews; nothing when there are no accounts.
pub(super) fn documents(
    name: &str,
    accounts: &BTreeMap<ServiceAccountRef, Rules>,
    host: &(String, String),
    constrained: bool,
) -> Vec<String> {
    let mut by_namespace: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for account in accounts.keys() {
        by_namespace
            .entry(&account.namespace)
            .or_default()
            .insert(&account.name);
    }
    if by_namespace.is_empty() {
        return Vec::new();
    }
    let mut documents = Vec::new();
    for (namespace, names) in by_namespace {
        let (group, verb) = if constrained {
            ("authentication.k8s.io", "impersonate:serviceaccount")
        } else {
            ("", "impersonate")
        };
        let rule = PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(vec!["serviceaccounts".to_owned()]),
            resource_names: Some(names.into_iter().map(ToOwned::to_owned).collect()),
            verbs: vec![verb.to_owned()],
            ..PolicyRule::default()
        };
        let role_name = format!("{name}-impersonation");
        documents.extend(role(&role_name, namespace, Some(vec![rule]), host));
    }
    let review = PolicyRule {
        api_groups: Some(vec!["authorization.k8s.io".to_owned()]),
        resources: Some(vec!["subjectaccessreviews".to_owned()]),
        verbs: vec!["create".to_owned()],
        ..PolicyRule::default()
    };
    documents.extend(cluster_role(
        &format!("{name}-read-reviews"),
        vec![review],
        host,
    ));
    if constrained {
        documents.extend(acting_on(name, accounts, host));
    }
    documents
}

/// What the host may do as the accounts under constrained impersonation: each account's own
/// rules with every verb as `impersonate-on:serviceaccount:<verb>`, and the discovery the
/// host's client does as the account (`get` of `/api` and `/apis`).
fn acting_on(
    name: &str,
    accounts: &BTreeMap<ServiceAccountRef, Rules>,
    host: &(String, String),
) -> Vec<String> {
    let mut places: BTreeMap<Place, BTreeMap<(String, String), BTreeSet<String>>> = BTreeMap::new();
    for rules in accounts.values() {
        let mut rules = rules.clone();
        rules.prune();
        for (place, resources) in rules.0 {
            for (resource, verbs) in resources {
                places
                    .entry(place.clone())
                    .or_default()
                    .entry(resource)
                    .or_default()
                    .extend(verbs.iter().map(|verb| on(verb)));
            }
        }
    }
    let role_name = format!("{name}-impersonate-on");
    let mut documents = Vec::new();
    let discovery = PolicyRule {
        non_resource_urls: Some(
            ["/api", "/api/*", "/apis", "/apis/*"]
                .map(String::from)
                .into(),
        ),
        verbs: vec![on("get")],
        ..PolicyRule::default()
    };
    let mut cluster_rules = vec![discovery];
    for (place, resources) in places {
        let rules: Vec<PolicyRule> = resources
            .into_iter()
            .map(|((group, resource), verbs)| PolicyRule {
                api_groups: Some(vec![group]),
                resources: Some(vec![resource]),
                verbs: verbs.into_iter().collect(),
                ..PolicyRule::default()
            })
            .collect();
        match place {
            Place::Cluster => cluster_rules.extend(rules),
            Place::Namespace(namespace) => {
                documents.extend(role(&role_name, &namespace, Some(rules), host));
            }
        }
    }
    documents.extend(cluster_role(&role_name, cluster_rules, host));
    documents
}

/// `verb` done as an impersonated ServiceAccount.
fn on(verb: &str) -> String {
    format!("impersonate-on:serviceaccount:{verb}")
}
