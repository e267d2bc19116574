//! What the secured telemetry port needs (`telemetry.authorization: kubernetes`): the host may
//! ask the API server to review tokens and access (`<name>-telemetry-reviews`, bound to the
//! host), a ClusterRole that lets a Prometheus scraper read `/metrics`
//! (`<name>-metrics-reader`), and what a `kubectl reconcile` user needs: the ClusterRole the
//! hosts check (`<name>-debug-reader`, `get /debug/reconciles*` and `/debug/logs*`; and
//! `<name>-recording-reader`, `get /debug/recordings*`, for `replay`: a recording holds what the
//! plugin read) and the Role of the API server's pod proxy in the hosts' namespace
//! (`<name>-debug-proxy`). The last four are left for the operator to bind.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};

use super::rules::{cluster_role, meta, yaml};

/// The reviews the host makes of each request to `/metrics` and `/debug/*`.
fn review_rules() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            api_groups: Some(vec!["authentication.k8s.io".to_owned()]),
            resources: Some(vec!["tokenreviews".to_owned()]),
            verbs: vec!["create".to_owned()],
            ..PolicyRule::default()
        },
        PolicyRule {
            api_groups: Some(vec!["authorization.k8s.io".to_owned()]),
            resources: Some(vec!["subjectaccessreviews".to_owned()]),
            verbs: vec!["create".to_owned()],
            ..PolicyRule::default()
        },
    ]
}

/// The ClusterRole and binding of the reviews, and the scraper's ClusterRole (unbound).
pub(super) fn documents(name: &str, host: &(String, String)) -> Vec<String> {
    let mut documents =
        cluster_role(&format!("{name}-telemetry-reviews"), review_rules(), host).to_vec();
    documents.push(yaml(&ClusterRole {
        metadata: meta(&format!("{name}-metrics-reader"), None),
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }));
    documents.push(yaml(&ClusterRole {
        metadata: meta(&format!("{name}-debug-reader"), None),
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec![
                "/debug/reconciles".to_owned(),
                "/debug/reconciles/*".to_owned(),
                "/debug/logs".to_owned(),
                "/debug/logs/*".to_owned(),
            ]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }));
    documents.push(yaml(&ClusterRole {
        metadata: meta(&format!("{name}-recording-reader"), None),
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec![
                "/debug/recordings".to_owned(),
                "/debug/recordings/*".to_owned(),
            ]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }));
    let strings = |items: &[&str]| Some(items.iter().map(|&item| item.to_owned()).collect());
    documents.push(yaml(&Role {
        metadata: meta(&format!("{name}-debug-proxy"), Some(&host.0)),
        rules: Some(vec![
            PolicyRule {
                api_groups: strings(&[""]),
                resources: strings(&["pods"]),
                verbs: vec!["list".to_owned()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: strings(&[""]),
                resources: strings(&["pods/proxy"]),
                verbs: vec!["get".to_owned()],
                ..PolicyRule::default()
            },
        ]),
    }));
    documents
}
