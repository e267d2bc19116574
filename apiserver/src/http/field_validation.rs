//! `fieldValidation`: what a writer hears of the fields its body carries that the kind's schema
//! does not declare ([`crate::schemas::known_fields`]; the server drops them whatever the
//! directive). `Ignore`: nothing; `Warn` (the default): one `Warning` header each, as
//! `299 - "unknown field \"spec.foo\""`; `Strict`: the write is refused. A JSON patch (a list
//! of operations) is not checked: its fields are dropped from the result.

use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::Value;

use super::request::Query;
use crate::error::ApiError;
use crate::faults::Verb;
use crate::resources::Resource;
use crate::schemas::known_fields;

/// The directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Ignore,
    Warn,
    Strict,
}

/// The request's directive; any value but `Ignore`, `Warn` and `Strict` is 422 against the
/// verb's options kind, as upstream.
pub(super) fn mode(query: &Query, verb: Verb) -> Result<Mode, ApiError> {
    match query.get("fieldValidation").map(String::as_str) {
        None | Some("" | "Warn") => Ok(Mode::Warn),
        Some("Ignore") => Ok(Mode::Ignore),
        Some("Strict") => Ok(Mode::Strict),
        Some(other) => {
            let options = match verb {
                Verb::Create => "CreateOptions",
                Verb::Update => "UpdateOptions",
                _ => "PatchOptions",
            };
            Err(ApiError::invalid(
                &format!("{options}.meta.k8s.io"),
                "",
                format!(
                    "fieldValidation: Unsupported value: \"{other}\": supported values: \
                     \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
            ))
        }
    }
}

/// What a body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// A whole object (create, update).
    Object,
    /// A merge or strategic merge patch.
    Patch,
    /// A server-side apply patch.
    Apply,
}

/// Checks `body` of kind `res`: the warnings to send, or the refusal. Under `Strict` an object
/// is 400 BadRequest and a patch 422 on field `patch`, naming every unknown field, as
/// upstream. An apply patch with an unknown field is refused whatever the directive, as
/// upstream refuses it (500, "field not declared in schema": the applied configuration cannot
/// be typed).
pub(super) fn check(
    mode: Mode,
    res: &Resource,
    body: &Value,
    form: Body,
) -> Result<Vec<String>, ApiError> {
    if !body.is_object() || (mode == Mode::Ignore && form != Body::Apply) {
        return Ok(Vec::new());
    }
    let unknown = known_fields::find(res, body, form != Body::Object);
    if form == Body::Apply && !unknown.is_empty() {
        return Err(not_declared(res, body, &unknown));
    }
    let unknown: Vec<String> = unknown
        .into_iter()
        .map(|path| format!("unknown field \"{path}\""))
        .collect();
    if mode == Mode::Warn || unknown.is_empty() {
        return Ok(unknown);
    }
    let list = unknown.join(", ");
    Err(match form {
        Body::Object => ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding \
             error: {list}",
            kind = res.kind,
            version = res.version
        )),
        _ => ApiError::invalid_all(
            "",
            "",
            vec![format!(
                "patch: Invalid value: {}: strict decoding error: {list}",
                Value::String(body.to_string())
            )],
        ),
    })
}

/// Upstream's refusal of an apply patch naming fields the kind does not declare.
fn not_declared(res: &Resource, body: &Value, unknown: &[String]) -> ApiError {
    let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let errors: Vec<String> = unknown
        .iter()
        .map(|path| format!(".{path}: field not declared in schema"))
        .collect();
    let errors = if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("errors:\n  {}", errors.join("\n  "))
    };
    ApiError::Unclassified(format!(
        "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {errors}",
        text("/metadata/namespace"),
        text("/metadata/name"),
        res.group,
        res.version,
        res.kind
    ))
}

/// `resp` with one `Warning` header per warning.
pub(super) fn warn(mut resp: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let quoted = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            resp.headers_mut().append("warning", value);
        }
    }
    resp
}
