//! A request's authorization attributes, derived from its method, path and query the way
//! kube-apiserver's `RequestInfoFactory.NewRequestInfo` derives them (k8s.io/apiserver
//! `pkg/endpoints/request/requestinfo.go`).

use super::UserInfo;
use crate::http::Query;

/// What a request asks to do, as upstream's `authorizer.Attributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection` (or
    /// `impersonate`, …); for a non-resource request the method in lower case.
    pub verb: String,
    /// A request under `/api/v1/…` or `/apis/<group>/<version>/…` with a resource.
    pub resource_request: bool,
    /// The URL path (what non-resource rules match).
    pub path: String,
    /// The namespace, empty when cluster-scoped (the namespace itself for `namespaces/<name>`).
    pub namespace: String,
    /// The API group, empty for core.
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object name, or the `metadata.name` a list or watch selects exactly.
    pub name: String,
}

/// The attributes of a request from `user`. Like upstream: `/api` and `/apis/<group>/<version>`
/// and shorter paths, and paths under other prefixes, are non-resource requests; a GET of a
/// collection is `list` or `watch` (`watch=true`, or the `/watch/` prefix), a DELETE of one is
/// `deletecollection`; `/namespaces/<ns>` names namespace `<ns>` (so a RoleBinding in `<ns>` may
/// grant reading that Namespace object); a `fieldSelector` of `metadata.name=<name>` names the
/// object for `list` and `watch`.
pub fn request_attributes(user: UserInfo, method: &str, path: &str, query: &Query) -> Attributes {
    let mut attrs = Attributes {
        user,
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Attributes::default()
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if parts.len() < 3 {
        return attrs;
    }
    let mut rest: &[&str] = match parts[0] {
        "api" => &parts[1..],
        "apis" if parts.len() >= 4 => {
            attrs.api_group = parts[1].to_string();
            &parts[2..]
        }
        _ => return attrs,
    };
    attrs.resource_request = true;
    attrs.api_version = rest[0].to_string();
    rest = &rest[1..];
    if matches!(rest[0], "watch" | "proxy") {
        if rest.len() < 2 {
            // Upstream refuses to build attributes here; nothing is authorized.
            attrs.verb = String::new();
            return attrs;
        }
        attrs.verb = rest[0].to_string();
        rest = &rest[1..];
    } else {
        attrs.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        attrs.namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    if rest.len() >= 3 && attrs.verb != "proxy" {
        attrs.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        attrs.name = rest[1].to_string();
    }
    attrs.resource = rest[0].to_string();
    if attrs.name.is_empty() && attrs.verb == "get" {
        attrs.verb = if query.get("watch").is_some_and(|w| parse_bool(w)) {
            "watch"
        } else {
            "list"
        }
        .to_string();
        if let Some(name) = query
            .get("fieldSelector")
            .and_then(|s| exact_name(s))
            .filter(|n| is_path_segment_name(n))
        {
            attrs.name = name;
        }
    }
    if attrs.name.is_empty() && attrs.verb == "delete" {
        attrs.verb = "deletecollection".into();
    }
    attrs
}

/// Go's `strconv.ParseBool` truth values.
fn parse_bool(s: &str) -> bool {
    matches!(s, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// The name a field selector requires exactly (`metadata.name=x` or `metadata.name==x` among
/// its comma-separated terms), as upstream's `RequiresExactMatch`.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (field.trim() == "metadata.name").then(|| value.trim().to_string())
    })
}

/// Upstream's `IsPathSegmentName`: not `.` or `..`, no `/` or `%`.
fn is_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, path: &str, query: &[(&str, &str)]) -> Attributes {
        let query = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        request_attributes(UserInfo::default(), method, path, &query)
    }

    /// (verb, group, namespace, resource, subresource, name) of a resource request.
    fn summary(a: &Attributes) -> (bool, &str, &str, &str, &str, &str, &str) {
        (
            a.resource_request,
            &a.verb,
            &a.api_group,
            &a.namespace,
            &a.resource,
            &a.subresource,
            &a.name,
        )
    }

    #[test]
    fn requests_get_the_attributes_upstream_derives() {
        let table = [
            (
                "GET",
                "/api/v1/namespaces/x/configmaps",
                &[][..],
                (true, "list", "", "x", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/x/configmaps",
                &[("watch", "true")][..],
                (true, "watch", "", "x", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/x/configmaps",
                &[("watch", "false")][..],
                (true, "list", "", "x", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/x/configmaps",
                &[][..],
                (true, "watch", "", "x", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/x/configmaps",
                &[("fieldSelector", "metadata.name=a")][..],
                (true, "list", "", "x", "configmaps", "", "a"),
            ),
            (
                "GET",
                "/api/v1/configmaps",
                &[][..],
                (true, "list", "", "", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/x/configmaps/a",
                &[][..],
                (true, "get", "", "x", "configmaps", "", "a"),
            ),
            (
                "POST",
                "/api/v1/namespaces/x/configmaps",
                &[][..],
                (true, "create", "", "x", "configmaps", "", ""),
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/x/deployments/d/status",
                &[][..],
                (true, "update", "apps", "x", "deployments", "status", "d"),
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/x/deployments/d",
                &[][..],
                (true, "patch", "apps", "x", "deployments", "", "d"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/x/configmaps/a",
                &[][..],
                (true, "delete", "", "x", "configmaps", "", "a"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/x/configmaps",
                &[][..],
                (true, "deletecollection", "", "x", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/x",
                &[][..],
                (true, "get", "", "x", "namespaces", "", "x"),
            ),
            (
                "GET",
                "/api/v1/namespaces",
                &[][..],
                (true, "list", "", "", "namespaces", "", ""),
            ),
            (
                "PUT",
                "/api/v1/namespaces/x/finalize",
                &[][..],
                (true, "update", "", "x", "namespaces", "finalize", "x"),
            ),
            (
                "POST",
                "/api/v1/namespaces/x/serviceaccounts/sa/token",
                &[][..],
                (true, "create", "", "x", "serviceaccounts", "token", "sa"),
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
                &[][..],
                (
                    true,
                    "get",
                    "rbac.authorization.k8s.io",
                    "",
                    "clusterroles",
                    "",
                    "admin",
                ),
            ),
            (
                "GET",
                "/api/v1",
                &[][..],
                (false, "get", "", "", "", "", ""),
            ),
            (
                "GET",
                "/apis/apps/v1",
                &[][..],
                (false, "get", "", "", "", "", ""),
            ),
            (
                "GET",
                "/version",
                &[][..],
                (false, "get", "", "", "", "", ""),
            ),
            (
                "POST",
                "/logs/x/y",
                &[][..],
                (false, "post", "", "", "", "", ""),
            ),
        ];
        for (method, path, query, want) in table {
            let a = attrs(method, path, query);
            assert_eq!(summary(&a), want, "{method} {path} {query:?}");
        }
    }

    #[test]
    fn field_selectors_name_an_object_only_when_exact() {
        assert_eq!(exact_name("metadata.name==a,x=y"), Some("a".into()));
        assert_eq!(exact_name("metadata.name!=a"), None);
        assert_eq!(exact_name("metadata.namespace=a"), None);
        let a = attrs(
            "GET",
            "/api/v1/namespaces/x/configmaps",
            &[("fieldSelector", "metadata.name=a/b")],
        );
        assert_eq!(a.name, "", "not a path segment name");
    }
}
