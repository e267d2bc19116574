//! The HTTP front: parses Kubernetes API paths, applies fault injection, dispatches to
//! discovery, object handlers and list/watch, and renders errors as `metav1.Status`.

mod discovery;
mod fields;
mod list;
mod objects;
mod protobuf;
mod table;
mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::error::ApiError;
use crate::faults::Verb;
use crate::resources::Resource;

/// Largest request body accepted: a real server reads at most 3 MiB
/// (`MaxRequestBodyBytes`) and answers 413 RequestEntityTooLarge beyond.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// State shared by the handlers.
pub(crate) struct App {
    pub cluster: Arc<Cluster>,
    pub shutdown: CancellationToken,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// Every request received, when the server was configured to record them.
    pub requests: Option<Arc<std::sync::Mutex<Vec<crate::RecordedRequest>>>>,
}

/// The router serving the whole API.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

/// A parsed resource path.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub res: Arc<Resource>,
    /// Namespace from the path (empty when none).
    pub ns: String,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub watch_prefix: bool,
}

/// The query parameters.
pub(crate) type Query = HashMap<String, String>;

pub(crate) fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

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

/// Whether reading a body failed because it is over [`MAX_BODY_BYTES`].
fn is_length_limit(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

fn not_found_path(path: &str) -> ApiError {
    ApiError::NoRoute(path.to_string())
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    if let Some(token) = &app.token {
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if presented != Some(token.as_str()) {
            return error_response(&ApiError::Unauthorized("Unauthorized".into()));
        }
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(requests) = &app.requests {
        requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(crate::RecordedRequest {
                method: method.to_string(),
                path: path.clone(),
                query: req.uri().query().map(str::to_owned),
            });
    }
    let query: Query = req
        .uri()
        .query()
        .map(|q| {
            axum::extract::Query::<Query>::try_from_uri(req.uri())
                .map(|axum::extract::Query(m)| m)
                .unwrap_or_else(|_| {
                    tracing::debug!(query = q, "unparsable query string");
                    Query::new()
                })
        })
        .unwrap_or_default();
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) if is_length_limit(&e) => {
            return error_response(&ApiError::RequestEntityTooLarge(format!(
                "limit is {MAX_BODY_BYTES}"
            )));
        }
        Err(e) => {
            return error_response(&ApiError::BadRequest(format!(
                "failed to read the request body: {e}"
            )));
        }
    };
    let result = dispatch(&app, &method, &path, &query, &headers, body).await;
    let resp = result.unwrap_or_else(|e| error_response(&e));
    tracing::debug!(%method, path, status = resp.status().as_u16(), "request");
    resp
}

async fn dispatch(
    app: &Arc<App>,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(resp) = discovery::serve(&app.cluster, method, &segments, headers) {
        return Ok(resp);
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path(path)),
    };
    let target = parse_target(app, group, version, rest).ok_or_else(|| not_found_path(path))?;
    let verb = verb_of(method, &target, query)?;
    let verb_name = verb_wire_name(verb);
    if !target.res.verbs.contains(&verb_name) {
        return Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource: {} does not \
             support {verb_name}",
            target.res.group_resource()
        )));
    }
    app.cluster.faults.before(verb, &target.res.plural).await?;
    match verb {
        Verb::List => list::list(app, &target, query, headers),
        Verb::Watch => watch::watch(app, &target, query, headers),
        _ => objects::serve(app, verb, &target, query, headers, body),
    }
}

fn parse_target(app: &App, group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let (watch_prefix, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let (ns, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..] if group.is_empty() && is_ns_sub(plural, tail) => {
            ("", "namespaces", Some(*ns), Some(*plural))
        }
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => {
            (*ns, *plural, tail.first().copied(), tail.get(1).copied())
        }
        [plural, tail @ ..] if tail.len() <= 2 => {
            ("", *plural, tail.first().copied(), tail.get(1).copied())
        }
        _ => return None,
    };
    let res = app.cluster.registry.find(group, version, plural)?;
    if (!res.namespaced && !ns.is_empty()) || (res.namespaced && ns.is_empty() && name.is_some()) {
        return None;
    }
    Some(Target {
        res,
        ns: ns.to_string(),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
        watch_prefix,
    })
}

fn is_ns_sub(plural: &str, tail: &[&str]) -> bool {
    tail.is_empty() && matches!(plural, "status" | "finalize")
}

fn is_true(query: &Query, key: &str) -> bool {
    query.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn verb_of(method: &Method, target: &Target, query: &Query) -> Result<Verb, ApiError> {
    let collection = target.name.is_none();
    let not_allowed = || {
        ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource: {method} on {} {}",
            if collection {
                "the collection of"
            } else {
                "one of"
            },
            target.res.group_resource()
        ))
    };
    if let Some(sub) = &target.sub
        && sub != "status"
    {
        return Err(ApiError::NotFound {
            resource: format!("{}/{sub}", target.res.group_resource()),
            name: target.name.clone().unwrap_or_default(),
        });
    }
    if target.sub.is_some() && !target.res.status {
        return Err(ApiError::not_found(
            &format!("{}/status", target.res.group_resource()),
            target.name.as_deref().unwrap_or_default(),
        ));
    }
    Ok(match *method {
        Method::GET if target.watch_prefix || is_true(query, "watch") => Verb::Watch,
        Method::GET if collection => Verb::List,
        Method::GET => Verb::Get,
        Method::POST if collection && target.sub.is_none() => Verb::Create,
        Method::PUT if !collection => Verb::Update,
        Method::PATCH if !collection => Verb::Patch,
        Method::DELETE if collection => Verb::DeleteCollection,
        Method::DELETE if target.sub.is_none() => Verb::Delete,
        _ => return Err(not_allowed()),
    })
}

fn verb_wire_name(verb: Verb) -> &'static str {
    match verb {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Watch => "watch",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
        Verb::DeleteCollection => "deletecollection",
    }
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
