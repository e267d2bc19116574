//! The reconcile host: Kubernetes controller machinery that dispatches reconciles to
//! WebAssembly components.
#![deny(missing_docs)]

pub mod authz;
pub mod bounded_read;
pub mod cli;
pub mod client;
pub mod cluster_config;
pub mod config;
pub mod controller;
pub mod delivery;
pub mod dev;
pub mod election;
pub mod exit;
pub mod file_changes;
pub mod heap;
pub mod informer;
pub mod kubectl;
pub mod leftovers;
pub mod manifest;
pub mod queue;
pub mod rbac;
pub mod runtime;
pub mod scaffold;
pub mod serve;
pub mod shard;
pub mod spelling;
pub mod telemetry;
pub mod tenant;
pub mod tools;
pub mod upgrade;
pub mod wasm;

/// `error` followed by each of its sources, joined by `: `: how the host prints an error. A
/// cause whose text the message already ends with (an error that prints its source itself, as
/// some of kube's do) is not repeated.
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct PrintsItsSource(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Chained(#[source] std::io::Error);

    #[test]
    fn a_cause_is_printed_once_whether_or_not_the_error_prints_it_itself() {
        let gone = || std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(
            super::error_chain(&PrintsItsSource(gone())),
            "outer: entity not found"
        );
        assert_eq!(
            super::error_chain(&Chained(gone())),
            "outer: entity not found"
        );
    }
}
