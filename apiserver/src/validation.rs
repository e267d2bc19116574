//! Kind-specific normalisation and validation a real API server applies to every write:
//! a Secret's `stringData` folded into `data`, label keys and values, the metadata rules of
//! [`crate::metadata`], ConfigMap and Secret data keys, and the 1 MiB limit on ConfigMap and
//! Secret data.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::metadata::{self, label_key_problem, label_shaped};
use crate::resources::Resource;
use crate::util::base64;

/// The most bytes of data a ConfigMap or Secret may hold (upstream `core.MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// Normalises as upstream's decoding and v1 conversion do: line breaks leave the base64 of a
/// ConfigMap's `binaryData` and a Secret's `data`; each `stringData` entry of a Secret is written
/// into `data` (base64, overriding an entry of the same key) and `stringData` is dropped.
pub fn normalize(res: &Resource, obj: &mut Value) {
    // `[]byte` fields are decoded and encoded again upstream: line breaks in their base64
    // (which Go's decoder skips) are gone from what is stored.
    let bytes_field = match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => Some("binaryData"),
        ("", "Secret") => Some("data"),
        _ => None,
    };
    if let Some(entries) = bytes_field
        .and_then(|field| obj.get_mut(field))
        .and_then(Value::as_object_mut)
    {
        for value in entries.values_mut() {
            if let Value::String(text) = value
                && text.contains(['\r', '\n'])
            {
                *text = text.replace(['\r', '\n'], "");
            }
        }
    }
    if !(res.group.is_empty() && res.kind == "Secret") {
        return;
    }
    let Some(string_data) = obj.as_object_mut().and_then(|o| o.remove("stringData")) else {
        return;
    };
    let Value::Object(entries) = string_data else {
        return;
    };
    if !obj.get("data").is_some_and(Value::is_object) {
        obj["data"] = json!({});
    }
    for (key, value) in entries {
        let text = match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        obj["data"][key] = json!(base64(text.as_bytes()));
    }
}

/// Refuses what upstream's validation refuses for the kinds it covers, as one 422 Invalid
/// with a cause per problem in upstream's order: labels, then annotations, owner references and
/// finalizers ([`crate::metadata`]), then ConfigMap and Secret data keys and more than
/// [`MAX_DATA_BYTES`] of data in a ConfigMap (`data` plus decoded `binaryData`) or a Secret
/// (decoded `data`).
pub fn validate(res: &Resource, obj: &Value) -> Result<(), ApiError> {
    validate_write(res, obj, None)
}

/// [`validate`] of an update from `current`: also the `immutable` rule of ConfigMaps and
/// Secrets, after the metadata problems as upstream's update validation orders them.
pub fn validate_update(res: &Resource, current: &Value, obj: &Value) -> Result<(), ApiError> {
    validate_write(res, obj, Some(current))
}

fn validate_write(res: &Resource, obj: &Value, current: Option<&Value>) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = if res.group.is_empty() {
        res.kind.clone()
    } else {
        format!("{}.{}", res.kind, res.group)
    };
    let mut problems = label_problems(obj);
    problems.extend(metadata::meta_problems(res, obj));
    if let Some(current) = current {
        problems.extend(metadata::immutable_problems(res, current, obj));
    }
    if res.group.is_empty() {
        problems.extend(data_problems(res, obj));
    }
    problems.extend(crate::kind_rules::problems(res, obj, current));
    problems.extend(crate::schema_check::problems(res, obj));
    problems.extend(crate::cel_rules::problems(res, obj, current));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_all(&kind, name, problems))
    }
}

/// Each label's key must be a qualified name and its value a label value.
fn label_problems(obj: &Value) -> Vec<String> {
    let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) else {
        return Vec::new();
    };
    labels
        .iter()
        .filter_map(|(key, value)| {
            let value = value.as_str().unwrap_or_default();
            label_key_problem(key)
                .map(|why| format!("Invalid value: \"{key}\": {why}"))
                .or_else(|| {
                    label_value_problem(value)
                        .map(|why| format!("Invalid value: \"{value}\": {why}"))
                })
                .map(|problem| format!("metadata.labels: {problem}"))
        })
        .collect()
}

