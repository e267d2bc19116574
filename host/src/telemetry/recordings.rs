//! Recorded reconciles on the telemetry port: each plugin's latest bundles, and recording a
//! key's next reconcile on request.
//!
//! - `GET /debug/recordings`: the plugins that record, with how many bundles each holds.
//! - `GET /debug/recordings/{plugin}`: that plugin's bundles, oldest first (a JSON array).
//! - `POST /debug/recordings/{plugin}/{namespace}/{name}` (`_` as the namespace of a
//!   cluster-scoped object): records the key's next reconcile whatever its outcome, and queues
//!   the key; `202 Accepted`.
//!
//! The last two answer `403 Forbidden` unless the host's configuration sets `recording.serve`:
//! a bundle holds what the plugin read, and outside a cluster the port has no authentication.

use axum::extract::State;
use axum::response::IntoResponse;

use super::Telemetry;

pub use super::recording_sources::{RecordingSource, Recordings};

const PLAIN_TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

pub(super) async fn summary(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, JSON)],
        telemetry.recordings().summary(),
    )
}

fn not_served() -> axum::response::Response {
    (
        axum::http::StatusCode::FORBIDDEN,
        [(axum::http::header::CONTENT_TYPE, PLAIN_TEXT)],
        "recordings are not served: the telemetry port has no authentication and a bundle holds \
         what the plugin read; set `recording.serve: true` in the host's configuration to serve \
         them (and keep the port private), or read them from `recording.directory`\n",
    )
        .into_response()
}

fn no_plugin(plugin: &str) -> axum::response::Response {
    (
        axum::http::StatusCode::NOT_FOUND,
        [(axum::http::header::CONTENT_TYPE, PLAIN_TEXT)],
        format!(
            "no plugin named {plugin:?} records here; GET /debug/recordings lists those that do\n"
        ),
    )
        .into_response()
}

pub(super) async fn plugin(
    State(telemetry): State<Telemetry>,
    axum::extract::Path(plugin): axum::extract::Path<String>,
) -> axum::response::Response {
    match telemetry.recordings().get(&plugin) {
        Some(source) if !source.served() => not_served(),
        Some(source) => (
            [(axum::http::header::CONTENT_TYPE, JSON)],
            source.bundles_json(),
        )
            .into_response(),
        None => no_plugin(&plugin),
    }
}

pub(super) async fn record_key(
    State(telemetry): State<Telemetry>,
    axum::extract::Path((plugin, namespace, name)): axum::extract::Path<(String, String, String)>,
) -> axum::response::Response {
    let Some(source) = telemetry.recordings().get(&plugin) else {
        return no_plugin(&plugin);
    };
    if !source.served() {
        return not_served();
    }
    let namespace = (namespace != "_").then_some(namespace.as_str());
    let text = |status, text: String| {
        (
            status,
            [(axum::http::header::CONTENT_TYPE, PLAIN_TEXT)],
            text,
        )
            .into_response()
    };
    let valid = namespace
        .is_none_or(|ns| crate::wasm::reference::check_namespace(Some(ns)).is_ok())
        && !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        return text(
            axum::http::StatusCode::BAD_REQUEST,
            "not an object key: give /debug/recordings/<plugin>/<namespace or _>/<name> with \
             Kubernetes names\n"
                .to_owned(),
        );
    }
    if source.request(namespace, &name) {
        text(
            axum::http::StatusCode::ACCEPTED,
            format!(
                "the next reconcile of {} is recorded; GET /debug/recordings/{plugin}\n",
                namespace.map_or_else(|| name.clone(), |ns| format!("{ns}/{name}"))
            ),
        )
    } else {
        text(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "recording is off (recording.keep 0 and no directory) or too many keys wait to be \
             recorded; try again later\n"
                .to_owned(),
        )
    }
}
