//! One call into a guest: a store with the plugin's limits and deadline, an instance (fresh, or
//! reused when the manifest opts in), the `reconcile` export, and the outcome classified.
//!
//! # Guarantees
//! - A trap, a deadline overrun or memory exhaustion ends the call with a [`GuestFailure`];
//!   the host keeps running, the store is dropped (a reused instance is discarded).
//! - A guest computing without end yields to the async runtime every
//!   [`EPOCH_TICK`](super::engine::EPOCH_TICK) and is
//!   stopped within about one tick of its deadline; a guest waiting on a host call is stopped at
//!   its deadline plus [`DEADLINE_GRACE`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmtime::component::{ComponentType, Lower, TypedFunc};
use wasmtime::{Store, UpdateDeadline};

use super::bindings::{self, Kind};
use super::context::PluginContext;
use super::cost::CallCost;
use super::guest_log::{MAX_ERROR, guest_text};
use super::manifest::InstanceReuse;
use super::module::Module;
use super::record::Session;
use super::state::{GuestState, MemoryLimitExceeded};
use super::tape::SharedTape;

/// Extra time a call waiting on a host import gets past its deadline before it is dropped.
pub const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// The guest ran past its deadline; the trap carries this error.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
struct DeadlineExceeded;

/// How a call into a guest failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestFailure {
    /// The guest returned `err`; its message cut at [`MAX_ERROR`] bytes, control characters
    /// escaped.
    #[error("the guest returned an error: {0}")]
    Returned(String),
    /// The guest trapped (a panic, an `unreachable`, an out-of-bounds access, ...).
    #[error("the guest trapped")]
    Trapped(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The guest ran past its deadline.
    #[error(
        "the guest ran past its deadline of {0:?}; raise `limits.deadline` in the manifest if \
         the work is legitimately this long"
    )]
    Deadline(Duration),
    /// The guest grew its memory past the limit.
    #[error(
        "the guest exceeded its memory limit of {0} bytes; raise `limits.memory` in the manifest \
         if it legitimately needs more"
    )]
    Memory(u64),
    /// No instance could be created (e.g. the instance pool is exhausted).
    #[error("the guest could not be instantiated")]
    Instantiate(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl GuestFailure {
    /// A short label for metrics: `error`, `trap`, `deadline`, `memory` or `instantiate`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Returned(_) => "error",
            Self::Trapped(_) => "trap",
            Self::Deadline(_) => "deadline",
            Self::Memory(_) => "memory",
            Self::Instantiate(_) => "instantiate",
        }
    }
}

/// The `request` record of the `reconcile` export, borrowing what the host already holds (the
/// key, the cached object's JSON) where the generated `Request` owns copies: lowering copies it
/// straight into guest memory. Checked against the component's export each time an instance is
/// created.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
pub(crate) struct RequestView<'a> {
    /// The object to reconcile.
    pub(crate) target: TargetView<'a>,
    /// The cached object as JSON text; `None` when it no longer exists.
    pub(crate) object: Option<&'a str>,
    /// How many times in a row this key has failed.
    pub(crate) requeues: u32,
}

impl<'a> RequestView<'a> {
    /// The request for `target` with `object` and `requeues`, borrowed.
    pub(crate) fn of(
        target: &'a bindings::ObjectRef,
        object: Option<&'a str>,
        requeues: u32,
    ) -> Self {
        Self {
            target: TargetView {
                kind: &target.kind,
                namespace: target.namespace.as_deref(),
                name: &target.name,
            },
            object,
            requeues,
        }
    }

    /// The target, owned.
    pub(crate) fn target_owned(&self) -> bindings::ObjectRef {
        bindings::ObjectRef {
            kind: self.target.kind.clone(),
            namespace: self.target.namespace.map(str::to_owned),
            name: self.target.name.to_owned(),
        }
    }
}

/// The `object-ref` record, borrowed.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
pub(crate) struct TargetView<'a> {
    /// The object's kind.
    pub(crate) kind: &'a Kind,
    /// Its namespace; `None` for cluster-scoped kinds.
    pub(crate) namespace: Option<&'a str>,
    /// Its name.
    pub(crate) name: &'a str,
}

/// The `reconcile` export, typed. Calls may pass requests that borrow for less than `'static`:
/// a component function copies its arguments in and keeps no reference to them.
type ReconcileFunc =
    TypedFunc<(RequestView<'static>,), (Result<bindings::Action, bindings::ReconcileError>,)>;

/// An instance with its store, kept between calls in reuse mode.
struct Warm {
    store: Store<GuestState>,
    reconcile: ReconcileFunc,
    calls: u32,
}

/// Idle reusable instances of one module (reuse mode only).
pub struct InstancePool {
    policy: InstanceReuse,
    idle: Mutex<Vec<Warm>>,
}

impl std::fmt::Debug for InstancePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstancePool")
            .field("policy", &self.policy)
            .field("idle", &self.idle.lock().len())
            .finish()
    }
}

impl InstancePool {
    /// An empty pool replacing instances per `policy`.
    #[must_use]
    pub fn new(policy: InstanceReuse) -> Self {
        Self {
            policy,
            idle: Mutex::default(),
        }
    }

    /// Drops every idle instance.
    pub(crate) fn clear(&self) {
        self.idle.lock().clear();
    }
}

