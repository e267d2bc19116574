//! A plugin as the controller sees it: a [`Reconciler`] whose every call goes into the plugin's
//! current module, on a fresh instance (or a reused one, if the manifest opts in).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::RwLock;

use super::history::{Ended, History};
use super::ran::Ran;
use crate::controller::{Action, Reconciler, Request};
use crate::informer::CachedObject;
use crate::telemetry::{Metrics, ModuleSeries, PluginCosts, PluginFailures};
use crate::upgrade::recordings::PluginRecordings;
use crate::upgrade::shadow::{Answer, OwnedRequest, ShadowRunner};
use crate::wasm::bindings::{self, Kind, ObjectRef};
use crate::wasm::context::PluginContext;
use crate::wasm::invoke::{self, GuestFailure, InstancePool, RequestView, TargetView};
use crate::wasm::module::Module;
use crate::wasm::record::{self, RecordedOutcome, Recording, Session};
use label_selector::LabelSelector;

/// Every reason a guest call can fail, as labelled in metrics.
pub const FAILURE_REASONS: [&str; 5] = ["error", "trap", "deadline", "memory", "instantiate"];

/// A failed reconcile of a plugin: which plugin, and how its guest failed.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}` (module {digest:.12})")]
pub struct PluginError {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// The digest of the module that ran.
    pub digest: String,
    /// What happened.
    #[source]
    pub failure: GuestFailure,
}

/// The module a plugin currently runs, with its reuse pool.
#[derive(Debug)]
pub struct Loaded {
    /// The module.
    pub module: Arc<Module>,
    /// Idle instances, when the manifest asks for instance reuse.
    pub pool: Option<Arc<InstancePool>>,
    /// The module's reconcile counts and times, when metrics are kept.
    series: Option<ModuleSeries>,
}

/// The results counted per module: `success` and every [`FAILURE_REASONS`] entry.
const MODULE_RESULTS: [&str; 6] = [
    "success",
    "error",
    "trap",
    "deadline",
    "memory",
    "instantiate",
];

/// Consecutive traps of a freshly swapped-in module, before its first good call, that roll it
/// back to the module it replaced.
pub const PROBATION_TRAPS: u32 = 3;

/// Told when a swapped-in module is rolled back: the rejected module's digest and why.
pub type RollbackHook = Box<dyn Fn(&str, &str) + Send + Sync>;

/// A module on probation and the one to return to.
struct Probation {
    candidate: Arc<Loaded>,
    previous: Arc<Loaded>,
    traps: u32,
}

