//! Controllers: a rate-limited workqueue per controller and the workers that reconcile its keys
//! (SEMANTICS §4).

mod key;
mod reconciler;
mod runner;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use key::ObjectKey;
pub use reconciler::{Action, ObjectLookup, Reconciler, Request};
pub use runner::{Controller, Outcome};

/// Hooks for controller-runtime's reconcile metrics; every method has a no-op default.
pub trait ReconcileMetrics: Send + Sync + 'static {
    /// `controller_runtime_reconcile_total{result}`, `controller_runtime_reconcile_errors_total`
    /// and `controller_runtime_reconcile_time_seconds`: one reconcile ended.
    fn reconciled(&self, outcome: Outcome, took: Duration) {
        let _ = (outcome, took);
    }
    /// `controller_runtime_active_workers`: a worker started (+1) or finished (−1) a reconcile.
    fn active_workers(&self, delta: i64) {
        let _ = delta;
    }
}

/// Reconcile metrics that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReconcileMetrics;

impl ReconcileMetrics for NoReconcileMetrics {}
