//! What the host needs to act as its plugins' ServiceAccounts: `impersonate` on exactly those
//! accounts, and `create` on SubjectAccessReviews to authorize their cached reads.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::rules::{cluster_role, role};
use crate::manifest::ServiceAccountRef;

/// A Role per namespace of `accounts` letting `host` impersonate those accounts by name, and a
/// ClusterRole to create SubjectAccessReviews; nothing when there are no accounts.
pub(super) fn documents<'a>(
    name: &str,
    accounts: impl Iterator<Item = &'a ServiceAccountRef>,
    host: &(String, String),
) -> Vec<String> {
    let mut by_namespace: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for account in accounts {
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
        let rule = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["serviceaccounts".to_owned()]),
            resource_names: Some(names.into_iter().map(ToOwned::to_owned).collect()),
            verbs: vec!["impersonate".to_owned()],
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
    documents
}
