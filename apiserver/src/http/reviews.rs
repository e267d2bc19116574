//! The `POST`s answered without storing anything: the review kinds (SubjectAccessReview and
//! friends, SelfSubjectReview) and a ServiceAccount's `token` subresource (TokenRequest).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;

use super::request::App;
use super::response::json_response;
use crate::auth::UserInfo;
use crate::auth::reviews::{Review, answer};
use crate::error::ApiError;

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
