//! `embedded-apiserver`: runs the in-memory Kubernetes API server standalone for kubectl.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use embedded_apiserver::{ApiServer, Config};

#[derive(Parser)]
#[command(
    version,
    about = "An in-memory Kubernetes API server for development and tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts the server, writes a kubeconfig and serves until Ctrl-C.
    Serve {
        /// Where to write the kubeconfig (it embeds the generated CA).
        #[arg(long, default_value = "embedded-apiserver.kubeconfig")]
        kubeconfig: PathBuf,
        /// Plain HTTP listen address.
        #[arg(long, default_value = "127.0.0.1:0")]
        http_addr: SocketAddr,
        /// HTTPS listen address (the kubeconfig points here).
        #[arg(long, default_value = "127.0.0.1:0")]
        https_addr: SocketAddr,
        /// Watch history window, in events; older resourceVersions get 410 Gone.
        #[arg(long, default_value_t = 10_000)]
        history_limit: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "embedded_apiserver=info".into()),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            kubeconfig,
            http_addr,
            https_addr,
            history_limit,
        } => {
            let config = Config::default()
                .http_addr(http_addr)
                .https_addr(Some(https_addr))
                .history_limit(history_limit);
            let server = ApiServer::start(config)
                .await
                .context("failed to start the embedded API server")?;
            server.write_kubeconfig(&kubeconfig).with_context(|| {
                format!("failed to write the kubeconfig to {}", kubeconfig.display())
            })?;
            let path = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
            println!("embedded API server running");
            println!("  HTTPS: {}", server.https_url().unwrap_or_default());
            println!("  HTTP:  {}", server.url());
            println!("point kubectl at it with:");
            println!("  export KUBECONFIG={}", path.display());
            println!("  kubectl get namespaces");
            println!("stop with Ctrl-C");
            tokio::signal::ctrl_c()
                .await
                .context("failed to listen for Ctrl-C")?;
            println!("shutting down");
            server.shutdown().await;
        }
    }
    Ok(())
}