/// A plugin: its context, its current module (swappable; calls in flight keep the module they
/// started with) and its failure counters.
///
/// # Guarantees
/// A module swapped in is on probation until one call of it completes (with an action or a
/// guest error): if its first [`PROBATION_TRAPS`] calls all trap (or cannot instantiate), the
/// plugin returns to the module it replaced and the rollback hook is told.
pub struct Plugin {
    context: Arc<PluginContext>,
    metrics: Option<Metrics>,
    costs: Option<PluginCosts>,
    current: RwLock<Arc<Loaded>>,
    canary: Option<(LabelSelector, Arc<Loaded>)>,
    shadow: Option<Arc<ShadowRunner>>,
    recordings: Option<Arc<PluginRecordings>>,
    history: Option<Arc<History>>,
    probation: parking_lot::Mutex<Option<Probation>>,
    rejected: parking_lot::Mutex<Option<String>>,
    failures: Option<PluginFailures>,
    on_rollback: Option<RollbackHook>,
    health: super::health::Health,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.context.name)
            .field("module", &self.current.read().module.digest())
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// A plugin running `module` with `context`.
    #[must_use]
    pub fn new(
        context: Arc<PluginContext>,
        module: Arc<Module>,
        failures: Option<PluginFailures>,
    ) -> Self {
        let loaded = Self::loaded(&context, None, module);
        Self {
            context,
            metrics: None,
            costs: None,
            current: RwLock::new(Arc::new(loaded)),
            canary: None,
            shadow: None,
            recordings: None,
            history: None,
            probation: parking_lot::Mutex::new(None),
            rejected: parking_lot::Mutex::new(None),
            failures,
            on_rollback: None,
            health: super::health::Health::default(),
        }
    }

    /// Calls `hook` whenever a swapped-in module is rolled back.
    #[must_use]
    pub fn with_rollback_hook(mut self, hook: RollbackHook) -> Self {
        self.on_rollback = Some(hook);
        self
    }

    /// Counts every call per module in `metrics`
    /// (`reconcile_host_plugin_module_reconciles_total` and its time histogram), and where the
    /// calls' time goes ([`Metrics::plugin_costs`]).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        let module = Arc::clone(&self.current.read().module);
        *self.current.get_mut() = Arc::new(Self::loaded(&self.context, Some(&metrics), module));
        self.costs = Some(metrics.plugin_costs(&self.context.name));
        self.metrics = Some(metrics);
        self
    }

    /// Sends the keys whose object matches `selector` to `module`.
    #[must_use]
    pub fn with_canary(mut self, selector: LabelSelector, module: Arc<Module>) -> Self {
        let loaded = Self::loaded(&self.context, self.metrics.as_ref(), module);
        self.canary = Some((selector, Arc::new(loaded)));
        self
    }

    /// Runs `shadow` after sampled reconciles.
    #[must_use]
    pub fn with_shadow(mut self, shadow: ShadowRunner) -> Self {
        self.shadow = Some(Arc::new(shadow));
        self
    }

    /// Records calls into `recordings` (failures, requested keys).
    #[must_use]
    pub fn with_recordings(mut self, recordings: Arc<PluginRecordings>) -> Self {
        self.recordings = Some(recordings);
        self
    }

    /// Keeps each reconcile's causes, outcome and API calls in `history`.
    #[must_use]
    pub fn with_history(mut self, history: Arc<History>) -> Self {
        self.history = Some(history);
        self
    }

    /// The plugin's recordings, when it records.
    #[must_use]
    pub fn recordings(&self) -> Option<&Arc<PluginRecordings>> {
        self.recordings.as_ref()
    }

    /// The digests of the canary's and the shadow's modules, when there are.
    #[must_use]
    pub fn side_modules(&self) -> (Option<&str>, Option<&str>) {
        (
            self.canary
                .as_ref()
                .map(|(_, loaded)| loaded.module.digest()),
            self.shadow.as_ref().map(|shadow| shadow.module().digest()),
        )
    }

    fn loaded(context: &PluginContext, metrics: Option<&Metrics>, module: Arc<Module>) -> Loaded {
        Loaded {
            series: metrics.map(|metrics| {
                metrics.plugin_module(&context.name, module.digest(), &MODULE_RESULTS)
            }),
            pool: context.manifest.instance_reuse.map(|policy| {
                let pool = Arc::new(InstancePool::new(policy));
                module.keep_pool(&pool);
                pool
            }),
            module,
        }
    }

    /// The plugin's context.
    #[must_use]
    pub fn context(&self) -> &Arc<PluginContext> {
        &self.context
    }

    /// The module new calls go to.
    #[must_use]
    pub fn module(&self) -> Arc<Module> {
        Arc::clone(&self.current.read().module)
    }

    /// Makes `module` serve every call that starts from now on; calls in flight finish on the
    /// module they started with. The new module is on probation (see the type's Guarantees).
    pub fn swap(&self, module: Arc<Module>) {
        let loaded = Arc::new(Self::loaded(&self.context, self.metrics.as_ref(), module));
        let mut current = self.current.write();
        let replaced = std::mem::replace(&mut *current, Arc::clone(&loaded));
        self.health.reset();
        // Bytes rolled back before are tried again if they come back after another module.
        *self.rejected.lock() = None;
        let mut probation = self.probation.lock();
        // A module replaced while still on probation was never proven: keep the last good one.
        let previous = probation.take().map_or(replaced, |trial| trial.previous);
        *probation = Some(Probation {
            candidate: loaded,
            previous,
            traps: 0,
        });
    }

    /// Whether its reconciles keep failing (see [`super::health`]).
    #[must_use]
    pub fn health(&self) -> &super::health::Health {
        &self.health
    }

    /// Forgets the module rolled back, if any; whether there was one.
    pub fn forget_rejected(&self) -> bool {
        self.rejected.lock().take().is_some()
    }

    /// The digest of the last module rolled back, if any, while no other module has been
    /// swapped in since: the same bytes are not swapped in again until then.
    #[must_use]
    pub fn rejected(&self) -> Option<String> {
        self.rejected.lock().clone()
    }

    /// Settles the probation of `ran` after a call: a good call ends it, the
    /// [`PROBATION_TRAPS`]th trap rolls back.
    fn judge(&self, ran: &Arc<Loaded>, result: &Result<bindings::Action, GuestFailure>) {
        let mut probation = self.probation.lock();
        let Some(trial) = probation.as_mut() else {
            return;
        };
        if !Arc::ptr_eq(&trial.candidate, ran) {
            return;
        }
        match result {
            Ok(_) | Err(GuestFailure::Returned(_)) => *probation = None,
            Err(GuestFailure::Trapped(_) | GuestFailure::Instantiate(_)) => {
                trial.traps += 1;
                if trial.traps >= PROBATION_TRAPS {
                    let trial = probation.take().expect("on probation");
                    *self.current.write() = Arc::clone(&trial.previous);
                    let digest = trial.candidate.module.digest().to_owned();
                    let reason = format!(
                        "its first {PROBATION_TRAPS} calls trapped; back to module {:.12}",
                        trial.previous.module.digest()
                    );
                    drop(probation);
                    *self.rejected.lock() = Some(digest.clone());
                    tracing::error!(plugin = %self.context.name, module = %digest, "{reason}");
                    if let Some(hook) = &self.on_rollback {
                        hook(&digest, &reason);
                    }
                }
            }
            Err(
                GuestFailure::Deadline(_) | GuestFailure::Memory(_) | GuestFailure::TenantMemory(_),
            ) => {}
        }
    }

    /// Calls the guest's `reconcile` with `request` (the `for` kind's key and object).
    ///
    /// # Errors
    /// [`PluginError`] when the guest fails in any way.
    pub async fn call(
        &self,
        target: ObjectRef,
        object: Option<String>,
        requeues: u32,
    ) -> Result<bindings::Action, PluginError> {
        self.call_view(
            RequestView::of(&target, object.as_deref(), requeues),
            false,
            &mut Ran::default(),
        )
        .await
    }

    /// [`call`](Self::call) with a request borrowing its strings; to the canary's module if
    /// `canary` and the plugin has one.
    /// What ran is told in `ran`.
    async fn call_view(
        &self,
        request: RequestView<'_>,
        canary: bool,
        ran: &mut Ran,
    ) -> Result<bindings::Action, PluginError> {
        let loaded = match &self.canary {
            Some((_, loaded)) if canary => Arc::clone(loaded),
            _ => Arc::clone(&self.current.read()),
        };
        let shadowed = self
            .shadow
            .as_ref()
            .and_then(|shadow| Some((shadow, shadow.admit()?)));
        let tape = shadowed
            .as_ref()
            .map(|(_, admitted)| Arc::clone(&admitted.tape));
        let recordings = self.recordings.as_ref().filter(|r| r.enabled());
        let requested = recordings
            .is_some_and(|r| r.take_request_for(request.target.namespace, request.target.name));
        let mut session = invoke::CallSession {
            session: recordings.map(|r| Session::Record(Recording::new(r.redact()))),
            metered: self.costs.is_some(),
            trace: ran.trace.clone(),
            ..invoke::CallSession::default()
        };
        let started_at = std::time::SystemTime::now();
        let started = std::time::Instant::now();
        let result = invoke::reconcile(
            &loaded.module,
            &self.context,
            loaded.pool.as_deref(),
            request,
            tape,
            &mut session,
        )
        .await;
        if let Some(recordings) = recordings {
            let outcome = RecordedOutcome::of(&result);
            if recordings.wants(&outcome, requested) {
                let recording = match session.session.take() {
                    Some(Session::Record(recording)) => recording,
                    // The instance never started: nothing was read.
                    _ => Recording::new(recordings.redact()),
                };
                let manifest = &self.context.manifest;
                let path = match (&manifest.canary, canary) {
                    (Some(canary_spec), true) if self.canary.is_some() => &canary_spec.module,
                    _ => &manifest.module,
                };
                let bundle = record::bundle(
                    &self.context,
                    &loaded.module,
                    path,
                    &request,
                    &session,
                    recording,
                    started_at,
                    outcome,
                );
                recordings.keep(bundle, requested);
            }
        }
        if let Some(costs) = &self.costs {
            costs.add(&session.cost);
        }
        if let Some(series) = &loaded.series {
            let label = result
                .as_ref()
                .map_or_else(GuestFailure::reason, |_| "success");
            series.observe(label, started.elapsed().as_secs_f64());
        }
        if let Some((shadow, admitted)) = shadowed {
            let owned = OwnedRequest {
                target: request.target_owned(),
                object: request.object.map(str::to_owned),
                requeues: request.requeues,
            };
            tokio::spawn(Arc::clone(shadow).run(admitted, owned, Answer::of(&result)));
        }
        self.judge(&loaded, &result);
        ran.calls = std::mem::take(&mut session.api_calls);
        ran.module = Some(Arc::clone(&loaded.module));
        result.map_err(|failure| {
            if let Some(failures) = &self.failures {
                failures.failed(failure.reason());
            }
            PluginError {
                plugin: Arc::clone(&self.context.name),
                digest: loaded.module.digest().to_owned(),
                failure,
            }
        })
    }
}

