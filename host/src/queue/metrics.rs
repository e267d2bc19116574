//! Hooks for client-go's seven workqueue metrics; the exporter lives in the telemetry module.

use std::time::Duration;

/// Receives a workqueue's measurements. Every method has a no-op default, so an implementation
/// overrides only what it exports. Names follow client-go's `workqueue_*` metrics.
///
/// The queue calls these outside its lock; implementations must be cheap and must not call back
/// into the queue.
pub trait QueueMetrics: Send + Sync + 'static {
    /// `workqueue_adds_total`: a key became dirty (adds of an already-dirty key are not counted).
    fn add(&self) {}

    /// `workqueue_depth`: the number of dirty keys changed by `delta` (+1 on add, −1 on get).
    fn depth(&self, delta: i64) {
        let _ = delta;
    }

    /// `workqueue_queue_duration_seconds`: how long a key waited between its add and its `get`.
    fn queue_latency(&self, waited: Duration) {
        let _ = waited;
    }

    /// `workqueue_work_duration_seconds`: how long a key was held between `get` and `done`.
    fn work_duration(&self, held: Duration) {
        let _ = held;
    }

    /// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`:
    /// the summed and the largest age of the work in progress, reported on demand by
    /// [`Queue::report_unfinished_work`](super::Queue::report_unfinished_work).
    fn unfinished_work(&self, total_seconds: f64, longest_seconds: f64) {
        let _ = (total_seconds, longest_seconds);
    }

    /// `workqueue_retries_total`: a key was re-added through the rate limiter.
    fn retry(&self) {}
}

/// Metrics that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMetrics;

impl QueueMetrics for NoMetrics {}
