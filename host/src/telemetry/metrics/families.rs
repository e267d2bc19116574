//! Every metric family the host exports, registered under its exposed name, with the buckets
//! and label sets they use.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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
pub(super) type OneLabel = [(&'static str, String); 1];
/// `controller="<name>",result="<outcome>"`.
type ResultLabels = [(&'static str, String); 2];
/// Three labels, e.g. `plugin`, `module`, `result`.
pub(super) type ThreeLabels = [(&'static str, String); 3];
type FloatGauge = Gauge<f64, AtomicU64>;
pub(super) type FloatCounter = Counter<f64, AtomicU64>;
type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

fn workqueue_histogram() -> Histogram {
    Histogram::new(WORKQUEUE_BUCKETS)
}

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

pub(super) fn label(key: &'static str, value: &str) -> OneLabel {
    [(key, value.to_owned())]
}

/// Every metric family the host exports. Families share their storage with the registry, so
/// a handle resolved from one is what the next scrape encodes.
pub(super) struct Families {
    pub(super) depth: Family<OneLabel, Gauge>,
    pub(super) adds: Family<OneLabel, Counter>,
    pub(super) queue_duration: HistogramFamily<OneLabel>,
    pub(super) work_duration: HistogramFamily<OneLabel>,
    pub(super) unfinished_work: Family<OneLabel, FloatGauge>,
    pub(super) longest_running: Family<OneLabel, FloatGauge>,
    pub(super) oldest_unhandled: Family<OneLabel, FloatGauge>,
    pub(super) retries: Family<OneLabel, Counter>,
    pub(super) reconcile_total: Family<ResultLabels, Counter>,
    pub(super) reconcile_errors: Family<OneLabel, Counter>,
    pub(super) reconcile_time: HistogramFamily<OneLabel>,
    pub(super) active_workers: Family<OneLabel, Gauge>,
    pub(super) max_concurrent: Family<OneLabel, Gauge>,
    pub(super) leader: Family<OneLabel, Gauge>,
    pub(super) plugin_failures: Family<ResultLabels, Counter>,
    pub(super) plugin_reloads: Family<ResultLabels, Counter>,
    pub(super) plugin_fetch_failures: Family<ResultLabels, Counter>,
    pub(super) plugin_log_dropped_lines: Family<OneLabel, Counter>,
    pub(super) plugin_log_dropped_bytes: Family<OneLabel, Counter>,
    pub(super) plugin_hot_requeues: Family<OneLabel, Counter>,
    pub(super) plugin_guest_seconds: Family<OneLabel, FloatCounter>,
    pub(super) plugin_instantiate_seconds: Family<OneLabel, FloatCounter>,
    pub(super) plugin_import_seconds: Family<ResultLabels, FloatCounter>,
    pub(super) plugin_import_calls: Family<ResultLabels, Counter>,
    pub(super) plugin_api_wait_seconds: Family<OneLabel, FloatCounter>,
    pub(super) shard_members: Family<OneLabel, Gauge>,
    pub(super) shard_keys_owned: Family<OneLabel, Gauge>,
    pub(super) shard_handovers: Family<OneLabel, Counter>,
    pub(super) fenced_writes: Family<OneLabel, Counter>,
    pub(super) module_reconciles: Family<ThreeLabels, Counter>,
    pub(super) module_time: HistogramFamily<ResultLabels>,
    pub(super) shadow_runs: Family<ResultLabels, Counter>,
    pub(super) shadow_diffs: Family<ThreeLabels, Counter>,
    pub(super) plugin_modules: Family<OneLabel, Gauge>,
    pub(super) tenant_instance_wait_seconds: Family<OneLabel, FloatCounter>,
    pub(super) tenant_memory_bytes: Family<OneLabel, Gauge>,
    pub(super) tenant_memory_refusals: Family<OneLabel, Counter>,
}

impl Families {
    /// The families, registered in `registry` under their exposed names. Counters are
    /// registered without `_total`: the encoder appends it.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(workqueue_histogram),
            work_duration: Family::new_with_constructor(workqueue_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            oldest_unhandled: Family::default(),
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
            tenant_instance_wait_seconds: Family::default(),
            tenant_memory_bytes: Family::default(),
            tenant_memory_refusals: Family::default(),
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
            "reconcile_host_oldest_unhandled_change_seconds",
            "Age of the oldest change of a key this replica is responsible for that no reconcile \
             has started on since, by controller; grows while a key is lost between replicas",
            f.oldest_unhandled.clone(),
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
        registry.register(
            "reconcile_host_tenant_instance_wait_seconds",
            "Wall time guest calls waited for their tenant's `instances` ceiling (tenants: in the \
             host's configuration), per tenant namespace",
            f.tenant_instance_wait_seconds.clone(),
        );
        registry.register(
            "reconcile_host_tenant_memory_bytes",
            "Linear memory held by a tenant's instances, kept ones included, per tenant namespace",
            f.tenant_memory_bytes.clone(),
        );
        registry.register(
            "reconcile_host_tenant_memory_refusals",
            "Memory growths of guests refused at their tenant's `memory` ceiling (the call fails \
             as out of memory), per tenant namespace",
            f.tenant_memory_refusals.clone(),
        );
        families
    }
}
