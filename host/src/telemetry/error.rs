//! What can go wrong in telemetry: binding and serving the endpoints, registering readiness
//! checks.

use std::net::SocketAddr;

/// What can go wrong in telemetry.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The listening address could not be bound.
    #[error(
        "failed to bind the telemetry server to {addr}; choose a free address for the \
         telemetry listener (port 0 lets the OS pick one)"
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("the telemetry server on {addr} stopped with an I/O error; restart the host")]
    Serve {
        /// The address it listened on.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The server task panicked or was aborted.
    #[error("the telemetry server task on {addr} panicked or was aborted; this is a bug")]
    Task {
        /// The address it listened on.
        addr: SocketAddr,
        /// The join failure.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A readiness check of that name is already registered.
    #[error(
        "readiness check `{name}` is already registered; give each check a unique name, \
         such as `cache/v1/ConfigMap`"
    )]
    DuplicateCheck {
        /// The name registered twice.
        name: String,
    },
    /// A readiness check name that would not print as one token in `/readyz`.
    #[error(
        "readiness check name {name:?} is empty or contains whitespace; use a name such as \
         `cache/v1/ConfigMap` or `leader-election`"
    )]
    InvalidCheckName {
        /// The rejected name.
        name: String,
    },
}