/// A call's recording or replay: handed to the store for the call, taken back after it.
#[derive(Debug, Default)]
pub struct CallSession {
    /// The session; `None` for a plain call.
    pub session: Option<Session>,
    /// For a replay: the `wasi:random/insecure-seed` a fresh instance answers.
    pub replay_seed: Option<u128>,
    /// After the call: whether it ran on a fresh instance.
    pub fresh: bool,
    /// After the call: the insecure seed of the instance it ran on.
    pub seed: u128,
    /// Whether the caller wants [`cost`](Self::cost): without metrics nobody reads it, and a
    /// reused instance's call is then spared its clock reads and arithmetic.
    pub metered: bool,
    /// After the call, when `metered`: where its time went.
    pub cost: CallCost,
}

/// Calls `reconcile` on a fresh instance of `module` (or a reused one from `pool`).
///
/// # Errors
/// [`GuestFailure`] when the guest returns an error, traps, overruns its deadline or memory, or
/// cannot be instantiated.
pub(crate) async fn reconcile(
    module: &Module,
    plugin: &Arc<PluginContext>,
    pool: Option<&InstancePool>,
    request: RequestView<'_>,
    tape: Option<SharedTape>,
    session: &mut CallSession,
) -> Result<bindings::Action, GuestFailure> {
    let limits = plugin.manifest.limits;
    // One deadline for the whole call, instantiation included.
    let deadline = Instant::now() + limits.deadline;
    module.touch();
    let warm = pool.and_then(|pool| pool.idle.lock().pop());
    session.fresh = warm.is_none();
    let (mut warm, instantiated) = match warm {
        Some(warm) => {
            *warm.store.data().session.lock() = session.session.take();
            (warm, Duration::ZERO)
        }
        None => {
            let started = Instant::now();
            let warm = instantiate(module, plugin, deadline, session).await?;
            (warm, started.elapsed())
        }
    };
    session.seed = warm.store.data().insecure_seed;
    warm.store.data_mut().deadline = deadline;
    warm.store.data_mut().tape = tape;
    warm.store.data_mut().begin_call();
    warm.store.set_epoch_deadline(1);
    let called = session.metered.then(Instant::now);
    let call = warm.reconcile.call_async(&mut warm.store, (request,));
    let outcome = tokio::time::timeout_at((deadline + DEADLINE_GRACE).into(), call).await;
    if let Some(called) = called {
        session.cost = warm
            .store
            .data()
            .cost
            .finish(called.elapsed(), instantiated);
    }
    warm.store.data().flush_stdio();
    warm.store.data_mut().tape = None;
    session.session = warm.store.data().session.lock().take();
    warm.calls += 1;
    let result = match outcome {
        Err(_elapsed) => Err(GuestFailure::Deadline(limits.deadline)),
        Ok(Err(error)) => Err(classify(error, limits.deadline, limits.memory)),
        Ok(Ok((Ok(action),))) => Ok(action),
        Ok(Ok((Err(error),))) => Err(GuestFailure::Returned(guest_text(
            &error.message,
            MAX_ERROR,
        ))),
    };
    if let Some(pool) = pool {
        let healthy = matches!(result, Ok(_) | Err(GuestFailure::Returned(_)));
        let peak = u64::try_from(warm.store.data().limiter.peak()).unwrap_or(u64::MAX);
        if healthy && warm.calls < pool.policy.max_calls && peak <= pool.policy.max_memory {
            pool.idle.lock().push(warm);
        }
    }
    result
}

async fn instantiate(
    module: &Module,
    plugin: &Arc<PluginContext>,
    deadline: Instant,
    session: &mut CallSession,
) -> Result<Warm, GuestFailure> {
    let state = match session.replay_seed {
        Some(seed) => GuestState::with_seed(Arc::clone(plugin), seed),
        None => GuestState::new(Arc::clone(plugin)),
    };
    // Set before instantiation: a guest's start-up reads of the clocks and random sources are
    // part of the call.
    *state.session.lock() = session.session.take();
    let pre = module
        .pre()
        .await
        .map_err(|error| GuestFailure::Instantiate(error.into()))?;
    let mut store = Store::new(pre.engine(), state);
    store.limiter(|state| &mut state.limiter);
    store.epoch_deadline_callback(|store| {
        if Instant::now() >= store.data().deadline {
            Err(DeadlineExceeded.into())
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store.data_mut().deadline = deadline;
    store.set_epoch_deadline(1);
    let limits = plugin.manifest.limits;
    let instance = tokio::time::timeout_at(
        (deadline + DEADLINE_GRACE).into(),
        pre.instance_pre().instantiate_async(&mut store),
    )
    .await
    .map_err(|_elapsed| GuestFailure::Deadline(limits.deadline))?
    .map_err(
        |error| match classify(error, limits.deadline, limits.memory) {
            GuestFailure::Trapped(source) => GuestFailure::Instantiate(source),
            other => other,
        },
    )?;
    let reconcile = instance
        .get_typed_func(&mut store, "reconcile")
        .map_err(|error| GuestFailure::Instantiate(error.into()))?;
    Ok(Warm {
        store,
        reconcile,
        calls: 0,
    })
}

fn classify(error: wasmtime::Error, deadline: Duration, memory: u64) -> GuestFailure {
    if error.downcast_ref::<DeadlineExceeded>().is_some() {
        GuestFailure::Deadline(deadline)
    } else if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        GuestFailure::Memory(memory)
    } else {
        GuestFailure::Trapped(error.into())
    }
}
