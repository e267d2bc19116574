//! The plugin lifecycle in a running host: the configured manifests are loaded at start, their
//! directories watched, and every change applied without a restart.
//!
//! # Flow
//! A change on disk (any event under a watched directory) is debounced for [`SETTLE`], then the
//! sources are rescanned and compared with what runs, by manifest text and module digest:
//! - a new manifest: its module is loaded, its informers (shared where possible) and workers
//!   start;
//! - a changed module (same manifest): compiled and checked off the hot path, then swapped in;
//!   calls in flight finish on the old module, new calls use the new one, and every key of the
//!   plugin is queued again so the new logic reaches existing objects;
//! - a changed manifest: the plugin's controller is rebuilt: the new one is prepared first, the
//!   old one drained and removed, and its queued keys handed to the new one (which also gets
//!   every cached object of its `for` kind);
//! - a removed manifest: the plugin stops taking keys, its reconciles in progress drain within
//!   the drain timeout, its workers and unshared informers stop.
//!
//! # Guarantees
//! - A module or manifest that fails to load (invalid bytes, a half-written file, the wrong
//!   world, a bad field) changes nothing: the previous version keeps serving. The failure is
//!   logged, counted in `plugin_reloads_total{plugin,result="failure"}`, and shown on `/readyz`
//!   as the failing check `plugin/<name>` until a good version loads.
//! - Content, not events, decides: a Kubernetes ConfigMap update (an atomic `..data` symlink
//!   swap), an editor's write-then-rename or a burst of writes causes one reload per changed
//!   content, and none when the content is unchanged.
//!
//! # Rooms
//! - `rescan.rs`: watching the sources and comparing them with what runs;
//! - `lifecycle.rs`: loading at start, then adding, swapping the module of, rebuilding and
//!   stopping one running plugin.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::controller::Intake;
use crate::delivery::reconciler::Plugin;
use crate::informer::{Scope, Store};
use crate::manifest::{Manifest, ManifestError};
use crate::runtime::{InformerError, Runtime};
use crate::telemetry::ReadinessGate;
use crate::wasm::api::ApiProvider;
use crate::wasm::module::{LoadError, ModuleLoader};

mod lifecycle;
mod rescan;

/// How long the sources must be quiet after a change before they are rescanned.
pub const SETTLE: Duration = Duration::from_millis(250);

/// Why a plugin could not be loaded or reloaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The module does not load.
    #[error("plugin `{plugin}`")]
    Module {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// A kind cannot be watched, or the controller cannot be built.
    #[error("plugin `{plugin}`")]
    Controller {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: Box<InformerError>,
    },
    /// Two manifests name the same plugin.
    #[error(
        "plugin manifests {first} and {second} both name the plugin `{plugin}`; plugin names \
         must be unique"
    )]
    DuplicateName {
        /// The name.
        plugin: String,
        /// The manifest loaded first.
        first: PathBuf,
        /// The other one.
        second: PathBuf,
    },
    /// The plugin sources cannot be listed.
    #[error("cannot list the plugin manifests")]
    Sources(#[source] std::io::Error),
}

/// Where loading a plugin source failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureStage {
    /// The manifest: unreadable, invalid (a field, a grant), or a name taken by another.
    Manifest,
    /// The module: unreadable, not a component, the wrong world, or not compiling.
    Module,
    /// The controller: a kind that cannot be watched.
    Controller,
}

impl FailureStage {
    fn of(error: &PluginError) -> Self {
        match error {
            PluginError::Manifest(_)
            | PluginError::DuplicateName { .. }
            | PluginError::Sources(_) => Self::Manifest,
            PluginError::Module { .. } => Self::Module,
            PluginError::Controller { .. } => Self::Controller,
        }
    }
}

/// The last failure to load a plugin source, kept until the source loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFailure {
    /// Where it failed.
    pub stage: FailureStage,
    /// The error with its causes.
    pub message: String,
}

/// What a plugin source (a manifest file) is doing now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceState {
    /// The digest of the module serving from this source, if one does.
    pub serving: Option<String>,
    /// The text of the manifest serving from this source, if one does.
    pub serving_manifest: Option<String>,
    /// The last failure since the source last loaded.
    pub failure: Option<SourceFailure>,
    /// Whether the serving plugin's reconciles keep failing.
    pub reconciles: Option<crate::delivery::health::Failing>,
}

/// One running plugin.
struct Running {
    path: PathBuf,
    manifest_text: String,
    plugin: Arc<Plugin>,
    queue: Intake,
    cache_scopes: Vec<Scope>,
    for_store: Arc<Store>,
    gate: Option<ReadinessGate>,
}

