//! The wasm runtime: one wasmtime engine, plugin modules compiled once and checked against the
//! `reconciler` world, and one call into a guest with its limits, its captured output and the
//! host imports it may use. It knows a plugin only by its [`Manifest`](crate::manifest::Manifest)
//! and its [`PluginContext`](context::PluginContext); how plugins arrive ([`crate::delivery`]) and
//! how new versions are tried ([`crate::upgrade`]) build on it.
//!
//! # Flow
//! The [`ModuleLoader`](module::ModuleLoader) compiles a component once per content digest
//! (`compiled`) and checks it against the world; [`invoke`] makes one call: a store
//! ([`state`]) with the plugin's limits and deadline, an instance (fresh, or from a pool), the
//! guest's stdout and stderr (`stdio`, [`guest_log`]), the host imports (`imports`) answered
//! from the plugin's grants, caches and API backend ([`api`], [`kube_api`]), the API writes kept
//! ([`tape`]) and, when asked, everything the guest read ([`record`]).

pub mod api;
pub mod api_notes;
pub(crate) mod bindings;
mod call;
pub mod call_trace;
mod compiled;
pub mod context;
pub mod cost;
pub mod engine;
mod failure;
pub mod guest_log;
pub(crate) mod imports;
pub mod invoke;
pub mod kube_api;
pub mod module;
mod pool;
pub mod record;
pub mod reference;
pub mod state;
mod stdio;
pub mod tape;

pub use bindings::{Action as GuestAction, ApiStatus, CallError, Kind, ObjectRef};
