//! Validation of `metadata` as upstream's `ValidateObjectMeta` does it: label keys (qualified
//! names), the name rule of each
//! kind, annotations (keys and total size), owner references and finalizer names; and the
//! `immutable` flag of ConfigMaps and Secrets. Each problem is one 422 cause, written
//! `field: Reason: detail` as upstream's field errors.

use serde_json::Value;

use crate::resources::Resource;
use crate::util::validate_subdomain;

/// The most bytes annotations may hold, keys and values together (upstream
/// `TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// The finalizers upstream accepts without a domain (`IsStandardFinalizerName`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Upstream's message for a change to a ConfigMap or Secret marked immutable.
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

/// Why `name` is not a valid name for `res`, as upstream's name function of the kind says it:
/// a DNS-1123 label for Namespaces and Services (a 1.36 server no longer asks a Service for a
/// DNS-1035 label: `1web` is accepted), a path segment for the RBAC kinds (`system:discovery`;
/// upstream's `ValidateRBACName`), a DNS-1123 subdomain otherwise. Empty when it is valid.
pub fn name_problems(res: &Resource, name: &str) -> Vec<String> {
    let core = res.group.is_empty() && res.crd.is_none();
    match res.kind.as_str() {
        "Namespace" | "Service" if core => dns_label_problems(name),
        _ if res.group == "rbac.authorization.k8s.io" => path_segment_problems(name),
        _ => validate_subdomain(name).err().into_iter().collect(),
    }
}

/// Upstream's `IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`.
fn path_segment_problems(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ['/', '%']
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// Upstream's `IsDNS1123Label`: at most 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn dns_label_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    let bytes = name.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let end = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.first().is_some_and(end) && bytes.last().is_some_and(end) && bytes.iter().all(inner) {
        return problems;
    }
    if name.len() <= 253 && validate_subdomain(name).is_ok() {
        // A valid subdomain that is no label: the dots are the problem.
        problems.push("must not contain dots".into());
    } else {
        problems.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
             '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                .into(),
        );
    }
    problems
}

/// Why `key` is not a valid label key (upstream's qualified name: an optional DNS-1123
/// subdomain prefix and `/`, then a name of at most 63 characters), or `None`.
pub(crate) fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Err(why) = validate_subdomain(prefix) {
            return Some(format!("prefix part {why}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 bytes".into());
    }
    if !label_shaped(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
             '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .into(),
        );
    }
    None
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub(crate) fn label_shaped(text: &str) -> bool {
    let bytes = text.as_bytes();
    let end = |b: &u8| b.is_ascii_alphanumeric();
    bytes.first().is_some_and(end)
        && bytes.last().is_some_and(end)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
}

/// The problems of `metadata.annotations`, `metadata.ownerReferences` and
/// `metadata.finalizers`, in upstream's order.
pub fn meta_problems(res: &Resource, obj: &Value) -> Vec<String> {
    let mut problems = annotation_problems(obj);
    problems.extend(owner_reference_problems(obj));
    let finalizers: Vec<&str> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for finalizer in &finalizers {
        if let Some(why) = label_key_problem(finalizer) {
            problems.push(format!(
                "metadata.finalizers: Invalid value: {finalizer:?}: {why}"
            ));
        }
    }
    // The built-in kinds' validation (upstream's core `ValidateObjectMeta`) also wants a
    // domain on every finalizer that is not a standard one; CRDs and custom resources do not.
    let kube_rules = res.crd.is_none() && res.kind != "CustomResourceDefinition";
    if kube_rules {
        for (i, finalizer) in finalizers.iter().enumerate() {
            if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(finalizer) {
                problems.push(format!(
                    "metadata.finalizers[{i}]: Invalid value: {finalizer:?}: name is neither a \
                     standard finalizer name nor is it fully qualified"
                ));
            }
        }
    }
    problems
}

/// Annotation keys are qualified names (case aside); keys and values hold at most
/// [`MAX_ANNOTATION_BYTES`] together.
fn annotation_problems(obj: &Value) -> Vec<String> {
    let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut problems: Vec<String> = annotations
        .keys()
        .filter_map(|key| {
            label_key_problem(&key.to_lowercase())
                .map(|why| format!("metadata.annotations: Invalid value: {key:?}: {why}"))
        })
        .collect();
    let total: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if total > MAX_ANNOTATION_BYTES {
        problems.push(format!(
            "metadata.annotations: Too long: may not be more than {MAX_ANNOTATION_BYTES} bytes"
        ));
    }
    problems
}

/// Each owner reference names an apiVersion with a version, a kind, a name and a uid; at most
/// one is the controller.
fn owner_reference_problems(obj: &Value) -> Vec<String> {
    let Some(refs) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let field = "metadata.ownerReferences";
    fn text<'a>(r: &'a Value, key: &str) -> &'a str {
        r.get(key).and_then(Value::as_str).unwrap_or_default()
    }
    let mut problems = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        let api_version = text(r, "apiVersion");
        let version = match api_version.split('/').collect::<Vec<_>>()[..] {
            [version] | [_, version] => version,
            _ => "",
        };
        if version.is_empty() {
            problems.push(format!(
                "{field}.apiVersion: Invalid value: {api_version:?}: version must not be empty"
            ));
        }
        for key in ["kind", "name", "uid"] {
            let value = text(r, key);
            if value.is_empty() {
                problems.push(format!(
                    "{field}.{key}: Invalid value: \"\": must not be empty"
                ));
            }
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{}/{}", text(r, "kind"), text(r, "name"));
            match &first_controller {
                Some(first) => problems.push(format!(
                    "{field}: Invalid value: {}: Only one reference can have Controller set to \
                     true. Found \"true\" in references for {first} and {current}",
                    go_json_owner_references(refs)
                )),
                None => first_controller = Some(current),
            }
        }
    }
    problems
}

