//! A write of a built-in kind must decode into the kind's type, as a real API server decodes
//! every request body (and every patched result) into its Go type before anything else: a
//! string where a number belongs, an array for an object, a `MicroTime` without its six
//! fractional digits is `400 BadRequest` "<Kind> in version "<v>" cannot be handled as a
//! <Kind>: <why>", and nothing is stored. The types are k8s-openapi's (the kinds of
//! [`crate::builtins`]); unknown fields pass, as they do upstream without strict field
//! validation. Custom resources are not decoded here.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::Resource;

type Decode = fn(&Value) -> Result<(), String>;

fn decoders() -> &'static HashMap<(&'static str, &'static str, &'static str), Decode> {
    static DECODERS: OnceLock<HashMap<(&'static str, &'static str, &'static str), Decode>> =
        OnceLock::new();
    DECODERS.get_or_init(|| {
        crate::builtins::all()
            .into_iter()
            .map(|k| ((k.group, k.version, k.kind), k.decode))
            .collect()
    })
}

/// The `MicroTime` fields of the built-in kinds (upstream's `metav1.MicroTime`, written
/// `2006-01-02T15:04:05.000000Z07:00`): `(group, kind, JSON pointer)`.
const MICRO_TIMES: &[(&str, &str, &str)] = &[
    ("coordination.k8s.io", "Lease", "/spec/acquireTime"),
    ("coordination.k8s.io", "Lease", "/spec/renewTime"),
    ("", "Event", "/eventTime"),
    ("", "Event", "/series/lastObservedTime"),
    ("events.k8s.io", "Event", "/eventTime"),
    ("events.k8s.io", "Event", "/series/lastObservedTime"),
];

/// Refuses `obj` when it does not decode as `res`'s built-in kind.
///
/// # Errors
/// [`ApiError::BadRequest`] naming the kind, the version and the reason.
pub fn check(res: &Resource, obj: &Value) -> Result<(), ApiError> {
    match problem(res, obj) {
        None => Ok(()),
        Some(why) => Err(ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
            kind = res.kind,
            version = res.version
        ))),
    }
}

/// Refuses the result `patched` of a patch when it does not decode as `res`'s
/// built-in kind, as upstream does: `422 Invalid`, one cause on field `patch` naming the
/// patched object and the reason.
///
/// # Errors
/// [`ApiError::Invalid`] with that cause.
pub fn check_patched(res: &Resource, patched: &Value) -> Result<(), ApiError> {
    match problem(res, patched) {
        None => Ok(()),
        // Upstream's Status names neither the kind nor the object here, only the cause.
        Some(why) => Err(ApiError::invalid_all(
            "",
            "",
            vec![format!(
                "patch: Invalid value: {}: {why}",
                Value::String(patched.to_string())
            )],
        )),
    }
}

/// Why `obj` does not decode as `res`'s built-in kind, if it does not.
fn problem(res: &Resource, obj: &Value) -> Option<String> {
    if res.crd.is_some() {
        return None;
    }
    let decode = decoders().get(&(res.group.as_str(), res.version.as_str(), res.kind.as_str()))?;
    // The type checks apiVersion and kind; whether the body names them, and names these, is
    // the request path's to judge (a body may leave them out, an events.k8s.io Event is stored
    // in its core form): the fields are decoded as this kind's.
    let api_version = if res.group.is_empty() {
        res.version.clone()
    } else {
        format!("{}/{}", res.group, res.version)
    };
    let mut typed = obj.clone();
    if let Some(fields) = typed.as_object_mut() {
        fields.insert("apiVersion".into(), Value::String(api_version));
        fields.insert("kind".into(), Value::String(res.kind.clone()));
    }
    // Go's base64 decoding of `[]byte` fields (a ConfigMap's binaryData, a Secret's data)
    // skips line breaks, which kustomize and others write; the Rust decoder does not, so a
    // failure is checked again without them.
    decode(&typed)
        .err()
        .filter(|_| decode(&without_line_breaks(typed)).is_err())
        .or_else(|| micro_time_problem(res, obj))
}

