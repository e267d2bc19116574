//! The reconcile host: Kubernetes controller machinery that dispatches reconciles to
//! WebAssembly components.
#![deny(missing_docs)]

pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod dev;
pub mod election;
pub mod informer;
pub mod plugin;
pub mod queue;
pub mod runtime;
pub mod telemetry;
pub mod tools;
