//! The default ClusterRoles and ClusterRoleBindings a server that authorizes starts with, from
//! kube-apiserver's bootstrap policy (k8s.io/kubernetes
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`): `cluster-admin` for
//! `system:masters`, discovery and `kubectl auth can-i`/`whoami` for every authenticated user,
//! the OIDC discovery paths for every ServiceAccount, health and version for everyone. The aggregated `admin`, `edit` and `view` roles and the
//! controllers' roles are not created.

use serde_json::{Value, json};

/// `(name, rules, subject groups)` of each default role and its binding.
fn defaults() -> Vec<(&'static str, Value, &'static [&'static str])> {
    vec![
        (
            "cluster-admin",
            json!([
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ]),
            &["system:masters"],
        ),
        (
            "system:discovery",
            json!([{"verbs": ["get"], "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/",
            ]}]),
            &["system:authenticated"],
        ),
        (
            "system:basic-user",
            json!([
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"]},
            ]),
            &["system:authenticated"],
        ),
        (
            "system:service-account-issuer-discovery",
            json!([{"verbs": ["get"], "nonResourceURLs": [
                "/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                "/openid/v1/jwks", "/openid/v1/jwks/",
            ]}]),
            &["system:serviceaccounts"],
        ),
        (
            "system:public-info-viewer",
            json!([{"verbs": ["get"], "nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/",
            ]}]),
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

/// The default ClusterRoles, then their ClusterRoleBindings, as objects to create.
pub fn objects() -> Vec<(&'static str, Value)> {
    let metadata = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let mut roles = Vec::new();
    let mut bindings = Vec::new();
    for (name, rules, groups) in defaults() {
        roles.push((
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": metadata(name), "rules": rules}),
        ));
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        bindings.push((
            "clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": metadata(name),
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": name},
                   "subjects": subjects}),
        ));
    }
    roles.extend(bindings);
    roles
}
