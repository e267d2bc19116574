//! `dev`: the host on the embedded API server with the example plugins loaded and their sample
//! objects applied, so a newcomer sees reconcilers work with no cluster.
//!
//! The embedded API server is in the build only with the `dev-server` feature (on by default, so
//! `cargo run` and `make dev` have it; off in the static binary of the container image). Without
//! it, `dev` says how to get a build that has it and exits 2.

use std::process::ExitCode;

#[cfg(feature = "dev-server")]
mod apply;
mod args;
#[cfg(feature = "dev-server")]
mod examples;
#[cfg(feature = "dev-server")]
mod registry;
#[cfg(feature = "dev-server")]
mod server;

pub use args::DevArgs;

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
