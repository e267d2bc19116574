//! The last reconciles of each key, with their causes, outcomes and API calls, on the telemetry
//! port: what `kubectl reconcile why` and `top` read from every replica.
//!
//! - `GET /debug/reconciles`: this replica and its plugins, each with its kind, reconcile and
//!   error counts, busy seconds and queue depth (a JSON object).
//! - `GET /debug/reconciles/{namespace}/{name}?kind=K` (`_` as the namespace of a
//!   cluster-scoped object): the last reconciles of that object here, by every plugin whose
//!   `for` kind is `K` (`Kind` or `apiVersion/Kind`), newest first.
//!
//! Both sit under `/debug/`: in a cluster only those the API server authorizes read them. An
//! entry holds names, resourceVersions and error texts, never object bodies.

use axum::extract::{Query, State};
use axum::response::IntoResponse;

use super::Telemetry;

pub use super::history_sources::{Histories, HistorySource};

const JSON: &str = "application/json";

pub(super) async fn summary(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, JSON)],
        telemetry.histories().summary().to_string(),
    )
}

#[derive(serde::Deserialize)]
pub(super) struct KindQuery {
    kind: Option<String>,
}

pub(super) async fn of_key(
    State(telemetry): State<Telemetry>,
    axum::extract::Path((namespace, name)): axum::extract::Path<(String, String)>,
    Query(query): Query<KindQuery>,
) -> axum::response::Response {
    let Some(kind) = query.kind.filter(|kind| !kind.is_empty()) else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            )],
            "name the object's kind: /debug/reconciles/<namespace or _>/<name>?kind=ConfigMap\n",
        )
            .into_response();
    };
    let namespace = (namespace != "_").then_some(namespace.as_str());
    (
        [(axum::http::header::CONTENT_TYPE, JSON)],
        telemetry
            .histories()
            .of_key(&kind, namespace, &name)
            .to_string(),
    )
        .into_response()
}
