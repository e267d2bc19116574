//! One running plugin's life: loading the configured plugins at start, then adding, swapping
//! the module of, rebuilding and stopping a plugin as the rescan ([`super::rescan`]) decides.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PluginError, Plugins, Running};
use crate::bounded_read::{self, MAX_MANIFEST_BYTES, MAX_MODULE_BYTES};
use crate::controller::{Cause, ObjectKey, Why};
use crate::delivery::history::History;
use crate::delivery::loader::{cache_scopes, controller_spec, manifest_paths};
use crate::delivery::reconciler::{FAILURE_REASONS, Plugin, PluginReconciler, RollbackHook};
use crate::informer::Scope;
use crate::manifest::{Manifest, ManifestError};
use crate::upgrade::recordings::PluginRecordings;
use crate::upgrade::shadow::ShadowRunner;
use crate::wasm::context::PluginContext;
use crate::wasm::module::{LoadError, Module, hex_sha256_blocking};

impl Plugins {
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
            let manifest = self.checked(manifest, &path)?;
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
    /// Loads the plugin's module, and its canary's and shadow's if it names them.
    async fn module(&self, manifest: &Manifest) -> Result<Modules, PluginError> {
        let load = |path: &Path| {
            let path = path.to_owned();
            async move {
                self.loader
                    .load(&path)
                    .await
                    .map_err(|source| PluginError::Module {
                        plugin: manifest.name.clone(),
                        source,
                    })
            }
        };
        let primary = load(&manifest.module).await?;
        let canary = match &manifest.canary {
            Some(canary) => Some(load(&canary.module).await?),
            None => None,
        };
        let shadow = match &manifest.shadow {
            Some(shadow) => Some(load(&shadow.module).await?),
            None => None,
        };
        Ok(Modules {
            primary,
            canary,
            shadow,
        })
    }

    /// Whether the canary's or the shadow's module file no longer holds the module running (the
    /// plugin is then rebuilt; the primary's module is swapped in place).
    pub(super) async fn side_modules_changed(
        &self,
        current: &Running,
        manifest: &Manifest,
    ) -> bool {
        let (canary, shadow) = current.plugin.side_modules();
        let changed = async |path: Option<&Path>, running: Option<&str>| match (path, running) {
            (Some(path), Some(running)) => {
                match bounded_read::read_async(path, MAX_MODULE_BYTES, "module").await {
                    Ok(bytes) => hex_sha256_blocking(bytes).await.1 != running,
                    Err(_) => true,
                }
            }
            (None, None) => false,
            _ => true,
        };
        changed(manifest.canary.as_ref().map(|c| c.module.as_path()), canary).await
            || changed(manifest.shadow.as_ref().map(|s| s.module.as_path()), shadow).await
    }

    pub(super) async fn add(
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

    pub(super) async fn swap_if_changed(
        &self,
        running: &mut BTreeMap<String, Running>,
        manifest: &Manifest,
    ) -> Result<bool, PluginError> {
        let Some(current) = running.get(&manifest.name) else {
            return Ok(false);
        };
        let bytes = bounded_read::read_async(&manifest.module, MAX_MODULE_BYTES, "module")
            .await
            .map_err(|source| PluginError::Module {
                plugin: manifest.name.clone(),
                source: LoadError::Read {
                    path: manifest.module.clone(),
                    source,
                },
            })?;
        let (bytes, digest) = hex_sha256_blocking(bytes).await;
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
        let link = crate::telemetry::traces::mark(
            || format!("module swap {}", manifest.name),
            || {
                vec![
                    opentelemetry::KeyValue::new("reconcile.plugin", manifest.name.to_string()),
                    opentelemetry::KeyValue::new("reconcile.module", digest.clone()),
                ]
            },
        );
        for object in &keys {
            let mut cause = Cause::now(Why::ModuleSwap(digest.clone()));
            cause.link.clone_from(&link);
            current.queue.add_cause(object.key(), cause);
        }
        tracing::info!(plugin = %manifest.name, module = %digest, requeued = keys.len(),
            "plugin module swapped");
        Ok(true)
    }

    pub(super) async fn rebuild(
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
        let mut keys = old.queue.queue().pending();
        keys.extend(old.queue.queue().waiting_keys());
        self.runtime.remove_controller(name).await;
        // Keys added while it drained; taking them empties the old queue, so its depth is no
        // longer counted in `workqueue_depth`.
        keys.extend(old.queue.queue().take_pending());
        for scope in &old.cache_scopes {
            self.runtime.release_informer(scope);
        }
        self.runtime.telemetry().recordings().remove(name);
        self.runtime.telemetry().histories().remove(name);
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

    pub(super) async fn stop(&self, running: &mut BTreeMap<String, Running>, name: &str) {
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
        modules: Modules,
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
        let tenant = self.tenants.of(&manifest);
        let api = self
            .apis
            .for_plugin(&manifest, tenant.as_ref().map(|tenant| tenant.api()));
        let context = Arc::new(
            PluginContext::new(Arc::new(manifest), caches, api)
                .with_counters(
                    telemetry.metrics().plugin_log_dropped(&name),
                    telemetry.metrics().plugin_hot_requeues(&name),
                )
                .with_tenant(tenant),
        );
        let mut plugin = Plugin::new(Arc::clone(&context), modules.primary, Some(failures))
            .with_rollback_hook(hook)
            .with_metrics(telemetry.metrics().clone());
        if let (Some(canary), Some(module)) = (&context.manifest.canary, modules.canary) {
            plugin = plugin.with_canary(canary.selector.clone(), module);
        }
        if let (Some(shadow), Some(module)) = (&context.manifest.shadow, modules.shadow) {
            plugin = plugin.with_shadow(ShadowRunner::new(
                module,
                Arc::new(context.shadow(shadow)),
                shadow.sample,
                context.manifest.concurrency,
                Some(telemetry.metrics().plugin_shadow(&name)),
            ));
        }
        let recordings = Arc::new(PluginRecordings::new(&name, self.recording.clone()));
        let history = Arc::new(History::new(context.manifest.for_kind.to_string()));
        let plugin = Arc::new(
            plugin
                .with_recordings(Arc::clone(&recordings))
                .with_history(Arc::clone(&history)),
        );
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
            queue.add(key, Why::Rebuilt);
        }
        {
            let queue = queue.clone();
            recordings.set_enqueue(Box::new(move |key| queue.add(key, Why::Requested)));
        }
        telemetry.recordings().register(&name, recordings);
        {
            let queue = queue.queue().clone();
            history.set_depth_probe(Box::new(move || queue.len()));
        }
        telemetry.histories().register(&name, history);
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

/// A plugin's modules: its own, and its canary's and shadow's when the manifest names them.
pub(super) struct Modules {
    primary: Arc<Module>,
    canary: Option<Arc<Module>>,
    shadow: Option<Arc<Module>>,
}

fn read_manifest(path: &Path) -> Result<(Manifest, String), PluginError> {
    let text =
        bounded_read::read_to_string(path, MAX_MANIFEST_BYTES, "manifest").map_err(|source| {
            ManifestError::Read {
                path: path.to_owned(),
                source,
            }
        })?;
    let manifest = Manifest::parse(&text, path.parent().unwrap_or(Path::new(".")))
        .map_err(|error| with_path(error, path))?;
    Ok((manifest, text))
}

/// `error` naming the manifest file rather than its directory.
pub(super) fn with_path(error: ManifestError, path: &Path) -> ManifestError {
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
