//! The `reconcile-host` command line: parsing, configuration precedence, and dispatch to each
//! subcommand (`run` itself is [`crate::serve`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{ConfigFileError, HostConfig, duration};

pub use crate::exit::{EXIT_CONFIG, EXIT_INTERRUPTED};

/// Kubernetes controller machinery that dispatches reconciles to WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "reconcile-host", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the host: informers, controllers, leader election, metrics and health endpoints.
    ///
    /// Settings come from, in increasing precedence: defaults, the --config file, environment
    /// variables, flags.
    Run(Box<RunArgs>),
    /// Run the host on an embedded in-memory API server with the example plugins loaded and
    /// their samples applied: no cluster needed. Build the examples first (`make dev` does both).
    Dev(crate::dev::DevArgs),
    /// Start a plugin of your own: write a project (a reconciler, its manifest, a unit test
    /// against a fake host, scripts to test, build and ship it, the SDK and the WIT) into a new
    /// directory, outside any checkout of the host.
    New(crate::scaffold::NewArgs),
    /// Write the bindings of the `reconciler` world this host serves, for a C or Go reconciler's
    /// build (what a project from `new --lang c|go` runs in build.sh).
    #[cfg(feature = "guest-toolchain")]
    Bindings(crate::scaffold::toolchain::BindingsArgs),
    /// Turn a core module (wasm32-wasip1, a reactor exporting `reconcile`) into a component of
    /// the `reconciler` world, with WASI preview1 adapted to preview2 (what a project from
    /// `new --lang c|go` runs in build.sh).
    #[cfg(feature = "guest-toolchain")]
    Componentize(crate::scaffold::toolchain::ComponentizeArgs),
    /// Check a plugin manifest and its component against the `reconciler` world: prints the
    /// module's digest, the imports it uses and the grants it has, then calls `reconcile` once
    /// with a sample object (no cluster; calls recorded, not applied). Exits 1 when that call
    /// fails (an error, a denied call, a trap), naming the fix; 2 on any other problem.
    Check(crate::tools::CheckArgs),
    /// Run one reconcile locally, with no cluster: the object and the cache come from files,
    /// the guest's API calls are recorded and printed, not applied. Exits 0 when the reconcile
    /// succeeds, 1 when the guest fails, 2 on bad input.
    Reconcile(crate::tools::ReconcileArgs),
    /// Re-run a recorded reconcile (a bundle from a host's `/debug/recordings` or
    /// `--record-dir`, or `reconcile --record`) with the recorded answers, clocks and random
    /// bytes, and print the first host calls or the outcome that differ. Exits 0 when nothing
    /// differs, 1 when something does, 2 on bad input.
    Replay(crate::tools::ReplayArgs),
    /// `kubectl reconcile`: why an object was reconciled, on every replica, and which plugins
    /// are busy; read through the API server. Run `reconcile-host kubectl install` once, then
    /// `kubectl reconcile why configmap/settings`.
    Kubectl(crate::kubectl::KubectlArgs),
    /// Print the RBAC objects (ClusterRole, Roles, bindings) that plugin manifests need, as
    /// YAML for `kubectl apply -f -`. Exits 2 when a manifest is unusable.
    Rbac(Box<crate::rbac::RbacArgs>),
    /// Print the CustomResourceDefinitions of `ReconcilerPlugin` (plugins declared as cluster
    /// objects) and `NamespacedReconcilerPlugin` (plugins a team declares in its namespace),
    /// as YAML for `kubectl apply -f -`.
    Crd,
    /// Publish a component to an OCI registry in the CNCF wasm artifact layout (config
    /// `application/vnd.wasm.config.v0+json` listing its world, imports and exports; one
    /// `application/wasm` layer) and print its digest reference
    /// `<registry>/<repository>@sha256:…` for a ReconcilerPlugin's `oci`.
    Push(crate::delivery::oci::push::PushArgs),
    /// Pull a module from an OCI registry into the disk cache as the host does, verifying its
    /// digests; prints the manifest digest, the layer digest and the file.
    #[command(hide = true)]
    Pull(crate::delivery::oci::push::PullArgs),
}

