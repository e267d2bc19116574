//! The reconcile host: Kubernetes controller machinery that dispatches reconciles to
//! WebAssembly components.
#![deny(missing_docs)]

pub mod cli;
pub mod client;
pub mod cluster_config;
pub mod config;
pub mod controller;
pub mod dev;
pub mod election;
pub mod informer;
pub mod plugin;
pub mod queue;
pub mod rbac;
pub mod runtime;
pub mod telemetry;
pub mod tools;

/// `error` followed by each of its sources, joined by `: `: how the host prints an error.
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
