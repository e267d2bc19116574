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
use tokio::sync::watch;

use super::hooks::{ControllerMetrics, LeaderStatus, WorkqueueMetrics};
use crate::controller::Outcome;
use crate::election::Leadership;
use crate::queue::{Key, Queue};
use crate::wasm::cost::{CallCost, IMPORT_COUNT, Import};

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
/// Three labels, e.g. `plugin`, `module`, `result`.
type ThreeLabels = [(&'static str, String); 3];
type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;
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
    plugin_failures: Family<ResultLabels, Counter>,
    plugin_reloads: Family<ResultLabels, Counter>,
    plugin_fetch_failures: Family<ResultLabels, Counter>,
    plugin_log_dropped_lines: Family<OneLabel, Counter>,
    plugin_log_dropped_bytes: Family<OneLabel, Counter>,
    plugin_hot_requeues: Family<OneLabel, Counter>,
    plugin_guest_seconds: Family<OneLabel, FloatCounter>,
    plugin_instantiate_seconds: Family<OneLabel, FloatCounter>,
    plugin_import_seconds: Family<ResultLabels, FloatCounter>,
    plugin_import_calls: Family<ResultLabels, Counter>,
    plugin_api_wait_seconds: Family<OneLabel, FloatCounter>,
    shard_members: Family<OneLabel, Gauge>,
    shard_keys_owned: Family<OneLabel, Gauge>,
    shard_handovers: Family<OneLabel, Counter>,
    fenced_writes: Family<OneLabel, Counter>,
    module_reconciles: Family<ThreeLabels, Counter>,
    module_time: HistogramFamily<ResultLabels>,
    shadow_runs: Family<ResultLabels, Counter>,
    shadow_diffs: Family<ThreeLabels, Counter>,
    plugin_modules: Family<OneLabel, Gauge>,
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
            plugin_failures: Family::default(),
            plugin_reloads: Family::default(),
            plugin_fetch_failures: Family::default(),
            plugin_log_dropped_lines: Family::default(),
            plugin_log_dropped_bytes: Family::default(),
            plugin_hot_requeues: Family::default(),
            plugin_guest_seconds: Family::default(),
            plugin_instantiate_seconds: Family::default(),
            plugin_import_seconds: Family::default(),
            plugin_import_calls: Family::default(),
            plugin_api_wait_seconds: Family::default(),
            shard_members: Family::default(),
            shard_keys_owned: Family::default(),
            shard_handovers: Family::default(),
            fenced_writes: Family::default(),
            module_reconciles: Family::default(),
            module_time: Family::new_with_constructor(reconcile_time_histogram),
            shadow_runs: Family::default(),
            shadow_diffs: Family::default(),
            plugin_modules: Family::default(),
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
            "reconcile_host_shard_members",
            "Sharded mode: live members of the ring, as this replica last saw them settle",
            f.shard_members.clone(),
        );
        registry.register(
            "reconcile_host_shard_keys_owned",
            "Sharded mode: cached keys of each plugin this replica dispatches",
            f.shard_keys_owned.clone(),
        );
        registry.register(
            "reconcile_host_shard_handovers",
            "Sharded mode: rings this replica saw settle (each moves keys between replicas)",
            f.shard_handovers.clone(),
        );
        registry.register(
            "reconcile_host_fenced_writes",
            "Writes refused because this replica's lease (leader or membership) had lapsed by \
             its own clock",
            f.fenced_writes.clone(),
        );
        registry.register(
            "reconcile_host_plugin_module_reconciles",
            "Reconciles by plugin, module (the first 12 hex digits of its digest) and result \
             (success or the failure reason), to compare a canary with the stable module",
            f.module_reconciles.clone(),
        );
        registry.register(
            "reconcile_host_plugin_module_reconcile_time_seconds",
            "Length of guest calls by plugin and module (the first 12 hex digits of its digest)",
            f.module_time.clone(),
        );
        registry.register(
            "reconcile_host_plugin_shadow_runs",
            "Shadow runs by plugin and outcome: same (no difference), different, failed (the \
             shadow trapped, overran a limit or made too many writes), skipped (sampled out or \
             every shadow slot busy)",
            f.shadow_runs.clone(),
        );
        registry.register(
            "reconcile_host_plugin_shadow_diffs",
            "Differences between a plugin's writes and its shadow's, by plugin, kind and verb \
             (verb `action` for a differing answer)",
            f.shadow_diffs.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease",
            f.leader.clone(),
        );
        registry.register(
            "reconcile_host_plugin_failures",
            "Failed guest calls per plugin, by reason: error (the guest returned an error), trap, \
             deadline, memory, instantiate",
            f.plugin_failures.clone(),
        );
        registry.register(
            "plugin_reloads",
            "Plugin loads and reloads (new, changed or removed module or manifest), by result: \
             success, or failure (the previous version keeps serving)",
            f.plugin_reloads.clone(),
        );
        registry.register(
            "reconcile_host_plugin_fetch_failures",
            "Failed fetches of a ReconcilerPlugin's module, by reason (RegistryUnreachable, \
             PullFailed, ConfigMapUnreadable, …); the previous module keeps serving",
            f.plugin_fetch_failures.clone(),
        );
        registry.register(
            "reconcile_host_plugin_log_dropped_lines",
            "Lines of guest output (stdout, stderr, the log import) dropped per plugin: over the \
             plugin's line rate, or past a call's byte budget",
            f.plugin_log_dropped_lines.clone(),
        );
        registry.register(
            "reconcile_host_plugin_log_dropped_bytes",
            "Bytes of guest output dropped per plugin",
            f.plugin_log_dropped_bytes.clone(),
        );
        registry.register(
            "reconcile_host_plugin_hot_requeues",
            "requeue-after answers shorter than the plugin's minimum, raised to it",
            f.plugin_hot_requeues.clone(),
        );
        registry.register(
            "reconcile_host_plugin_modules",
            "Plugin modules in use, by state: loaded (compiled code mapped) or unloaded (idle, \
             mapped again from the module cache by the next call)",
            f.plugin_modules.clone(),
        );
        registry.register(
            "reconcile_host_plugin_guest_seconds",
            "Wall time guest calls spent running guest code (WASI calls included), per plugin",
            f.plugin_guest_seconds.clone(),
        );
        registry.register(
            "reconcile_host_plugin_instantiate_seconds",
            "Wall time spent creating and starting guest instances, per plugin (zero with \
             instance reuse, between replacements)",
            f.plugin_instantiate_seconds.clone(),
        );
        registry.register(
            "reconcile_host_plugin_import_seconds",
            "Wall time host imports spent on host work (decoding, validation, grant checks, \
             cache reads, encoding), API waits excluded, per plugin and import",
            f.plugin_import_seconds.clone(),
        );
        registry.register(
            "reconcile_host_plugin_import_calls",
            "Calls of host imports, per plugin and import",
            f.plugin_import_calls.clone(),
        );
        registry.register(
            "reconcile_host_plugin_api_wait_seconds",
            "Wall time host imports spent waiting on the API server (client and events calls: \
             the plugin's rate limit, the request and its answer), per plugin",
            f.plugin_api_wait_seconds.clone(),
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

    /// The counters of failed guest calls of plugin `name`, by reason; every reason starts at
    /// zero so rates work from the first scrape.
    #[must_use]
    pub fn plugin_failures(&self, name: &str, reasons: &[&'static str]) -> PluginFailures {
        let f = &self.inner.families;
        PluginFailures {
            counters: reasons
                .iter()
                .map(|reason| {
                    let counter = f.plugin_failures.get_or_create_owned(&[
                        ("plugin", name.to_owned()),
                        ("reason", (*reason).to_owned()),
                    ]);
                    (*reason, counter)
                })
                .collect(),
        }
    }

    /// The counters of guest output plugin `name` dropped
    /// (`reconcile_host_plugin_log_dropped_{lines,bytes}_total{plugin}`), starting at zero.
    #[must_use]
    pub fn plugin_log_dropped(&self, name: &str) -> crate::wasm::guest_log::DroppedCounters {
        let f = &self.inner.families;
        let plugin = label("plugin", name);
        crate::wasm::guest_log::DroppedCounters {
            lines: f.plugin_log_dropped_lines.get_or_create_owned(&plugin),
            bytes: f.plugin_log_dropped_bytes.get_or_create_owned(&plugin),
        }
    }

    /// `reconcile_host_plugin_hot_requeues_total{plugin}`: counts requeue-after answers of
    /// plugin `name` raised to its minimum; starts at zero.
    #[must_use]
    pub fn plugin_hot_requeues(&self, name: &str) -> Counter {
        self.inner
            .families
            .plugin_hot_requeues
            .get_or_create_owned(&label("plugin", name))
    }

    /// Where the guest calls of plugin `name` spend their time:
    /// `reconcile_host_plugin_{guest,instantiate,api_wait}_seconds_total{plugin}` and
    /// `reconcile_host_plugin_import_{seconds,calls}_total{plugin,import}`, every series
    /// starting at zero.
    #[must_use]
    pub fn plugin_costs(&self, name: &str) -> PluginCosts {
        let f = &self.inner.families;
        let plugin = label("plugin", name);
        let per_import = |import: Import| {
            let labels = [
                ("plugin", name.to_owned()),
                ("import", import.label().to_owned()),
            ];
            (
                f.plugin_import_seconds.get_or_create_owned(&labels),
                f.plugin_import_calls.get_or_create_owned(&labels),
            )
        };
        PluginCosts {
            guest: f.plugin_guest_seconds.get_or_create_owned(&plugin),
            instantiate: f.plugin_instantiate_seconds.get_or_create_owned(&plugin),
            api_wait: f.plugin_api_wait_seconds.get_or_create_owned(&plugin),
            imports: Import::ALL.map(per_import),
        }
    }

    /// `reconcile_host_plugin_fetch_failures_total{plugin="<name>",reason}`: counts one failed
    /// fetch of a ReconcilerPlugin's module.
    pub fn plugin_fetch_failed(&self, plugin: &str, reason: &str) {
        self.inner
            .families
            .plugin_fetch_failures
            .get_or_create(&[("plugin", plugin.to_owned()), ("reason", reason.to_owned())])
            .inc();
    }

    /// `plugin_reloads_total{plugin="<name>",result}`: counts one (re)load of `plugin` with
    /// `success` true or false.
    pub fn plugin_reloaded(&self, plugin: &str, success: bool) {
        self.inner
            .families
            .plugin_reloads
            .get_or_create(&[
                ("plugin", plugin.to_owned()),
                (
                    "result",
                    if success { "success" } else { "failure" }.to_owned(),
                ),
            ])
            .inc();
    }

    /// The series of module `module` (a digest) of plugin `plugin`, labelled with the first
    /// 12 hex digits of the digest; every result starts at zero.
    #[must_use]
    pub fn plugin_module(
        &self,
        plugin: &str,
        module: &str,
        results: &[&'static str],
    ) -> ModuleSeries {
        let f = &self.inner.families;
        let short: String = module.chars().take(12).collect();
        ModuleSeries {
            results: results
                .iter()
                .map(|result| {
                    let counter = f.module_reconciles.get_or_create_owned(&[
                        ("plugin", plugin.to_owned()),
                        ("module", short.clone()),
                        ("result", (*result).to_owned()),
                    ]);
                    (*result, counter)
                })
                .collect(),
            time: f
                .module_time
                .get_or_create_owned(&[("plugin", plugin.to_owned()), ("module", short)]),
        }
    }

    /// The shadow series of plugin `plugin`; every run outcome starts at zero.
    #[must_use]
    pub fn plugin_shadow(&self, plugin: &str) -> ShadowMetrics {
        let f = &self.inner.families;
        let runs = SHADOW_OUTCOMES
            .iter()
            .map(|outcome| {
                let counter = f.shadow_runs.get_or_create_owned(&[
                    ("plugin", plugin.to_owned()),
                    ("outcome", (*outcome).to_owned()),
                ]);
                (*outcome, counter)
            })
            .collect();
        ShadowMetrics {
            plugin: plugin.to_owned(),
            runs,
            diffs: f.shadow_diffs.clone(),
        }
    }

    /// Sharded mode's series for the ring `ring`.
    #[must_use]
    pub fn sharding(&self, ring: &str) -> ShardMetrics {
        let f = &self.inner.families;
        ShardMetrics {
            members: f.shard_members.get_or_create_owned(&label("ring", ring)),
            handovers: f.shard_handovers.get_or_create_owned(&label("ring", ring)),
            keys_owned: f.shard_keys_owned.clone(),
        }
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

    /// Keeps `reconcile_host_plugin_modules{state="loaded"|"unloaded"}` equal to what `counts`
    /// returns (loaded, unloaded), read before every scrape. Keep the hook while the modules
    /// are used.
    #[must_use = "dropping the hook unregisters it at once"]
    pub fn report_plugin_modules_on_scrape(
        &self,
        counts: impl Fn() -> (usize, usize) + Send + Sync + 'static,
    ) -> ScrapeHook {
        let family = &self.inner.families.plugin_modules;
        let loaded = family.get_or_create_owned(&label("state", "loaded"));
        let unloaded = family.get_or_create_owned(&label("state", "unloaded"));
        self.on_scrape(move || {
            let (now_loaded, now_unloaded) = counts();
            loaded.set(i64::try_from(now_loaded).unwrap_or(i64::MAX));
            unloaded.set(i64::try_from(now_unloaded).unwrap_or(i64::MAX));
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

/// `reconcile_host_plugin_failures_total{plugin, reason}` of one plugin, from
/// [`Metrics::plugin_failures`].
#[derive(Clone, Debug)]
pub struct PluginFailures {
    counters: Vec<(&'static str, Counter)>,
}

impl PluginFailures {
    /// Counts one failure with `reason` (one of the reasons the handle was made with).
    pub fn failed(&self, reason: &str) {
        if let Some((_, counter)) = self.counters.iter().find(|(r, _)| *r == reason) {
            counter.inc();
        }
    }
}

/// Where one plugin's guest calls spend their time, from [`Metrics::plugin_costs`].
#[derive(Clone, Debug)]
pub struct PluginCosts {
    guest: FloatCounter,
    instantiate: FloatCounter,
    api_wait: FloatCounter,
    /// Seconds and calls, by [`Import`] index.
    imports: [(FloatCounter, Counter); IMPORT_COUNT],
}

impl PluginCosts {
    /// Adds one call's cost.
    pub fn add(&self, cost: &CallCost) {
        self.guest.inc_by(cost.guest.as_secs_f64());
        if !cost.instantiate.is_zero() {
            self.instantiate.inc_by(cost.instantiate.as_secs_f64());
        }
        if !cost.api_wait.is_zero() {
            self.api_wait.inc_by(cost.api_wait.as_secs_f64());
        }
        for ((seconds, calls), (host, count)) in
            self.imports.iter().zip(cost.host.iter().zip(cost.calls))
        {
            if count > 0 {
                seconds.inc_by(host.as_secs_f64());
                calls.inc_by(u64::from(count));
            }
        }
    }
}

/// The outcomes of a shadow run (`reconcile_host_plugin_shadow_runs_total{outcome}`).
pub const SHADOW_OUTCOMES: [&str; 4] = ["same", "different", "failed", "skipped"];

/// One module's series, from [`Metrics::plugin_module`].
#[derive(Clone, Debug)]
pub struct ModuleSeries {
    results: Vec<(&'static str, Counter)>,
    time: Histogram,
}

impl ModuleSeries {
    /// Counts one call with `result` that took `seconds`.
    pub fn observe(&self, result: &str, seconds: f64) {
        if let Some((_, counter)) = self.results.iter().find(|(r, _)| *r == result) {
            counter.inc();
        }
        self.time.observe(seconds);
    }
}

/// A plugin's shadow series, from [`Metrics::plugin_shadow`].
#[derive(Clone, Debug)]
pub struct ShadowMetrics {
    plugin: String,
    runs: Vec<(&'static str, Counter)>,
    diffs: Family<ThreeLabels, Counter>,
}

impl ShadowMetrics {
    /// Counts one run with `outcome` (one of [`SHADOW_OUTCOMES`]).
    pub fn ran(&self, outcome: &str) {
        if let Some((_, counter)) = self.runs.iter().find(|(o, _)| *o == outcome) {
            counter.inc();
        }
    }

    /// Counts one difference about an object of `kind` made by `verb`.
    pub fn differs(&self, kind: &str, verb: &str) {
        self.diffs
            .get_or_create(&[
                ("plugin", self.plugin.clone()),
                ("kind", kind.to_owned()),
                ("verb", verb.to_owned()),
            ])
            .inc();
    }
}

/// Sharded mode's series for one ring.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    members: Gauge,
    handovers: Counter,
    keys_owned: Family<OneLabel, Gauge>,
}

impl ShardMetrics {
    /// A ring of `members` settled.
    pub fn settled(&self, members: usize) {
        self.members.set(i64::try_from(members).unwrap_or(i64::MAX));
        self.handovers.inc();
    }

    /// This replica dispatches `keys` cached keys of `plugin`.
    pub fn keys_owned(&self, plugin: &str, keys: usize) {
        self.keys_owned
            .get_or_create(&label("plugin", plugin))
            .set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// `plugin` is gone: its series with it.
    pub fn forget(&self, plugin: &str) {
        self.keys_owned.remove(&label("plugin", plugin));
    }
}
