//! Telemetry on one HTTP port: Prometheus metrics under client-go's and controller-runtime's
//! names, liveness, and readiness aggregated from named checks; in a cluster, served over HTTPS
//! with `/metrics` and `/debug/*` for whom the API server authorizes ([`access`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use reconcile_host::queue::{RateLimitingQueue, default_controller_limiter};
//! use reconcile_host::telemetry::{Exposure, Telemetry};
//! use tokio_util::sync::CancellationToken;
//!
//! let telemetry = Telemetry::new();
//! // Per controller: its queue reports client-go's workqueue metrics, refreshed per scrape.
//! let queue = RateLimitingQueue::<String>::with_metrics(
//!     default_controller_limiter(),
//!     telemetry.metrics().workqueue("configmaps"),
//! );
//! let _unfinished = telemetry.metrics().report_unfinished_work_on_scrape(&queue);
//! // ... and `Controller::with_metrics(.., telemetry.metrics().controller("configmaps", 4))`.
//! let synced = telemetry.health().gate("cache/v1/ConfigMap")?;
//!
//! let shutdown = CancellationToken::new();
//! let server = telemetry.serve("127.0.0.1:0".parse()?, Exposure::Open, shutdown.clone()).await?;
//! println!("scrape http://{}/metrics", server.local_addr());
//! synced.set_ready();
//! shutdown.cancel();
//! server.await?;
//! # Ok(()) }
//! ```

pub mod access;
mod error;
mod handle;
mod health;
mod history_sources;
mod hooks;
pub mod log_book;
pub mod logs;
mod metrics;
mod plugin_logs;
pub mod reconciles;
mod recording_sources;
pub mod recordings;
mod server;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod traces;

pub use error::TelemetryError;
pub use handle::Telemetry;
pub use health::{CheckResult, Health, Readiness, ReadinessGate};
pub use hooks::{ControllerMetrics, LeaderStatus, WorkqueueMetrics};
pub use metrics::{
    Metrics, ModuleSeries, PluginCosts, PluginFailures, RECONCILE_TIME_BUCKETS, SHADOW_OUTCOMES,
    ScrapeHook, ShadowMetrics, ShardMetrics, TenantMetrics, WORKQUEUE_BUCKETS,
};
pub use server::{Exposure, OPENMETRICS_CONTENT_TYPE, Server};
