//! The runtime: informers feed controllers' queues; workers dispatch only while this replica
//! leads; shutdown drains before it releases the Lease.

mod controllers;
mod dispatch;
mod kind;
mod lease_thread;
mod registry;
mod settings;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controller::unhandled::READY_BOUND as UNHANDLED_READY_BOUND;
use crate::controller::{Cause, Causes, Controller, Intake, ObjectKey, Reconciler, Unhandled, Why};
use crate::election::Fence;
use crate::informer::{CachedObject, Enqueue, KeyFilter, Scope, enqueue_controller, enqueue_self};
use crate::queue::RateLimitingQueue;
use crate::shard::{Assignment, Gate, MemberSettings, Sharding};
use crate::telemetry::Telemetry;

use controllers::{Controllers, Runnable, Slot, Work};

pub use dispatch::RuntimeError;
pub use kind::KindRef;
pub use registry::{InformerError, InformerRegistry};
pub use settings::{ControllerSpec, ElectionSettings, RuntimeSettings};

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
    /// What the Lease thread builds its own client from (preferred to `election_client`).
    election_config: std::sync::OnceLock<(kube::Config, crate::client::ClientLimits)>,
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
                election_config: std::sync::OnceLock::new(),
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

    /// Like [`use_election_client`](Self::use_election_client), but the client is built from
    /// `config` and `limits` on the Lease thread, so its request buffer and connections run
    /// there too and renewals never wait for the workers that run reconciles (a client built
    /// elsewhere keeps its tasks on the runtime it was built on). Preferred to
    /// `use_election_client`; a second call is ignored.
    pub fn use_election_config(&self, config: kube::Config, limits: crate::client::ClientLimits) {
        let _ = self.inner.election_config.set((config, limits));
    }

    /// The client the Lease thread uses.
    fn election_client(&self) -> lease_thread::LeaseClient {
        let inner = &self.inner;
        match (inner.election_config.get(), inner.election_client.get()) {
            (Some((config, limits)), _) => {
                lease_thread::LeaseClient::Config(Box::new(config.clone()), limits.clone())
            }
            (None, client) => {
                lease_thread::LeaseClient::Built(client.unwrap_or(&inner.client).clone())
            }
        }
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
    /// changes into a new queue. Returns where keys enter it. While the runtime runs, the controller
    /// starts dispatching at once (if this replica leads).
    ///
    /// # Errors
    /// When a kind is unknown or does not fit the namespace, the limiter settings are invalid,
    /// or a controller of that name runs already.
    pub async fn add_controller<R>(
        &self,
        spec: ControllerSpec,
        reconciler: R,
    ) -> Result<Intake, InformerError>
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
        let unhandled = Arc::new(Unhandled::default());
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
        }
        .noting(Arc::clone(&unhandled));
        let causes = Arc::new(Causes::default());
        let of_kind = |kind: &str| enqueue.clone().noting_causes(Arc::clone(&causes), kind);
        let mut subscriptions = vec![primary.subscribe(
            enqueue_self(of_kind(&spec.for_kind.kind), spec.predicates),
            spec.resync,
        )];
        for (informer, owned) in informers[1..].iter().zip(&spec.owns) {
            subscriptions.push(informer.subscribe(
                enqueue_controller(
                    of_kind(&owned.kind),
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
        .with_fence(self.fence())
        .with_unhandled(Arc::clone(&unhandled))
        .with_causes(Arc::clone(&causes));
        if let Some(gate) = &self.inner.gate {
            controller = controller.with_gate(Arc::clone(gate), spec.placement);
        }
        let rescan = {
            let (name, queue, placement) = (spec.name.clone(), queue.clone(), spec.placement);
            let (causes, unhandled) = (Arc::clone(&causes), Arc::clone(&unhandled));
            move |before: &Assignment, now: &Assignment| {
                let mut owned = 0;
                let mut gained = Vec::new();
                for object in store.list() {
                    let key = object.key();
                    let ring_key = placement.ring_key(key.as_str());
                    if now.admits(&name, ring_key) {
                        owned += 1;
                        if !before.admits(&name, ring_key) {
                            gained.push(key);
                        }
                    }
                }
                if gained.is_empty() {
                    return owned;
                }
                // Changes that wait first: the cache's order would put the same keys first
                // after every handover.
                unhandled.oldest_first(&mut gained);
                // One span marks the handover, for every key it brought.
                let link = crate::telemetry::traces::mark(
                    || format!("handover {name}"),
                    || {
                        vec![opentelemetry::KeyValue::new(
                            "reconcile.controller",
                            name.clone(),
                        )]
                    },
                );
                for key in gained {
                    let mut cause = Cause::now(Why::Handover);
                    cause.link.clone_from(&link);
                    causes.note(&key, cause);
                    queue.add(key);
                }
                owned
            }
        };
        let oldest = self.oldest_unhandled(&spec, &unhandled, Arc::clone(primary.store()));
        let scrape = vec![
            scrape,
            metrics.report_oldest_unhandled_on_scrape(&spec.name, {
                let oldest = Arc::clone(&oldest);
                move || oldest()
            }),
        ];
        let check = unhandled_check_name(&spec.name);
        let registered = self.inner.telemetry.health().add_check(&check, move || {
            let age = oldest();
            if age > UNHANDLED_READY_BOUND {
                Err(format!(
                    "a change has waited {} s for a reconcile (bound {} s): a key may be lost \
                     between replicas; reconcile_host_oldest_unhandled_change_seconds shows it",
                    age.as_secs(),
                    UNHANDLED_READY_BOUND.as_secs()
                ))
            } else {
                Ok(())
            }
        });
        if let Err(error) = registered {
            tracing::warn!(error = &error as &dyn std::error::Error, "readiness check");
        }
        let slot = Slot::new(
            Arc::new(controller),
            subscriptions,
            scopes,
            scrape,
            Box::new(rescan),
            unhandled,
        );
        if let Err(slot) = self.inner.controllers.insert(&spec.name, slot) {
            self.inner.telemetry.health().remove_check(&check);
            drop(slot.subscriptions);
            for scope in &slot.scopes {
                self.release_informer(scope);
            }
            return Err(InformerError::Duplicate { name: spec.name });
        }
        Ok(Intake::new(queue, causes))
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
        self.inner
            .telemetry
            .health()
            .remove_check(&unhandled_check_name(name));
        if let Some(election) = self.inner.settings.election.as_ref().filter(|e| e.sharded) {
            let metrics = self.inner.telemetry.metrics();
            metrics.sharding(&election.lease_name).forget(name);
        }
        tracing::info!(controller = name, "controller removed");
        true
    }

    /// The age of the oldest change `unhandled` holds among the keys this replica is
    /// responsible for now: in sharded mode those its assignment gives `spec`, else every key
    /// while this replica leads (none otherwise).
    fn oldest_unhandled(
        &self,
        spec: &ControllerSpec,
        unhandled: &Arc<Unhandled>,
        store: Arc<crate::informer::Store>,
    ) -> Arc<dyn Fn() -> Duration + Send + Sync> {
        let unhandled = Arc::clone(unhandled);
        let cached = move |key: &ObjectKey| store.get(key).is_some();
        match &self.inner.gate {
            Some(gate) => {
                let (gate, name, placement) = (Arc::clone(gate), spec.name.clone(), spec.placement);
                Arc::new(move || {
                    let assignment = gate.assignment();
                    let mine = |key: &ObjectKey| {
                        assignment.admits(&name, placement.ring_key(key.as_str()))
                    };
                    unhandled.oldest(mine, &cached)
                })
            }
            None => {
                let leading = self.inner.leadership.subscribe();
                Arc::new(move || {
                    let leads = *leading.borrow();
                    unhandled.oldest(|_| leads, &cached)
                })
            }
        }
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
                        if !probe.is_synced() {
                            Err("initial list not cached yet".to_owned())
                        } else if probe.is_stale() {
                            Err("stale: the API server's store was replaced; listing again"
                                .to_owned())
                        } else {
                            Ok(())
                        }
                    });
            if let Err(error) = registered {
                tracing::warn!(error = &error as &dyn std::error::Error, "readiness check");
            }
        }
        Ok(informer)
    }
}

/// `unhandled/<controller>`.
fn unhandled_check_name(controller: &str) -> String {
    format!("unhandled/{controller}")
}

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
