//! The review APIs, answered by the same authorizer that guards requests:
//! `authorization.k8s.io/v1` SubjectAccessReview, SelfSubjectAccessReview,
//! LocalSubjectAccessReview and SelfSubjectRulesReview, and `authentication.k8s.io/v1`
//! SelfSubjectReview (`kubectl auth whoami`). Like upstream's REST handlers (k8s.io/kubernetes
//! `pkg/registry/authorization`), each answers the review sent with its `status` filled in.

use serde_json::{Map, Value, json};

use super::attributes::Attributes;
use super::{Decision, UserInfo, authorize, rbac};
use crate::error::ApiError;
use crate::store::Store;
use crate::util::now_rfc3339;

/// Which review a request creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// `subjectaccessreviews`: about any user.
    Subject,
    /// `selfsubjectaccessreviews`: about the requester.
    SelfSubject,
    /// `namespaces/{ns}/localsubjectaccessreviews`: about any user, in one namespace.
    LocalSubject,
    /// `selfsubjectrulesreviews`: every rule of the requester in a namespace.
    SelfRules,
    /// `authentication.k8s.io` `selfsubjectreviews`: who the requester is.
    SelfUser,
}

impl Review {
    /// The review a `POST` to `group`/`plural` creates, if it is one.
    pub fn of(group: &str, plural: &str) -> Option<Self> {
        Some(match (group, plural) {
            ("authorization.k8s.io", "subjectaccessreviews") => Review::Subject,
            ("authorization.k8s.io", "selfsubjectaccessreviews") => Review::SelfSubject,
            ("authorization.k8s.io", "localsubjectaccessreviews") => Review::LocalSubject,
            ("authorization.k8s.io", "selfsubjectrulesreviews") => Review::SelfRules,
            ("authentication.k8s.io", "selfsubjectreviews") => Review::SelfUser,
            _ => return None,
        })
    }

    fn kind(self) -> &'static str {
        match self {
            Review::Subject => "SubjectAccessReview",
            Review::SelfSubject => "SelfSubjectAccessReview",
            Review::LocalSubject => "LocalSubjectAccessReview",
            Review::SelfRules => "SelfSubjectRulesReview",
            Review::SelfUser => "SelfSubjectReview",
        }
    }

    fn group(self) -> &'static str {
        match self {
            Review::SelfUser => "authentication.k8s.io",
            _ => "authorization.k8s.io",
        }
    }
}

/// The string fields of `v` named in `keys`, empty ones left out (Go's `omitempty`).
fn strings(v: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| {
            let s = v
                .get(*k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())?;
            Some(((*k).to_string(), json!(s)))
        })
        .collect()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Answers a review created by `requester` (namespace `ns` from the path, for the local one);