/// Flags of `run`; each overrides the config file.
#[derive(Debug, Default, Args)]
pub struct RunArgs {
    /// YAML configuration file (see docs/configuration.md).
    #[arg(long, env = "RECONCILE_HOST_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Kubeconfig to use [default: $KUBECONFIG, ~/.kube/config, then in-cluster].
    #[arg(long, env = "RECONCILE_HOST_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context [default: the current context].
    #[arg(long, env = "RECONCILE_HOST_CONTEXT")]
    pub context: Option<String>,
    /// In-cluster (no kubeconfig found): the directory holding the service account's `token`,
    /// `ca.crt` and `namespace` [default: /var/run/secrets/kubernetes.io/serviceaccount].
    #[arg(long, env = "RECONCILE_HOST_SERVICE_ACCOUNT_DIR", value_name = "DIR")]
    pub service_account_dir: Option<PathBuf>,
    /// Elect one active replica through a Lease [default: true].
    #[arg(long, env = "RECONCILE_HOST_LEADER_ELECT", value_name = "BOOL")]
    pub leader_elect: Option<bool>,
    /// How the replicas share the work: `leader` (one replica dispatches every key) or
    /// `sharded` (each live replica dispatches its share, placed by consistent hashing)
    /// [default: leader].
    #[arg(long, env = "RECONCILE_HOST_ELECTION_MODE", value_name = "MODE")]
    pub election_mode: Option<crate::config::ElectionMode>,
    /// Name of the Lease [default: reconcile-host].
    #[arg(long, env = "RECONCILE_HOST_LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Namespace of the Lease [default: the host's namespace: in a pod its service account's,
    /// with a kubeconfig the context's, else `default`].
    #[arg(long, env = "RECONCILE_HOST_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long followers wait before taking over [default: 15s].
    #[arg(long, env = "RECONCILE_HOST_LEASE_DURATION", value_parser = duration::parse)]
    pub lease_duration: Option<Duration>,
    /// How long the leader tries to renew before giving up [default: 10s].
    #[arg(long, env = "RECONCILE_HOST_RENEW_DEADLINE", value_parser = duration::parse)]
    pub renew_deadline: Option<Duration>,
    /// How often to try to acquire or renew [default: 2s].
    #[arg(long, env = "RECONCILE_HOST_RETRY_PERIOD", value_parser = duration::parse)]
    pub retry_period: Option<Duration>,
    /// Exit after losing leadership instead of campaigning again [default: false].
    #[arg(
        long,
        env = "RECONCILE_HOST_EXIT_ON_LOST_LEADERSHIP",
        value_name = "BOOL"
    )]
    pub exit_on_lost_leadership: Option<bool>,
    /// Address of /metrics, /healthz and /readyz [default: 0.0.0.0:8080].
    #[arg(long, env = "RECONCILE_HOST_METRICS_ADDRESS", value_name = "ADDR")]
    pub metrics_address: Option<SocketAddr>,
    /// Who may read /metrics and /debug/*: `kubernetes` (HTTPS, a bearer token the API server
    /// authenticates and authorizes), `none` (plain HTTP), or `auto`: `kubernetes` in a cluster
    /// [default: auto].
    #[arg(
        long,
        env = "RECONCILE_HOST_TELEMETRY_AUTHORIZATION",
        value_name = "MODE",
        value_enum
    )]
    pub telemetry_authorization: Option<crate::config::TelemetryAuthorization>,
    /// Requests per second to the API server [default: 5].
    #[arg(long, env = "RECONCILE_HOST_QPS")]
    pub qps: Option<f64>,
    /// Requests allowed at once above --qps [default: 10].
    #[arg(long, env = "RECONCILE_HOST_BURST")]
    pub burst: Option<u32>,
    /// Requests per second of each plugin whose manifest sets no `apiRateLimit` [default: 5].
    #[arg(long, env = "RECONCILE_HOST_PLUGIN_QPS")]
    pub plugin_qps: Option<f64>,
    /// Requests at once of each plugin whose manifest sets no `apiRateLimit` [default: 10].
    #[arg(long, env = "RECONCILE_HOST_PLUGIN_BURST")]
    pub plugin_burst: Option<u32>,
    /// How long reconciles in progress may finish after a shutdown signal [default: 30s].
    #[arg(long, env = "RECONCILE_HOST_DRAIN_TIMEOUT", value_parser = duration::parse)]
    pub drain_timeout: Option<Duration>,
    /// A plugin manifest, or a directory of `<name>/plugin.yaml` manifests, to load (repeat
    /// for more; added to the config file's `plugins`).
    #[arg(
        long = "plugin",
        env = "RECONCILE_HOST_PLUGINS",
        value_name = "PATH",
        value_delimiter = ','
    )]
    pub plugins: Vec<PathBuf>,
    /// Also load plugins declared as `ReconcilerPlugin` objects (`reconcile-host crd` prints
    /// their CRD) [default: false].
    #[arg(long, env = "RECONCILE_HOST_PLUGIN_OBJECTS", value_name = "BOOL")]
    pub plugin_objects: Option<bool>,
    /// Directory for compiled plugin modules, so restarts do not recompile them [default:
    /// $XDG_CACHE_HOME/reconcile-host/modules or ~/.cache/reconcile-host/modules].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    pub module_cache: Option<PathBuf>,
    /// Unmap a plugin module's compiled code after it goes this long without a call; its next
    /// call maps it again from the module cache (0s: never) [default: 60s].
    #[arg(long, env = "RECONCILE_HOST_UNLOAD_IDLE_MODULES_AFTER", value_parser = duration::parse)]
    pub unload_idle_modules_after: Option<Duration>,
    /// Also write every recorded reconcile (failures, and keys asked for on the health port)
    /// to this directory, one JSON bundle a file, for `reconcile-host replay`.
    #[arg(long, env = "RECONCILE_HOST_RECORD_DIR", value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Serve each plugin's recorded reconciles on the telemetry port and take requests to
    /// record a key there; bundles hold what plugins read, so serve them only behind
    /// --telemetry-authorization or on a private port [default: false].
    #[arg(long, env = "RECONCILE_HOST_SERVE_RECORDINGS", value_name = "BOOL")]
    pub serve_recordings: Option<bool>,
}