/// The owner references as upstream prints a bad value: JSON with the Go struct's field order.
fn go_json_owner_references(refs: &[Value]) -> String {
    let items: Vec<String> = refs
        .iter()
        .map(|r| {
            let mut fields: Vec<String> = ["apiVersion", "kind", "name", "uid"]
                .iter()
                .map(|k| {
                    let v = r.get(*k).and_then(Value::as_str).unwrap_or_default();
                    format!("{k:?}:{}", Value::from(v))
                })
                .collect();
            for key in ["controller", "blockOwnerDeletion"] {
                if let Some(b) = r.get(key).and_then(Value::as_bool) {
                    fields.push(format!("{key:?}:{b}"));
                }
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// A ConfigMap or Secret stored with `immutable: true` keeps its data and the flag: upstream's
/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate` (a Secret's `stringData` is already folded
/// into `data` here).
pub fn immutable_problems(res: &Resource, current: &Value, next: &Value) -> Vec<String> {
    let fields: &[&str] = match res.kind.as_str() {
        _ if !res.group.is_empty() || res.crd.is_some() => return Vec::new(),
        "ConfigMap" => &["data", "binaryData"],
        "Secret" => &["data"],
        _ => return Vec::new(),
    };
    let immutable = |v: &Value| v.get("immutable").and_then(Value::as_bool) == Some(true);
    if !immutable(current) {
        return Vec::new();
    }
    let mut problems = Vec::new();
    if !immutable(next) {
        problems.push(format!("immutable: Forbidden: {IMMUTABLE}"));
    }
    // Absent and null are the same (a nil map); an empty map is not, as for Go's DeepEqual.
    let map = |v: &Value, field: &str| v.get(field).filter(|d| !d.is_null()).cloned();
    for field in fields {
        if map(current, field) != map(next, field) {
            problems.push(format!("{field}: Forbidden: {IMMUTABLE}"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn res(plural: &str) -> Resource {
        Registry::default()
            .find("", "v1", plural)
            .expect(plural)
            .as_ref()
            .clone()
    }

    #[test]
    fn namespaces_and_services_take_labels_other_kinds_subdomains() {
        assert_eq!(
            name_problems(&res("namespaces"), "a.b"),
            ["must not contain dots"]
        );
        assert_eq!(
            name_problems(&res("services"), "a.b"),
            ["must not contain dots"]
        );
        assert!(name_problems(&res("services"), "1abc").is_empty());
        assert!(
            name_problems(&res("services"), "Web")[0].starts_with("a lowercase RFC 1123 label")
        );
        assert!(name_problems(&res("configmaps"), "a.b").is_empty());
        assert_eq!(
            name_problems(&res("namespaces"), &"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn metadata_problems_name_the_field_as_upstream() {
        let cm = |meta: Value| json!({"metadata": meta});
        let problems = meta_problems(
            &res("configmaps"),
            &cm(json!({"annotations": {"bad key!": "x"},
                       "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}],
                       "finalizers": ["hold"]})),
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("metadata.annotations: Invalid value: \"bad key!\": "));
        assert_eq!(
            problems[1],
            "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
        );
        assert_eq!(
            problems[2],
            "metadata.finalizers[0]: Invalid value: \"hold\": name is neither a standard \
             finalizer name nor is it fully qualified"
        );
        let big = cm(json!({"annotations": {"k": "x".repeat(MAX_ANNOTATION_BYTES)}}));
        assert_eq!(
            meta_problems(&res("configmaps"), &big),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        let at_limit = cm(json!({"annotations": {"k": "x".repeat(MAX_ANNOTATION_BYTES - 1)}}));
        assert!(meta_problems(&res("configmaps"), &at_limit).is_empty());
        let standard = cm(json!({"finalizers": ["orphan", "example.com/x"]}));
        assert!(meta_problems(&res("configmaps"), &standard).is_empty());
        let owner = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": name,
                   "controller": true})
        };
        let two = cm(json!({"ownerReferences": [owner("a"), owner("b")]}));
        let problems = meta_problems(&res("configmaps"), &two);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with(
            "metadata.ownerReferences: Invalid value: [{\"apiVersion\":\"v1\",\"kind\""
        ));
        assert!(problems[0].ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references \
             for ConfigMap/a and ConfigMap/b"
        ));
    }

    #[test]
    fn immutable_config_maps_keep_their_data_and_the_flag() {
        let live = json!({"immutable": true, "data": {"k": "v"}});
        let cm = res("configmaps");
        assert!(immutable_problems(&cm, &live, &live).is_empty());
        assert_eq!(
            immutable_problems(&cm, &live, &json!({"immutable": false, "data": {"k": "w"}})),
            [
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
        let mutable = json!({"data": {"k": "v"}});
        assert!(immutable_problems(&cm, &mutable, &json!({"data": {}})).is_empty());
    }
}
