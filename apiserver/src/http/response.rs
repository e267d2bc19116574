//! The forms of an answer: JSON bodies, `Status` errors (with `Retry-After`), an object in the
//! requested version, as metadata only, or whether a Table was asked for.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::resources::Resource;

/// A response with `body` as `application/json`.
pub(crate) fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `err` as a `Status` object with its code (and `Retry-After` when throttled).
pub(crate) fn error_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(code, err.status().to_string());
    if let ApiError::TooManyRequests {
        retry_after_secs, ..
    } = err
        && let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// The object as the requested version: an Event through `events.k8s.io/v1` is converted
/// from its stored core form; for a custom resource, with the "None" conversion strategy, only
/// `apiVersion` differs between versions. Other built-in kinds are served as stored.
fn as_version(res: &Resource, bytes: Bytes) -> Bytes {
    if res.is_events_v1() {
        return match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => Bytes::from(crate::events::to_events_v1(v).to_string()),
            Err(_) => bytes,
        };
    }
    if res.crd.is_none() {
        return bytes;
    }
    let api_version = res.api_version();
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    if v.get("apiVersion").and_then(|a| a.as_str()) == Some(api_version.as_str())
        || v.get("kind").and_then(|k| k.as_str()) == Some("Status")
    {
        return bytes;
    }
    v["apiVersion"] = serde_json::Value::String(api_version);
    serde_json::to_vec(&v).map(Bytes::from).unwrap_or(bytes)
}

/// Whether the client asked for `PartialObjectMetadata` (metadata-only lists, gets, watches).
pub(crate) fn wants_metadata(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split(',').next())
        .is_some_and(|first| first.contains("as=PartialObjectMetadata"))
}

/// A 406 when every form the client accepts is a metadata form of the other shape: a
/// `PartialObjectMetadata` of a list, or a `PartialObjectMetadataList` of one object (upstream
/// answers 406 then, naming its internal Go type, as here). `list`: the answer is a list.
///
/// # Errors
/// [`ApiError::NotAcceptable`].
pub(crate) fn check_metadata_shape(
    headers: &HeaderMap,
    res: &Resource,
    list: bool,
) -> Result<(), ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let asked = |form: &str| {
        accept.split(',').all(|alternative| {
            alternative
                .split(';')
                .any(|param| param.trim() == format!("as={form}"))
        })
    };
    // Upstream's internal type: `*core.ConfigMap`, `*apps.Deployment`, custom resources
    // `*unstructured.Unstructured`.
    let go_type = |suffix: &str| {
        if res.crd.is_none() {
            let package = res
                .group
                .split('.')
                .next()
                .filter(|g| !g.is_empty())
                .unwrap_or("core");
            format!("*{package}.{}{suffix}", res.kind)
        } else {
            format!("*unstructured.Unstructured{suffix}")
        }
    };
    if list && asked("PartialObjectMetadata") {
        return Err(ApiError::NotAcceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type("List")
        )));
    }
    if !list && asked("PartialObjectMetadataList") {
        return Err(ApiError::NotAcceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type("")
        )));
    }
    Ok(())
}

/// The object in the form the client asked for: the requested version, or only its metadata.
pub(crate) fn render(res: &Resource, metadata_only: bool, bytes: Bytes) -> Bytes {
    if !metadata_only {
        return as_version(res, bytes);
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    if v.get("kind").and_then(|k| k.as_str()) == Some("Status") {
        return bytes;
    }
    let partial = serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": v.get("metadata").cloned().unwrap_or_default(),
    });
    Bytes::from(partial.to_string())
}

/// Whether the client asked for the `meta.k8s.io/v1` Table form.
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table"))
        })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(&self)
    }
}