/// How often, at most, a plugin is warned about requeue-after answers below its minimum.
pub const HOT_REQUEUE_WARN_EVERY: Duration = Duration::from_secs(10);

/// The controller's view of a plugin.
#[derive(Clone, Debug)]
pub struct PluginReconciler {
    plugin: Arc<Plugin>,
    kind: Kind,
    last_hot_warning: Arc<parking_lot::Mutex<Option<std::time::Instant>>>,
}

impl PluginReconciler {
    /// Reconciles through `plugin`.
    #[must_use]
    pub fn new(plugin: Arc<Plugin>) -> Self {
        let for_kind = &plugin.context.manifest.for_kind;
        let kind = Kind {
            api_version: for_kind.api_version.clone(),
            kind: for_kind.kind.clone(),
        };
        Self {
            plugin,
            kind,
            last_hot_warning: Arc::default(),
        }
    }

    /// Warns (at most every [`HOT_REQUEUE_WARN_EVERY`]) that a key asked to be requeued sooner
    /// than the plugin's minimum.
    fn warn_hot_requeue(&self, key: &crate::controller::ObjectKey, asked: Duration, min: Duration) {
        let now = std::time::Instant::now();
        {
            let mut last = self.last_hot_warning.lock();
            if last.is_some_and(|at| now.duration_since(at) < HOT_REQUEUE_WARN_EVERY) {
                return;
            }
            *last = Some(now);
        }
        tracing::warn!(plugin = %self.plugin.context.name, %key, ?asked, minimum = ?min,
            "requeue-after below the plugin's minimum, raised to it: a key that requeues itself \
             this fast is a hot loop (see reconcile_host_plugin_hot_requeues_total; the minimum \
             is limits.minRequeueAfter)");
    }
}

