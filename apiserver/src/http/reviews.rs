//! The `POST`s answered without storing anything: the review kinds (SubjectAccessReview and
//! friends, SelfSubjectReview, TokenReview) and a ServiceAccount's `token` subresource
//! (TokenRequest).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;

use super::request::App;
use super::response::json_response;
use crate::auth::UserInfo;
use crate::auth::reviews::{Review, answer};
use crate::error::ApiError;

/// A review's body as JSON: kubectl sends TokenRequests and reviews as protobuf, read as the
/// JSON they stand for (a body that does not decode is left as sent, for the JSON error).
pub(super) fn json_body(body: &[u8], protobuf: bool) -> std::borrow::Cow<'_, [u8]> {
    if protobuf && let Ok(value) = super::protobuf::decode(body) {
        return std::borrow::Cow::Owned(value.to_string().into_bytes());
    }
    std::borrow::Cow::Borrowed(body)
}

/// The answer to a `POST` under `group/version` with path segments `rest`, when it is a review
/// or a TokenRequest; `None` for any other request.
pub(super) fn serve(
    app: &Arc<App>,
    group: &str,
    version: &str,
    rest: &[&str],
    user: &UserInfo,
    manager: &str,
    body: &[u8],
) -> Option<Result<Response, ApiError>> {
    if version != "v1" {
        return None;
    }
    let store = &app.cluster.store;
    let created = |value: serde_json::Value| json_response(StatusCode::CREATED, value.to_string());
    match (group, rest) {
        ("", ["namespaces", ns, "serviceaccounts", name, "token"]) => Some(
            app.auth
                .tokens
                .request(store, ns, name, manager, body)
                .map(created),
        ),
        ("authentication.k8s.io", ["tokenreviews"]) => Some(token_review(app, body).map(created)),
        (_, ["namespaces", ns, plural]) => {
            let review = Review::of(group, plural).filter(|r| *r == Review::LocalSubject)?;
            Some(answer(store, app.auth.enforces(), review, user, ns, manager, body).map(created))
        }
        (_, [plural]) => {
            let review = Review::of(group, plural).filter(|r| *r != Review::LocalSubject)?;
            Some(answer(store, app.auth.enforces(), review, user, "", manager, body).map(created))
        }
        _ => None,
    }
}

/// A TokenReview: whether this server issued `spec.token` (or knows it as the admin's or a
/// configured user's), and to whom, as upstream answers one: the spec echoed, `authenticated`
/// and `user` for a known token, an `error` for an unknown one.
fn token_review(app: &Arc<App>, body: &[u8]) -> Result<serde_json::Value, ApiError> {
    let sent: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the TokenReview body is not valid JSON: {e}; send a TokenReview object (apiVersion \
             authentication.k8s.io/v1)"
        ))
    })?;
    let spec = sent
        .get("spec")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let token = spec
        .get("token")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let status = match app.auth.user_for_token(&app.cluster.store, token) {
        Some(user) if !token.is_empty() => {
            let mut info = serde_json::json!({"username": user.name, "groups": user.groups});
            if !user.uid.is_empty() {
                info["uid"] = serde_json::json!(user.uid);
            }
            serde_json::json!({"authenticated": true, "user": info})
        }
        _ => serde_json::json!({"user": {}, "error": "[invalid bearer token]"}),
    };
    Ok(serde_json::json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": crate::util::now_rfc3339()},
        "spec": spec,
        "status": status,
    }))
}