impl RunArgs {
    /// The configuration: the file (or defaults), overridden by every flag and variable set.
    ///
    /// # Errors
    /// When the file cannot be read or parsed, or the result is invalid.
    pub fn resolve(&self) -> Result<HostConfig, ConfigFileError> {
        let mut config = match &self.config {
            Some(path) => HostConfig::load(path)?,
            None => HostConfig::default(),
        };
        let le = &mut config.leader_election;
        set(&mut config.kubeconfig, self.kubeconfig.clone().map(Some));
        set(&mut config.context, self.context.clone().map(Some));
        set(
            &mut config.service_account_dir,
            self.service_account_dir.clone().map(Some),
        );
        set(&mut le.enabled, self.leader_elect);
        set(&mut le.mode, self.election_mode);
        set(&mut le.lease_name, self.lease_name.clone());
        set(
            &mut le.lease_namespace,
            self.lease_namespace.clone().map(Some),
        );
        set(&mut le.lease_duration, self.lease_duration);
        set(&mut le.renew_deadline, self.renew_deadline);
        set(&mut le.retry_period, self.retry_period);
        set(&mut le.exit_on_loss, self.exit_on_lost_leadership);
        set(&mut config.telemetry.address, self.metrics_address);
        set(
            &mut config.telemetry.authorization,
            self.telemetry_authorization,
        );
        set(&mut config.client.qps, self.qps);
        set(&mut config.client.burst, self.burst);
        set(&mut config.plugin_client.qps, self.plugin_qps);
        set(&mut config.plugin_client.burst, self.plugin_burst);
        set(&mut config.shutdown.drain_timeout, self.drain_timeout);
        config.plugins.extend(self.plugins.iter().cloned());
        set(&mut config.plugin_objects, self.plugin_objects);
        set(
            &mut config.module_cache,
            self.module_cache.clone().map(Some),
        );
        set(
            &mut config.modules.unload_idle_after,
            self.unload_idle_modules_after,
        );
        set(
            &mut config.recording.directory,
            self.record_dir.clone().map(Some),
        );
        set(&mut config.recording.serve, self.serve_recordings);
        config.validate()?;
        Ok(config)
    }
}

impl Command {
    /// The log filter when `RUST_LOG` is not set: `info` (`warn` for the authoring commands);
    /// in `dev`, also every reconcile (debug events of the controller loop).
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Dev(_) => "info,reconcile_host::controller=debug",
            Command::Run(_) => "info",
            Command::Check(_) | Command::Rbac(_) | Command::Crd | Command::New(_) => "warn",
            Command::Push(_) | Command::Pull(_) | Command::Kubectl(_) => "warn",
            #[cfg(feature = "guest-toolchain")]
            Command::Bindings(_) | Command::Componentize(_) => "warn",
            Command::Reconcile(_) | Command::Replay(_) => "info",
        }
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

/// Runs `reconcile-host` with `cli`; the process exit code.
pub async fn main(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Rbac(args) => crate::rbac::rbac(*args).await,
        Command::Crd => print_crd(),
        Command::New(args) => crate::scaffold::new(&args),
        #[cfg(feature = "guest-toolchain")]
        Command::Bindings(args) => crate::scaffold::toolchain::bindings(&args),
        #[cfg(feature = "guest-toolchain")]
        Command::Componentize(args) => crate::scaffold::toolchain::componentize(&args),
        Command::Push(args) => crate::delivery::oci::push::push(args).await,
        Command::Pull(args) => crate::delivery::oci::push::pull(args).await,
        Command::Run(args) => {
            let config = match args.resolve() {
                Ok(config) => config,
                Err(error) => {
                    eprintln!("error: {}", crate::error_chain(&error));
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            report(crate::serve::run(config).await)
        }
        Command::Dev(args) => report(crate::dev::dev(args).await),
        Command::Check(args) => crate::tools::check(args).await,
        Command::Reconcile(args) => crate::tools::reconcile(args).await,
        Command::Replay(args) => crate::tools::replay(args).await,
        Command::Kubectl(args) => crate::kubectl::kubectl(args).await,
    }
}

fn report(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|error| {
        eprintln!("error: {error:#}");
        ExitCode::FAILURE
    })
}

/// `reconcile-host crd`: the `ReconcilerPlugin` and `NamespacedReconcilerPlugin` CRDs,
/// generated from the manifest's types.
fn print_crd() -> ExitCode {
    use kube::CustomResourceExt;
    let crds = [
        crate::manifest::ReconcilerPlugin::crd(),
        crate::manifest::namespaced::crd(),
    ];
    let yaml: Result<Vec<String>, _> = crds.iter().map(serde_yaml_ng::to_string).collect();
    match yaml {
        Ok(documents) => {
            print!("{}", documents.join("---\n"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: cannot write the ReconcilerPlugin CRD as YAML: {error}");
            ExitCode::FAILURE
        }
    }
}
