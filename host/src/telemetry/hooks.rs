//! The hook types that queues, controllers and the elector report to; each holds its
//! series' metrics, resolved once, so reporting takes no registry lock.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use crate::controller::{Outcome, ReconcileMetrics};
use crate::queue::QueueMetrics;

type FloatGauge = Gauge<f64, AtomicU64>;

/// client-go's seven workqueue metrics for one queue; see
/// [`Metrics::workqueue`](super::Metrics::workqueue).
#[derive(Debug)]
pub struct WorkqueueMetrics {
    pub(super) depth: Gauge,
    pub(super) adds: Counter,
    pub(super) queue_duration: Histogram,
    pub(super) work_duration: Histogram,
    pub(super) unfinished_work: FloatGauge,
    pub(super) longest_running: FloatGauge,
    pub(super) retries: Counter,
}

impl QueueMetrics for WorkqueueMetrics {
    fn add(&self) {
        self.adds.inc();
    }

    fn depth(&self, delta: i64) {
        self.depth.inc_by(delta);
    }

    fn queue_latency(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn work_duration(&self, held: Duration) {
        self.work_duration.observe(held.as_secs_f64());
    }

    fn unfinished_work(&self, total_seconds: f64, longest_seconds: f64) {
        self.unfinished_work.set(total_seconds);
        self.longest_running.set(longest_seconds);
    }

    fn retry(&self) {
        self.retries.inc();
    }
}

/// controller-runtime's reconcile metrics for one controller; see
/// [`Metrics::controller`](super::Metrics::controller).
#[derive(Debug)]
pub struct ControllerMetrics {
    pub(super) success: Counter,
    pub(super) requeue: Counter,
    pub(super) requeue_after: Counter,
    pub(super) error: Counter,
    pub(super) errors: Counter,
    pub(super) time: Histogram,
    pub(super) active_workers: Gauge,
}

impl ReconcileMetrics for ControllerMetrics {
    fn reconciled(&self, outcome: Outcome, took: Duration) {
        let total = match outcome {
            Outcome::Success => &self.success,
            Outcome::Requeue => &self.requeue,
            Outcome::RequeueAfter => &self.requeue_after,
            Outcome::Error => {
                self.errors.inc();
                &self.error
            }
        };
        total.inc();
        self.time.observe(took.as_secs_f64());
    }

    fn active_workers(&self, delta: i64) {
        self.active_workers.inc_by(delta);
    }
}

/// `leader_election_master_status` for one Lease; see
/// [`Metrics::leader_election`](super::Metrics::leader_election).
#[derive(Clone, Debug)]
pub struct LeaderStatus {
    pub(super) gauge: Gauge,
}

impl LeaderStatus {
    /// Reports 1 while this replica leads the Lease, 0 otherwise.
    pub fn set_leading(&self, leading: bool) {
        self.gauge.set(i64::from(leading));
    }

    /// Whether the gauge currently reports leading.
    #[must_use]
    pub fn is_leading(&self) -> bool {
        self.gauge.get() == 1
    }
}
