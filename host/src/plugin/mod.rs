//! Plugins: reconcilers compiled to WebAssembly components, their manifests, and the wasmtime
//! runtime that calls them.
//!
//! # Flow
//! A [`Manifest`](manifest::Manifest) names a component; the [`ModuleLoader`](module::ModuleLoader)
//! compiles it once per content digest and checks it against the `reconciler` world; a
//! [`Plugin`](reconciler::Plugin) holds the module and the plugin's context (grants, caches, API
//! backend); its [`PluginReconciler`](reconciler::PluginReconciler) is what a controller calls,
//! one fresh instance per reconcile unless the manifest opts into instance reuse.

pub mod api;
mod bindings;
mod compiled;
pub mod context;
pub mod cost;
pub mod engine;
pub mod guest_log;
mod imports;
pub mod invoke;
pub mod kube_api;
pub mod loader;
pub mod manifest;
pub mod module;
pub mod objects;
pub mod oci;
pub mod reconciler;
pub mod record;
pub mod reference;
pub mod shadow;
pub mod state;
mod stdio;
pub mod supervisor;
pub mod tape;

pub use bindings::{Action as GuestAction, ApiStatus, CallError, Kind, ObjectRef};
