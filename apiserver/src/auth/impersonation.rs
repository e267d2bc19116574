//! `Impersonate-User`, `Impersonate-Group` and `Impersonate-Uid`, checked as kube-apiserver v1.36
//! checks them (k8s.io/apiserver `pkg/endpoints/filters/impersonation`, constrained
//! impersonation on by default): the modes `serviceaccount` (a ServiceAccount name alone),
//! `user-info` (any other user) and `arbitrary-node` (a node name alone) first need
//! `impersonate-on:<mode>:<verb>` on the request itself, then `impersonate:<mode>` on the
//! impersonated `users`/`serviceaccounts`/`nodes`, `groups` and `uids` (group
//! `authentication.k8s.io`); the legacy mode needs `impersonate` on `users`, `groups` or
//! `serviceaccounts` in group `""` (uids in `authentication.k8s.io`). The first mode that passes
//! wins; when none does, the first mode's 403 is the answer.

use axum::http::HeaderMap;

use super::{
    ANONYMOUS, AUTHENTICATED, Attributes, MASTERS, UNAUTHENTICATED, UserInfo, authorize, forbidden,
    split_service_account,
};
use crate::error::ApiError;
use crate::store::Store;

/// Groups from which the constrained modes first try one `*` check (upstream's
/// `manyAuthorizationChecksInLoop`).
const MANY_CHECKS: usize = 4;

/// The user the impersonation headers ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Wanted {
    name: String,
    uid: String,
    groups: Vec<String>,
}

/// One way of impersonating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    ArbitraryNode,
    ServiceAccount,
    UserInfo,
    Legacy,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::ArbitraryNode => "arbitrary-node",
            Mode::ServiceAccount => "serviceaccount",
            Mode::UserInfo => "user-info",
            Mode::Legacy => "legacy",
        }
    }

    /// Whether this mode applies to the wanted user (upstream's mode filters).
    fn applies(self, wanted: &Wanted) -> bool {
        let only_name = wanted.uid.is_empty() && wanted.groups.is_empty();
        let node = node_name(&wanted.name).is_some();
        let sa = split_service_account(&wanted.name).is_some();
        match self {
            Mode::ArbitraryNode => only_name && node,
            Mode::ServiceAccount => only_name && sa,
            Mode::UserInfo => !node && !sa,
            Mode::Legacy => true,
        }
    }
}

fn node_name(user: &str) -> Option<&str> {
    user.strip_prefix("system:node:")
        .filter(|n| crate::util::validate_subdomain(n).is_ok())
}

/// Go's `%#v` of a string slice (for upstream's 400 message).
fn go_strings(items: &[String]) -> String {
    if items.is_empty() {
        return "[]string(nil)".into();
    }
    let quoted: Vec<String> = items.iter().map(|s| super::quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The user the request acts as: `requester` itself without impersonation headers, else the
/// impersonated user once every check passed (`system:authenticated` added unless the user is
/// `system:anonymous` or in `system:unauthenticated`).
///
/// # Errors
/// 400 for a group or uid without `Impersonate-User`; upstream's 403 when a check fails.
pub fn impersonate(
    store: &Store,
    enforce: bool,
    headers: &HeaderMap,
    request: &Attributes,
) -> Result<UserInfo, ApiError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let wanted = Wanted {
        name: header("impersonate-user"),
        uid: header("impersonate-uid"),
        groups: headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect(),
    };
    if wanted.name.is_empty() {
        if !wanted.uid.is_empty() || !wanted.groups.is_empty() {
            return Err(ApiError::BadRequest(format!(
                "requested &user.DefaultInfo{{Name:\"\", UID:{}, Groups:{}, \
                 Extra:map[string][]string(nil)}} without impersonating a user name",
                super::quote(&wanted.uid),
                go_strings(&wanted.groups)
            )));
        }
        return Ok(request.user.clone());
    }
    let mut first_error = None;
    for mode in [
        Mode::ArbitraryNode,
        Mode::ServiceAccount,
        Mode::UserInfo,
        Mode::Legacy,
    ] {
        if !mode.applies(&wanted) {
            continue;
        }
        match check(store, enforce, mode, &wanted, request) {
            Ok(user) => return Ok(user),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| ApiError::Internal("all impersonation modes failed; file a bug".into())))
}

/// One mode's checks; the impersonated user when they pass.
fn check(
    store: &Store,
    enforce: bool,
    mode: Mode,
    wanted: &Wanted,
    request: &Attributes,
) -> Result<UserInfo, ApiError> {
    let allowed = |attrs: &Attributes| -> Result<(), ApiError> {
        if !enforce {
            return Ok(());
        }
        let decision = authorize(store, attrs);
        if decision.allowed {
            Ok(())
        } else {
            Err(forbidden(attrs, &decision.reason))
        }
    };
    let constrained = mode != Mode::Legacy;
    if constrained {
        let mut on = request.clone();
        on.verb = format!("impersonate-on:{}:{}", mode.name(), request.verb);
        allowed(&on)?;
    }
    let (verb, group) = if constrained {
        (
            format!("impersonate:{}", mode.name()),
            "authentication.k8s.io",
        )
    } else {
        ("impersonate".to_string(), "")
    };
    let attrs = |group: &str, resource: &str, name: &str| Attributes {
        user: request.user.clone(),
        verb: verb.clone(),
        resource_request: true,
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        name: name.into(),
        ..Attributes::default()
    };
    let mut user = UserInfo {
        name: wanted.name.clone(),
        uid: wanted.uid.clone(),
        groups: wanted.groups.clone(),
    };
    let mut name_check = attrs(group, "users", &wanted.name);
    if constrained && let Some(node) = node_name(&wanted.name) {
        name_check.resource = "nodes".into();
        name_check.name = node.into();
        user.groups = vec!["system:nodes".into()];
    }
    if let Some((ns, sa)) = split_service_account(&wanted.name) {
        name_check.resource = "serviceaccounts".into();
        name_check.namespace = ns.into();
        name_check.name = sa.into();
        if wanted.groups.is_empty() {
            user.groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
    }
    allowed(&name_check)?;
    if !wanted.uid.is_empty() {
        allowed(&attrs("authentication.k8s.io", "uids", &wanted.uid))?;
    }
    if !wanted.groups.is_empty() {
        let mut group_check = attrs(group, "groups", "");
        if constrained && wanted.groups.iter().any(String::is_empty) {
            return Err(forbidden(
                &group_check,
                "impersonating the empty string group is not allowed",
            ));
        }
        if constrained && wanted.groups.iter().any(|g| g == MASTERS) {
            group_check.name = MASTERS.into();
            return Err(forbidden(
                &group_check,
                "impersonating the system:masters group is not allowed",
            ));
        }
        let mut all = false;
        if constrained && wanted.groups.len() >= MANY_CHECKS {
            group_check.name = "*".into();
            all = allowed(&group_check).is_ok();
        }
        if !all {
            for g in &wanted.groups {
                group_check.name = g.clone();
                allowed(&group_check)?;
            }
        }
    }
    if user.name == ANONYMOUS {
        if !user.in_group(UNAUTHENTICATED) {
            user.groups.push(UNAUTHENTICATED.into());
        }
    } else if !user.in_group(UNAUTHENTICATED) && !user.in_group(AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    Ok(user)
}
