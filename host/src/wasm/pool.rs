//! Instances kept between calls when a manifest opts into reuse: each with its store and typed
//! `reconcile` export, replaced per the manifest's `instanceReuse` policy.

use parking_lot::Mutex;
use wasmtime::Store;
use wasmtime::component::TypedFunc;

use crate::manifest::InstanceReuse;
use crate::wasm::bindings;
use crate::wasm::call::RequestView;
use crate::wasm::state::GuestState;

/// The `reconcile` export, typed. Calls may pass requests that borrow for less than `'static`:
/// a component function copies its arguments in and keeps no reference to them.
pub(crate) type ReconcileFunc =
    TypedFunc<(RequestView<'static>,), (Result<bindings::Action, bindings::ReconcileError>,)>;

/// An instance with its store, kept between calls in reuse mode.
pub(crate) struct Warm {
    pub(crate) store: Store<GuestState>,
    pub(crate) reconcile: ReconcileFunc,
    pub(crate) calls: u32,
}

/// Idle reusable instances of one module (reuse mode only).
pub struct InstancePool {
    pub(crate) policy: InstanceReuse,
    pub(crate) idle: Mutex<Vec<Warm>>,
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
