//! kube-apiserver's RBAC authorizer (k8s.io/kubernetes `plugin/pkg/auth/authorizer/rbac` and
//! `pkg/registry/rbac/validation/rule.go`) over this server's store: the ClusterRoleBindings,
//! then the RoleBindings of the request's namespace, each read at request time, each binding
//! that names the user (User, Group, ServiceAccount) contributing its role's rules.

use serde_json::Value;

use super::{Attributes, Decision, UserInfo, quote};
use crate::store::Store;

const GROUP: &str = "rbac.authorization.k8s.io";

/// One `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`.
    pub resources: Vec<String>,
    /// `resourceNames`.
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`.
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// A rule from its JSON form (missing lists are empty).
    pub fn from_json(v: &Value) -> Self {
        let list = |key: &str| -> Vec<String> {
            v.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Rule {
            verbs: list("verbs"),
            api_groups: list("apiGroups"),
            resources: list("resources"),
            resource_names: list("resourceNames"),
            non_resource_urls: list("nonResourceURLs"),
        }
    }

    /// Whether this rule allows the request (upstream's `RuleAllows`).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == attrs.verb);
        if !verb {
            return false;
        }
        if !attrs.resource_request {
            return self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || *url == attrs.path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| attrs.path.starts_with(prefix))
            });
        }
        let combined = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        let group = self
            .api_groups
            .iter()
            .any(|g| g == "*" || *g == attrs.api_group);
        let resource = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!attrs.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
        });
        let name = self.resource_names.is_empty() || self.resource_names.contains(&attrs.name);
        group && resource && name
    }
}

/// A binding's subject.
struct Subject<'a>(&'a Value);

impl Subject<'_> {
    fn field(&self, key: &str) -> &str {
        self.0.get(key).and_then(Value::as_str).unwrap_or_default()
    }

    /// Upstream's `appliesToUser`; `namespace` is the binding's (empty for a cluster binding).
    fn applies_to(&self, user: &UserInfo, namespace: &str) -> bool {
        let name = self.field("name");
        match self.field("kind") {
            "User" => user.name == name,
            "Group" => user.in_group(name),
            "ServiceAccount" => {
                let ns = match self.field("namespace") {
                    "" => namespace,
                    ns => ns,
                };
                !ns.is_empty()
                    && user.name == format!("{}{ns}:{name}", super::SERVICE_ACCOUNT_PREFIX)
            }
            _ => false,
        }
    }

    /// Upstream's `describeSubject`.
    fn describe(&self, binding_namespace: &str) -> String {
        let (kind, name) = (self.field("kind"), self.field("name"));
        if kind == "ServiceAccount" {
            let ns = match self.field("namespace") {
                "" => binding_namespace,
                ns => ns,
            };
            return format!("{kind} {}", quote(&format!("{name}/{ns}")));
        }
        format!("{kind} {}", quote(name))
    }
}

/// The objects of one RBAC table, in `ns` when given.
fn objects(store: &Store, plural: &str, ns: Option<&str>) -> Vec<Value> {
    let table = format!("{plural}.{GROUP}");
    store
        .list(&table, ns, None, 0, &|_| true)
        .items
        .into_iter()
        .filter_map(|(_, bytes)| serde_json::from_slice(&bytes).ok())
        .collect()
}

/// The rules a binding's `roleRef` names, or upstream's lister error.
fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Result<Vec<Rule>, String> {
    let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    let (table, ns, singular) = match kind {
        "Role" => ("roles", namespace, "role"),
        "ClusterRole" => ("clusterroles", "", "clusterrole"),
        other => return Err(format!("unsupported role reference kind: {}", quote(other))),
    };
    let stored = store
        .get(&format!("{table}.{GROUP}"), ns, name)
        .ok_or_else(|| format!("{singular}.{GROUP} {} not found", quote(name)))?;
    let role: Value = serde_json::from_slice(&stored.bytes).unwrap_or_default();
    Ok(role
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().map(Rule::from_json).collect())
        .unwrap_or_default())
}

/// What [`visit_rules`] hands its visitor: a rule and the binding that grants it, or a role that
/// cannot be resolved.
pub type Visit<'a> = Result<(&'a str, &'a Rule), String>;

/// Calls `visit` with each rule that applies to `user` in `namespace` and a description of the
/// binding that grants it (`ClusterRoleBinding "b" of ClusterRole "r" to User "u"`), and with
/// each role that cannot be resolved; stops when `visit` returns false (upstream's
/// `VisitRulesFor`).
pub fn visit_rules(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    visit: &mut dyn FnMut(Visit<'_>) -> bool,
) {
    let scopes: [(&str, Option<&str>); 2] = [
        ("clusterrolebindings", None),
        ("rolebindings", Some(namespace)),
    ];
    for (plural, ns) in scopes {
        if ns == Some("") {
            continue;
        }
        for binding in objects(store, plural, ns) {
            let binding_ns = ns.unwrap_or_default();
            let subjects = binding.get("subjects").and_then(Value::as_array);
            let Some(subject) = subjects
                .into_iter()
                .flatten()
                .map(Subject)
                .find(|s| s.applies_to(user, binding_ns))
            else {
                continue;
            };
            let role_ref = binding.get("roleRef").cloned().unwrap_or_default();
            let rules = match role_rules(store, &role_ref, binding_ns) {
                Ok(rules) => rules,
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                    continue;
                }
            };
            let name = binding
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let text = |key: &str| role_ref.get(key).and_then(Value::as_str).unwrap_or("");
            let source = if ns.is_none() {
                format!(
                    "ClusterRoleBinding {} of {} {} to {}",
                    quote(name),
                    text("kind"),
                    quote(text("name")),
                    subject.describe("")
                )
            } else {
                format!(
                    "RoleBinding {} of {} {} to {}",
                    quote(&format!("{name}/{binding_ns}")),
                    text("kind"),
                    quote(text("name")),
                    subject.describe(binding_ns)
                )
            };
            for rule in &rules {
                if !visit(Ok((&source, rule))) {
                    return;
                }
            }
        }
    }
}

/// Upstream's `RBACAuthorizer.Authorize`: allowed by the first rule that allows the request
/// (reason `RBAC: allowed by <binding>`); otherwise denied, the reason naming the roles that
/// could not be resolved (`RBAC: role.rbac.authorization.k8s.io "r" not found`), if any.
pub fn authorize(store: &Store, attrs: &Attributes) -> Decision {
    let mut errors = Vec::new();
    let mut allowed_by = None;
    visit_rules(
        store,
        &attrs.user,
        &attrs.namespace,
        &mut |item| match item {
            Ok((source, rule)) if rule.allows(attrs) => {
                allowed_by = Some(source.to_string());
                false
            }
            Ok(_) => true,
            Err(e) => {
                errors.push(e);
                true
            }
        },
    );
    if let Some(source) = allowed_by {
        return Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {source}"),
        };
    }
    let reason = match errors.as_slice() {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    };
    Decision {
        allowed: false,
        reason,
    }
}

/// Every rule that applies to `user` in `namespace`, and the resolution errors (upstream's
/// `RulesFor`, which SelfSubjectRulesReview reports).
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<String>) {
    let (mut rules, mut errors) = (Vec::new(), Vec::new());
    visit_rules(store, user, namespace, &mut |item| {
        match item {
            Ok((_, rule)) => rules.push(rule.clone()),
            Err(e) => errors.push(e),
        }
        true
    });
    (rules, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            ..Attributes::default()
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn rules_match_requests_as_upstream_rule_allows() {
        let cm_read =
            rule(json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}));
        let named = rule(
            json!({"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
        );
        let any = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        let status = rule(
            json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}),
        );
        let any_status =
            rule(json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/status"]}));
        let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        let table = [
            (&cm_read, request("get", "", "configmaps", "", "a"), true),
            (&cm_read, request("list", "", "configmaps", "", ""), true),
            (&cm_read, request("watch", "", "configmaps", "", ""), false),
            (
                &cm_read,
                request("get", "apps", "configmaps", "", "a"),
                false,
            ),
            (&cm_read, request("get", "", "secrets", "", "a"), false),
            (
                &cm_read,
                request("get", "", "configmaps", "status", "a"),
                false,
            ),
            (&named, request("get", "", "configmaps", "", "a"), true),
            (&named, request("get", "", "configmaps", "", "b"), false),
            (&named, request("list", "", "configmaps", "", ""), false),
            (&named, request("list", "", "configmaps", "", "a"), false),
            (&named, request("update", "", "configmaps", "", "a"), true),
            (
                &any,
                request("deletecollection", "apps", "deployments", "scale", ""),
                true,
            ),
            (&any, path("get", "/healthz"), false),
            (
                &status,
                request("update", "apps", "deployments", "status", "d"),
                true,
            ),
            (
                &status,
                request("update", "apps", "deployments", "", "d"),
                false,
            ),
            (
                &any_status,
                request("get", "batch", "jobs", "status", "j"),
                true,
            ),
            (&any_status, request("get", "batch", "jobs", "", "j"), false),
            (
                &any_status,
                request("get", "batch", "jobs", "statusx", "j"),
                false,
            ),
            (&urls, path("get", "/healthz"), true),
            (&urls, path("get", "/healthz/etcd"), false),
            (&urls, path("get", "/apis/apps"), true),
            (&urls, path("post", "/apis/apps"), false),
            (&urls, request("get", "", "healthz", "", ""), false),
        ];
        for (rule, attrs, want) in table {
            assert_eq!(rule.allows(&attrs), want, "{rule:?} on {attrs:?}");
        }
        let named_list = request("list", "", "configmaps", "", "a");
        let list_rule = rule(
            json!({"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
        );
        assert!(
            list_rule.allows(&named_list),
            "a list selecting metadata.name=a is allowed by a rule naming a"
        );
    }

    #[test]
    fn subjects_apply_by_user_group_and_service_account() {
        let sa = UserInfo::service_account("ns", "sa", "");
        let subject = |v: Value| Subject(Box::leak(Box::new(v)));
        assert!(
            subject(json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}))
                .applies_to(&sa, "")
        );
        assert!(subject(json!({"kind": "ServiceAccount", "name": "sa"})).applies_to(&sa, "ns"));
        assert!(!subject(json!({"kind": "ServiceAccount", "name": "sa"})).applies_to(&sa, ""));
        assert!(!subject(json!({"kind": "ServiceAccount", "name": "sa"})).applies_to(&sa, "other"));
        assert!(
            subject(json!({"kind": "Group", "name": "system:serviceaccounts:ns"}))
                .applies_to(&sa, "")
        );
        assert!(!subject(json!({"kind": "User", "name": "sa"})).applies_to(&sa, "ns"));
        assert_eq!(
            subject(json!({"kind": "ServiceAccount", "name": "sa"})).describe("ns"),
            "ServiceAccount \"sa/ns\""
        );
    }
}
