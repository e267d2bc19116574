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
use k8s_openapi::jiff::{Timestamp, Unit};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::delivery::oci::{OciError, Registry};
use crate::delivery::supervisor::{FailureStage, Plugins, SourceState};
use crate::manifest::{PluginCondition, ReconcilerPlugin, ReconcilerPluginStatus};
use crate::telemetry::Metrics;
use crate::wasm::module::hex_sha256;

/// The largest module a ConfigMap may carry (the API server's limit on a ConfigMap's data).
pub const CONFIG_MAP_MODULE_MAX: usize = 1024 * 1024;

/// How often the state is compared with the objects' status (and written when it differs).
const STATUS_PERIOD: Duration = Duration::from_millis(250);

/// The longest one object's module may take to fetch (a registry that trickles bytes would
/// otherwise hold every other object's changes and status).
const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

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

/// Why an object's module could not be fetched.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(
        "ConfigMap {namespace}/{name} cannot be read: {source}; create it, or grant the host \
         `get` on it"
    )]
    ConfigMapRead {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "ConfigMap {namespace}/{name} has no binaryData key `{key}`; put the component there \
         (kubectl create configmap {name} --from-file={key}=component.wasm)"
    )]
    ConfigMapKey {
        namespace: String,
        name: String,
        key: String,
    },
    #[error(
        "the component in ConfigMap {namespace}/{name} is {size} bytes, over the 1 MiB a \
         ConfigMap holds; publish it to a registry (reconcile-host push) and use `oci`"
    )]
    TooLarge {
        namespace: String,
        name: String,
        size: usize,
    },
    #[error("{0}")]
    Registry(#[source] OciError),
    #[error(
        "`oci` sources need the host's registry client, which failed to start (see its log \
         line); fix the host's `oci` settings"
    )]
    NoRegistry,
    #[error("set exactly one module source: `oci` or `configMap`")]
    NoSource,
    #[error(
        "fetching the module took longer than {} s (a registry or API server too slow to \
         answer); it is tried again at the next change or refetch",
        FETCH_TIMEOUT.as_secs()
    )]
    TimedOut,
    #[error("cannot write the plugin's files under {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl FetchError {
    fn reason(&self) -> &'static str {
        match self {
            Self::ConfigMapRead { .. } => "ConfigMapUnreadable",
            Self::ConfigMapKey { .. } => "ConfigMapKeyMissing",
            Self::TooLarge { .. } => "ModuleTooLarge",
            Self::Registry(error) if error.is_unreachable() => "RegistryUnreachable",
            Self::Registry(_) => "PullFailed",
            Self::NoRegistry => "RegistryUnavailable",
            Self::NoSource => "NoModuleSource",
            Self::TimedOut => "FetchTimedOut",
            Self::Write { .. } => "WriteFailed",
        }
    }
}

/// What fetching one object gave.
struct Fetched {
    generation: Option<i64>,
    result: Result<Module, FetchError>,
}

/// A fetched module.
#[derive(Clone, PartialEq, Eq)]
struct Module {
    /// What status reports: the manifest digest an `oci` reference resolved to, or the
    /// content digest of a ConfigMap's module (`sha256:…`).
    resolved: String,
    /// The sha256 of the component's bytes (hex), as the supervisor reports what serves.
    content: String,
    /// The manifest file written for the spec, as the supervisor reports what serves.
    manifest: String,
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

/// The status an object should have, keeping each condition's transition time while its
/// status stays the same.
fn status(
    fetch: &Fetched,
    state: &SourceState,
    old: &ReconcilerPluginStatus,
    identity: &str,
) -> ReconcilerPluginStatus {
    let mut conditions = Vec::new();
    let mut condition = |type_: &str, status: &str, reason: &str, message: String| {
        conditions.push((
            type_.to_owned(),
            status.to_owned(),
            reason.to_owned(),
            message,
        ));
    };
    let failure = state.failure.as_ref();
    let failed = |stage: FailureStage| failure.filter(|f| f.stage == stage);
    let module = fetch.result.as_ref().ok();
    // This spec's module and manifest both serve (a spec change alone is not served until the
    // supervisor has applied the new manifest).
    let serving_this = module.is_some_and(|m| {
        state.serving.as_deref() == Some(&m.content)
            && state.serving_manifest.as_deref() == Some(&m.manifest)
    });
    match &fetch.result {
        Ok(module) => condition(
            "Fetched",
            "True",
            "Fetched",
            format!("module {}", module.resolved),
        ),
        Err(error) => condition("Fetched", "False", error.reason(), error.to_string()),
    }
    if let Some(f) = failed(FailureStage::Manifest) {
        condition("GrantsValid", "False", "InvalidManifest", f.message.clone());
    } else if module.is_some() {
        condition("GrantsValid", "True", "Valid", String::new());
    } else {
        condition("GrantsValid", "Unknown", "NotFetched", String::new());
    }
    if let Some(f) = failed(FailureStage::Module) {
        condition("Compiled", "False", "ModuleRefused", f.message.clone());
    } else if serving_this {
        condition("Compiled", "True", "Compiled", String::new());
    } else {
        condition("Compiled", "Unknown", "Pending", String::new());
    }
    let (ready, reason, message) = match (serving_this, failure, &fetch.result) {
        (true, None, _) => ("True", "Serving", "the plugin's module serves".to_owned()),
        (_, Some(f), _) => ("False", "LoadFailed", f.message.clone()),
        (_, None, Err(error)) => ("False", error.reason(), error.to_string()),
        (false, None, Ok(_)) => ("False", "Loading", "the module is being loaded".to_owned()),
    };
    condition("Ready", ready, reason, message);
    let other_serves = state.serving.is_some() && !serving_this;
    if other_serves && (failure.is_some() || fetch.result.is_err()) {
        let message = format!(
            "module sha256:{} keeps serving",
            state.serving.as_deref().unwrap_or_default()
        );
        condition("Degraded", "True", "PreviousVersionServes", message);
    } else {
        condition("Degraded", "False", "AsDeclared", String::new());
    }
    let now = Timestamp::now()
        .round(Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string());
    let conditions = conditions
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let kept = (old.conditions.iter())
                .find(|c| c.type_ == type_ && c.status == status)
                .map(|c| c.last_transition_time.clone());
            PluginCondition {
                type_,
                status,
                reason,
                message: bounded(message),
                last_transition_time: kept.unwrap_or_else(|| now.clone()),
                observed_generation: fetch.generation,
            }
        })
        .collect();
    ReconcilerPluginStatus {
        observed_generation: fetch.generation,
        resolved_digest: module.map(|m| m.resolved.clone()),
        conditions,
        replicas: if state.serving.is_some() {
            vec![identity.to_owned()]
        } else {
            Vec::new()
        },
    }
}

