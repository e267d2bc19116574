//! The schema rules of a custom resource's values beyond types and bounds
//! ([`crate::schema_check`]): `pattern` (RE2, which Rust's `regex` follows), `format` (the
//! formats upstream's CRD validation knows that plugins use: `date-time`, `date`, `byte`,
//! `uuid`, `ipv4`, `ipv6`, `cidr`, `mac`, `hostname`, `email`; other formats are not checked,
//! as upstream ignores unknown ones), `multipleOf`, `uniqueItems`, and the list types
//! `x-kubernetes-list-type: set` (no value twice) and `map` (no key twice, by
//! `x-kubernetes-list-map-keys`).

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

/// The problems of `value` (at `path`) by `schema`'s rules, upstream's wording; a string whose
/// length already failed (`length_failed`) is not matched against its pattern, as upstream
/// says only the first of the two.
pub fn problems(value: &Value, schema: &Value, path: &str, length_failed: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let Value::String(text) = value {
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && !length_failed
            && matches(pattern, text) == Some(false)
        {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body should match '{pattern}'"
            ));
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !fits_format(format, text)
        {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body must be of type {format}: {value}"
            ));
        }
    }
    if let (Some(number), Some(factor)) = (
        value.as_f64(),
        schema.get("multipleOf").and_then(Value::as_f64),
    ) && factor > 0.0
        && (number / factor).fract() != 0.0
    {
        out.push(format!(
            "{path}: Invalid value: {value}: {path} in body should be a multiple of {}",
            schema["multipleOf"]
        ));
    }
    if let Value::Array(items) = value {
        out.extend(list_problems(items, schema, path));
    }
    out
}

fn list_problems(items: &[Value], schema: &Value, path: &str) -> Vec<String> {
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Vec::new();
    match list_type {
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    out.push(format!("{path}[{i}]: Duplicate value: {}", shown(item)));
                }
            }
        }
        Some("map") if !keys.is_empty() => {
            let key_of = |item: &Value| -> Option<Map<String, Value>> {
                let object = item.as_object()?;
                Some(
                    keys.iter()
                        .filter_map(|k| object.get(*k).map(|v| ((*k).to_string(), v.clone())))
                        .collect(),
                )
            };
            let item_keys: Vec<Option<Map<String, Value>>> = items.iter().map(key_of).collect();
            for (i, key) in item_keys.iter().enumerate() {
                if let Some(key) = key
                    && item_keys[..i].contains(&Some(key.clone()))
                {
                    out.push(format!(
                        "{path}[{i}]: Duplicate value: {}",
                        shown(&Value::Object(key.clone()))
                    ));
                }
            }
        }
        _ if unique => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    out.push(format!("{path}[{i}]: Duplicate value: {}", shown(item)));
                }
            }
        }
        _ => {}
    }
    out
}

/// A value as upstream prints it in a duplicate's cause: JSON.
fn shown(value: &Value) -> String {
    value.to_string()
}

/// Whether `text` matches `pattern`; `None` when the pattern does not compile (upstream refuses
/// such a CRD; this server lets the value pass).
fn matches(pattern: &str, text: &str) -> Option<bool> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Regex>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let regex = cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok());
    regex.as_ref().map(|r| r.is_match(text))
}

fn fits_format(format: &str, text: &str) -> bool {
    static RULES: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            (
                "date-time",
                r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$",
            ),
            ("date", r"^\d{4}-\d{2}-\d{2}$"),
            (
                "uuid",
                r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            ),
            ("mac", r"^(?i)([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$"),
            (
                "hostname",
                r"^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$",
            ),
            ("email", r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
        ]
        .into_iter()
        .filter_map(|(name, re)| Some((name, Regex::new(re).ok()?)))
        .collect()
    });
    match format {
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<Ipv6Addr>().is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(ip, bits)| {
            let bits: Option<u8> = bits.parse().ok();
            match (ip.parse::<Ipv4Addr>(), ip.parse::<Ipv6Addr>(), bits) {
                (Ok(_), _, Some(b)) => b <= 32,
                (_, Ok(_), Some(b)) => b <= 128,
                _ => false,
            }
        }),
        "byte" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        _ => rules
            .iter()
            .find(|(name, _)| *name == format)
            .is_none_or(|(_, re)| re.is_match(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_formats_and_multiples_are_causes_in_upstreams_words() {
        let schema = json!({"type": "string", "pattern": "^[a-z]+$"});
        assert_eq!(
            problems(&json!("Ab"), &schema, "spec.name", false),
            ["spec.name: Invalid value: \"Ab\": spec.name in body should match '^[a-z]+$'"]
        );
        assert!(problems(&json!("ab"), &schema, "spec.name", false).is_empty());
        let when = json!({"type": "string", "format": "date-time"});
        assert!(problems(&json!("2026-12-05T07:00:00Z"), &when, "w", false).is_empty());
        assert_eq!(
            problems(&json!("soon"), &when, "w", false),
            ["w: Invalid value: \"soon\": w in body must be of type date-time: \"soon\""]
        );
        for (format, good, bad) in [
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
            ("byte", "eA==", "not base64!"),
        ] {
            let schema = json!({"format": format});
            assert!(
                problems(&json!(good), &schema, "f", false).is_empty(),
                "{format} {good}"
            );
            assert_eq!(
                problems(&json!(bad), &schema, "f", false).len(),
                1,
                "{format} {bad}"
            );
        }
        assert!(problems(&json!("x"), &json!({"format": "unheard-of"}), "f", false).is_empty());
        assert_eq!(
            problems(&json!(5), &json!({"multipleOf": 2}), "n", false),
            ["n: Invalid value: 5: n in body should be a multiple of 2"]
        );
    }

    #[test]
    fn sets_and_maps_refuse_a_value_or_key_twice() {
        let set = json!({"type": "array", "x-kubernetes-list-type": "set"});
        assert_eq!(
            problems(&json!(["a", "b", "a"]), &set, "spec.tags", false),
            ["spec.tags[2]: Duplicate value: \"a\""]
        );
        let map = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"]});
        assert_eq!(
            problems(
                &json!([{"port": 80, "host": "a"}, {"port": 80, "host": "b"}]),
                &map,
                "spec.endpoints",
                false
            ),
            ["spec.endpoints[1]: Duplicate value: {\"port\":80}"]
        );
        assert!(problems(&json!([{"port": 80}, {"port": 81}]), &map, "e", false).is_empty());
    }
}
