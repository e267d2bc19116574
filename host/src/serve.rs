//! Running the host (`reconcile-host run`, and `dev` on its embedded API server): from a resolved
//! configuration to informers, controllers, leader election, plugins and the telemetry endpoints,
//! until a signal.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::client::{self, ClientLimits};
use crate::cluster_config::{ClusterConfig, ClusterSource, cluster_config};
use crate::config::{HostConfig, TelemetryAuthorization, TelemetryConfig};
use crate::delivery::objects::PluginObjects;
use crate::delivery::oci::Registry;
use crate::delivery::supervisor::Plugins;
use crate::election::{ElectionConfig, default_identity};
use crate::exit::{EXIT_CONFIG, EXIT_INTERRUPTED};
use crate::manifest::ApiRateLimit;
use crate::runtime::{ElectionSettings, Runtime, RuntimeSettings};
use crate::telemetry::access::Access;
use crate::telemetry::{Exposure, Telemetry};
use crate::wasm::engine::{EngineSettings, PluginEngine};
use crate::wasm::kube_api::KubeApis;
use crate::wasm::module::ModuleLoader;

/// The leader election client's limits: an attempt is a GET and a PUT every retry period, so
/// twice that rate with room for retries (at least 5 qps, burst 10).
fn election_limits(retry_period: std::time::Duration) -> ClientLimits {
    let attempts = 1.0 / retry_period.as_secs_f64().max(0.001);
    ClientLimits::default()
        .qps((4.0 * attempts).max(5.0))
        .burst(10)
}

/// How the telemetry port is served: secured (HTTPS, the API server's checks with `client`)
/// unless `telemetry.authorization` is `none` (`auto` is resolved before).
fn exposure(telemetry: &TelemetryConfig, client: &kube::Client) -> anyhow::Result<Exposure> {
    if telemetry.authorization == TelemetryAuthorization::None {
        return Ok(Exposure::Open);
    }
    let files = telemetry
        .tls
        .cert_file
        .as_deref()
        .zip(telemetry.tls.key_file.as_deref());
    Ok(Exposure::Secured {
        access: Access::new(client.clone()),
        tls: crate::telemetry::tls::server_config(files)?,
    })
}

