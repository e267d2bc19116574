//! The telemetry HTTP server: `/metrics`, `/debug/*`, `/healthz` and `/readyz` on one port,
//! open over HTTP or secured (HTTPS, and the API server's checks: [`super::access`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::error::TelemetryError;
use super::handle::Telemetry;

/// The `Content-Type` of `/metrics`: OpenMetrics 1.0 text.
///
/// This is what `prometheus-client` encodes, and what Prometheus asks for first: its default
/// `scrape_protocols` put `OpenMetricsText1.0.0` ahead of the classic `text/plain; version=0.0.4`.
/// Labelling the same bytes `text/plain` would be wrong, not just old-fashioned: the classic
/// parser matches a counter's `# TYPE workqueue_adds counter` against sample names literally,
/// so `workqueue_adds_total` would be ingested as untyped.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

const PLAIN_TEXT: &str = "text/plain; charset=utf-8";

impl Telemetry {
    /// The routes, for serving on a listener of the caller's choosing or for tests:
    /// - `GET /metrics`: every metric, scrape hooks run first ([`OPENMETRICS_CONTENT_TYPE`]);
    /// - `GET /healthz`: `200 ok` while the process serves;
    /// - `GET /readyz`: `200` when every readiness check passes, else `503`; the body always
    ///   lists each check (`[+]name ok` / `[-]name failed: reason`);
    /// - `/debug/recordings…`: recorded reconciles (see [`super::recordings`]);
    /// - `/debug/reconciles…`: the last reconciles of each key, and why (see
    ///   [`super::reconciles`]);
    /// - `/debug/logs…`: each plugin's latest log lines (see [`super::plugin_logs`]).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/debug/reconciles", get(super::reconciles::summary))
            .route(
                "/debug/reconciles/{namespace}/{name}",
                get(super::reconciles::of_key),
            )
            .route("/debug/logs", get(super::plugin_logs::summary))
            .route("/debug/logs/{plugin}", get(super::plugin_logs::of_plugin))
            .route("/debug/recordings", get(super::recordings::summary))
            .route("/debug/recordings/{plugin}", get(super::recordings::plugin))
            .route(
                "/debug/recordings/{plugin}/{namespace}/{name}",
                axum::routing::post(super::recordings::record_key),
            )
            .with_state(self.clone())
    }

    /// Binds `addr` (port 0 picks a free port) and serves [`router`](Telemetry::router) as
    /// `exposure` says until `shutdown` is cancelled; then stops accepting, lets requests in
    /// flight finish, and the returned [`Server`] resolves.
    ///
    /// # Errors
    /// [`TelemetryError::Bind`] when `addr` cannot be bound.
    pub async fn serve(
        &self,
        addr: SocketAddr,
        exposure: Exposure,
        shutdown: CancellationToken,
    ) -> Result<Server, TelemetryError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| TelemetryError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| TelemetryError::Bind { addr, source })?;
        let stopped = shutdown.cancelled_owned();
        let task = match exposure {
            Exposure::Open => {
                tracing::info!(%local_addr, "serving /metrics, /healthz and /readyz (HTTP, open)");
                let serving = axum::serve(listener, self.router()).with_graceful_shutdown(stopped);
                tokio::spawn(async move { serving.await })
            }
            Exposure::Secured { access, tls } => {
                tracing::info!(%local_addr,
                    "serving /metrics, /healthz and /readyz (HTTPS; /metrics and /debug/* \
                     for tokens the API server authorizes)");
                let router = self.router().layer(axum::middleware::from_fn_with_state(
                    access,
                    super::access::guard,
                ));
                let listener = super::tls::TlsListener::new(listener, tls)
                    .map_err(|source| TelemetryError::Bind { addr, source })?;
                let serving = axum::serve(listener, router).with_graceful_shutdown(stopped);
                tokio::spawn(async move { serving.await })
            }
        };
        Ok(Server { local_addr, task })
    }
}