/// the access reviews' `managedFields` name `manager`.
/// `enforce` false: every access review is allowed (the server does not authorize).
///
/// # Errors
/// 400 for a body that is not JSON or a namespace mismatch, 422 for an invalid review.
pub fn answer(
    store: &Store,
    enforce: bool,
    review: Review,
    requester: &UserInfo,
    ns: &str,
    manager: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let sent: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the {} body is not valid JSON: {e}; send a {} object (apiVersion {}/v1)",
            review.kind(),
            review.kind(),
            review.group()
        ))
    })?;
    // Upstream names the kind of its decoded (internal) review, which has none: `.group`.
    let kind = format!(".{}", review.group());
    let spec = sent.get("spec").cloned().unwrap_or_default();
    let mut out = json!({"kind": review.kind(), "apiVersion": format!("{}/v1", review.group())});
    match review {
        Review::SelfUser => {
            let mut info = json!({"username": requester.name, "groups": requester.groups});
            if !requester.uid.is_empty() {
                info["uid"] = json!(requester.uid);
            }
            out["metadata"] = json!({"creationTimestamp": now_rfc3339()});
            out["status"] = json!({"userInfo": info});
            return Ok(out);
        }
        Review::SelfRules => {
            let namespace = text(&spec, "namespace");
            if namespace.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            out["metadata"] = json!({});
            out["spec"] = json!({});
            out["status"] = rules_status(store, enforce, requester, &namespace);
            return Ok(out);
        }
        _ => {}
    }
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let mut problems = Vec::new();
    match (resource, non_resource) {
        (Some(_), Some(n)) => problems.push(format!(
            "spec.nonResourceAttributes: Invalid value: {n}: cannot be specified in \
             combination with resourceAttributes"
        )),
        (None, None) => problems.push(
            "spec.resourceAttributes: Invalid value: \"null\": exactly one of \
             nonResourceAttributes or resourceAttributes must be specified"
                .into(),
        ),
        _ => {}
    }
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let subject = match review {
        Review::SelfSubject => requester.clone(),
        _ => {
            let user = UserInfo {
                name: text(&spec, "user"),
                uid: text(&spec, "uid"),
                groups: groups.clone(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                problems.push(
                    "spec.user: Invalid value: \"\": at least one of user or group must be \
                     specified"
                        .into(),
                );
            }
            user
        }
    };
    let mut metadata = json!({});
    if review == Review::LocalSubject {
        let meta_ns = sent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(ns);
        if meta_ns != ns {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the \
                 request"
                    .into(),
            ));
        }
        metadata["namespace"] = json!(ns);
        if let Some(r) = resource {
            let attr_ns = text(r, "namespace");
            if attr_ns != ns {
                problems.push(format!(
                    "spec.resourceAttributes.namespace: Invalid value: \"{attr_ns}\": must match \
                     metadata.namespace"
                ));
            }
        }
        if let Some(n) = non_resource {
            problems.push(format!(
                "spec.nonResourceAttributes: Invalid value: {n}: disallowed on this kind of \
                 request"
            ));
        }
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid_all(&kind, "", problems));
    }
    let mut echoed = Map::new();
    let attrs = if let Some(r) = resource {
        let fields = strings(
            r,
            &[
                "namespace",
                "verb",
                "group",
                "version",
                "resource",
                "subresource",
                "name",
            ],
        );
        echoed.insert("resourceAttributes".into(), Value::Object(fields));
        Attributes {
            user: subject.clone(),
            verb: text(r, "verb"),
            resource_request: true,
            namespace: text(r, "namespace"),
            api_group: text(r, "group"),
            api_version: match text(r, "version").as_str() {
                "" => "*".into(),
                v => v.into(),
            },
            resource: text(r, "resource"),
            subresource: text(r, "subresource"),
            name: text(r, "name"),
            ..Attributes::default()
        }
    } else {
        let n = non_resource.cloned().unwrap_or_default();
        echoed.insert(
            "nonResourceAttributes".into(),
            Value::Object(strings(&n, &["path", "verb"])),
        );
        Attributes {
            user: subject.clone(),
            verb: text(&n, "verb"),
            path: text(&n, "path"),
            ..Attributes::default()
        }
    };
    if review != Review::SelfSubject {
        if !subject.name.is_empty() {
            echoed.insert("user".into(), json!(subject.name));
        }
        if !groups.is_empty() {
            echoed.insert("groups".into(), json!(groups));
        }
        if let Some(extra) = spec.get("extra").filter(|e| e.is_object()) {
            echoed.insert("extra".into(), extra.clone());
        }
        if !subject.uid.is_empty() {
            echoed.insert("uid".into(), json!(subject.uid));
        }
    }
    let decision = if enforce {
        authorize(store, &attrs)
    } else {
        Decision {
            allowed: true,
            reason: String::new(),
        }
    };
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    if metadata.as_object().is_some_and(|m| !m.is_empty()) {
        out["metadata"] = metadata;
    }
    out["spec"] = Value::Object(echoed);
    // Upstream's create handler records the sender's fields, as for any created object.
    crate::patch::record_update(None, &mut out, manager, &now_rfc3339());
    if out.get("metadata").is_none() {
        out["metadata"] = json!({});
    }
    out["status"] = status;
    Ok(out)
}

/// A SelfSubjectRulesReview's status: the RBAC rules of `user` in `namespace` (resource and
/// non-resource rules apart, as upstream splits them), `incomplete` false, and the roles that
/// could not be resolved as `evaluationError`. Without authorization: everything.
fn rules_status(store: &Store, enforce: bool, user: &UserInfo, namespace: &str) -> Value {
    if !enforce {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let (rules, errors) = rbac::rules_for(store, user, namespace);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in &rules {
        if !rule.resources.is_empty() {
            let mut r = json!({"verbs": rule.verbs});
            for (key, list) in [
                ("apiGroups", &rule.api_groups),
                ("resources", &rule.resources),
                ("resourceNames", &rule.resource_names),
            ] {
                if !list.is_empty() {
                    r[key] = json!(list);
                }
            }
            resource_rules.push(r);
        }
        if !rule.non_resource_urls.is_empty() {
            non_resource_rules
                .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    });
    match errors.as_slice() {
        [] => {}
        [one] => status["evaluationError"] = json!(one),
        many => status["evaluationError"] = json!(format!("[{}]", many.join(", "))),
    }
    status
}
