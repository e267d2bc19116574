//! One call into a guest: a store with the plugin's limits and deadline, an instance (fresh, or
//! reused when the manifest opts in), the `reconcile` export, and the outcome classified.
//!
//! # Guarantees
//! - A trap, a deadline overrun or memory exhaustion ends the call with a [`GuestFailure`];
//!   the host keeps running, the store is dropped (a reused instance is discarded).
//! - A guest computing without end yields to the async runtime every
//!   [`EPOCH_TICK`](crate::wasm::engine::EPOCH_TICK) and is
//!   stopped within about one tick of its deadline; a guest waiting on a host call is stopped at
//!   its deadline plus [`DEADLINE_GRACE`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};

use crate::wasm::bindings;
use crate::wasm::context::PluginContext;
use crate::wasm::guest_log::{MAX_ERROR, guest_text};
use crate::wasm::module::Module;
use crate::wasm::state::{GuestState, MemoryLimitExceeded, TenantMemoryExceeded};
use crate::wasm::tape::SharedTape;

pub use crate::wasm::call::CallSession;
pub(crate) use crate::wasm::call::{RequestView, TargetView};
pub use crate::wasm::failure::{GuestFailure, GuestText};
pub use crate::wasm::pool::InstancePool;
use crate::wasm::pool::Warm;

/// Extra time a call waiting on a host import gets past its deadline before it is dropped.
pub const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// The guest ran past its deadline; the trap carries this error.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
struct DeadlineExceeded;

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
    // A place among the tenant's calls at once, held to the end of the call; taken before the
    // deadline starts, so the wait does not eat into the guest's time.
    let _slot = match &plugin.tenant {
        Some(tenant) => Some(tenant.run_slot().await),
        None => None,
    };
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
    warm.store.data_mut().trace = session.trace.take();
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
    session.api_calls = std::mem::take(&mut warm.store.data_mut().api_notes);
    session.trace = warm.store.data_mut().trace.take();
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
        .map_err(|error| GuestFailure::Instantiate(GuestText::new(&crate::error_chain(&error))))?;
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
        .map_err(|error| GuestFailure::Instantiate(GuestText::of(&error)))?;
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
    } else if let Some(tenant) = error.downcast_ref::<TenantMemoryExceeded>() {
        GuestFailure::TenantMemory(TenantMemoryExceeded {
            namespace: tenant.namespace.clone(),
            ..*tenant
        })
    } else {
        GuestFailure::Trapped(GuestText::of(&error))
    }
}
