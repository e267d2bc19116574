//! The runtime: informers feed controllers' queues; workers dispatch only while this replica
//! leads; shutdown drains before it releases the Lease.

mod controllers;
mod registry;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controller::{Controller, ObjectKey, Reconciler};
use crate::election::{
    ConfigError, ElectionConfig, ElectionError, Fence, KubeLease, LeaderElector, Leadership,
};
use crate::informer::{
    CachedObject, Enqueue, KeyFilter, Predicates, Scope, enqueue_controller, enqueue_self,
};
use crate::queue::{ControllerLimiter, RateLimitingQueue};
use crate::shard::{Assignment, Gate, MemberSettings, Placement, Sharding};
use crate::telemetry::Telemetry;

use controllers::{Controllers, Runnable, Slot, Term, Work};

pub use registry::{InformerError, InformerRegistry};

/// A kind named by `apiVersion` and `kind`, resolved through discovery (CRDs included).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

impl KindRef {
    /// `api_version` + `kind`.
    #[must_use]
    pub fn new(api_version: &str, kind: &str) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

/// What a controller reconciles and how.
#[derive(Clone, Debug)]
pub struct ControllerSpec {
    /// Names the controller in logs and metrics.
    pub name: String,
    /// The kind whose keys are reconciled.
    pub for_kind: KindRef,
    /// Kinds whose changes enqueue their controlling owner of `for_kind`.
    pub owns: Vec<KindRef>,
    /// Only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// Only `for_kind` objects matching this label selector.
    pub label_selector: Option<String>,
    /// Update filters.
    pub predicates: Predicates,
    /// Re-enqueue every cached object this often.
    pub resync: Option<Duration>,
    /// Concurrent reconciles.
    pub workers: usize,
    /// How failed and requeued keys are delayed.
    pub limiter: ControllerLimiter,
    /// Sharded mode: how its keys are placed on the replicas.
    pub placement: Placement,
}

/// Leader election settings for the runtime.
#[derive(Clone, Debug)]
pub struct ElectionSettings {
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// The Lease's name.
    pub lease_name: String,
    /// Durations, identity, release on cancel.
    pub config: ElectionConfig,
    /// Whether to exit (instead of campaigning again) after losing leadership.
    pub exit_on_loss: bool,
    /// Sharded mode: every replica holds a membership Lease `<lease_name>-<identity>` and
    /// dispatches its share of the keys, instead of one leader dispatching them all.
    pub sharded: bool,
}

/// How the runtime runs.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// `None`: this replica always dispatches.
    pub election: Option<ElectionSettings>,
    /// How long reconciles in progress may run after shutdown starts before they are cancelled.
    pub drain_timeout: Duration,
}

/// Why the runtime stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The leader election settings are invalid.
    #[error("invalid leader election settings")]
    Election(#[from] ConfigError),
    /// Leadership was lost and the runtime was told to exit then.
    #[error("stopping after losing leadership")]
    Lost(#[from] ElectionError),
}

impl<R: Reconciler> Runnable for Controller<R> {
    fn run(&self, intake: CancellationToken, abort: CancellationToken) -> Work<'_> {
        Box::pin(Controller::run(self, intake, abort))
    }
}

