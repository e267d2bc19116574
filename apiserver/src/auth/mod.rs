//! Who is asking and whether they may: bearer-token authentication, impersonation, request
//! attributes as kube-apiserver's `RequestInfo` derives them, and its authorizer chain (the
//! `system:masters` group, then RBAC over this server's own Roles and bindings).
//!
//! Off unless [`Config::authorization`](crate::Config::authorization) is set: then every request
//! is authenticated, impersonation headers are checked, and the request is authorized before it
//! reaches a handler, with upstream's `403 Forbidden` Status when it is not.

pub(crate) mod attributes;
pub(crate) mod authn;
pub(crate) mod bootstrap;
pub(crate) mod impersonation;
pub(crate) mod rbac;
pub(crate) mod reviews;
pub(crate) mod tokens;

pub(crate) use attributes::Attributes;

use crate::error::ApiError;
use crate::store::Store;

/// The group whose members may do anything (upstream's `system:masters`).
pub const MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of a request without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of a request without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The prefix of a ServiceAccount's user name: `system:serviceaccount:<namespace>:<name>`.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// An authenticated (or impersonated) user, as upstream's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The uid, empty when none.
    pub uid: String,
    /// The groups, in order.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user a ServiceAccount's token authenticates as, with its three groups.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        UserInfo {
            name: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
            uid: uid.to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// `namespace` and `name` of a ServiceAccount user name (`system:serviceaccount:ns:name`).
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    // Upstream's SplitUsername: exactly two parts, each a valid object name.
    let valid = |s: &str| !s.contains(':') && crate::util::validate_subdomain(s).is_ok();
    (valid(ns) && valid(name)).then_some((ns, name))
}

/// What the authorizer chain answered: allowed or not, and why (upstream's `reason`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// `RBAC: allowed by …` when allowed by RBAC; on a denial, the role lookups that failed.
    pub reason: String,
}

/// Upstream's union authorizer as the test control plane runs it (`--authorization-mode=Node,RBAC`
/// behind the `system:masters` authorizer): members of `system:masters` are allowed with no
/// reason; anyone else is allowed by an RBAC rule or denied (the Node authorizer has no opinion
/// on users that are not nodes).
pub fn authorize(store: &Store, attrs: &Attributes) -> Decision {
    if attrs.user.in_group(MASTERS) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    rbac::authorize(store, attrs)
}

/// The `403 Forbidden` a denied request gets (upstream's `ForbiddenStatusError`): the message
/// names the user, the verb, the resource (with subresource), group and namespace, or the path.
pub fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let user = &attrs.user.name;
    let what = if attrs.resource_request {
        let mut resource = attrs.resource.clone();
        if !attrs.subresource.is_empty() {
            resource = format!("{resource}/{}", attrs.subresource);
        }
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", quote(&attrs.namespace))
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            quote(user),
            attrs.verb,
            quote(&resource),
            quote(&attrs.api_group)
        )
    } else {
        format!(
            "User {} cannot {} path {}",
            quote(user),
            attrs.verb,
            quote(&attrs.path)
        )
    };
    let what = what
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {err}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {} is forbidden: {err}", quote(&attrs.name))
    };
    ApiError::Denied {
        group: attrs.api_group.clone(),
        resource: attrs.resource.clone(),
        name: attrs.name.clone(),
        message,
    }
}

/// A string quoted as Go's `%q` quotes it (for the names and values in upstream's messages).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(ns: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            user: UserInfo::service_account("a", "b", ""),
            verb: "list".into(),
            resource_request: true,
            path: String::new(),
            namespace: ns.into(),
            api_group: String::new(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
        }
    }

    #[test]
    fn forbidden_messages_read_as_upstream_writes_them() {
        let e = forbidden(&attrs("x", "configmaps", "", ""), "");
        assert_eq!(
            e.to_string(),
            "configmaps is forbidden: User \"system:serviceaccount:a:b\" cannot list resource \
             \"configmaps\" in API group \"\" in the namespace \"x\""
        );
        let mut a = attrs("", "deployments", "status", "web");
        a.api_group = "apps".into();
        a.verb = "get".into();
        assert_eq!(
            forbidden(&a, "RBAC: role.rbac.authorization.k8s.io \"r\" not found").to_string(),
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:a:b\" cannot get \
             resource \"deployments/status\" in API group \"apps\" at the cluster scope: RBAC: \
             role.rbac.authorization.k8s.io \"r\" not found"
        );
        let mut p = attrs("", "", "", "");
        p.resource_request = false;
        p.verb = "get".into();
        p.path = "/logs/<x>".into();
        let e = forbidden(&p, "");
        assert_eq!(
            e.to_string(),
            "forbidden: User \"system:serviceaccount:a:b\" cannot get path \"/logs/&lt;x&gt;\""
        );
        assert_eq!(e.status()["details"], serde_json::json!({}));
    }

    #[test]
    fn service_account_user_names_split_into_namespace_and_name() {
        assert_eq!(
            split_service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(split_service_account("system:serviceaccount:ns"), None);
        assert_eq!(split_service_account("system:serviceaccount:ns:a:b"), None);
        assert_eq!(split_service_account("alice"), None);
    }
}
