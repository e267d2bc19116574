//! Kind-specific normalisation and validation a real API server applies to every write:
//! a Secret's `stringData` folded into `data`, and the 1 MiB limit on ConfigMap and Secret data.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::Resource;
use crate::util::base64;

/// The most bytes of data a ConfigMap or Secret may hold (upstream `core.MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// Normalises a Secret as upstream's v1 conversion does: each `stringData` entry is written
/// into `data` (base64, overriding an entry of the same key) and `stringData` is dropped.
pub fn normalize(res: &Resource, obj: &mut Value) {
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

/// Refuses what upstream's validation refuses for the kinds it covers: more than
/// [`MAX_DATA_BYTES`] of data in a ConfigMap (`data` plus decoded `binaryData`) or a Secret
/// (decoded `data`), as 422 Invalid with upstream's field and message.
pub fn validate(res: &Resource, obj: &Value) -> Result<(), ApiError> {
    if !res.group.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (total, field) = match res.kind.as_str() {
        "ConfigMap" => (
            entry_bytes(obj.get("data"), false) + entry_bytes(obj.get("binaryData"), true),
            "[]",
        ),
        "Secret" => (entry_bytes(obj.get("data"), true), "data"),
        _ => return Ok(()),
    };
    if total > MAX_DATA_BYTES {
        return Err(ApiError::invalid(
            &res.kind,
            name,
            format!(
                "{field}: Too long: may not be more than {MAX_DATA_BYTES} bytes ({total} bytes \
                 sent); a {} holds at most 1 MiB of data: split it or store the data elsewhere",
                res.kind
            ),
        ));
    }
    Ok(())
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
