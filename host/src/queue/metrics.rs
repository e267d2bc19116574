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

/// What the basic queue reports to the hooks.
#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as StdMutex};

    use super::*;
    use crate::queue::Queue;

    #[derive(Default)]
    struct Recorded {
        adds: usize,
        depth: i64,
        latencies: Vec<Duration>,
        work: Vec<Duration>,
        unfinished: Option<(f64, f64)>,
    }

    #[derive(Default)]
    struct Recorder(StdMutex<Recorded>);

    impl QueueMetrics for Recorder {
        fn add(&self) {
            self.0.lock().unwrap().adds += 1;
        }
        fn depth(&self, delta: i64) {
            self.0.lock().unwrap().depth += delta;
        }
        fn queue_latency(&self, waited: Duration) {
            self.0.lock().unwrap().latencies.push(waited);
        }
        fn work_duration(&self, held: Duration) {
            self.0.lock().unwrap().work.push(held);
        }
        fn unfinished_work(&self, total: f64, longest: f64) {
            self.0.lock().unwrap().unfinished = Some((total, longest));
        }
    }

    #[test]
    fn taking_the_pending_keys_empties_the_queue_and_its_depth() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(Arc::clone(&recorder) as Arc<dyn QueueMetrics>);
        for key in ["a", "b", "c"] {
            q.add(key);
        }
        let taken = q.try_get().flatten();
        assert_eq!(taken, Some("a"));
        assert_eq!(q.take_pending(), ["b", "c"]);
        assert_eq!(recorder.0.lock().unwrap().depth, 0);
        assert_eq!(q.len(), 0);
        q.done(&"a");
        q.add("b");
        assert_eq!(
            recorder.0.lock().unwrap().depth,
            1,
            "a taken key can be added again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn adds_made_while_the_lock_is_held_are_counted_with_their_own_time() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(recorder.clone());
        {
            let _held = q.hold_lock();
            q.add("a");
            q.add("a"); // dedup: not counted
            assert_eq!(recorder.0.lock().unwrap().adds, 0, "counted when applied");
        }
        tokio::time::advance(Duration::from_millis(40)).await;
        assert_eq!(q.len(), 1);
        let a = q.get().await.unwrap();
        q.done(&a);
        let r = recorder.0.lock().unwrap();
        assert_eq!((r.adds, r.depth), (1, 0));
        assert_eq!(
            r.latencies,
            [Duration::from_millis(40)],
            "waited from the add, not from when it was applied"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_hooks_see_adds_depth_latency_work_and_unfinished_work() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(recorder.clone());
        q.add("a");
        q.add("a"); // dedup: not counted
        q.add("b");
        tokio::time::advance(Duration::from_millis(30)).await;
        let a = q.get().await.unwrap();
        tokio::time::advance(Duration::from_millis(20)).await;
        let b = q.get().await.unwrap();
        q.add("a"); // while processing: counted, depth +1
        tokio::time::advance(Duration::from_millis(100)).await;
        q.report_unfinished_work();
        q.done(&a);
        q.done(&b);
        let r = recorder.0.lock().unwrap();
        assert_eq!(r.adds, 3);
        assert_eq!(r.depth, 1, "`a` is dirty again");
        assert_eq!(
            r.latencies,
            [Duration::from_millis(30), Duration::from_millis(50)]
        );
        assert_eq!(
            r.work,
            [Duration::from_millis(120), Duration::from_millis(100)]
        );
        let (total, longest) = r.unfinished.unwrap();
        assert!((total - 0.22).abs() < 1e-9, "total {total}");
        assert!((longest - 0.12).abs() < 1e-9, "longest {longest}");
    }
}
