//! The validation rules of upstream's kind strategies for the kinds the host and its examples
//! write, beyond field types (which decoding checks) and metadata ([`crate::metadata`]):
//! - workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets): a selector that is not
//!   empty and matches the pod template's labels, fixed once created; replicas not negative;
//!   the template's containers present, each named and with an image;
//! - Secrets: the `type` fixed once created, and the keys a type needs (`tls.crt` and `tls.key`
//!   of `kubernetes.io/tls`, `.dockerconfigjson` of `kubernetes.io/dockerconfigjson`);
//! - Services: ports, unless the Service is `ExternalName` or headless;
//! - Leases: positive durations, transitions not negative.
//!
//! Each problem is one cause, `<field>: <reason>: <detail>`, in upstream's wording.

use serde_json::{Map, Value};

use crate::resources::Resource;

/// The problems of `obj`, an object of kind `res` being created (`current` is `None`) or
/// replacing `current`.
pub fn problems(res: &Resource, obj: &Value, current: Option<&Value>) -> Vec<String> {
    if res.crd.is_some() {
        return Vec::new();
    }
    match (res.group.as_str(), res.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            workload(res, obj, current)
        }
        ("", "Secret") => secret(obj, current),
        ("", "Service") => service(obj),
        ("coordination.k8s.io", "Lease") => lease(obj),
        _ => Vec::new(),
    }
}

/// A value as upstream's causes print it: JSON.
fn json(value: Option<&Value>) -> String {
    value.map_or_else(|| "null".to_string(), Value::to_string)
}

fn workload(res: &Resource, obj: &Value, current: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let labels = spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object);
    let labels_value = spec.pointer("/template/metadata/labels");
    let mismatch = || {
        format!(
            "spec.template.metadata.labels: Invalid value: {}: `selector` does not match \
             template `labels`",
            json(labels_value)
        )
    };
    match selector {
        // No selector selects nothing: the template does not match it either.
        None => {
            out.push("spec.selector: Required value".to_string());
            out.push(mismatch());
        }
        Some(selector) if is_empty_selector(selector) => out.push(format!(
            "spec.selector: Invalid value: {}: empty selector is invalid for {}",
            json(Some(selector)),
            res.singular
        )),
        Some(selector) => {
            if !selects(selector, labels) {
                out.push(mismatch());
            }
        }
    }
    if let Some(replicas) = spec.get("replicas").and_then(Value::as_i64)
        && replicas < 0
    {
        out.push(format!(
            "spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
        ));
    }
    out.extend(containers(
        "spec.template.spec",
        spec.pointer("/template/spec"),
    ));
    if let Some(current) = current {
        let before = current.pointer("/spec/selector");
        if before.is_some() && before != selector {
            out.push(format!(
                "spec.selector: Invalid value: {}: field is immutable",
                json(selector)
            ));
        }
    }
    out
}

fn is_empty_selector(selector: &Value) -> bool {
    let empty = |key: &str| {
        selector.get(key).is_none_or(|v| {
            v.is_null()
                || v.as_object().is_some_and(Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
        })
    };
    empty("matchLabels") && empty("matchExpressions")
}

/// Whether a label selector selects `labels`.
fn selects(selector: &Value, labels: Option<&Map<String, Value>>) -> bool {
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let match_expressions = expressions(selector)
        .into_iter()
        .all(|(key, operator, values)| match operator {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        });
    match_labels && match_expressions
}

/// A label selector's `matchExpressions`: (key, operator, values) each.
pub(crate) fn expressions(selector: &Value) -> Vec<(&str, &str, Vec<&str>)> {
    selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
            let values = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (text("key"), text("operator"), values)
        })
        .collect()
}

/// A pod spec's containers at `at`: at least one, each named and with an image.
fn containers(at: &str, pod_spec: Option<&Value>) -> Vec<String> {
    let list = pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    let Some(list) = list else {
        return vec![format!("{at}.containers: Required value")];
    };
    let mut out = Vec::new();
    for (i, container) in list.iter().enumerate() {
        let text = |key: &str| container.get(key).and_then(Value::as_str).unwrap_or("");
        if text("name").is_empty() {
            out.push(format!("{at}.containers[{i}].name: Required value"));
        }
        if text("image").is_empty() {
            out.push(format!("{at}.containers[{i}].image: Required value"));
        }
    }
    out
}

