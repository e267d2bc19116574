//! The `reconcile-host` binary.

use clap::Parser;

/// Kubernetes controller machinery that dispatches reconciles to WebAssembly components.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