/// The merge patch that makes an object's status `status`: a field `status` leaves empty is
/// written as null (or an empty list), so what an earlier status said there (a digest resolved
/// for an earlier spec, replicas that served) does not stay behind.
fn status_patch(status: &ReconcilerPluginStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        fields
            .entry("observedGeneration")
            .or_insert(serde_json::Value::Null);
        fields
            .entry("resolvedDigest")
            .or_insert(serde_json::Value::Null);
        fields.entry("conditions").or_insert(json!([]));
        fields.entry("replicas").or_insert(json!([]));
    }
    json!({ "status": value })
}

/// The longest condition message written (an error chain can be long; the log has it whole).
const MESSAGE_MAX: usize = 2048;

/// `message` cut to [`MESSAGE_MAX`] bytes at a character boundary, marked when cut.
fn bounded(mut message: String) -> String {
    if message.len() > MESSAGE_MAX {
        let mut end = MESSAGE_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" …");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::supervisor::SourceFailure;

    fn fetched(generation: i64, content: &str, manifest: &str) -> Fetched {
        Fetched {
            generation: Some(generation),
            result: Ok(Module {
                resolved: format!("sha256:{content}"),
                content: content.to_owned(),
                manifest: manifest.to_owned(),
            }),
        }
    }

    fn serving(content: &str, manifest: &str, failure: Option<FailureStage>) -> SourceState {
        SourceState {
            serving: Some(content.to_owned()),
            serving_manifest: Some(manifest.to_owned()),
            failure: failure.map(|stage| SourceFailure {
                stage,
                message: "grants[0]: no such verb".to_owned(),
            }),
        }
    }

    fn condition<'a>(status: &'a ReconcilerPluginStatus, type_: &str) -> (&'a str, &'a str) {
        let c = (status.conditions.iter())
            .find(|c| c.type_ == type_)
            .expect("the condition");
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn ready_only_once_the_specs_module_and_manifest_both_serve() {
        let old = ReconcilerPluginStatus::default();
        let done = status(
            &fetched(1, "aa", "m1"),
            &serving("aa", "m1", None),
            &old,
            "h",
        );
        assert_eq!(condition(&done, "Ready"), ("True", "Serving"));
        assert_eq!(condition(&done, "Degraded"), ("False", "AsDeclared"));
        assert_eq!(done.replicas, ["h"]);

        // The spec changed (same module): not Ready until the new manifest serves.
        let pending = status(
            &fetched(2, "aa", "m2"),
            &serving("aa", "m1", None),
            &old,
            "h",
        );
        assert_eq!(condition(&pending, "Ready"), ("False", "Loading"));
        assert_eq!(condition(&pending, "Compiled"), ("Unknown", "Pending"));

        // The new spec refused while the old one serves: degraded, the reason named.
        let refused = status(
            &fetched(2, "aa", "m2"),
            &serving("aa", "m1", Some(FailureStage::Manifest)),
            &old,
            "h",
        );
        assert_eq!(condition(&refused, "Ready"), ("False", "LoadFailed"));
        assert_eq!(
            condition(&refused, "GrantsValid"),
            ("False", "InvalidManifest")
        );
        assert_eq!(
            condition(&refused, "Degraded"),
            ("True", "PreviousVersionServes")
        );
    }

    #[tokio::test]
    async fn the_objects_directory_is_made_afresh_and_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("objects-dir-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("left-over")).expect("an old directory");
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:1".parse().expect("a URL"),
        ))
        .expect("a client");
        let objects = PluginObjects::new(client, None, dir.clone(), "h".to_owned())
            .expect("the directory is prepared");
        assert!(!dir.join("left-over").exists(), "what it held is gone");
        let mode = std::fs::metadata(objects.dir())
            .expect("made")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_status_patch_clears_what_the_status_leaves_empty() {
        let patch = status_patch(&ReconcilerPluginStatus {
            observed_generation: Some(2),
            ..ReconcilerPluginStatus::default()
        });
        assert_eq!(
            patch,
            json!({"status": {"observedGeneration": 2, "resolvedDigest": null,
                              "conditions": [], "replicas": []}})
        );
        let serving = status_patch(&ReconcilerPluginStatus {
            observed_generation: Some(2),
            resolved_digest: Some("sha256:1".to_owned()),
            conditions: Vec::new(),
            replicas: vec!["host-a".to_owned()],
        });
        assert_eq!(serving["status"]["resolvedDigest"], "sha256:1");
        assert_eq!(serving["status"]["replicas"], json!(["host-a"]));
    }
}
