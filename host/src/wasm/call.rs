//! What one call into a guest is given: the `request` record borrowed from what the host holds,
//! and the call's recording or replay session with what the call reports back (fresh instance,
//! seed, cost).

use wasmtime::component::{ComponentType, Lower};

use crate::wasm::bindings::{self, Kind};
use crate::wasm::cost::CallCost;
use crate::wasm::record::Session;

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
    /// After the call: the API calls it made.
    pub api_calls: crate::wasm::api_notes::ApiNotes,
    /// The reconcile span the call's imports and API requests are traced under, if any.
    pub trace: Option<opentelemetry::Context>,
}