/// ConfigMap and Secret data keys are config keys, and their data holds at most 1 MiB.
fn data_problems(res: &Resource, obj: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if matches!(res.kind.as_str(), "ConfigMap" | "Secret") {
        for field in ["data", "binaryData"] {
            for key in obj
                .get(field)
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.keys())
            {
                let valid = !key.is_empty()
                    && key.len() <= 253
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
                if !valid {
                    problems.push(format!(
                        "{field}[{key}]: Invalid value: \"{key}\": a valid config key must \
                         consist of alphanumeric characters, '-', '_' or '.' (e.g. \
                         'key.name',  or 'KEY_NAME',  or 'key-name', regex used for \
                         validation is '[-._a-zA-Z0-9]+')"
                    ));
                }
            }
        }
    }
    let (total, field) = match res.kind.as_str() {
        "ConfigMap" => (
            entry_bytes(obj.get("data"), false) + entry_bytes(obj.get("binaryData"), true),
            "[]",
        ),
        "Secret" => (entry_bytes(obj.get("data"), true), "data"),
        _ => return problems,
    };
    if total > MAX_DATA_BYTES {
        problems.push(format!(
            "{field}: Too long: may not be more than {MAX_DATA_BYTES} bytes ({total} bytes \
             sent); a {} holds at most 1 MiB of data: split it or store the data elsewhere",
            res.kind
        ));
    }
    problems
}

/// Why `value` is not a valid label value (empty, or at most 63 label characters), or `None`.
fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 bytes".into());
    }
    if !value.is_empty() && !label_shaped(value) {
        return Some(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', \
              or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .into(),
        );
    }
    None
}

/// The bytes an object's data map holds: string lengths, or decoded lengths of base64 values.
fn entry_bytes(map: Option<&Value>, base64_values: bool) -> usize {
    let Some(map) = map.and_then(Value::as_object) else {
        return 0;
    };
    map.values()
        .filter_map(Value::as_str)
        .map(|s| {
            if base64_values {
                let padding = s.bytes().rev().take_while(|&b| b == b'=').count();
                (s.len() / 4 * 3).saturating_sub(padding.min(2))
            } else {
                s.len()
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn res(plural: &str) -> Resource {
        Registry::default()
            .find("", "v1", plural)
            .expect(plural)
            .as_ref()
            .clone()
    }

    #[test]
    fn invalid_label_keys_and_values_are_422_naming_the_label() {
        let cm = |labels: Value| json!({"metadata": {"name": "c", "labels": labels}});
        assert!(
            validate(
                &res("configmaps"),
                &cm(json!({"app.kubernetes.io/name": "web", "a": ""}))
            )
            .is_ok()
        );
        for (labels, expected) in [
            (
                json!({"bad key!": "x"}),
                "Invalid value: \"bad key!\": name part must consist",
            ),
            (
                json!({"ok": "x".repeat(64)}),
                "must be no more than 63 bytes",
            ),
            (
                json!({"Bad.Prefix/name": "x"}),
                "prefix part a lowercase RFC 1123 subdomain",
            ),
            (json!({"ok": "-x"}), "a valid label must be an empty string"),
        ] {
            let err = validate(&res("configmaps"), &cm(labels)).unwrap_err();
            assert_eq!(err.code(), 422);
            let message = err.to_string();
            assert!(
                message.contains("metadata.labels: Invalid value: "),
                "{message}"
            );
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn config_map_data_keys_must_be_config_keys() {
        let err = validate(
            &res("configmaps"),
            &json!({"metadata": {"name": "c"}, "data": {"a/b": "x"}}),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("data[a/b]: Invalid value: \"a/b\": a valid config key"),
            "{err}"
        );
        assert!(validate(&res("configmaps"), &json!({"data": {"A_b.c-1": "x"}})).is_ok());
    }

    #[test]
    fn string_data_is_folded_into_base64_data_and_wins() {
        let mut secret = json!({"data": {"a": "eA==", "b": "eA=="}, "stringData": {"b": "hi"}});
        normalize(&res("secrets"), &mut secret);
        assert_eq!(secret, json!({"data": {"a": "eA==", "b": "aGk="}}));
        let mut cm = json!({"stringData": {"b": "hi"}});
        normalize(&res("configmaps"), &mut cm);
        assert!(
            cm.get("stringData").is_some(),
            "only Secrets have stringData"
        );
    }

    #[test]
    fn decoded_base64_lengths_are_counted() {
        for data in ["", "a", "ab", "abc", "abcd", "abcde"] {
            let v = json!({"k": base64(data.as_bytes())});
            assert_eq!(entry_bytes(Some(&v), true), data.len(), "{data}");
        }
    }

    #[test]
    fn data_over_one_mebibyte_is_invalid_and_exactly_one_is_accepted() {
        let at_limit = "x".repeat(MAX_DATA_BYTES);
        let cm = json!({"metadata": {"name": "c"}, "data": {"k": at_limit}});
        assert!(validate(&res("configmaps"), &cm).is_ok());
        let over = json!({"metadata": {"name": "c"}, "data": {"k": at_limit},
                          "binaryData": {"b": "eA=="}});
        let err = validate(&res("configmaps"), &over).unwrap_err();
        assert_eq!(err.code(), 422);
        assert!(err.to_string().contains("Too long"), "{err}");
    }
}
