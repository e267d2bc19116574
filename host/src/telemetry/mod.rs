//! Telemetry on one HTTP port: Prometheus metrics under client-go's and controller-runtime's
//! names, liveness, and readiness aggregated from named checks.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use reconcile_host::queue::{RateLimitingQueue, default_controller_limiter};
//! use reconcile_host::telemetry::Telemetry;
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
//! let server = telemetry.serve("127.0.0.1:0".parse()?, shutdown.clone()).await?;
//! println!("scrape http://{}/metrics", server.local_addr());
//! synced.set_ready();
//! shutdown.cancel();
//! server.await?;
//! # Ok(()) }
//! ```

mod health;
mod hooks;
pub mod logs;
mod metrics;
mod server;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;

pub use health::{CheckResult, Health, Readiness, ReadinessGate};
pub use hooks::{ControllerMetrics, LeaderStatus, WorkqueueMetrics};
pub use metrics::{Metrics, PluginFailures, RECONCILE_TIME_BUCKETS, ScrapeHook, WORKQUEUE_BUCKETS};
pub use server::{OPENMETRICS_CONTENT_TYPE, Server};

/// What can go wrong in telemetry.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The listening address could not be bound.
    #[error(
        "failed to bind the telemetry server to {addr}; choose a free address for the \
         telemetry listener (port 0 lets the OS pick one)"
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("the telemetry server on {addr} stopped with an I/O error; restart the host")]
    Serve {
        /// The address it listened on.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The server task panicked or was aborted.
    #[error("the telemetry server task on {addr} panicked or was aborted; this is a bug")]
    Task {
        /// The address it listened on.
        addr: SocketAddr,
        /// The join failure.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A readiness check of that name is already registered.
    #[error(
        "readiness check `{name}` is already registered; give each check a unique name, \
         such as `cache/v1/ConfigMap`"
    )]
    DuplicateCheck {
        /// The name registered twice.
        name: String,
    },
    /// A readiness check name that would not print as one token in `/readyz`.
    #[error(
        "readiness check name {name:?} is empty or contains whitespace; use a name such as \
         `cache/v1/ConfigMap` or `leader-election`"
    )]
    InvalidCheckName {
        /// The rejected name.
        name: String,
    },
}

/// The process's metrics and health checks, served together by
/// [`serve`](Telemetry::serve). A cheap clonable handle: clone it into every component.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    metrics: Metrics,
    health: Health,
}

impl Telemetry {
    /// Empty metrics (every family registered, no series) and no readiness checks.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The metric registry and its hooks.
    #[must_use]
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The readiness checks.
    #[must_use]
    pub fn health(&self) -> &Health {
        &self.health
    }
}
