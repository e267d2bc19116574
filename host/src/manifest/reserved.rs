//! What no grant can reach, whatever it says: the objects that decide what the host and every
//! plugin may do. A plugin that could write them could act with rights it was not granted.
//!
//! - `ReconcilerPlugin` objects (`reconcile-host.dev`), their spec and their status: writing one
//!   would declare a plugin with any grant, or forge another plugin's conditions.
//! - RBAC (`rbac.authorization.k8s.io`: Roles, ClusterRoles and their bindings): writing them
//!   would hand the plugin, through the host's account, rights beyond its grants.
//! - ServiceAccount tokens (`serviceaccounts/token`): a token carries its account's rights, the
//!   host's own among them.
//! - Leases and ServiceAccounts in the namespace where the host keeps its leader and membership
//!   Leases (its own namespace unless configured): checked where the host knows that namespace
//!   ([`host_namespace_refusal`]); taking a Lease stops every plugin's dispatch, and the host's
//!   ServiceAccount is what it acts as.

use super::grant::{Grant, Verb};
use crate::runtime::KindRef;

/// The group of the host's own kinds.
const HOST_GROUP: &str = "reconcile-host.dev/";
/// The RBAC group.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io/";
/// The kinds of the RBAC group.
const RBAC_KINDS: [&str; 4] = ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];

fn writes(grant: &Grant) -> bool {
    grant.verbs.iter().any(|verb| *verb != Verb::Get)
}

/// Why `grant` reaches what no plugin may write, with the fix; `None` when it does not.
#[must_use]
pub fn refusal(grant: &Grant) -> Option<String> {
    let KindRef { api_version, kind } = &grant.kind;
    if api_version.starts_with(HOST_GROUP) && kind == "ReconcilerPlugin" && writes(grant) {
        return Some(format!(
            "gives {} on {}, which no plugin may write: a plugin that wrote ReconcilerPlugin \
             objects could declare a plugin with any grant or forge another plugin's status; \
             keep only `get` (or read them through `cache:`)",
            verbs(grant),
            grant.kind
        ));
    }
    if api_version.starts_with(RBAC_GROUP) && RBAC_KINDS.contains(&kind.as_str()) && writes(grant) {
        return Some(format!(
            "gives {} on {}, which no plugin may write: RBAC decides what the host and every \
             plugin may do, so a plugin writing it could give itself, through the host, rights \
             it was not granted; keep only `get`, and have an administrator apply what \
             `reconcile-host rbac` prints",
            verbs(grant),
            grant.kind
        ));
    }
    if api_version == "v1"
        && kind == "ServiceAccount"
        && grant.subresources.iter().any(|s| s == "token")
    {
        return Some(
            "gives the `token` subresource of ServiceAccounts, which no plugin may use: a token \
             carries its account's rights, the host's own among them; remove `token` from \
             `subresources`"
                .to_owned(),
        );
    }
    None
}

/// Why `grant` reaches the Leases or ServiceAccounts of the namespace `namespace` the host
/// keeps its leader and membership Leases in, with the fix; `None` when it does not.
#[must_use]
pub fn host_namespace_refusal(grant: &Grant, namespace: &str) -> Option<String> {
    let KindRef { api_version, kind } = &grant.kind;
    let what = if api_version.starts_with("coordination.k8s.io/") && kind == "Lease" {
        "Leases, among them the host's leader and membership Leases (taking one stops every \
         plugin)"
    } else if api_version == "v1" && kind == "ServiceAccount" {
        "ServiceAccounts, among them the one the host acts as"
    } else {
        return None;
    };
    (writes(grant) && grant.covers_namespace(Some(namespace))).then(|| {
        format!(
            "gives {} on {what} in namespace `{namespace}`, where the host keeps its own, which \
             no plugin may write; list other namespaces under `namespaces`",
            verbs(grant)
        )
    })
}

fn verbs(grant: &Grant) -> String {
    let writes: Vec<&str> = (grant.verbs.iter())
        .filter(|verb| **verb != Verb::Get)
        .map(|verb| verb.as_str())
        .collect();
    writes.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(api_version: &str, kind: &str, verbs: &[Verb], subresources: &[&str]) -> Grant {
        Grant {
            kind: KindRef::new(api_version, kind),
            verbs: verbs.to_vec(),
            namespaces: None,
            subresources: subresources.iter().map(|s| (*s).to_owned()).collect(),
            resource: None,
        }
    }

    #[test]
    fn the_host_s_kinds_rbac_and_tokens_are_refused_and_reads_are_not() {
        let refused = [
            grant(
                "reconcile-host.dev/v1alpha1",
                "ReconcilerPlugin",
                &[Verb::Patch],
                &["status"],
            ),
            grant(
                "reconcile-host.dev/v1alpha1",
                "ReconcilerPlugin",
                &[Verb::Create],
                &[],
            ),
            grant(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                &[Verb::Create],
                &[],
            ),
            grant(
                "rbac.authorization.k8s.io/v1",
                "Role",
                &[Verb::Get, Verb::Update],
                &[],
            ),
            grant("v1", "ServiceAccount", &[Verb::Create], &["token"]),
        ];
        for grant in &refused {
            let message = refusal(grant).unwrap_or_else(|| panic!("{grant:?} refused"));
            assert!(message.contains("no plugin may"), "{message}");
        }
        let allowed = [
            grant(
                "reconcile-host.dev/v1alpha1",
                "ReconcilerPlugin",
                &[Verb::Get],
                &[],
            ),
            grant("rbac.authorization.k8s.io/v1", "Role", &[Verb::Get], &[]),
            grant("v1", "ServiceAccount", &[Verb::Create, Verb::Delete], &[]),
            grant("v1", "ConfigMap", &[Verb::Patch], &["status"]),
        ];
        for grant in &allowed {
            assert_eq!(refusal(grant), None, "{grant:?}");
        }
    }

    #[test]
    fn lease_and_service_account_writes_in_the_host_s_namespace_are_refused() {
        for (api_version, kind) in [
            ("coordination.k8s.io/v1", "Lease"),
            ("v1", "ServiceAccount"),
        ] {
            let mut own = grant(api_version, kind, &[Verb::Update], &[]);
            let message =
                host_namespace_refusal(&own, "ops").expect("every namespace includes ops");
            assert!(
                message.contains("`ops`") && message.contains("namespaces"),
                "{message}"
            );
            own.namespaces = Some(vec!["team-a".to_owned()]);
            assert_eq!(host_namespace_refusal(&own, "ops"), None);
            own.namespaces = Some(vec!["team-a".to_owned(), "ops".to_owned()]);
            assert!(host_namespace_refusal(&own, "ops").is_some());
            let read = grant(api_version, kind, &[Verb::Get], &[]);
            assert_eq!(host_namespace_refusal(&read, "ops"), None);
        }
        let config_maps = grant("v1", "ConfigMap", &[Verb::Delete], &[]);
        assert_eq!(host_namespace_refusal(&config_maps, "ops"), None);
    }
}
