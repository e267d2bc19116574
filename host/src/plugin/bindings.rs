//! The host's bindings of `wit/reconcile.wit`: the one `bindgen!` of the host side.

#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "reconciler",
    imports: { default: async },
    exports: { default: async },
});

pub use self::kube::reconcile::types::{ApiStatus, CallError, Kind, ObjectRef};
