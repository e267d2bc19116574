//! The host's Prometheus metrics: client-go's workqueue, controller-runtime's reconcile and
//! client-go's leader-election names, plus hooks that refresh gauges right before a scrape.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::hooks::{ControllerMetrics, LeaderStatus, WorkqueueMetrics};
use crate::controller::Outcome;
use crate::queue::{Key, Queue};

/// client-go's workqueue latency buckets, `ExponentialBuckets(10e-9, 10, 10)`: 10 ns to 10 s.
/// Written out rather than multiplied so each bound is the nearest `f64` to its power of ten.
pub const WORKQUEUE_BUCKETS: [f64; 10] =
    [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets: 5 ms to 60 s.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// One label: client-go's `name="<queue>"`, controller-runtime's `controller="<name>"`.
type OneLabel = [(&'static str, String); 1];
/// `controller="<name>",result="<outcome>"`.
type ResultLabels = [(&'static str, String); 2];
type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

fn workqueue_histogram() -> Histogram {
    Histogram::new(WORKQUEUE_BUCKETS)
}

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn label(key: &'static str, value: &str) -> OneLabel {
    [(key, value.to_owned())]
}

/// Every metric family the host exports. Families share their storage with the registry, so
/// a handle resolved from one is what the next scrape encodes.
struct Families {
    depth: Family<OneLabel, Gauge>,
    adds: Family<OneLabel, Counter>,
    queue_duration: HistogramFamily<OneLabel>,
    work_duration: HistogramFamily<OneLabel>,
    unfinished_work: Family<OneLabel, FloatGauge>,
    longest_running: Family<OneLabel, FloatGauge>,
    retries: Family<OneLabel, Counter>,
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<OneLabel, Counter>,
    reconcile_time: HistogramFamily<OneLabel>,
    active_workers: Family<OneLabel, Gauge>,
    max_concurrent: Family<OneLabel, Gauge>,
    leader: Family<OneLabel, Gauge>,
}

impl Families {
    /// The families, registered in `registry` under their exposed names. Counters are
    /// registered without `_total`: the encoder appends it.
    fn register(registry: &mut Registry) -> Self {
        let families = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(workqueue_histogram),
            work_duration: Family::new_with_constructor(workqueue_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            leader: Family::default(),
        };
        let f = &families;
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            f.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            f.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            f.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            f.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads",
            f.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            f.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            f.retries.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            f.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            f.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            f.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            f.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            f.max_concurrent.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease",
            f.leader.clone(),
        );
        families
    }
}

type Refresh = Arc<dyn Fn() + Send + Sync>;

struct Inner {
    registry: Registry,
    families: Families,
    /// Callbacks run before every encode, by registration id.
    on_scrape: Mutex<Vec<(u64, Refresh)>>,
    next_hook: AtomicU64,
}

/// The host's metric registry: hands out the hooks that queues, controllers and the elector
/// report to, and encodes everything for a scrape. A cheap clonable handle.
///
/// # Flow
/// 1. Per controller: [`workqueue`](Metrics::workqueue) for its queue,
///    [`report_unfinished_work_on_scrape`](Metrics::report_unfinished_work_on_scrape) with that
///    queue, and [`controller`](Metrics::controller) for its workers.
/// 2. Per Lease: [`leader_election`](Metrics::leader_election), set as leadership changes.
/// 3. Each scrape calls [`encode`](Metrics::encode): scrape hooks run first, so on-demand
///    gauges are fresh, then every family is encoded.
///
/// Asking twice for the same name returns hooks that share one series, as client-go does.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("scrape_hooks", &self.inner.on_scrape.lock().len())
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered and no series yet.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let families = Families::register(&mut registry);
        Self {
            inner: Arc::new(Inner {
                registry,
                families,
                on_scrape: Mutex::new(Vec::new()),
                next_hook: AtomicU64::new(0),
            }),
        }
    }

    /// The hook for the workqueue `name` (series labelled `name="<name>"`); pass it to
    /// [`RateLimitingQueue::with_metrics`](crate::queue::RateLimitingQueue::with_metrics).
    #[must_use]
    pub fn workqueue(&self, name: &str) -> Arc<WorkqueueMetrics> {
        let f = &self.inner.families;
        let name = label("name", name);
        Arc::new(WorkqueueMetrics {
            depth: f.depth.get_or_create_owned(&name),
            adds: f.adds.get_or_create_owned(&name),
            queue_duration: f.queue_duration.get_or_create_owned(&name),
            work_duration: f.work_duration.get_or_create_owned(&name),
            unfinished_work: f.unfinished_work.get_or_create_owned(&name),
            longest_running: f.longest_running.get_or_create_owned(&name),
            retries: f.retries.get_or_create_owned(&name),
        })
    }

    /// The hook for the controller `name` (series labelled `controller="<name>"`); pass it to
    /// [`Controller::with_metrics`](crate::controller::Controller::with_metrics). Sets
    /// `controller_runtime_max_concurrent_reconciles` to `workers` and, as controller-runtime
    /// does, starts every `result` of `controller_runtime_reconcile_total` at zero.
    #[must_use]
    pub fn controller(&self, name: &str, workers: usize) -> Arc<ControllerMetrics> {
        let f = &self.inner.families;
        let controller = label("controller", name);
        let total = |outcome: Outcome| {
            f.reconcile_total.get_or_create_owned(&[
                ("controller", name.to_owned()),
                ("result", outcome.label().to_owned()),
            ])
        };
        f.max_concurrent
            .get_or_create(&controller)
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        Arc::new(ControllerMetrics {
            success: total(Outcome::Success),
            requeue: total(Outcome::Requeue),
            requeue_after: total(Outcome::RequeueAfter),
            error: total(Outcome::Error),
            errors: f.reconcile_errors.get_or_create_owned(&controller),
            time: f.reconcile_time.get_or_create_owned(&controller),
            active_workers: f.active_workers.get_or_create_owned(&controller),
        })
    }

    /// The `leader_election_master_status{name="<lease>"}` gauge, starting at 0 (not leading).
    #[must_use]
    pub fn leader_election(&self, lease: &str) -> LeaderStatus {
        let gauge = self
            .inner
            .families
            .leader
            .get_or_create_owned(&label("name", lease));
        LeaderStatus { gauge }
    }

    /// Runs `refresh` right before every [`encode`](Metrics::encode), until the returned hook
    /// is dropped. `refresh` must be quick and must not call back into these metrics' scrape
    /// hooks; it may report to any metric hook.
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn on_scrape(&self, refresh: impl Fn() + Send + Sync + 'static) -> ScrapeHook {
        let id = self
            .inner
            .next_hook
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.on_scrape.lock().push((id, Arc::new(refresh)));
        ScrapeHook {
            metrics: Arc::downgrade(&self.inner),
            id,
        }
    }

    /// Calls [`Queue::report_unfinished_work`] on `queue` before every scrape, so
    /// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`
    /// are current when read (client-go instead polls every 500 ms). Keep the hook as long as
    /// the queue runs. Accepts any layer of queue (they dereference to [`Queue`]).
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn report_unfinished_work_on_scrape<K: Key>(&self, queue: &Queue<K>) -> ScrapeHook {
        let queue = queue.clone();
        self.on_scrape(move || queue.report_unfinished_work())
    }

    /// Runs the scrape hooks, then encodes every series in the OpenMetrics text format
    /// (ending in `# EOF`).
    ///
    /// # Panics
    /// Never in practice: writing to a `String` cannot fail and every label is a string.
    #[must_use]
    pub fn encode(&self) -> String {
        let hooks: Vec<Refresh> = self
            .inner
            .on_scrape
            .lock()
            .iter()
            .map(|(_, refresh)| Arc::clone(refresh))
            .collect();
        for refresh in hooks {
            refresh();
        }
        let mut text = String::new();
        encode(&mut text, &self.inner.registry).expect("encoding metrics into a String failed");
        text
    }
}

/// Keeps a [`Metrics::on_scrape`] callback registered; dropping it unregisters the callback.
#[derive(Debug)]
pub struct ScrapeHook {
    metrics: Weak<Inner>,
    id: u64,
}

impl Drop for ScrapeHook {
    fn drop(&mut self) {
        if let Some(inner) = self.metrics.upgrade() {
            inner.on_scrape.lock().retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::controller::ReconcileMetrics;
    use crate::queue::{QueueMetrics, RateLimitingQueue};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The encoded lines that start with `prefix`.
    fn lines(text: &str, prefix: &str) -> Vec<String> {
        text.lines()
            .filter(|line| line.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn workqueue_hooks_expose_client_go_names_labels_and_values() {
        let metrics = Metrics::new();
        let hook = metrics.workqueue("configmaps");
        hook.add();
        hook.add();
        hook.depth(1);
        hook.depth(1);
        hook.depth(-1);
        hook.queue_latency(ms(250));
        hook.work_duration(ms(1500));
        hook.unfinished_work(4.5, 3.0);
        hook.retry();
        let text = metrics.encode();
        for line in [
            "# TYPE workqueue_depth gauge",
            r#"workqueue_depth{name="configmaps"} 1"#,
            "# TYPE workqueue_adds counter",
            r#"workqueue_adds_total{name="configmaps"} 2"#,
            "# TYPE workqueue_queue_duration_seconds histogram",
            r#"workqueue_queue_duration_seconds_sum{name="configmaps"} 0.25"#,
            r#"workqueue_queue_duration_seconds_count{name="configmaps"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="0.1",name="configmaps"} 0"#,
            r#"workqueue_queue_duration_seconds_bucket{le="1.0",name="configmaps"} 1"#,
            "# TYPE workqueue_work_duration_seconds histogram",
            r#"workqueue_work_duration_seconds_sum{name="configmaps"} 1.5"#,
            r#"workqueue_work_duration_seconds_bucket{le="1.0",name="configmaps"} 0"#,
            r#"workqueue_work_duration_seconds_bucket{le="10.0",name="configmaps"} 1"#,
            "# TYPE workqueue_unfinished_work_seconds gauge",
            r#"workqueue_unfinished_work_seconds{name="configmaps"} 4.5"#,
            "# TYPE workqueue_longest_running_processor_seconds gauge",
            r#"workqueue_longest_running_processor_seconds{name="configmaps"} 3.0"#,
            "# TYPE workqueue_retries counter",
            r#"workqueue_retries_total{name="configmaps"} 1"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing line {line:?} in:\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(!text.contains("_total_total"), "{text}");
    }

    #[test]
    fn workqueue_histograms_use_client_go_buckets_from_ten_nanoseconds_to_ten_seconds() {
        let metrics = Metrics::new();
        let _hook = metrics.workqueue("q");
        let bounds: Vec<String> =
            lines(&metrics.encode(), "workqueue_queue_duration_seconds_bucket")
                .iter()
                .map(|line| line.split('"').nth(1).unwrap_or_default().to_owned())
                .collect();
        assert_eq!(
            bounds,
            [
                "1e-8", "1e-7", "0.000001", "0.00001", "0.0001", "0.001", "0.01", "0.1", "1.0",
                "10.0", "+Inf"
            ]
        );
    }

    #[test]
    fn controller_hooks_expose_controller_runtime_names_with_every_result_at_zero() {
        let metrics = Metrics::new();
        let _hook = metrics.controller("web", 4);
        let text = metrics.encode();
        for result in ["success", "requeue", "requeue_after", "error"] {
            let line = format!(
                r#"controller_runtime_reconcile_total{{controller="web",result="{result}"}} 0"#
            );
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        for line in [
            "# TYPE controller_runtime_reconcile counter",
            r#"controller_runtime_reconcile_errors_total{controller="web"} 0"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="web"} 0"#,
            r#"controller_runtime_active_workers{controller="web"} 0"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="web"} 4"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        assert_eq!(
            lines(&text, "controller_runtime_reconcile_time_seconds_bucket").len(),
            RECONCILE_TIME_BUCKETS.len() + 1,
            "controller-runtime's buckets plus +Inf"
        );
    }

    #[test]
    fn reconciled_outcomes_count_by_result_and_errors_count_twice() {
        let metrics = Metrics::new();
        let hook = metrics.controller("web", 2);
        hook.active_workers(1);
        hook.active_workers(1);
        hook.active_workers(-1);
        hook.reconciled(Outcome::Success, ms(20));
        hook.reconciled(Outcome::Success, ms(30));
        hook.reconciled(Outcome::Requeue, ms(1));
        hook.reconciled(Outcome::RequeueAfter, ms(1));
        hook.reconciled(Outcome::Error, ms(2_000));
        let text = metrics.encode();
        for line in [
            r#"controller_runtime_reconcile_total{controller="web",result="success"} 2"#,
            r#"controller_runtime_reconcile_total{controller="web",result="requeue"} 1"#,
            r#"controller_runtime_reconcile_total{controller="web",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_total{controller="web",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="web"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="web"} 5"#,
            r#"controller_runtime_reconcile_time_seconds_sum{controller="web"} 2.052"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="web"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.05",controller="web"} 4"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="2.0",controller="web"} 5"#,
            r#"controller_runtime_active_workers{controller="web"} 1"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn leader_status_reports_one_while_leading_and_zero_otherwise() {
        let metrics = Metrics::new();
        let status = metrics.leader_election("reconcile-host");
        let series = |text: &str| lines(text, "leader_election_master_status{");
        assert_eq!(
            series(&metrics.encode()),
            [r#"leader_election_master_status{name="reconcile-host"} 0"#]
        );
        status.set_leading(true);
        assert!(status.is_leading());
        assert_eq!(
            series(&metrics.encode()),
            [r#"leader_election_master_status{name="reconcile-host"} 1"#]
        );
        status.set_leading(false);
        assert_eq!(
            series(&metrics.encode()),
            [r#"leader_election_master_status{name="reconcile-host"} 0"#]
        );
    }

    #[test]
    fn two_hooks_for_one_name_share_their_series() {
        let metrics = Metrics::new();
        metrics.workqueue("q").add();
        metrics.workqueue("q").add();
        assert_eq!(
            lines(&metrics.encode(), "workqueue_adds_total"),
            [r#"workqueue_adds_total{name="q"} 2"#]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unfinished_work_is_refreshed_from_the_queue_on_every_scrape() {
        let metrics = Metrics::new();
        let queue = RateLimitingQueue::<String>::with_metrics(
            crate::queue::default_controller_limiter(),
            metrics.workqueue("q"),
        );
        let _refresh = metrics.report_unfinished_work_on_scrape(&queue);
        queue.add("a".to_owned());
        queue.add("b".to_owned());
        let a = queue.get().await.expect("queue is running");
        tokio::time::advance(Duration::from_secs(2)).await;
        let b = queue.get().await.expect("queue is running");
        tokio::time::advance(Duration::from_secs(1)).await;
        let text = metrics.encode();
        assert_eq!(
            lines(&text, "workqueue_unfinished_work_seconds{"),
            [r#"workqueue_unfinished_work_seconds{name="q"} 4.0"#],
            "3 s of `a` plus 1 s of `b`"
        );
        assert_eq!(
            lines(&text, "workqueue_longest_running_processor_seconds{"),
            [r#"workqueue_longest_running_processor_seconds{name="q"} 3.0"#]
        );
        queue.done(&a);
        queue.done(&b);
        let text = metrics.encode();
        assert_eq!(
            lines(&text, "workqueue_unfinished_work_seconds{"),
            [r#"workqueue_unfinished_work_seconds{name="q"} 0.0"#]
        );
        assert_eq!(
            lines(&text, "workqueue_depth{"),
            [r#"workqueue_depth{name="q"} 0"#]
        );
    }

    #[test]
    fn dropping_a_scrape_hook_stops_its_refresh() {
        let metrics = Metrics::new();
        let calls = Arc::new(AtomicU64::new(0));
        let hook = metrics.on_scrape({
            let calls = Arc::clone(&calls);
            move || {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let _ = metrics.encode();
        let _ = metrics.encode();
        drop(hook);
        let _ = metrics.encode();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