/// How the telemetry port is served.
pub enum Exposure {
    /// Plain HTTP, every path open to whoever reaches the port.
    Open,
    /// HTTPS with `tls`; every path but `/healthz` and `/readyz` behind `access`.
    Secured {
        /// The checks with the API server.
        access: super::access::Access,
        /// The certificate served.
        tls: std::sync::Arc<rustls::ServerConfig>,
    },
}

/// A running telemetry server; see [`Telemetry::serve`].
///
/// Awaiting it waits for the graceful shutdown to finish. Dropping it aborts the server at
/// once, so keep it for as long as the endpoints should answer.
#[derive(Debug)]
#[must_use = "dropping the server stops it"]
pub struct Server {
    local_addr: SocketAddr,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// The address the server listens on (with the port the OS picked for port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Future for Server {
    type Output = Result<(), TelemetryError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let addr = self.local_addr;
        Pin::new(&mut self.task)
            .poll(cx)
            .map(|joined| match joined {
                Ok(Ok(())) => Ok(()),
                Ok(Err(source)) => Err(TelemetryError::Serve { addr, source }),
                Err(source) => Err(TelemetryError::Task { addr, source }),
            })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn metrics(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        telemetry.metrics().encode(),
    )
}

async fn healthz() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, PLAIN_TEXT)], "ok")
}

async fn readyz(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    let readiness = telemetry.health().readiness();
    let status = if readiness.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, PLAIN_TEXT)],
        readiness.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    use crate::queue::QueueMetrics;

    use super::*;

    async fn get(telemetry: &Telemetry, path: &str) -> (StatusCode, String, String) {
        let response = telemetry
            .router()
            .oneshot(
                Request::get(path)
                    .body(Body::empty())
                    .expect("valid request"),
            )
            .await
            .expect("the router is infallible");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|value| value.to_str().expect("ASCII").to_owned())
            .unwrap_or_default();
        let body = to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body fits");
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).expect("UTF-8"),
        )
    }

    #[tokio::test]
    async fn metrics_route_serves_openmetrics_text_with_its_content_type() {
        let telemetry = Telemetry::new();
        telemetry.metrics().workqueue("q").add();
        let (status, content_type, body) = get(&telemetry, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(
            body.contains("workqueue_adds_total{name=\"q\"} 1\n"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[tokio::test]
    async fn healthz_answers_ok_even_when_not_ready() {
        let telemetry = Telemetry::new();
        let _gate = telemetry.health().gate("never").expect("unique name");
        assert_eq!(
            get(&telemetry, "/healthz").await,
            (StatusCode::OK, PLAIN_TEXT.to_owned(), "ok".to_owned())
        );
    }

    #[tokio::test]
    async fn readyz_answers_503_with_details_until_ready_then_200() {
        let telemetry = Telemetry::new();
        let gate = telemetry
            .health()
            .gate("cache/v1/ConfigMap")
            .expect("unique name");
        assert_eq!(
            get(&telemetry, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                PLAIN_TEXT.to_owned(),
                "[-]cache/v1/ConfigMap failed: not ready yet\nreadyz check failed\n".to_owned()
            )
        );
        gate.set_ready();
        assert_eq!(
            get(&telemetry, "/readyz").await,
            (
                StatusCode::OK,
                PLAIN_TEXT.to_owned(),
                "[+]cache/v1/ConfigMap ok\nreadyz check passed\n".to_owned()
            )
        );
    }

    #[tokio::test]
    async fn unknown_paths_are_not_found() {
        let (status, _, _) = get(&Telemetry::new(), "/metricz").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn binding_a_taken_address_names_the_address() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a free port");
        let addr = taken.local_addr().expect("bound");
        let error = Telemetry::new()
            .serve(addr, Exposure::Open, CancellationToken::new())
            .await
            .expect_err("the port is taken");
        assert!(matches!(error, TelemetryError::Bind { addr: a, .. } if a == addr));
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}