/// `run`: the host until a signal; a second signal exits at once. Exits 2 when no API server
/// configuration can be found (see [`crate::cluster_config`]).
pub(crate) async fn run(config: HostConfig) -> anyhow::Result<ExitCode> {
    let source = ClusterSource {
        kubeconfig: config.kubeconfig.clone(),
        context: config.context.clone(),
        service_account_dir: config.service_account_dir.clone(),
    };
    let found = cluster_config(&source).await.and_then(|cluster| {
        let lease_namespace = match &config.leader_election.lease_namespace {
            Some(namespace) => namespace.clone(),
            None if config.leader_election.enabled => cluster.namespace()?.to_owned(),
            None => String::new(),
        };
        Ok((cluster, lease_namespace))
    });
    let (
        ClusterConfig {
            config: kube_config,
            origin,
            ..
        },
        lease_namespace,
    ) = match found {
        Ok(found) => found,
        Err(error) => {
            eprintln!("error: {}", crate::error_chain(&error));
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    tracing::info!(url = %kube_config.cluster_url, from = %origin, "API server");
    let mut config = config;
    if config.telemetry.authorization == TelemetryAuthorization::Auto {
        config.telemetry.authorization = match origin {
            crate::cluster_config::Origin::InCluster(_) => TelemetryAuthorization::Kubernetes,
            crate::cluster_config::Origin::Kubeconfig(_) => TelemetryAuthorization::None,
        };
    }
    // Flushed when the host returns.
    let _traces = match crate::telemetry::traces::init_from_env() {
        Ok(traces) => traces,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    host(config, kube_config, lease_namespace).await
}

/// The host on `kube_config` with `config`, until a signal; its Lease in `lease_namespace`.
async fn host(
    config: HostConfig,
    kube_config: kube::Config,
    lease_namespace: String,
) -> anyhow::Result<ExitCode> {
    let limits = ClientLimits::default()
        .qps(config.client.qps)
        .burst(config.client.burst);
    let client =
        client::client(kube_config.clone(), &limits).context("cannot build the API client")?;
    // This process's name among the replicas: its Lease identity, and how it signs its answers.
    let replica = default_identity();
    // Where the host's own Leases live: no plugin grant may reach them.
    let host_leases = (config.leader_election.enabled).then(|| lease_namespace.clone());
    let election = config.leader_election.enabled.then(|| ElectionSettings {
        lease_namespace,
        lease_name: config.leader_election.lease_name.clone(),
        config: ElectionConfig {
            identity: replica.clone(),
            lease_duration: config.leader_election.lease_duration,
            renew_deadline: config.leader_election.renew_deadline,
            retry_period: config.leader_election.retry_period,
            release_on_cancel: true,
        },
        exit_on_loss: config.leader_election.exit_on_loss,
        sharded: config.leader_election.mode == crate::config::ElectionMode::Sharded,
    });
    if let Some(election) = &election {
        if election.sharded {
            tracing::info!(identity = %election.config.identity,
                ring = %format!("{}/{}", election.lease_namespace, election.lease_name),
                "sharded: dispatching this replica's share of the keys");
        } else {
            tracing::info!(identity = %election.config.identity,
                lease = %format!("{}/{}", election.lease_namespace, election.lease_name),
                "campaigning for leadership");
        }
    }
    let telemetry = Telemetry::new();
    telemetry.histories().set_replica(&replica);
    let serving = CancellationToken::new();
    let exposure = match exposure(&config.telemetry, &client) {
        Ok(exposure) => exposure,
        Err(error) => {
            eprintln!("error: {error:#}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let server = match telemetry
        .serve(config.telemetry.address, exposure, serving.clone())
        .await
    {
        Ok(server) => server,
        Err(error) => {
            eprintln!(
                "error: cannot serve /metrics, /healthz and /readyz on {}: {}; pick another \
                 --metrics-address",
                config.telemetry.address,
                crate::error_chain(&error)
            );
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    // Not ready until the API server answered and the plugins are loaded.
    let startup = telemetry.health().gate("startup").ok();
    let shutdown = CancellationToken::new();
    let interrupted = CancellationToken::new();
    tokio::spawn(signals(shutdown.clone(), interrupted.clone()));
    if !wait_for_api_server(
        &client,
        &kube_config.cluster_url,
        startup.as_ref(),
        &shutdown,
    )
    .await
    {
        serving.cancel();
        let _ = server.await;
        tracing::info!("stopped before the API server was reached");
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = Runtime::with_telemetry(
        client.clone(),
        RuntimeSettings {
            election,
            drain_timeout: config.shutdown.drain_timeout,
        },
        telemetry,
    );
    // Lease renewals go through a client of their own, built on the Lease thread: no informer
    // or plugin request, and no busy worker, can make them wait.
    runtime.use_election_config(
        kube_config.clone(),
        election_limits(config.leader_election.retry_period),
    );
    if let Some(gate) = &startup {
        gate.set_not_ready("loading the plugins");
    }
    if config.plugin_objects {
        crate::config::remove_abandoned_plugin_objects_dirs(&std::env::temp_dir());
    }
    let objects = match config.plugin_objects.then(|| {
        PluginObjects::new(
            client.clone(),
            registry(&config),
            config.plugin_objects_dir(),
            replica.clone(),
        )
    }) {
        None => None,
        Some(Ok(objects)) => Some(objects),
        Some(Err(error)) => {
            eprintln!(
                "error: cannot prepare {} for the plugins of ReconcilerPlugin objects: {error}; \
                 point TMPDIR at a writable directory",
                config.plugin_objects_dir().display()
            );
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let object_dir = objects.as_ref().map(|objects| objects.dir().to_owned());
    let plugins = match load_plugins(
        &runtime,
        &config,
        kube_config,
        object_dir.clone(),
        host_leases,
    )
    .await
    {
        Ok(plugins) => plugins,
        Err(error) => {
            eprintln!("error: {error:#}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if let (Some(objects), Some(plugins)) = (objects, &plugins) {
        tokio::spawn(objects.run(
            plugins.clone(),
            runtime.leading(),
            Some(runtime.registry().store_epoch()),
            shutdown.clone(),
        ));
    }
    if let Some(plugins) = &plugins {
        let idle = config.modules.unload_idle_after;
        tokio::spawn(Arc::clone(plugins).unload_idle_modules(idle, shutdown.clone()));
    }
    if let Some(gate) = &startup {
        gate.set_ready();
    }
    let sources = plugins.map(|plugins| {
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if let Err(error) = plugins.watch(stop).await {
                tracing::warn!(%error, "cannot watch the plugin sources; changes need a restart");
            }
        })
    });
    tokio::select! {
        result = runtime.run(shutdown) => {
            // The source watcher ends on the same token; wait for it so no rescan outlives
            // the runtime.
            if let Some(sources) = sources {
                let _ = sources.await;
            }
            serving.cancel();
            let _ = server.await;
            // The plugins of ReconcilerPlugin objects are rebuilt from the objects at every
            // start: nothing under their directory outlives the process.
            if let Some(dir) = &object_dir
                && let Err(error) = std::fs::remove_dir_all(dir)
            {
                tracing::warn!(dir = %dir.display(), %error, "cannot remove the plugin-objects directory");
            }
            result.context("the host stopped")?;
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        }
        () = interrupted.cancelled() => {
            tracing::warn!("second signal: exiting without finishing the shutdown");
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
    }
}

/// Loads every plugin the configuration names into `runtime`; `None` when there are none.
async fn load_plugins(
    runtime: &Runtime,
    config: &HostConfig,
    kube_config: kube::Config,
    object_dir: Option<PathBuf>,
    host_leases: Option<String>,
) -> anyhow::Result<Option<Arc<Plugins>>> {
    if config.plugins.is_empty() && object_dir.is_none() {
        tracing::warn!(
            "no plugins configured; pass --plugin <manifest or directory> or set `plugins:`, \
             or --plugin-objects true to load ReconcilerPlugin objects"
        );
        return Ok(None);
    }
    let mut sources = config.plugins.clone();
    sources.extend(object_dir);
    let engine = engine(config.module_cache_dir())?;
    tracing::info!(pooling = engine.pooling(), "WebAssembly engine ready");
    let budget = &config.plugin_client;
    let apis = KubeApis::new(
        kube_config,
        ApiRateLimit {
            qps: budget.qps,
            burst: budget.burst,
        },
        ApiRateLimit {
            qps: budget.max_qps,
            burst: budget.max_burst,
        },
    );
    let apis = apis.with_fence(runtime.fence());
    if let Some(directory) = &config.recording.directory {
        std::fs::create_dir_all(directory).with_context(|| {
            format!(
                "cannot create the recording directory {}; fix recording.directory (or \
                 --record-dir) or make it writable",
                directory.display()
            )
        })?;
    }
    let plugins = Arc::new(
        Plugins::new(runtime.clone(), ModuleLoader::new(engine), apis, sources)
            .with_recording(config.recording.clone())
            .with_host_leases(host_leases)
            .with_identity(config.plugin_identity.clone())
            .with_tenants(
                crate::tenant::Tenants::new(config.tenants.clone())
                    .with_metrics(runtime.telemetry().metrics().clone()),
            ),
    );
    let loaded = plugins
        .load_all()
        .await
        .context("cannot load the plugins")?;
    if loaded == 0 && !config.plugin_objects {
        tracing::warn!(sources = ?config.plugins,
            "no plugin manifests found; add <name>/plugin.yaml to a plugin directory (the host \
             loads them when they appear)");
    }
    tracing::info!(
        plugins = loaded,
        "plugins loaded; watching their sources for changes"
    );
    Ok(Some(plugins))
}

/// The registry client for `oci` plugin sources; `None` (logged) when the `oci` settings are
/// unusable, so only those plugins fail.
fn registry(config: &HostConfig) -> Option<Arc<Registry>> {
    let dir = (config.oci.cache_dir_beside(config.module_cache_dir()))
        .unwrap_or_else(|| std::env::temp_dir().join("reconcile-host-oci"));
    match Registry::new(&config.oci, dir) {
        Ok(registry) => Some(Arc::new(registry)),
        Err(error) => {
            tracing::error!(error = %crate::error_chain(&error),
                "cannot start the registry client; ReconcilerPlugins with `oci` will not load");
            None
        }
    }
}

/// The engine, caching compiled modules in `cache` if it is usable (a warning otherwise).
fn engine(cache: Option<PathBuf>) -> anyhow::Result<PluginEngine> {
    let settings = EngineSettings {
        module_cache: cache,
        ..EngineSettings::default()
    };
    match PluginEngine::new(settings.clone()) {
        Err(error @ crate::wasm::engine::EngineError::Cache(..)) => {
            tracing::warn!(error = %crate::error_chain(&error), "compiling plugin modules without a cache");
            PluginEngine::new(EngineSettings {
                module_cache: None,
                ..settings
            })
            .context("cannot start the WebAssembly engine")
        }
        other => other.context("cannot start the WebAssembly engine"),
    }
}

/// The longest wait between two attempts to reach the API server at start.
const REACH_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until the API server at `url` answers (any HTTP answer counts: it is up), retrying
/// with backoff from 500 ms to [`REACH_BACKOFF_MAX`] and saying so at each attempt; `false` if
/// `shutdown` came first. `gate` fails with the reason meanwhile.
async fn wait_for_api_server(
    client: &kube::Client,
    url: &http::Uri,
    gate: Option<&crate::telemetry::ReadinessGate>,
    shutdown: &CancellationToken,
) -> bool {
    let mut delay = std::time::Duration::from_millis(500);
    loop {
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return false,
            attempt = client.apiserver_version() => attempt,
        };
        match attempt {
            Ok(version) => {
                tracing::info!(%url, version = %version.git_version, "API server reached");
                return true;
            }
            Err(kube::Error::Api(status)) => {
                tracing::info!(%url, code = status.code, "API server reached");
                return true;
            }
            Err(error) => {
                let reason = format!(
                    "cannot reach the API server at {url}: {}; check that it is up, that the \
                     address is right and that its certificate is trusted (the kubeconfig's or \
                     the service account's CA)",
                    crate::error_chain(&error)
                );
                tracing::warn!(retry_in = ?delay, "{reason}");
                if let Some(gate) = gate {
                    gate.set_not_ready(reason);
                }
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(REACH_BACKOFF_MAX);
    }
}

/// First SIGTERM/SIGINT: graceful shutdown. Second: exit now.
async fn signals(shutdown: CancellationToken, interrupted: CancellationToken) {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                return;
            }
        };
    for round in 0..2 {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        if round == 0 {
            tracing::info!("shutting down: draining reconciles, then releasing the lease");
            shutdown.cancel();
        } else {
            interrupted.cancel();
        }
    }
}
