//! Plugins declared as `ReconcilerPlugin` objects (`kubectl apply`): each object's spec and
//! module are written as `<name>/plugin.yaml` and `<name>/module.wasm` into a directory the
//! supervisor watches like any plugin directory, so an object gets the lifecycle of a file
//! (validated and compiled off the hot path, a changed module swapped in with no lost key, a bad
//! version leaving the good one serving, removal draining its work). The replica that leads
//! writes each object's status: `observedGeneration`, `resolvedDigest`, the conditions
//! `Fetched`, `Compiled`, `GrantsValid`, `Ready` and `Degraded`, and the replicas serving it.
//!
//! Module sources: `configMap` (the component in a ConfigMap's `binaryData`, at most 1 MiB, read
//! again every [`REFETCH_PERIOD`]) and `oci` (a registry reference pulled by [`crate::delivery::oci`], kept
//! on disk by digest; a tag is resolved once and the digest pinned in `status.resolvedDigest`
//! until the spec changes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::delivery::oci::Registry;
use crate::delivery::supervisor::Plugins;
use crate::manifest::ReconcilerPlugin;
use crate::telemetry::Metrics;
use crate::wasm::module::hex_sha256;

mod fetched;
mod status;
#[cfg(test)]
mod tests;

use fetched::{FETCH_TIMEOUT, FetchError, Fetched, Module};
use status::{status, status_patch};

/// The largest module a ConfigMap may carry (the API server's limit on a ConfigMap's data).
pub const CONFIG_MAP_MODULE_MAX: usize = 1024 * 1024;

/// How often the state is compared with the objects' status (and written when it differs).
const STATUS_PERIOD: Duration = Duration::from_millis(250);

/// How often ConfigMap sources are read again (their changes are not watched).
const REFETCH_PERIOD: Duration = Duration::from_secs(10);

/// The objects' plugin directory, the API it reads them from and the registries modules come
/// from.
pub struct PluginObjects {
    client: kube::Client,
    registry: Option<Arc<Registry>>,
    dir: PathBuf,
    identity: String,
    /// The last error writing each object's status, so that it is logged once.
    status_failures: parking_lot::Mutex<BTreeMap<String, String>>,
}

impl PluginObjects {
    /// Objects read through `client`, written under `dir` (emptied first: what it holds is
    /// rebuilt from the objects), status naming this replica `identity`.
    ///
    /// # Errors
    /// When `dir` cannot be emptied or created.
    pub fn new(
        client: kube::Client,
        registry: Option<Arc<Registry>>,
        dir: PathBuf,
        identity: String,
    ) -> std::io::Result<Self> {
        match std::fs::remove_dir_all(&dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        // Created afresh, private to this user: a directory someone else made in its place
        // (a shared temporary directory) is an error, never used.
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)?;
        Ok(Self {
            client,
            registry,
            dir,
            identity,
            status_failures: parking_lot::Mutex::default(),
        })
    }

