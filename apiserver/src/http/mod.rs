//! The HTTP front: parses Kubernetes API paths, applies fault injection, dispatches to
//! discovery, object handlers and list/watch, and renders errors as `metav1.Status`.

mod discovery;
mod field_validation;
mod fields;
mod list;
mod list_options;
mod objects;
mod openapi;
mod protobuf;
mod request;
mod response;
mod reviews;
mod scale;
mod table;
mod watch;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;

use crate::auth::{self, UserInfo};
use crate::error::ApiError;
use crate::faults::Verb;
pub(crate) use request::App;
pub(crate) use request::Query;
pub use request::RecordedRequest;
use request::{Target, is_true};
use response::error_response;

/// Largest request body accepted: a real server reads at most 3 MiB
/// (`MaxRequestBodyBytes`) and answers 413 RequestEntityTooLarge beyond.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The router serving the whole API.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
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
    let requester = match app.auth.authenticate(&app.cluster.store, req.headers()) {
        Ok(user) => user,
        Err(e) => return error_response(&e),
    };
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(requests) = &app.requests {
        requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(RecordedRequest {
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
    let user = match authorize(&app, requester, &method, &path, &query, &headers) {
        Ok(user) => user,
        Err(e) => return error_response(&e),
    };
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
    let result = dispatch(&app, &method, &path, &query, &headers, &user, body).await;
    let resp = result.unwrap_or_else(|e| error_response(&e));
    tracing::debug!(%method, path, status = resp.status().as_u16(), "request");
    resp
}

/// Impersonation, then authorization (when the server authorizes): the user the request acts
/// as, or upstream's 400/403.
fn authorize(
    app: &App,
    requester: UserInfo,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let store = &app.cluster.store;
    let enforce = app.auth.enforces();
    let mut attrs = auth::attributes::request_attributes(requester, method.as_str(), path, query);
    attrs.user = auth::impersonation::impersonate(store, enforce, headers, &attrs)?;
    if enforce {
        let decision = auth::authorize(store, &attrs);
        if !decision.allowed {
            return Err(auth::forbidden(&attrs, &decision.reason));
        }
    }
    Ok(attrs.user)
}

async fn dispatch(
    app: &Arc<App>,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    user: &UserInfo,
    body: Bytes,
) -> Result<Response, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let version = format!("v1.{}.0", discovery::KUBERNETES_MINOR);
    if let Some(resp) = openapi::serve(&app.cluster, method, &segments, headers, &version) {
        return Ok(resp);
    }
    if let Some(resp) = discovery::serve(&app.cluster, method, &segments, headers) {
        return Ok(resp);
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path(path)),
    };
    if *method == Method::POST
        && let Some(resp) = reviews::serve(
            app,
            group,
            version,
            rest,
            user,
            &objects::write_options(query, headers, Verb::Create).field_manager,
            &reviews::json_body(&body, objects::is_protobuf(headers)),
        )
    {
        return resp;
    }
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
        Verb::List => {
            list_options::validate(query, false)?;
            response::check_metadata_shape(headers, &target.res, true)?;
            list::list(app, &target, query, headers)
        }
        _ if target.sub.as_deref() == Some("scale") => {
            scale::serve(app, verb, &target, query, headers, &body)
        }
        Verb::Get => {
            response::check_metadata_shape(headers, &target.res, false)?;
            objects::serve(app, verb, &target, query, headers, body)
        }
        Verb::Watch => {
            list_options::validate(query, true)?;
            watch::watch(app, &target, query, headers)
        }
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
        && !(sub == "scale" && target.res.scale.is_some())
    {
        // As upstream: a subresource the kind does not have is no route at all.
        let ns = if target.ns.is_empty() {
            String::new()
        } else {
            format!("namespaces/{}/", target.ns)
        };
        let root = if target.res.group.is_empty() {
            "/api"
        } else {
            "/apis"
        };
        return Err(ApiError::NoRoute(format!(
            "{root}/{}/{ns}{}/{}/{sub}",
            target.res.api_version(),
            target.res.plural,
            target.name.as_deref().unwrap_or_default()
        )));
    }
    if target.sub.as_deref() == Some("status") && !target.res.status {
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