impl Reconciler for PluginReconciler {
    type Object = CachedObject;
    type Error = PluginError;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, PluginError> {
        // Borrowed from the key and the cache: lowering copies them into the guest once.
        let view = RequestView {
            target: TargetView {
                kind: &self.kind,
                namespace: request.key.namespace(),
                name: request.key.name(),
            },
            object: request.object.as_deref().map(CachedObject::json),
            requeues: request.requeues,
        };
        let canary = self.plugin.canary.as_ref().is_some_and(|(selector, _)| {
            request.object.as_deref().is_some_and(|object| {
                selector.matches_by(|label| {
                    object
                        .labels()
                        .iter()
                        .find(|(name, _)| &**name == label)
                        .map(|(_, value)| &**value)
                })
            })
        });
        let health = &self.plugin.health;
        let mut ran = Ran {
            trace: request.trace.clone(),
            ..Ran::default()
        };
        let (started, clock) = (SystemTime::now(), std::time::Instant::now());
        let result = self.plugin.call_view(view, canary, &mut ran).await;
        ran.annotate(&self.plugin.context.name, canary);
        let action = match result {
            Ok(action) => {
                health.succeeded(&request.key);
                action
            }
            Err(error) => {
                health.failed(&request.key, error.failure.reason(), || {
                    crate::error_chain(&error.failure)
                });
                if let Some(history) = &self.plugin.history {
                    let ended =
                        Ended::Error(error.failure.reason(), crate::error_chain(&error.failure));
                    history.keep(
                        &request.key,
                        ran.entry(&request, canary, started, clock, ended),
                    );
                }
                return Err(error);
            }
        };
        let action = self.action(&request.key, action);
        if let Some(history) = &self.plugin.history {
            let ended = match action {
                Action::Done => Ended::Success,
                Action::Requeue => Ended::Requeue,
                Action::RequeueAfter(delay) => Ended::RequeueAfter(delay),
            };
            history.keep(
                &request.key,
                ran.entry(&request, canary, started, clock, ended),
            );
        }
        Ok(action)
    }
}

impl PluginReconciler {
    /// The controller's action for the guest's `action`, a requeue-after raised to the
    /// plugin's minimum.
    fn action(&self, key: &crate::controller::ObjectKey, action: bindings::Action) -> Action {
        match action {
            bindings::Action::Done => Action::Done,
            bindings::Action::Requeue => Action::Requeue,
            bindings::Action::RequeueAfter(ms) => {
                let asked = Duration::from_millis(u64::from(ms));
                let context = &self.plugin.context;
                let minimum = context.manifest.limits.min_requeue_after;
                if asked < minimum {
                    context.hot_requeues.inc();
                    self.warn_hot_requeue(key, asked, minimum);
                }
                Action::RequeueAfter(asked.max(minimum))
            }
        }
    }
}
