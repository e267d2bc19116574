//! The `dev-server` half of `dev`: starts the embedded API server, applies the examples' samples
//! and runs the host against it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use embedded_apiserver::{ApiServer, Config as ServerConfig};
use tokio_util::sync::CancellationToken;

use super::apply::{apply_samples, sample_files};
use super::args::DevArgs;
use super::examples::Examples;
use crate::config::HostConfig;

/// Runs `dev` until a signal.
///
/// # Errors
/// When the API server cannot start, a sample cannot be applied or a plugin cannot load.
pub(super) async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    if !args.registry_address.ip().is_loopback() {
        anyhow::bail!(
            "--registry-address {} is not a loopback address; the dev registry has no \
             authentication and takes pushes from anyone who reaches it: give 127.0.0.1:<port>",
            args.registry_address
        );
    }
    let manifests = crate::delivery::loader::manifest_paths(std::slice::from_ref(&args.examples))
        .with_context(|| {
        format!(
            "cannot read the examples in {}; run from the repository root or pass --examples",
            args.examples.display()
        )
    })?;
    // The registry's port is bound before the API server picks a free one for its plain HTTP
    // listener, so that pick cannot take it.
    let listener = tokio::net::TcpListener::bind(args.registry_address)
        .await
        .with_context(|| {
            format!(
                "cannot start the dev registry on {}; pass another --registry-address",
                args.registry_address
            )
        })?;
    let server = ApiServer::start(
        // RBAC and impersonation as a cluster has them: a plugin acting as a ServiceAccount
        // meets in `dev` the refusals it would meet there (the kubeconfig's user is admin).
        ServerConfig::default()
            .http_addr(SocketAddr::from(([127, 0, 0, 1], 0)))
            .https_addr(Some(args.api_address))
            .authorization(true),
    )
    .await
    .with_context(|| {
        format!(
            "cannot start the embedded API server on {}; pass another --api-address",
            args.api_address
        )
    })?;
    if let Some(dir) = args.kubeconfig_out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    server
        .write_kubeconfig(&args.kubeconfig_out)
        .context("cannot write the kubeconfig")?;
    let client = server
        .kube_client()
        .context("cannot connect to the embedded API server")?;
    let samples = sample_files(&args.examples)?;
    let applied = apply_samples(&client, &samples).await?;
    tracing::info!(objects = applied, files = samples.len(), "samples applied");

    let registry = super::registry::serve(listener)?.to_string();

    let kubeconfig =
        std::path::absolute(&args.kubeconfig_out).unwrap_or_else(|_| args.kubeconfig_out.clone());
    let mut config = HostConfig {
        kubeconfig: Some(kubeconfig.clone()),
        plugin_objects: true,
        module_cache: args.module_cache,
        ..HostConfig::default()
    };
    config.oci.insecure_registries.push(registry.clone());
    let examples = Arc::new(Examples {
        client: client.clone(),
        config: config.clone(),
        registry: registry.clone(),
        manifests: manifests.clone(),
    });
    examples.install_crd().await?;
    let declared = examples.declare().await?;
    tracing::info!(examples = declared, %registry, "examples pushed and declared as ReconcilerPlugins");
    let stop = CancellationToken::new();
    Arc::clone(&examples).follow(&args.examples, stop.clone());
    println!(
        "{}",
        banner(&kubeconfig, &manifests, &registry, args.metrics_address)
    );

    config.leader_election.enabled = false;
    config.telemetry.address = args.metrics_address;
    // `dev` serves its telemetry on loopback, open: plain HTTP, no checks.
    config.telemetry.authorization = crate::config::TelemetryAuthorization::None;
    config.client.qps = 50.0;
    config.client.burst = 100;
    config.plugin_client.qps = 50.0;
    config.plugin_client.burst = 100;
    let code = crate::serve::run(config).await;
    stop.cancel();
    server.shutdown().await;
    code
}

fn banner(kubeconfig: &Path, manifests: &[PathBuf], registry: &str, metrics: SocketAddr) -> String {
    let metrics = if metrics.port() == 0 {
        "a free port, named by the log line `serving /metrics`".to_owned()
    } else {
        format!("http://{metrics}/metrics")
    };
    let plugins: Vec<String> = manifests
        .iter()
        .map(|path| format!("    {}", path.display()))
        .collect();
    let kc = kubeconfig.display();
    format!(
        "\nreconcile-host dev: an in-memory API server and registry with the example plugins\n\
         \n  plugins (ReconcilerPlugin objects, components in {registry}/examples/<name>):\n{}\n\
         \n  kubeconfig: {kc}\n  metrics:    {metrics}\n\
         \n  try, in another terminal:\n\
         \x20   export KUBECONFIG={kc}\n\
         \x20   kubectl get reconcilerplugins                         # every example Ready\n\
         \x20   kubectl get websites,deployments,services             # website (Rust)\n\
         \x20   kubectl patch website hello --type merge -p '{{\"spec\":{{\"replicas\":3}}}}'\n\
         \x20   kubectl get website hello -o jsonpath='{{.status}}'\n\
         \x20   kubectl get websites.js.example.com hello-js -o yaml   # website-js (JavaScript)\n\
         \x20   kubectl get websites.go.example.com hello-go -o yaml   # website-go (Go)\n\
         \x20   kubectl get configmaps -A -l replicator.example.com/copy-of   # configmap-replicator \
         (Rust) and configmap-replicator-python\n\
         \x20   kubectl delete configmap shared-settings\n\
         \x20   kubectl get configmaps -n ttl-demo --watch             # ttl-reaper-c (C) deletes \
         short-lived after 2 minutes\n\
         \n  An edited example (its plugin.yaml, or any file under it) is pushed and declared again.\
         \n  Ctrl-C stops (drains reconciles first).\n",
        plugins.join("\n")
    )
}
