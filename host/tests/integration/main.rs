//! The host's integration tests, one binary (one link of the host and wasmtime instead of one per
//! file): each module checks one part against the embedded API server, real HTTP or a real
//! component, and opens with what it checks. `cargo test -p reconcile-host --test integration
//! <module>::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod api_client;
mod informer;
mod module_unload;
mod plugin_sources;
mod runtime;
mod telemetry;
mod unhandled;
mod workqueue;
