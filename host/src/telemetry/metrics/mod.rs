//! The host's Prometheus metrics: client-go's workqueue, controller-runtime's reconcile and
//! client-go's leader-election names, plus hooks that refresh gauges right before a scrape.

mod families;
mod plugins;
mod sharding;
mod tenants;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use super::hooks::{ControllerMetrics, LeaderStatus, WorkqueueMetrics};
use crate::controller::Outcome;
use crate::election::Leadership;
use crate::queue::{Key, Queue};

use families::{Families, label};

pub use families::{RECONCILE_TIME_BUCKETS, WORKQUEUE_BUCKETS};
pub use plugins::{ModuleSeries, PluginCosts, PluginFailures, SHADOW_OUTCOMES, ShadowMetrics};
pub use sharding::ShardMetrics;
pub use tenants::TenantMetrics;

type Refresh = Arc<dyn Fn() + Send + Sync>;

struct Inner {
    registry: Registry,
    families: Families,
    /// Callbacks run before every encode, by registration id.
    on_scrape: Mutex<Vec<(u64, Refresh)>>,
    next_hook: AtomicU64,
    /// How many loaded copies of each (plugin, module) hold its series (see
    /// [`Metrics::plugin_module`]).
    module_users: Mutex<std::collections::HashMap<(String, String), usize>>,
}

/// The host's metric registry: hands out the hooks that queues, controllers and the elector
/// report to, and encodes everything for a scrape. A cheap clonable handle.
///
/// # Flow
/// 1. Per controller: [`workqueue`](Metrics::workqueue) for its queue,
///    [`report_unfinished_work_on_scrape`](Metrics::report_unfinished_work_on_scrape) with that
///    queue, and [`controller`](Metrics::controller) for its workers.
/// 2. Per Lease: [`report_leadership_on_scrape`](Metrics::report_leadership_on_scrape) with
///    the elector's channel, or [`leader_election`](Metrics::leader_election) set by hand.
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
                module_users: Mutex::default(),
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
    /// [`Controller::with_metrics`](crate::controller::Controller::with_metrics) with the same
    /// `workers`. Sets `controller_runtime_max_concurrent_reconciles` to `workers` (at least
    /// one, as the controller runs) and, as controller-runtime does, starts every `result` of
    /// `controller_runtime_reconcile_total` at zero.
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
            .set(i64::try_from(workers.max(1)).unwrap_or(i64::MAX));
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

    /// Keeps `reconcile_host_fenced_writes_total{lease="<lease>"}` equal to the writes `fence`
    /// refused, read before every scrape. Keep the hook while the fence is used.
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn report_fenced_writes_on_scrape(
        &self,
        lease: &str,
        fence: crate::election::Fence,
    ) -> ScrapeHook {
        let counter = self
            .inner
            .families
            .fenced_writes
            .get_or_create_owned(&label("lease", lease));
        self.on_scrape(move || {
            let seen = counter.get();
            counter.inc_by(fence.refused().saturating_sub(seen));
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

    /// Keeps `leader_election_master_status{name="<lease>"}` in step with an elector's
    /// [`subscribe`](crate::election::LeaderElector::subscribe) channel: set now and re-read
    /// before every scrape, so no task has to follow the channel. Keep the hook while the
    /// elector runs.
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn report_leadership_on_scrape(
        &self,
        lease: &str,
        leadership: watch::Receiver<Leadership>,
    ) -> ScrapeHook {
        let status = self.leader_election(lease);
        let refresh = move || status.set_leading(leadership.borrow().is_leading());
        refresh();
        self.on_scrape(refresh)
    }

    /// Runs `refresh` right before every [`encode`](Metrics::encode), until the returned hook
    /// is dropped. `refresh` runs on the scraping task, outside any lock: it must be quick and
    /// must not call [`encode`](Metrics::encode) (that would recurse); it may report to any
    /// metric hook and register or drop scrape hooks.
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

    /// Keeps `reconcile_host_oldest_unhandled_change_seconds{controller}` equal to what `oldest`
    /// returns, read before every scrape (see [`crate::controller::Unhandled`]).
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn report_oldest_unhandled_on_scrape(
        &self,
        controller: &str,
        oldest: impl Fn() -> std::time::Duration + Send + Sync + 'static,
    ) -> ScrapeHook {
        let gauge = self
            .inner
            .families
            .oldest_unhandled
            .get_or_create_owned(&label("controller", controller));
        self.on_scrape(move || {
            gauge.set(oldest().as_secs_f64());
        })
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