/// `value` with `\r` and `\n` taken out of every string.
fn without_line_breaks(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(['\r', '\n'], "")),
        Value::Array(items) => Value::Array(items.into_iter().map(without_line_breaks).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, without_line_breaks(value)))
                .collect(),
        ),
        other => other,
    }
}

fn micro_time_problem(res: &Resource, obj: &Value) -> Option<String> {
    MICRO_TIMES
        .iter()
        .filter(|(group, kind, _)| *group == res.group && *kind == res.kind)
        .filter_map(|(_, _, pointer)| obj.pointer(pointer)?.as_str())
        .find(|value| !is_micro_time(value))
        .map(|value| {
            format!(
                "parsing time \"{value}\" as \"2006-01-02T15:04:05.000000Z07:00\": a MicroTime \
                 has exactly six fractional digits, e.g. 2024-01-01T00:00:00.000000Z"
            )
        })
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` then `Z` or `±HH:MM`, as Go parses that layout.
fn is_micro_time(value: &str) -> bool {
    let bytes = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| bytes.get(i) == Some(&c);
    let clock = digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19)
        && at(19, b'.')
        && digits(20..26);
    let zone = &value.get(26..).unwrap_or_default();
    clock
        && (*zone == "Z"
            || (zone.len() == 6
                && matches!(zone.as_bytes()[0], b'+' | b'-')
                && digits(27..29)
                && at(29, b':')
                && digits(30..32)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(group: &str, version: &str, kind: &str) -> Resource {
        crate::resources::builtins()
            .into_iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .expect("a built-in kind")
    }

    #[test]
    fn a_wrong_typed_field_is_a_bad_request_naming_the_kind() {
        let config_map = resource("", "v1", "ConfigMap");
        let error = check(
            &config_map,
            &json!({"metadata": {"name": "a"}, "data": {"n": 5}}),
        )
        .unwrap_err();
        assert_eq!(error.code(), 400);
        assert!(
            error
                .to_string()
                .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
            "{error}"
        );
        assert!(
            check(
                &config_map,
                &json!({"metadata": {"name": "a"}, "data": {"n": "5"}})
            )
            .is_ok()
        );
        let deployment = resource("apps", "v1", "Deployment");
        assert!(check(&deployment, &json!({"spec": {"template": []}})).is_err());
        assert!(check(&deployment, &json!({"spec": {"unknownField": 1}})).is_ok());
        // Line breaks in base64, as Go's decoder takes them; other bad base64 is refused.
        let secret = resource("", "v1", "Secret");
        assert!(check(&secret, &json!({"data": {"k": "eHh4\neHh4"}})).is_ok());
        assert!(check(&secret, &json!({"data": {"k": "not base64!"}})).is_err());
        // A patch's result: 422 with the cause on `patch`.
        let error = check_patched(&config_map, &json!({"data": {"n": 5}})).unwrap_err();
        assert_eq!(error.code(), 422);
        assert!(
            error.to_string().contains("patch: Invalid value: "),
            "{error}"
        );
    }

    #[test]
    fn micro_times_need_six_fractional_digits() {
        let lease = resource("coordination.k8s.io", "v1", "Lease");
        for ok in [
            "2024-01-01T00:00:00.000000Z",
            "2024-01-01T00:00:00.123456+02:00",
        ] {
            assert!(
                check(&lease, &json!({"spec": {"renewTime": ok}})).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00.123Z",
            "2024-01-01T00:00:00.1234567Z",
        ] {
            let error = check(&lease, &json!({"spec": {"renewTime": bad}})).unwrap_err();
            assert!(
                error.to_string().contains("six fractional digits"),
                "{bad}: {error}"
            );
        }
    }
}
