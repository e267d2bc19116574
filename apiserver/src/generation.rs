//! Which kinds carry `metadata.generation`, and when it changes, as a real API server decides it.
//!
//! The rule upstream: `generation` is not a generic field. Each kind's registry strategy
//! (`pkg/registry/<group>/<kind>/strategy.go` in k8s.io/kubernetes, and the apiextensions
//! strategies for CRDs and custom resources) sets `Generation = 1` in `PrepareForCreate` and
//! increments it in `PrepareForUpdate` when the desired state (the spec) changes — or does
//! neither. Kinds whose strategy does neither (ConfigMap, Secret, Namespace, Service,
//! ServiceAccount, Event, Lease, Role, ... ) have no generation at all. [`TRACKED`] is the list
//! of kinds whose strategy sets it, read from Kubernetes v1.36.3's strategies; two kinds have a
//! partial rule ([`CREATE_ONLY`], [`UPDATE_ONLY`]).
//!
//! Custom resources always get a generation (apiextensions' `customResourceStrategy`); their
//! generation moves on any change outside `metadata` made through the main endpoint (a status
//! change included when the CRD serves no status subresource).

use serde_json::Value;

use crate::resources::Resource;

/// How a kind's `metadata.generation` behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// No generation: create sets none, updates keep none.
    None,
    /// `1` on create, incremented when the object changes outside `metadata` and `status`.
    Tracked,
    /// `1` on create, never incremented (PriorityClass: its strategy sets it on create only).
    CreateOnly,
    /// None on create, incremented on a spec change (CSIDriver: its strategy only increments).
    UpdateOnly,
    /// A custom resource: `1` on create, incremented on any change outside `metadata`.
    Custom,
}

/// `(group, kind)` of the built-in kinds whose strategy sets and increments the generation.
pub const TRACKED: &[(&str, &str)] = &[
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "ReplicationController"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("policy", "PodDisruptionBudget"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "DeviceTaintRule"),
    ("resource.k8s.io", "ResourceSlice"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
];

/// Kinds whose strategy sets the generation on create but never increments it.
pub const CREATE_ONLY: &[(&str, &str)] = &[("scheduling.k8s.io", "PriorityClass")];

/// Kinds whose strategy increments the generation on update but sets none on create.
pub const UPDATE_ONLY: &[(&str, &str)] = &[("storage.k8s.io", "CSIDriver")];

/// The rule for a served resource.
pub fn rule(res: &Resource) -> Rule {
    if res.crd.is_some() {
        return Rule::Custom;
    }
    let key = (res.group.as_str(), res.kind.as_str());
    let has = |list: &[(&str, &str)]| list.iter().any(|&(g, k)| (g, k) == key);
    if has(TRACKED) {
        Rule::Tracked
    } else if has(CREATE_ONLY) {
        Rule::CreateOnly
    } else if has(UPDATE_ONLY) {
        Rule::UpdateOnly
    } else {
        Rule::None
    }
}

/// The generation a new object starts with, if any.
pub fn on_create(res: &Resource) -> Option<i64> {
    match rule(res) {
        Rule::Tracked | Rule::CreateOnly | Rule::Custom => Some(1),
        Rule::None | Rule::UpdateOnly => None,
    }
}

/// The generation after an update from `current` to `next`, if any. A write through the
/// `status` subresource (`status_write`) never changes it.
pub fn on_update(res: &Resource, current: &Value, next: &Value, status_write: bool) -> Option<i64> {
    let live = current
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    if status_write {
        return live;
    }
    let changed = |skip_status: bool| {
        let (Some(a), Some(b)) = (current.as_object(), next.as_object()) else {
            return current != next;
        };
        a.keys()
            .chain(b.keys())
            .filter(|k| k.as_str() != "metadata" && !(skip_status && k.as_str() == "status"))
            .any(|k| a.get(k) != b.get(k))
    };
    match rule(res) {
        Rule::None => None,
        Rule::CreateOnly => live,
        Rule::Tracked => {
            let live = live.unwrap_or(1);
            Some(if changed(true) { live + 1 } else { live })
        }
        Rule::UpdateOnly => {
            if changed(true) {
                Some(live.unwrap_or(0) + 1)
            } else {
                live
            }
        }
        Rule::Custom => {
            let live = live.unwrap_or(1);
            Some(if changed(false) { live + 1 } else { live })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    #[test]
    fn kinds_without_a_generation_in_a_real_server_get_none() {
        let reg = Registry::default();
        for (group, plural) in [
            ("", "configmaps"),
            ("", "secrets"),
            ("", "namespaces"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("", "events"),
            ("coordination.k8s.io", "leases"),
            ("events.k8s.io", "events"),
            ("rbac.authorization.k8s.io", "roles"),
        ] {
            let res = reg.find(group, "v1", plural).expect(plural);
            assert_eq!(rule(&res), Rule::None, "{group}/{plural}");
            assert_eq!(on_create(&res), None);
        }
        for (group, plural) in [
            ("apps", "deployments"),
            ("", "pods"),
            ("policy", "poddisruptionbudgets"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
        ] {
            let res = reg.find(group, "v1", plural).expect(plural);
            assert_eq!(on_create(&res), Some(1), "{group}/{plural}");
        }
    }

    #[test]
    fn custom_resources_without_status_subresource_count_status_changes() {
        let mut res = Registry::default()
            .find("", "v1", "configmaps")
            .expect("configmaps")
            .as_ref()
            .clone();
        res.crd = Some("widgets.example.com".into());
        let a = json!({"metadata": {"generation": 3}, "spec": 1, "status": 1});
        let b = json!({"metadata": {"generation": 3}, "spec": 1, "status": 2});
        assert_eq!(on_update(&res, &a, &b, false), Some(4));
        assert_eq!(on_update(&res, &a, &a, false), Some(3));
        assert_eq!(
            on_update(&res, &a, &b, true),
            Some(3),
            "status writes keep it"
        );
    }
}
