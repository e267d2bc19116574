//! The host's bindings of `wit/reconcile.wit`: the one `bindgen!` of the host side.

#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "reconciler",
    imports: { default: async },
    exports: { default: async },
    // Recorded reconciles keep the imports' arguments and results as JSON (`wasm/record`).
    additional_derives: [serde::Serialize, serde::Deserialize],
});

pub use self::kube::reconcile::types::{ApiStatus, CallError, Kind, ObjectRef};
