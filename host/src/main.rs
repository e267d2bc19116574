//! The `reconcile-host` binary.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use reconcile_host::cli::Cli;
use tracing_subscriber::prelude::*;

/// The command line; called as `kubectl-reconcile` (kubectl's plugin, a link to this binary),
/// the arguments of `reconcile-host kubectl`.
fn arguments() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called = args
        .first()
        .and_then(|arg0| std::path::Path::new(arg0).file_name())
        .is_some_and(|name| name == reconcile_host::kubectl::PLUGIN_NAME);
    if called {
        args.splice(0..1, ["reconcile-host".into(), "kubectl".into()]);
    }
    args
}

/// How long blocking work may still run after the host stopped before the process exits.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

fn main() -> ExitCode {
    let cli = Cli::parse_from(arguments());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(cli.command.default_log_filter()));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(tracing_subscriber::filter::filter_fn(
            reconcile_host::telemetry::logs::keeps,
        ));
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .with(reconcile_host::telemetry::log_book::PluginLogLayer)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(reconcile_host::cli::main(cli));
    // Blocking work still running (a module read stuck on a slow or hung filesystem) must not
    // hold the exit once the host has stopped.
    runtime.shutdown_timeout(EXIT_GRACE);
    code
}