    /// The directory to hand the supervisor as a plugin source.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Follows the objects until `stop`: writes their plugins' files, removes those of deleted
    /// objects, and (while `leading`) writes their status.
    pub async fn run(
        self,
        plugins: Arc<Plugins>,
        leading: watch::Receiver<bool>,
        stop: CancellationToken,
    ) {
        let api: Api<ReconcilerPlugin> = Api::all(self.client.clone());
        let mut events =
            std::pin::pin!(watcher(api.clone(), watcher::Config::default()).default_backoff());
        let mut objects: BTreeMap<String, ReconcilerPlugin> = BTreeMap::new();
        let mut listing: Option<BTreeMap<String, ReconcilerPlugin>> = None;
        let mut fetched: BTreeMap<String, Fetched> = BTreeMap::new();
        let mut status_tick = tokio::time::interval(STATUS_PERIOD);
        let mut refetch_tick = tokio::time::interval(REFETCH_PERIOD);
        let mut warned = false;
        loop {
            let mut changed = false;
            tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => match event {
                    None => return,
                    Some(Err(error)) => {
                        if !warned {
                            tracing::warn!(error = %crate::error_chain(&error),
                                "cannot watch ReconcilerPlugin objects; install the CRD \
                                 (reconcile-host crd | kubectl apply -f -) and grant the host \
                                 list and watch on reconcilerplugins.reconcile-host.dev");
                            warned = true;
                        }
                    }
                    Some(Ok(event)) => {
                        warned = false;
                        changed = apply(event, &mut objects, &mut listing);
                    }
                },
                _ = refetch_tick.tick() => changed = true,
                _ = status_tick.tick() => {
                    if *leading.borrow() {
                        self.write_status(&api, &plugins, &objects, &fetched).await;
                    }
                    continue;
                }
            }
            if changed {
                fetched = self
                    .materialize(&objects, &fetched, plugins.metrics())
                    .await;
            }
        }
    }

    /// Writes the files of every object and removes those of objects gone.
    async fn materialize(
        &self,
        objects: &BTreeMap<String, ReconcilerPlugin>,
        before: &BTreeMap<String, Fetched>,
        metrics: &Metrics,
    ) -> BTreeMap<String, Fetched> {
        let mut fetched = BTreeMap::new();
        for (name, object) in objects {
            let result = tokio::time::timeout(FETCH_TIMEOUT, self.fetch(name, object))
                .await
                .unwrap_or(Err(FetchError::TimedOut));
            if let Err(error) = &result {
                let already = before
                    .get(name)
                    .and_then(|f| f.result.as_ref().err())
                    .is_some_and(|e| e.to_string() == error.to_string());
                if !already {
                    tracing::error!(plugin = %name, error = %crate::error_chain(error),
                        "cannot fetch the ReconcilerPlugin's module; what serves keeps serving");
                }
                metrics.plugin_fetch_failed(name, error.reason());
            }
            let generation = object.metadata.generation;
            fetched.insert(name.clone(), Fetched { generation, result });
        }
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !objects.contains_key(&name)
                    && !name.starts_with('.')
                    && let Err(error) = std::fs::remove_dir_all(entry.path())
                {
                    tracing::warn!(plugin = %name, %error,
                        "cannot remove a deleted ReconcilerPlugin's files");
                }
            }
        }
        fetched
    }

    /// Fetches one object's module and writes its files when they changed.
    async fn fetch(&self, name: &str, object: &ReconcilerPlugin) -> Result<Module, FetchError> {
        let spec = serde_json::to_value(&object.spec).unwrap_or_default();
        let dir = self.dir.join(name);
        let module_path = dir.join("module.wasm");
        let module = if let Some(source) = spec.get("configMap") {
            let bytes = self.config_map_module(source).await?;
            let content = hex_sha256(&bytes);
            write_if_changed(&dir, &module_path, &bytes)?;
            Module {
                resolved: format!("sha256:{content}"),
                content,
                manifest: String::new(),
            }
        } else if let Some(reference) = spec.get("oci").and_then(|r| r.as_str()) {
            let registry = self.registry.as_ref().ok_or(FetchError::NoRegistry)?;
            // A tag resolved before for this generation stays pinned to its digest.
            let status = object.status.as_ref();
            let pin = status
                .filter(|s| s.observed_generation == object.metadata.generation)
                .and_then(|s| s.resolved_digest.as_deref());
            let pulled = registry
                .pull(reference, pin)
                .await
                .map_err(FetchError::Registry)?;
            let content = pulled
                .layer_digest
                .strip_prefix("sha256:")
                .unwrap_or_default()
                .to_owned();
            let current = std::fs::read(&module_path).map(|bytes| hex_sha256(&bytes));
            if current.ok().as_deref() != Some(content.as_str()) {
                let bytes = std::fs::read(&pulled.path).map_err(|source| FetchError::Write {
                    path: pulled.path.clone(),
                    source,
                })?;
                write_if_changed(&dir, &module_path, &bytes)?;
            }
            Module {
                resolved: pulled.digest,
                content,
                manifest: String::new(),
            }
        } else {
            return Err(FetchError::NoSource);
        };
        // The manifest file: the spec without the source, named by the object, the module
        // beside it. It changes only when the spec does, so a new module alone is a swap.
        let mut manifest = spec;
        // A shadow's and a canary's modules come from registries too; written before the
        // manifest that names them.
        for (field, file) in [("shadow", "shadow.wasm"), ("canary", "canary.wasm")] {
            let Some(reference) = manifest
                .get(field)
                .and_then(|section| section.get("oci"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
            else {
                continue;
            };
            let registry = self.registry.as_ref().ok_or(FetchError::NoRegistry)?;
            let pulled = registry
                .pull(&reference, None)
                .await
                .map_err(FetchError::Registry)?;
            let bytes = std::fs::read(&pulled.path).map_err(|source| FetchError::Write {
                path: pulled.path.clone(),
                source,
            })?;
            write_if_changed(&dir, &dir.join(file), &bytes)?;
            if let Some(section) = manifest.get_mut(field).and_then(|s| s.as_object_mut()) {
                section.remove("oci");
                section.insert("module".to_owned(), json!(file));
            }
        }
        if let Some(fields) = manifest.as_object_mut() {
            fields.remove("configMap");
            fields.remove("oci");
            fields.insert("name".to_owned(), json!(name));
            fields.insert("module".to_owned(), json!("module.wasm"));
        }
        let text = serde_yaml_ng::to_string(&manifest).unwrap_or_default();
        write_if_changed(&dir, &dir.join("plugin.yaml"), text.as_bytes())?;
        Ok(Module {
            manifest: text,
            ..module
        })
    }

    /// The component in the ConfigMap `source` names.
    async fn config_map_module(&self, source: &serde_json::Value) -> Result<Vec<u8>, FetchError> {
        let field = |key: &str| source[key].as_str().unwrap_or_default().to_owned();
        let (namespace, name, key) = (field("namespace"), field("name"), field("key"));
        let config_map = Api::<ConfigMap>::namespaced(self.client.clone(), &namespace)
            .get(&name)
            .await
            .map_err(|source| FetchError::ConfigMapRead {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        let Some(bytes) = config_map
            .binary_data
            .and_then(|mut data| data.remove(&key))
        else {
            return Err(FetchError::ConfigMapKey {
                namespace,
                name,
                key,
            });
        };
        if bytes.0.len() > CONFIG_MAP_MODULE_MAX {
            return Err(FetchError::TooLarge {
                namespace,
                name,
                size: bytes.0.len(),
            });
        }
        Ok(bytes.0)
    }

    /// Writes the status of each object whose state differs from what it says.
    async fn write_status(
        &self,
        api: &Api<ReconcilerPlugin>,
        plugins: &Plugins,
        objects: &BTreeMap<String, ReconcilerPlugin>,
        fetched: &BTreeMap<String, Fetched>,
    ) {
        for (name, object) in objects {
            let Some(fetch) = fetched.get(name) else {
                continue;
            };
            let state = plugins
                .source_state(&self.dir.join(name).join("plugin.yaml"))
                .await;
            let old = object.status.clone().unwrap_or_default();
            let status = status(fetch, &state, &old, &self.identity);
            if status == old {
                continue;
            }
            let patch = Patch::Merge(status_patch(&status));
            let result = api
                .patch_status(name, &PatchParams::default(), &patch)
                .await;
            let mut failures = self.status_failures.lock();
            match result {
                Ok(_) => {
                    failures.remove(name);
                }
                Err(error) => {
                    // Said once per distinct error, not at every tick.
                    let message = crate::error_chain(&error);
                    if failures.get(name) != Some(&message) {
                        tracing::warn!(plugin = %name, error = %message,
                            "cannot write the ReconcilerPlugin's status; grant the host patch \
                             on reconcilerplugins/status");
                        failures.insert(name.clone(), message);
                    }
                }
            }
        }
    }
}

/// Writes `contents` to `path` in `dir` (through a temporary file and a rename, so the
/// supervisor never reads half a file) unless it holds them already.
fn write_if_changed(dir: &Path, path: &Path, contents: &[u8]) -> Result<(), FetchError> {
    if std::fs::read(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    let error = |source| FetchError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(error)?;
    let temporary = dir.join(".writing");
    std::fs::write(&temporary, contents).map_err(error)?;
    std::fs::rename(&temporary, path).map_err(error)
}

/// Applies a watch event to the known objects; whether they changed.
fn apply(
    event: watcher::Event<ReconcilerPlugin>,
    objects: &mut BTreeMap<String, ReconcilerPlugin>,
    listing: &mut Option<BTreeMap<String, ReconcilerPlugin>>,
) -> bool {
    let name = |object: &ReconcilerPlugin| object.metadata.name.clone().unwrap_or_default();
    match event {
        watcher::Event::Apply(object) => {
            objects.insert(name(&object), object);
            true
        }
        watcher::Event::Delete(object) => objects.remove(&name(&object)).is_some(),
        watcher::Event::Init => {
            *listing = Some(BTreeMap::new());
            false
        }
        watcher::Event::InitApply(object) => {
            listing
                .get_or_insert_with(BTreeMap::new)
                .insert(name(&object), object);
            false
        }
        watcher::Event::InitDone => {
            *objects = listing.take().unwrap_or_default();
            true
        }
    }
}