/// The data keys each Secret type needs.
const SECRET_KEYS: &[(&str, &[&str])] = &[
    ("kubernetes.io/tls", &["tls.crt", "tls.key"]),
    ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"]),
    ("kubernetes.io/dockercfg", &[".dockercfg"]),
];

fn secret(obj: &Value, current: Option<&Value>) -> Vec<String> {
    let secret_type = |o: &Value| {
        o.get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or("Opaque")
            .to_string()
    };
    let kind = secret_type(obj);
    let mut out = Vec::new();
    if let Some(current) = current
        && secret_type(current) != kind
    {
        out.push(format!(
            "type: Invalid value: {}: field is immutable",
            Value::String(kind.clone())
        ));
    }
    let data = obj.get("data").and_then(Value::as_object);
    if let Some((_, keys)) = SECRET_KEYS.iter().find(|(t, _)| *t == kind) {
        for key in *keys {
            if !data.is_some_and(|d| d.contains_key(*key)) {
                out.push(format!("data[{key}]: Required value"));
            }
        }
    }
    out
}

fn service(obj: &Value) -> Vec<String> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let text = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or("");
    let headless = text("clusterIP") == "None";
    let ports = spec
        .get("ports")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty());
    if text("type") == "ExternalName" || headless || ports {
        return Vec::new();
    }
    vec!["spec.ports: Required value".to_string()]
}

fn lease(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let number = |key: &str| obj.pointer(&format!("/spec/{key}")).and_then(Value::as_i64);
    if let Some(seconds) = number("leaseDurationSeconds")
        && seconds <= 0
    {
        out.push(format!(
            "spec.leaseDurationSeconds: Invalid value: {seconds}: must be greater than 0"
        ));
    }
    if let Some(transitions) = number("leaseTransitions")
        && transitions < 0
    {
        out.push(format!(
            "spec.leaseTransitions: Invalid value: {transitions}: must be greater than or equal to 0"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::builtins;

    fn res(group: &str, kind: &str) -> Resource {
        builtins()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("a built-in kind")
    }

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({"spec": {"selector": selector, "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    }

    #[test]
    fn a_workload_selector_must_select_its_template_and_stay_as_created() {
        let d = res("apps", "Deployment");
        let ok = deployment(
            json!({"matchLabels": {"app": "a"}}),
            json!({"app": "a", "x": "y"}),
        );
        assert!(problems(&d, &ok, None).is_empty());
        let expressions = deployment(
            json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["b"]}]}),
            json!({"app": "a"}),
        );
        assert!(problems(&d, &expressions, None).is_empty());
        let mismatch = deployment(json!({"matchLabels": {"app": "a"}}), json!({"app": "b"}));
        assert_eq!(
            problems(&d, &mismatch, None),
            [
                "spec.template.metadata.labels: Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"
            ]
        );
        let changed = deployment(
            json!({"matchLabels": {"app": "a", "x": "y"}}),
            json!({"app": "a", "x": "y"}),
        );
        assert_eq!(
            problems(&d, &changed, Some(&ok)),
            [
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"a\",\"x\":\"y\"}}: field is immutable"
            ]
        );
    }

    #[test]
    fn a_secret_keeps_its_type_and_has_the_keys_its_type_needs() {
        let s = res("", "Secret");
        let opaque = json!({"data": {"a": "eA=="}});
        let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(
            problems(&s, &tls, Some(&opaque)),
            [
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
                "data[tls.key]: Required value"
            ]
        );
        assert!(problems(&s, &opaque, Some(&json!({"type": "Opaque"}))).is_empty());
    }

    #[test]
    fn services_need_ports_unless_headless_or_external_and_leases_positive_durations() {
        let svc = res("", "Service");
        assert_eq!(
            problems(&svc, &json!({"spec": {}}), None),
            ["spec.ports: Required value"]
        );
        assert!(problems(&svc, &json!({"spec": {"clusterIP": "None"}}), None).is_empty());
        let lease = res("coordination.k8s.io", "Lease");
        assert_eq!(
            problems(&lease, &json!({"spec": {"leaseDurationSeconds": 0}}), None),
            ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
        );
    }
}
