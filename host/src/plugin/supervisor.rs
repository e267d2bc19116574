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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::api::ApiProvider;
use super::context::PluginContext;
use super::loader::{cache_scopes, controller_spec, manifest_paths};
use super::manifest::{Manifest, ManifestError};
use super::module::{LoadError, Module, ModuleLoader, hex_sha256};
use super::reconciler::{FAILURE_REASONS, Plugin, PluginReconciler, RollbackHook};
use crate::controller::ObjectKey;
use crate::informer::{Scope, Store};
use crate::queue::RateLimitingQueue;
use crate::runtime::{InformerError, Runtime};
use crate::telemetry::ReadinessGate;

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

/// One running plugin.
struct Running {
    path: PathBuf,
    manifest_text: String,
    plugin: Arc<Plugin>,
    queue: RateLimitingQueue<ObjectKey>,
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
        }
    }

    /// Loads every plugin the sources name. At start, any failure is an error (a host with a
    /// broken configuration should not pretend to run).
    ///
    /// # Errors
    /// The first manifest or module that does not load.
    pub async fn load_all(&self) -> Result<usize, PluginError> {
        let manifests = manifest_paths(&self.sources).map_err(PluginError::Sources)?;
        let mut running = self.running.lock().await;
        for path in manifests {
            let (manifest, text) = read_manifest(&path)?;
            if let Some(other) = running.get(&manifest.name) {
                return Err(PluginError::DuplicateName {
                    plugin: manifest.name.clone(),
                    first: other.path.clone(),
                    second: path,
                });
            }
            let name = manifest.name.clone();
            let module = self.module(&manifest).await?;
            let plugin = self.start(path, manifest, text, module, Vec::new()).await?;
            self.runtime
                .telemetry()
                .metrics()
                .plugin_reloaded(&name, true);
            running.insert(name, plugin);
        }
        Ok(running.len())
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

    /// Watches the sources until `stop`, applying every change (see the module's Flow).
    ///
    /// # Errors
    /// When the file watcher cannot be set up.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) -> Result<(), notify::Error> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut watcher = RecommendedWatcher::new(
            move |event: notify::Result<notify::Event>| {
                let _ = tx.send(event.is_ok());
            },
            notify::Config::default(),
        )?;
        for source in &self.sources {
            let (path, mode) = if source.is_dir() {
                (source.as_path(), RecursiveMode::Recursive)
            } else {
                (
                    source.parent().unwrap_or(Path::new(".")),
                    RecursiveMode::NonRecursive,
                )
            };
            watcher.watch(path, mode)?;
            tracing::info!(path = %path.display(), "watching plugin sources");
        }
        // Modules kept elsewhere (e.g. a build's output directory) are watched too, so a
        // rebuilt component reloads without touching its manifest.
        let module_dirs: std::collections::BTreeSet<PathBuf> = self
            .running
            .lock()
            .await
            .values()
            .filter_map(|r| {
                r.plugin
                    .context()
                    .manifest
                    .module
                    .parent()
                    .map(Path::to_owned)
            })
            .filter(|dir| !self.sources.iter().any(|source| dir.starts_with(source)))
            .collect();
        for dir in module_dirs {
            match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => tracing::info!(path = %dir.display(), "watching plugin modules"),
                Err(error) => tracing::warn!(path = %dir.display(), %error,
                    "cannot watch a plugin module's directory; its changes need a manifest change"),
            }
        }
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(()),
                event = rx.recv() => if event.is_none() { return Ok(()) },
            }
            // Settle: wait until no event arrived for SETTLE.
            loop {
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    more = tokio::time::timeout(SETTLE, rx.recv()) => match more {
                        Ok(Some(_)) => {}
                        Ok(None) => return Ok(()),
                        Err(_quiet) => break,
                    },
                }
            }
            tracing::debug!("plugin sources changed; rescanning");
            // A rescan still running at shutdown is abandoned, not finished against a runtime
            // that is stopping (its file reads would fail and be reported as reload errors).
            tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(()),
                () = self.sync() => tracing::debug!("plugin sources rescanned"),
            }
        }
    }

    /// Compares the sources with what runs and applies the differences; failures are
    /// reported and leave the previous version serving.
    pub async fn sync(&self) {
        let manifests = match manifest_paths(&self.sources) {
            Ok(manifests) => manifests,
            Err(error) => {
                tracing::warn!(error = %error, "cannot list the plugin manifests; nothing changed");
                return;
            }
        };
        let mut running = self.running.lock().await;
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        for path in manifests {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot read plugin manifest");
                    // Keep whatever runs from this file.
                    if let Some((name, _)) = running.iter().find(|(_, r)| r.path == path) {
                        seen.insert(name.clone(), path);
                    }
                    continue;
                }
            };
            let previous = running
                .iter()
                .find(|(_, r)| r.path == path)
                .map(|(n, _)| n.clone());
            let manifest = match Manifest::parse(&text, path.parent().unwrap_or(Path::new("."))) {
                Ok(manifest) => manifest,
                Err(error) => {
                    let name = previous
                        .clone()
                        .unwrap_or_else(|| path.display().to_string());
                    self.report(
                        &running,
                        &name,
                        &PluginError::Manifest(with_path(error, &path)),
                    );
                    if let Some(name) = previous {
                        seen.insert(name, path);
                    }
                    continue;
                }
            };
            let name = manifest.name.clone();
            if let Some(first) = seen.get(&name) {
                let error = PluginError::DuplicateName {
                    plugin: name.clone(),
                    first: first.clone(),
                    second: path.clone(),
                };
                self.report(&running, &name, &error);
                continue;
            }
            seen.insert(name.clone(), path.clone());
            let renamed_from = previous.filter(|old| *old != name);
            let result = match running.get(&name) {
                None => self.add(&mut running, path.clone(), manifest, text).await,
                Some(current) if current.manifest_text != text => {
                    self.rebuild(&mut running, path.clone(), manifest, text)
                        .await
                }
                Some(_) => self.swap_if_changed(&mut running, &manifest).await,
            };
            if let Some(old) = renamed_from {
                // The file now names another plugin: the old one goes once the new one runs.
                if result.is_ok() {
                    self.stop(&mut running, &old).await;
                } else {
                    seen.insert(old, path.clone());
                }
            }
            match result {
                Ok(false) => {}
                Ok(true) => {
                    self.runtime
                        .telemetry()
                        .metrics()
                        .plugin_reloaded(&name, true);
                    if let Some(gate) = running.get(&name).and_then(|r| r.gate.as_ref()) {
                        gate.set_ready();
                    }
                }
                Err(error) => self.report(&running, &name, &error),
            }
        }
        let gone: Vec<String> = running
            .keys()
            .filter(|name| !seen.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            self.stop(&mut running, &name).await;
            self.runtime
                .telemetry()
                .metrics()
                .plugin_reloaded(&name, true);
        }
    }

    fn report(&self, running: &BTreeMap<String, Running>, name: &str, error: &PluginError) {
        let message = crate::error_chain(error);
        let serving = running.contains_key(name);
        if serving {
            tracing::error!(plugin = %name, error = %message,
                "plugin reload failed; the previous version keeps serving");
        } else {
            tracing::error!(plugin = %name, error = %message, "plugin failed to load");
        }
        self.runtime
            .telemetry()
            .metrics()
            .plugin_reloaded(name, false);
        if let Some(gate) = running.get(name).and_then(|r| r.gate.as_ref()) {
            gate.set_not_ready(format!(
                "the last reload failed, the previous version serves: {message}"
            ));
        }
    }

    async fn module(&self, manifest: &Manifest) -> Result<Arc<Module>, PluginError> {
        self.loader
            .load(&manifest.module)
            .await
            .map_err(|source| PluginError::Module {
                plugin: manifest.name.clone(),
                source,
            })
    }

    async fn add(
        &self,
        running: &mut BTreeMap<String, Running>,
        path: PathBuf,
        manifest: Manifest,
        text: String,
    ) -> Result<bool, PluginError> {
        let name = manifest.name.clone();
        let module = self.module(&manifest).await?;
        let started = self.start(path, manifest, text, module, Vec::new()).await?;
        tracing::info!(plugin = %name, "plugin added");
        running.insert(name, started);
        Ok(true)
    }

    async fn swap_if_changed(
        &self,
        running: &mut BTreeMap<String, Running>,
        manifest: &Manifest,
    ) -> Result<bool, PluginError> {
        let Some(current) = running.get(&manifest.name) else {
            return Ok(false);
        };
        let bytes =
            tokio::fs::read(&manifest.module)
                .await
                .map_err(|source| PluginError::Module {
                    plugin: manifest.name.clone(),
                    source: LoadError::Read {
                        path: manifest.module.clone(),
                        source,
                    },
                })?;
        let digest = hex_sha256(&bytes);
        if digest == current.plugin.module().digest() {
            // The module on disk is the one serving — also when the module serving before a
            // rollback is put back: whatever was rejected is no longer on disk.
            if current.plugin.forget_rejected()
                && let Some(gate) = &current.gate
            {
                gate.set_ready();
            }
            return Ok(false);
        }
        if current
            .plugin
            .rejected()
            .is_some_and(|rejected| rejected == digest)
        {
            // Still the rolled-back bytes: the readiness check keeps saying so.
            return Ok(false);
        }
        let module = self
            .loader
            .load_bytes(&manifest.module, bytes)
            .await
            .map_err(|source| PluginError::Module {
                plugin: manifest.name.clone(),
                source,
            })?;
        let digest = module.digest().to_owned();
        current.plugin.swap(module);
        // A new module serves: an earlier failure or rollback is history (a rollback of this
        // one reports again).
        if let Some(gate) = &current.gate {
            gate.set_ready();
        }
        let keys = current.for_store.list();
        for object in &keys {
            current.queue.add(object.key());
        }
        tracing::info!(plugin = %manifest.name, module = %digest, requeued = keys.len(),
            "plugin module swapped");
        Ok(true)
    }

    async fn rebuild(
        &self,
        running: &mut BTreeMap<String, Running>,
        path: PathBuf,
        manifest: Manifest,
        text: String,
    ) -> Result<bool, PluginError> {
        let name = manifest.name.clone();
        // Everything that can fail happens before the old controller stops.
        let module = self.module(&manifest).await?;
        let spec = controller_spec(&manifest);
        // Hold every informer the new version needs, so the kinds it shares with the old one
        // keep their caches across the swap and a kind that cannot be watched fails now.
        let mut scopes: Vec<Scope> = cache_scopes(&manifest)
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        scopes.push(Scope {
            api_version: spec.for_kind.api_version.clone(),
            kind: spec.for_kind.kind.clone(),
            namespace: spec.namespace.clone(),
            label_selector: spec.label_selector.clone(),
        });
        let mut pins = Vec::new();
        for scope in scopes {
            match self.runtime.informer(scope.clone()).await {
                Ok(_) => pins.push(scope),
                Err(source) => {
                    self.unpin(&pins);
                    return Err(PluginError::Controller {
                        plugin: name,
                        source: Box::new(source),
                    });
                }
            }
        }
        let old = running.remove(&name).expect("rebuild of a running plugin");
        let handed_over = self.retire(&name, old).await;
        let result = self.start(path, manifest, text, module, handed_over).await;
        self.unpin(&pins);
        let started = result?;
        tracing::info!(plugin = %name, "plugin rebuilt for its new manifest");
        running.insert(name, started);
        Ok(true)
    }

    fn unpin(&self, pins: &[Scope]) {
        for scope in pins {
            self.runtime.release_informer(scope);
        }
    }

    /// Stops a plugin's controller (drained) and gives back its caches; returns the keys its
    /// queue still held.
    async fn retire(&self, name: &str, old: Running) -> Vec<ObjectKey> {
        let mut keys = old.queue.pending();
        keys.extend(old.queue.waiting_keys());
        self.runtime.remove_controller(name).await;
        // Keys added while it drained; taking them empties the old queue, so its depth is no
        // longer counted in `workqueue_depth`.
        keys.extend(old.queue.take_pending());
        for scope in &old.cache_scopes {
            self.runtime.release_informer(scope);
        }
        if old.gate.is_some() {
            self.runtime
                .telemetry()
                .health()
                .remove_check(&format!("plugin/{name}"));
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    async fn stop(&self, running: &mut BTreeMap<String, Running>, name: &str) {
        if let Some(old) = running.remove(name) {
            self.retire(name, old).await;
            tracing::info!(plugin = %name, "plugin removed");
        }
    }

    /// Starts a plugin: its caches, its controller (queue seeded with `keys`), its readiness
    /// gate.
    async fn start(
        &self,
        path: PathBuf,
        manifest: Manifest,
        text: String,
        module: Arc<Module>,
        keys: Vec<ObjectKey>,
    ) -> Result<Running, PluginError> {
        let name = manifest.name.clone();
        let failed = |source| PluginError::Controller {
            plugin: name.clone(),
            source: Box::new(source),
        };
        let scopes = cache_scopes(&manifest);
        let mut caches = HashMap::new();
        let mut acquired = Vec::new();
        for (kind, scope) in scopes {
            match self.runtime.informer(scope.clone()).await {
                Ok(informer) => {
                    caches.insert(kind, Arc::clone(informer.store()));
                    acquired.push(scope);
                }
                Err(error) => {
                    self.unpin(&acquired);
                    return Err(failed(error));
                }
            }
        }
        let for_store = Arc::clone(&caches[&manifest.for_kind]);
        let spec = controller_spec(&manifest);
        let telemetry = self.runtime.telemetry();
        let failures = telemetry.metrics().plugin_failures(&name, &FAILURE_REASONS);
        // Re-registered on a rebuild: the old plugin's check was removed when it retired.
        let gate = telemetry.health().gate(&format!("plugin/{name}")).ok();
        let hook: RollbackHook = {
            let (metrics, gate, plugin) = (telemetry.metrics().clone(), gate.clone(), name.clone());
            Box::new(move |digest: &str, reason: &str| {
                metrics.plugin_reloaded(&plugin, false);
                if let Some(gate) = &gate {
                    gate.set_not_ready(format!("module {digest:.12} was rolled back: {reason}"));
                }
            })
        };
        let api = self.apis.for_plugin(&manifest);
        let context = Arc::new(
            PluginContext::new(Arc::new(manifest), caches, api).with_counters(
                telemetry.metrics().plugin_log_dropped(&name),
                telemetry.metrics().plugin_hot_requeues(&name),
            ),
        );
        let plugin =
            Arc::new(Plugin::new(context, module, Some(failures)).with_rollback_hook(hook));
        let queue = match self
            .runtime
            .add_controller(spec, PluginReconciler::new(Arc::clone(&plugin)))
            .await
        {
            Ok(queue) => queue,
            Err(error) => {
                self.unpin(&acquired);
                telemetry.health().remove_check(&format!("plugin/{name}"));
                return Err(failed(error));
            }
        };
        for key in keys {
            queue.add(key);
        }
        if let Some(gate) = &gate {
            gate.set_ready();
        }
        tracing::info!(plugin = %name, module = %plugin.module().digest(), "plugin loaded");
        Ok(Running {
            path,
            manifest_text: text,
            plugin,
            queue,
            cache_scopes: acquired,
            for_store,
            gate,
        })
    }
}

fn read_manifest(path: &Path) -> Result<(Manifest, String), PluginError> {
    let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
        path: path.to_owned(),
        source,
    })?;
    let manifest = Manifest::parse(&text, path.parent().unwrap_or(Path::new(".")))
        .map_err(|error| with_path(error, path))?;
    Ok((manifest, text))
}

/// `error` naming the manifest file rather than its directory.
fn with_path(error: ManifestError, path: &Path) -> ManifestError {
    match error {
        ManifestError::Parse { message, .. } => ManifestError::Parse {
            path: path.to_owned(),
            message,
        },
        ManifestError::Invalid { field, problem, .. } => ManifestError::Invalid {
            path: path.to_owned(),
            field,
            problem,
        },
        other => other,
    }
}
