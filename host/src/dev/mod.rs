//! `dev`: the host on the embedded API server with the example plugins loaded and their sample
//! objects applied, so a newcomer sees reconcilers work with no cluster.
//!
//! The embedded API server is in the build only with the `dev-server` feature (on by default, so
//! `cargo run` and `make dev` have it; off in the static binary of the container image). Without
//! it, `dev` says how to get a build that has it and exits 2.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[cfg(feature = "dev-server")]
mod server;

/// Flags of `dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory of examples: each `<name>/plugin.yaml` is loaded and each
    /// `<name>/samples/*.yaml` applied.
    #[arg(long, default_value = "examples", value_name = "DIR")]
    pub examples: PathBuf,
    /// Where to write the kubeconfig of the embedded API server.
    #[arg(long, default_value = "target/dev/kubeconfig", value_name = "FILE")]
    pub kubeconfig_out: PathBuf,
    /// Address of the embedded API server (HTTPS; the kubeconfig points here).
    #[arg(long, default_value = "127.0.0.1:6443", value_name = "ADDR")]
    pub api_address: SocketAddr,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub metrics_address: SocketAddr,
    /// Directory for compiled plugin modules, as for `run` [default:
    /// $XDG_CACHE_HOME/reconcile-host/modules or ~/.cache/reconcile-host/modules].
    #[arg(long, value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
}

/// Runs `dev` until a signal.
///
/// # Errors
/// When the API server cannot start, a sample cannot be applied or a plugin cannot load.
#[cfg(feature = "dev-server")]
pub async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    server::dev(args).await
}

/// Without the `dev-server` feature: says how to get a build with the embedded API server and
/// exits 2 ([`EXIT_CONFIG`](crate::exit::EXIT_CONFIG)).
///
/// # Errors
/// Never; the result matches the `dev-server` build's.
#[cfg(not(feature = "dev-server"))]
#[allow(clippy::unused_async)]
pub async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    eprintln!("error: {WITHOUT_DEV_SERVER}");
    Ok(ExitCode::from(crate::exit::EXIT_CONFIG))
}

/// What `dev` says in a build without the embedded API server.
pub const WITHOUT_DEV_SERVER: &str = "`reconcile-host dev` needs the embedded API server, which \
     this build leaves out (it was built without the `dev-server` feature, as the container \
     image's static binary is); from the repository, run `make dev`, or build a host that has it \
     with `cargo build -p reconcile-host --features dev-server`";
