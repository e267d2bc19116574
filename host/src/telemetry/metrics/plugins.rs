//! The series of each plugin: failed guest calls, dropped guest output, hot requeues, where
//! its calls spend their time, module fetches and reloads, each module's reconciles, shadow runs
//! and the modules loaded.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use super::families::{FloatCounter, ThreeLabels, label};
use super::{Metrics, ScrapeHook};
use crate::wasm::cost::{CallCost, IMPORT_COUNT, Import};

impl Metrics {
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
    /// 12 hex digits of the digest; every result starts at zero. The series stay while a
    /// handle for that plugin and module is held (a module rolled back to keeps its counts) and
    /// leave `/metrics` when the last one is dropped, so replaced modules do not pile up.
    #[must_use]
    pub fn plugin_module(
        &self,
        plugin: &str,
        module: &str,
        results: &[&'static str],
    ) -> ModuleSeries {
        let f = &self.inner.families;
        let short: String = module.chars().take(12).collect();
        *self
            .inner
            .module_users
            .lock()
            .entry((plugin.to_owned(), short.clone()))
            .or_default() += 1;
        let user = Arc::new(ModuleUser {
            metrics: self.clone(),
            plugin: plugin.to_owned(),
            module: short.clone(),
            results: results.to_vec(),
        });
        ModuleSeries {
            _user: user,
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
    _user: Arc<ModuleUser>,
}

/// One holder of a module's series: the last one dropped removes them from the families.
#[derive(Debug)]
struct ModuleUser {
    metrics: Metrics,
    plugin: String,
    module: String,
    results: Vec<&'static str>,
}

impl Drop for ModuleUser {
    fn drop(&mut self) {
        let inner = &self.metrics.inner;
        let mut users = inner.module_users.lock();
        let key = (self.plugin.clone(), self.module.clone());
        let Some(count) = users.get_mut(&key) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        users.remove(&key);
        let f = &inner.families;
        for result in &self.results {
            f.module_reconciles.remove(&[
                ("plugin", self.plugin.clone()),
                ("module", self.module.clone()),
                ("result", (*result).to_owned()),
            ]);
        }
        f.module_time.remove(&[
            ("plugin", self.plugin.clone()),
            ("module", self.module.clone()),
        ]);
    }
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