/// The plugins of a host and the sources they come from.
pub struct Plugins {
    runtime: Runtime,
    loader: ModuleLoader,
    apis: Arc<dyn ApiProvider>,
    sources: Vec<PathBuf>,
    running: tokio::sync::Mutex<BTreeMap<String, Running>>,
    failures: parking_lot::Mutex<HashMap<PathBuf, SourceFailure>>,
    recording: crate::config::RecordingConfig,
    host_leases: Option<String>,
    identity: crate::config::PluginIdentityConfig,
    tenants: Arc<crate::tenant::Tenants>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl Plugins {
    /// Plugins from `sources` (manifest files, or directories of `<name>/plugin.yaml`), run in
    /// `runtime`, compiled by `loader`, each calling the API through the backend `apis` gives
    /// it.
    #[must_use]
    pub fn new(
        runtime: Runtime,
        loader: ModuleLoader,
        apis: impl ApiProvider,
        sources: Vec<PathBuf>,
    ) -> Self {
        Self {
            runtime,
            loader,
            apis: Arc::new(apis),
            sources,
            running: tokio::sync::Mutex::default(),
            failures: parking_lot::Mutex::default(),
            recording: crate::config::RecordingConfig::default(),
            host_leases: None,
            identity: crate::config::PluginIdentityConfig::default(),
            tenants: Arc::default(),
        }
    }

    /// Refuses every manifest whose grants write Leases or ServiceAccounts in `namespace`, where
    /// the host keeps its leader and membership Leases (see [`crate::manifest::reserved`]).
    #[must_use]
    pub fn with_host_leases(mut self, namespace: Option<String>) -> Self {
        self.host_leases = namespace;
        self
    }

    /// Gives each plugin naming no ServiceAccount the default of `identity`, and refuses one
    /// that would act as the host where `identity` requires an account.
    #[must_use]
    pub fn with_identity(mut self, identity: crate::config::PluginIdentityConfig) -> Self {
        self.identity = identity;
        self
    }

    /// Holds the plugins of each tenant to the ceilings of `tenants`.
    #[must_use]
    pub fn with_tenants(mut self, tenants: crate::tenant::Tenants) -> Self {
        self.tenants = Arc::new(tenants);
        self
    }

    /// `manifest` (read from `path`) with the ServiceAccount it acts as, unless it would act
    /// as the host where that is refused, or a grant reaches what this host keeps for itself.
    fn checked(&self, mut manifest: Manifest, path: &Path) -> Result<Manifest, ManifestError> {
        manifest.service_account = self
            .identity
            .resolve(manifest.service_account.as_ref())
            .map_err(|problem| ManifestError::Invalid {
                path: path.to_owned(),
                field: "serviceAccountName".to_owned(),
                problem,
            })?;
        let Some(namespace) = &self.host_leases else {
            return Ok(manifest);
        };
        if let Some(account) = &manifest.service_account
            && account.namespace == *namespace
        {
            // The host's own ServiceAccount lives there: acting as an account of that
            // namespace could be acting as the host.
            return Err(ManifestError::Invalid {
                path: path.to_owned(),
                field: "serviceAccountName".to_owned(),
                problem: format!(
                    "ServiceAccount {account} is in namespace `{namespace}`, which this host \
                     keeps for itself (its own account and Leases); use an account in another \
                     namespace"
                ),
            });
        }
        for (i, grant) in manifest.grants.iter().enumerate() {
            if let Some(problem) =
                crate::manifest::reserved::host_namespace_refusal(grant, namespace)
            {
                return Err(ManifestError::Invalid {
                    path: path.to_owned(),
                    field: format!("grants[{i}]"),
                    problem,
                });
            }
        }
        Ok(manifest)
    }

    /// Records the plugins' reconciles as `settings` say (default: the last 16 failures of
    /// each plugin, in memory).
    #[must_use]
    pub fn with_recording(mut self, settings: crate::config::RecordingConfig) -> Self {
        self.recording = settings;
        self
    }

    /// Unloads the plugin modules idle for `idle` or longer (see
    /// [`Module`](crate::wasm::module::Module)), looking every quarter of `idle` and at least once a
    /// second, and reports `reconcile_host_plugin_modules` on every scrape, until `stop`. A zero
    /// `idle` unloads nothing.
    pub async fn unload_idle_modules(self: Arc<Self>, idle: Duration, stop: CancellationToken) {
        let counts = Arc::clone(&self);
        let _hook = (self.runtime.telemetry().metrics())
            .report_plugin_modules_on_scrape(move || counts.loader.counts());
        if idle.is_zero() || !self.loader.engine().has_module_cache() {
            if !idle.is_zero() {
                tracing::info!("no module cache: idle plugin modules stay loaded");
            }
            stop.cancelled().await;
            return;
        }
        let period = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let unloaded = self.loader.unload_idle(idle);
            if unloaded > 0 {
                crate::heap::release_free_memory();
                tracing::info!(modules = unloaded, idle = ?idle,
                    "unloaded idle plugin modules; their next call maps them again");
            }
        }
    }

    /// What the plugin source `path` (a manifest file) is doing: the module serving from it,
    /// and its last failure since it last loaded.
    pub async fn source_state(&self, path: &std::path::Path) -> SourceState {
        let running = self.running.lock().await;
        let serving = running.values().find(|running| running.path == path);
        SourceState {
            serving: serving.map(|running| running.plugin.module().digest().to_owned()),
            serving_manifest: serving.map(|running| running.manifest_text.clone()),
            reconciles: serving.and_then(|running| running.plugin.health().failing()),
            failure: self.failures.lock().get(path).cloned(),
        }
    }

    /// The metrics the plugins report to.
    #[must_use]
    pub fn metrics(&self) -> &crate::telemetry::Metrics {
        self.runtime.telemetry().metrics()
    }

    /// Names and module digests of the running plugins.
    pub async fn running(&self) -> Vec<(String, String)> {
        self.running
            .lock()
            .await
            .iter()
            .map(|(name, running)| (name.clone(), running.plugin.module().digest().to_owned()))
            .collect()
    }
}
