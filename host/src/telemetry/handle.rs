//! The telemetry handle: the metric registry and the readiness checks, cloned into every
//! component and served together (see `server.rs`).

use super::health::Health;
use super::history_sources::Histories;
use super::metrics::Metrics;
use super::recording_sources::Recordings;

/// The process's metrics and health checks, served together by
/// [`serve`](Telemetry::serve). A cheap clonable handle: clone it into every component.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    metrics: Metrics,
    health: Health,
    recordings: Recordings,
    histories: Histories,
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

    /// The plugins' reconcile histories.
    #[must_use]
    pub fn histories(&self) -> &Histories {
        &self.histories
    }

    /// The plugins' recorded reconciles.
    #[must_use]
    pub fn recordings(&self) -> &Recordings {
        &self.recordings
    }
}