/// Wires informers, controllers and leader election together.
///
/// # Flow
/// 1. Controllers are added; their informers start at once on every replica (warm standby).
/// 2. [`run`](Runtime::run) waits until every cache holds its initial list, then dispatches —
///    while leading, if election is on.
/// 3. When leadership is lost, dispatch stops and reconciles in progress are cancelled at once
///    (their keys stay queued); the replica campaigns again or exits.
/// 4. On shutdown: stop taking keys, let reconciles in progress finish within the drain
///    timeout (then cancel them), release the Lease, return.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    /// The elector's own client, so Lease renewals never wait behind other traffic.
    election_client: std::sync::OnceLock<kube::Client>,
    registry: InformerRegistry,
    controllers: Controllers,
    settings: RuntimeSettings,
    leadership: watch::Sender<bool>,
    telemetry: Telemetry,
    /// Open while this replica may dispatch and write: always without election, else while its
    /// lease is valid by its own clock.
    fence: Fence,
    /// Sharded mode: the membership, until `run` takes it, and the gate dispatch passes.
    sharding: parking_lot::Mutex<Option<Sharding>>,
    gate: Option<Arc<Gate>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("controllers", &self.inner.controllers.len())
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime talking to the cluster through `client`, with its own metrics registry.
    #[must_use]
    pub fn new(client: kube::Client, settings: RuntimeSettings) -> Self {
        Self::with_telemetry(client, settings, Telemetry::new())
    }

    /// A runtime reporting metrics and readiness to `telemetry`: workqueue and reconcile
    /// metrics per controller, a `cache/...` readiness check per informer, and the leader gauge.
    #[must_use]
    pub fn with_telemetry(
        client: kube::Client,
        settings: RuntimeSettings,
        telemetry: Telemetry,
    ) -> Self {
        let fence = if settings.election.is_some() {
            Fence::closed()
        } else {
            Fence::always_open()
        };
        let sharding = settings
            .election
            .as_ref()
            .filter(|election| election.sharded)
            .map(|election| {
                Sharding::new(
                    MemberSettings {
                        namespace: election.lease_namespace.clone(),
                        ring: election.lease_name.clone(),
                        config: election.config.clone(),
                    },
                    fence.clone(),
                    telemetry.metrics().sharding(&election.lease_name),
                )
            });
        let gate = sharding.as_ref().map(Sharding::gate);
        Self {
            inner: Arc::new(Inner {
                fence,
                sharding: parking_lot::Mutex::new(sharding),
                gate,
                registry: InformerRegistry::new(client.clone()),
                client,
                election_client: std::sync::OnceLock::new(),
                controllers: Controllers::default(),
                settings,
                leadership: watch::Sender::new(false),
                telemetry,
            }),
        }
    }

    /// The fence of this runtime: open while it may dispatch and write (see [`Fence`]). Give
    /// it to the clients whose writes must stop when the lease lapses.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.inner.fence.clone()
    }

    /// Makes leader election use `client` (its own rate limit and connections) instead of the
    /// runtime's: Lease renewals then never queue behind informer or plugin requests. Call it
    /// before [`run`](Self::run); a second call is ignored.
    pub fn use_election_client(&self, client: kube::Client) {
        let _ = self.inner.election_client.set(client);
    }

    /// The metrics registry and health checks this runtime reports to.
    #[must_use]
    pub fn telemetry(&self) -> &Telemetry {
        &self.inner.telemetry
    }

    /// The shared informers.
    #[must_use]
    pub fn registry(&self) -> &InformerRegistry {
        &self.inner.registry
    }

    /// True while this replica dispatches reconciles.
    #[must_use]
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.inner.leadership.subscribe()
    }

    /// Adds a controller: starts (or shares) the informers of its kinds and routes their
    /// changes into a new queue. Returns the queue. While the runtime runs, the controller
    /// starts dispatching at once (if this replica leads).
    ///
    /// # Errors
    /// When a kind is unknown or does not fit the namespace, the limiter settings are invalid,
    /// or a controller of that name runs already.
    pub async fn add_controller<R>(
        &self,
        spec: ControllerSpec,
        reconciler: R,
    ) -> Result<RateLimitingQueue<ObjectKey>, InformerError>
    where
        R: Reconciler<Object = CachedObject>,
    {
        if self.inner.controllers.contains(&spec.name) {
            return Err(InformerError::Duplicate { name: spec.name });
        }
        let metrics = self.inner.telemetry.metrics();
        let limiter = spec
            .limiter
            .build()
            .map_err(|source| InformerError::Limiter {
                controller: spec.name.clone(),
                source,
            })?;
        let mut scopes = vec![Scope {
            api_version: spec.for_kind.api_version.clone(),
            kind: spec.for_kind.kind.clone(),
            namespace: spec.namespace.clone(),
            label_selector: spec.label_selector.clone(),
        }];
        scopes.extend(spec.owns.iter().map(|owned| Scope {
            api_version: owned.api_version.clone(),
            kind: owned.kind.clone(),
            namespace: spec.namespace.clone(),
            label_selector: None,
        }));
        let mut informers = Vec::with_capacity(scopes.len());
        for scope in &scopes {
            match self.informer(scope.clone()).await {
                Ok(informer) => informers.push(informer),
                Err(error) => {
                    for acquired in &scopes[..informers.len()] {
                        self.release_informer(acquired);
                    }
                    return Err(error);
                }
            }
        }
        let queue = RateLimitingQueue::with_metrics(limiter, metrics.workqueue(&spec.name));
        let scrape = metrics.report_unfinished_work_on_scrape(&queue);
        let primary = &informers[0];
        // Sharded mode: only this replica's keys enter its queue (a key it gains later is
        // queued from the cache when the ring that gives it settles).
        let enqueue = match &self.inner.gate {
            Some(gate) => {
                let (gate, name, placement) = (Arc::clone(gate), spec.name.clone(), spec.placement);
                let admit: KeyFilter = Arc::new(move |key: &ObjectKey| {
                    gate.assignment()
                        .admits(&name, placement.ring_key(key.as_str()))
                });
                Enqueue::filtered(queue.clone(), admit)
            }
            None => Enqueue::from(queue.clone()),
        };
        let mut subscriptions =
            vec![primary.subscribe(enqueue_self(enqueue.clone(), spec.predicates), spec.resync)];
        for informer in &informers[1..] {
            subscriptions.push(informer.subscribe(
                enqueue_controller(
                    enqueue.clone(),
                    &spec.for_kind.api_version,
                    &spec.for_kind.kind,
                    spec.predicates,
                ),
                None,
            ));
        }
        let store = Arc::clone(primary.store());
        let lookup = Arc::clone(&store);
        let mut controller = Controller::with_metrics(
            &spec.name,
            queue.clone(),
            reconciler,
            move |key: &ObjectKey| lookup.get(key),
            spec.workers,
            metrics.controller(&spec.name, spec.workers),
        )
        .with_fence(self.fence());
        if let Some(gate) = &self.inner.gate {
            controller = controller.with_gate(Arc::clone(gate), spec.placement);
        }
        let rescan = {
            let (name, queue, placement) = (spec.name.clone(), queue.clone(), spec.placement);
            move |before: &Assignment, now: &Assignment| {
                let mut owned = 0;
                for object in store.list() {
                    let key = object.key();
                    let ring_key = placement.ring_key(key.as_str());
                    if now.admits(&name, ring_key) {
                        owned += 1;
                        if !before.admits(&name, ring_key) {
                            queue.add(key);
                        }
                    }
                }
                owned
            }
        };
        let slot = Slot::new(
            Arc::new(controller),
            subscriptions,
            scopes,
            scrape,
            Box::new(rescan),
        );
        if let Err(slot) = self.inner.controllers.insert(&spec.name, slot) {
            drop(slot.subscriptions);
            for scope in &slot.scopes {
                self.release_informer(scope);
            }
            return Err(InformerError::Duplicate { name: spec.name });
        }
        Ok(queue)
    }

    /// Removes the controller `name`: its informers stop routing keys to it, reconciles in
    /// progress get the drain timeout to finish (then are cancelled), and informers no one else
    /// uses stop. False if there is no such controller.
    pub async fn remove_controller(&self, name: &str) -> bool {
        let Some(slot) = self
            .inner
            .controllers
            .remove(name, self.inner.settings.drain_timeout)
            .await
        else {
            return false;
        };
        for scope in &slot.scopes {
            self.release_informer(scope);
        }
        drop(slot.scrape);
        if let Some(election) = self.inner.settings.election.as_ref().filter(|e| e.sharded) {
            let metrics = self.inner.telemetry.metrics();
            metrics.sharding(&election.lease_name).forget(name);
        }
        tracing::info!(controller = name, "controller removed");
        true
    }

    /// Gives back one use of `scope`'s informer (see [`informer`](Self::informer)); the last
    /// one stops it and removes its readiness check.
    pub fn release_informer(&self, scope: &Scope) {
        if self.inner.registry.release(scope) {
            self.inner
                .telemetry
                .health()
                .remove_check(&cache_check_name(scope));
        }
    }

    /// The shared informer for `scope`; the first time a scope is watched its cache gets a
    /// readiness check named `cache/<apiVersion>/<kind>[/<namespace>][?<selector>]`. Each call
    /// is one use, given back with [`release_informer`](Self::release_informer).
    ///
    /// # Errors
    /// When the kind is unknown or does not fit the namespace.
    pub async fn informer(
        &self,
        scope: Scope,
    ) -> Result<Arc<crate::informer::Informer>, InformerError> {
        let (informer, started) = self.inner.registry.informer(&scope).await?;
        if started {
            let probe = Arc::clone(&informer);
            let registered =
                self.inner
                    .telemetry
                    .health()
                    .add_check(&cache_check_name(&scope), move || {
                        if probe.is_synced() {
                            Ok(())
                        } else {
                            Err("initial list not cached yet".to_owned())
                        }
                    });
            if let Err(error) = registered {
                tracing::warn!(error = &error as &dyn std::error::Error, "readiness check");
            }
        }
        Ok(informer)
    }

    /// Runs until `shutdown` is cancelled (see the type's Flow).
    ///
    /// # Errors
    /// Invalid election settings, or leadership lost with `exit_on_loss`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), RuntimeError> {
        for informer in self.inner.registry.informers() {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = informer.wait_synced() => {}
            }
        }
        tracing::info!(controllers = self.inner.controllers.len(), "caches synced");
        let Some(election) = self.inner.settings.election.clone() else {
            self.serve_term(&CancellationToken::new(), &shutdown).await;
            return Ok(());
        };
        let sharding = self.inner.sharding.lock().take();
        if let Some(sharding) = sharding {
            self.serve_sharded(sharding, &election, &shutdown).await;
            return Ok(());
        }
        let lock = KubeLease::new(
            self.inner
                .election_client
                .get()
                .unwrap_or(&self.inner.client)
                .clone(),
            &election.lease_namespace,
            &election.lease_name,
        );
        let elector = LeaderElector::new(lock, election.config)?
            .campaign_after_loss(!election.exit_on_loss)
            .with_fence(self.inner.fence.clone());
        let mut leadership = elector.subscribe();
        let _leader_gauge = self
            .inner
            .telemetry
            .metrics()
            .report_leadership_on_scrape(&election.lease_name, elector.subscribe());
        let _fenced = self
            .inner
            .telemetry
            .metrics()
            .report_fenced_writes_on_scrape(&election.lease_name, self.fence());
        let elector_stop = CancellationToken::new();
        let mut campaign = tokio::spawn(elector.run(elector_stop.clone()));
        // If this future is dropped (the replica is killed), the elector must die with it.
        let _abort_campaign = AbortOnDrop(campaign.abort_handle());
        let result = loop {
            let term = tokio::select! {
                () = shutdown.cancelled() => break Ok(()),
                ended = &mut campaign => break ended.unwrap_or(Ok(())).map_err(RuntimeError::from),
                term = next_term(&mut leadership) => match term {
                    Some(term) => term,
                    None => break Ok(()),
                },
            };
            self.serve_term(&term, &shutdown).await;
            if shutdown.is_cancelled() {
                break Ok(());
            }
        };
        // Drained: now give the Lease up (the elector releases it when stopped).
        elector_stop.cancel();
        if !campaign.is_finished() {
            let _ = campaign.await;
        }
        result
    }

    /// Sharded mode: dispatches through the gate while the membership runs; on shutdown drains,
    /// then leaves the ring.
    async fn serve_sharded(
        &self,
        sharding: Sharding,
        election: &ElectionSettings,
        shutdown: &CancellationToken,
    ) {
        let client = self
            .inner
            .election_client
            .get()
            .unwrap_or(&self.inner.client)
            .clone();
        let metrics = self
            .inner
            .telemetry
            .metrics()
            .sharding(&election.lease_name);
        let _fenced = self
            .inner
            .telemetry
            .metrics()
            .report_fenced_writes_on_scrape(&election.lease_name, self.fence());
        let gate = sharding.gate();
        let runtime = self.clone();
        let _owned = self.inner.telemetry.metrics().on_scrape(move || {
            let now = gate.assignment();
            runtime.inner.controllers.rescan(&now, &now, &metrics);
        });
        let runtime = self.clone();
        let changed = Box::new(move |before: &Assignment, now: &Assignment| {
            // One replica writes what belongs to no key (ReconcilerPlugin statuses).
            runtime
                .inner
                .leadership
                .send_replace(now.admits(RING_WIDE, ""));
            runtime.inner.controllers.requeue_gained(before, now);
        });
        let stop = CancellationToken::new();
        let member = tokio::spawn(sharding.run(client, changed, stop.clone()));
        let _abort_member = AbortOnDrop(member.abort_handle());
        self.serve_term(&CancellationToken::new(), shutdown).await;
        stop.cancel();
        let _ = member.await;
    }

    /// Dispatches until `term` ends (abort at once) or `shutdown` (drain, then abort).
    async fn serve_term(&self, term: &CancellationToken, shutdown: &CancellationToken) {
        let inner = &self.inner;
        // Children of the term: its end stops intake and aborts reconciles at once, whichever
        // task notices first.
        let tokens = Term {
            intake: term.child_token(),
            abort: term.child_token(),
        };
        inner.leadership.send_replace(true);
        inner.controllers.begin_term(tokens.clone());
        tokio::select! {
            () = term.cancelled() => {
                tokens.intake.cancel();
                tokens.abort.cancel();
                join_all(inner.controllers.end_term()).await;
            }
            () = shutdown.cancelled() => {
                tokens.intake.cancel();
                let mut work = std::pin::pin!(join_all(inner.controllers.end_term()));
                tokio::select! {
                    _ = &mut work => {}
                    () = term.cancelled() => {
                        tokens.abort.cancel();
                        work.await;
                    }
                    () = tokio::time::sleep(inner.settings.drain_timeout) => {
                        tracing::warn!(timeout = ?inner.settings.drain_timeout,
                            "drain timeout passed; cancelling reconciles in progress");
                        tokens.abort.cancel();
                        work.await;
                    }
                }
            }
        }
        inner.leadership.send_replace(false);
    }
}

/// The plugin name under which sharded mode places work that belongs to no key: no plugin
/// has it (plugin names are DNS labels).
const RING_WIDE: &str = "/ring-wide";

/// `cache/<apiVersion>/<kind>[/<namespace>][?<selector>]`.
fn cache_check_name(scope: &Scope) -> String {
    let mut name = format!("cache/{}/{}", scope.api_version, scope.kind);
    if let Some(namespace) = &scope.namespace {
        name = format!("{name}/{namespace}");
    }
    if let Some(selector) = &scope.label_selector {
        name = format!("{name}?{}", selector.replace(' ', ""));
    }
    name
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The next live term of leadership, or `None` when the elector is gone. A term that already
/// ended (the elector publishes `Following` just after cancelling it) is skipped.
async fn next_term(leadership: &mut watch::Receiver<Leadership>) -> Option<CancellationToken> {
    let live =
        |state: &Leadership| matches!(state, Leadership::Leading { term } if !term.is_cancelled());
    let state = leadership.wait_for(live).await.ok()?;
    match &*state {
        Leadership::Leading { term } => Some(term.clone()),
        Leadership::Following { .. } => None,
    }
}
