//! Each plugin's latest log lines on the telemetry port ([`super::log_book`]): what
//! `kubectl reconcile logs` reads from every replica.
//!
//! - `GET /debug/logs`: this replica and the plugins it holds lines of.
//! - `GET /debug/logs/{plugin}?after=SEQ&tail=N`: that plugin's lines after `SEQ` (each line has
//!   a `seq`, rising in this process; default 0, all kept), the last `N` of them, oldest first,
//!   with `next`, the `seq` to ask after next time.
//!
//! Under `/debug/`: in a cluster only those the API server authorizes read them. A line holds
//! what the guest wrote, which may be anything it read.

use axum::extract::{Query, State};
use axum::response::IntoResponse;
use serde_json::json;

use super::Telemetry;
use super::log_book::book;

const JSON: &str = "application/json";

pub(super) async fn summary(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, JSON)],
        json!({"replica": &*telemetry.histories().replica(), "plugins": book().summary()})
            .to_string(),
    )
}

#[derive(serde::Deserialize)]
pub(super) struct LinesQuery {
    #[serde(default)]
    after: u64,
    tail: Option<usize>,
}

pub(super) async fn of_plugin(
    State(telemetry): State<Telemetry>,
    axum::extract::Path(plugin): axum::extract::Path<String>,
    Query(query): Query<LinesQuery>,
) -> axum::response::Response {
    let lines = book()
        .lines(&plugin, query.after, query.tail)
        .unwrap_or_default();
    let next = lines
        .last()
        .and_then(|line| line["seq"].as_u64())
        .unwrap_or(query.after);
    (
        [(axum::http::header::CONTENT_TYPE, JSON)],
        json!({
            "replica": &*telemetry.histories().replica(),
            "plugin": plugin,
            "lines": lines,
            "next": next,
        })
        .to_string(),
    )
        .into_response()
}
