//! The flags of `dev`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Flags of `dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory of examples: each `<name>/plugin.yaml` is declared as a ReconcilerPlugin (its
    /// component pushed to the dev registry) and each `<name>/samples/*.yaml` applied.
    #[arg(long, default_value = "examples", value_name = "DIR")]
    pub examples: PathBuf,
    /// Where to write the kubeconfig of the embedded API server.
    #[arg(long, default_value = "target/dev/kubeconfig", value_name = "FILE")]
    pub kubeconfig_out: PathBuf,
    /// Address of the embedded API server (HTTPS; the kubeconfig points here).
    #[arg(long, default_value = "127.0.0.1:6443", value_name = "ADDR")]
    pub api_address: SocketAddr,
    /// Address of the in-memory OCI registry the examples' components are pushed to (plain
    /// HTTP, loopback).
    #[arg(long, default_value = "127.0.0.1:5001", value_name = "ADDR")]
    pub registry_address: SocketAddr,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub metrics_address: SocketAddr,
    /// Directory for compiled plugin modules, as for `run` [default:
    /// $XDG_CACHE_HOME/reconcile-host/modules or ~/.cache/reconcile-host/modules].
    #[arg(long, value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
}
