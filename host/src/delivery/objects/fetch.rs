//! One object's fetch, a task of its own: the module (and a shadow's and a canary's) read from
//! its source into memory or the registry's disk cache, and the manifest made from the spec,
//! ready for the objects' loop to write as files ([`super::files`]). At most [`PER_SOURCE`]
//! fetches talk to one source at a time (a registry `host:port`, or the API server for
//! ConfigMaps), so a source that never answers holds up only its own fetches.
//!
//! # Guarantees
//! - A digest pinned (in the reference, or recorded for the generation in status) and pulled
//!   before is served from the disk cache with no request; the loop verifies its bytes as it
//!   copies them.
//! - A fetch gives up after [`FETCH_TIMEOUT`], its slot freed.
//! - Hashing runs on a blocking thread, never on the runtime's workers.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::CONFIG_MAP_MODULE_MAX;
use super::fetched::{Bytes, FETCH_TIMEOUT, FetchError, Module, ModuleFile, Prepared};
use super::files::blocking;
use crate::delivery::oci::{Registry, digest_hex};
use crate::wasm::module::hex_sha256;

/// How many fetches talk to one source at a time.
pub(super) const PER_SOURCE: usize = 4;

/// Where a fetch's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Source {
    /// A registry, by `host:port`.
    Registry(String),
    /// The API server (a ConfigMap's `binaryData`).
    ApiServer,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Registry(host) => write!(f, "registry {host}"),
            Self::ApiServer => f.write_str("the API server"),
        }
    }
}

/// What a running fetch waits on, for status.
#[derive(Clone, Debug, Default)]
pub(super) struct Step {
    /// The source asked (none yet: the fetch has not reached one).
    pub(super) source: Option<Source>,
    /// What is asked of it: a registry reference, or `ConfigMap <namespace>/<name>`.
    pub(super) what: String,
}

/// The digests recorded for the object's generation: a tag is resolved once, then pinned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Pins {
    /// The manifest digest the module's `oci` reference resolved to.
    pub(super) module: Option<String>,
    /// The shadow's.
    pub(super) shadow: Option<String>,
    /// The canary's.
    pub(super) canary: Option<String>,
    /// The layer (hex) of each manifest digest, as this host's last answer for the generation
    /// had them: a refetch of these needs no request and no read.
    pub(super) layers: BTreeMap<String, String>,
}

/// A fetch to run.
pub(super) struct Job {
    /// The object's spec (a namespaced object's held to its namespace).
    pub(super) spec: Value,
    /// Why a namespaced object's spec cannot be run: the field reaching out, and the fix.
    pub(super) refused: Option<String>,
    /// The object's name (the manifest's).
    pub(super) name: String,
    /// What the generation resolved to before.
    pub(super) pins: Pins,
    /// What the fetch waits on, updated as it goes.
    pub(super) step: Arc<parking_lot::Mutex<Step>>,
}

/// A module found in, or pulled into, the disk cache.
struct Cached {
    /// Its manifest digest (`sha256:…`).
    digest: String,
    /// Its layer digest (hex).
    layer: String,
    path: PathBuf,
}

/// What fetches share: the clients and each source's slots.
pub(super) struct Fetcher {
    client: kube::Client,
    registry: Option<Arc<Registry>>,
    slots: parking_lot::Mutex<BTreeMap<Source, Arc<Semaphore>>>,
}

impl Fetcher {
    pub(super) fn new(client: kube::Client, registry: Option<Arc<Registry>>) -> Self {
        Self {
            client,
            registry,
            slots: parking_lot::Mutex::default(),
        }
    }

    /// Runs `job`, giving up after [`FETCH_TIMEOUT`].
    pub(super) async fn run(self: Arc<Self>, job: Job) -> Result<Prepared, FetchError> {
        tokio::time::timeout(FETCH_TIMEOUT, self.fetch(&job))
            .await
            .unwrap_or(Err(FetchError::TimedOut))
    }

    /// Waits for one of `source`'s slots, saying so in `job`'s step.
    async fn slot(
        &self,
        source: Source,
        what: String,
        job: &Job,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slots = Arc::clone(
            self.slots
                .lock()
                .entry(source.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(PER_SOURCE))),
        );
        *job.step.lock() = Step {
            source: Some(source),
            what,
        };
        // Never closed: the permit is always had.
        slots.acquire_owned().await.ok()
    }

    async fn fetch(&self, job: &Job) -> Result<Prepared, FetchError> {
        if let Some(refused) = &job.refused {
            return Err(FetchError::OutOfNamespace(refused.clone()));
        }
        let spec = &job.spec;
        let mut files = Vec::new();
        let mut layers = BTreeMap::new();
        let pinned = spec.get("oci").is_some();
        let (resolved, content) = if let Some(source) = spec.get("configMap") {
            let bytes = self.config_map_module(source, job).await?;
            let (bytes, content) = blocking(move || {
                let content = hex_sha256(&bytes);
                (bytes, content)
            })
            .await;
            files.push(ModuleFile {
                file: "module.wasm",
                sha256: content.clone(),
                bytes: Bytes::Memory(bytes),
            });
            (format!("sha256:{content}"), content)
        } else if let Some(reference) = spec.get("oci").and_then(Value::as_str) {
            let cached = self.oci(reference, job.pins.module.as_deref(), job).await?;
            layers.insert(cached.digest.clone(), cached.layer.clone());
            let content = cached.layer.clone();
            files.push(ModuleFile {
                file: "module.wasm",
                sha256: cached.layer,
                bytes: Bytes::Cached(cached.path),
            });
            (cached.digest, content)
        } else {
            return Err(FetchError::NoSource);
        };
        // The manifest file: the spec without the source, named by the object, the module
        // beside it. It changes only when the spec does, so a new module alone is a swap.
        let mut manifest = spec.clone();
        // A shadow's and a canary's modules come from registries too, pinned as the module is.
        let mut sides = [None, None];
        for ((field, file, pin), resolved) in [
            ("shadow", "shadow.wasm", job.pins.shadow.as_deref()),
            ("canary", "canary.wasm", job.pins.canary.as_deref()),
        ]
        .into_iter()
        .zip(&mut sides)
        {
            let Some(reference) = manifest
                .get(field)
                .and_then(|section| section.get("oci"))
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                continue;
            };
            let cached = self.oci(&reference, pin, job).await?;
            layers.insert(cached.digest.clone(), cached.layer.clone());
            *resolved = Some(cached.digest);
            files.push(ModuleFile {
                file,
                sha256: cached.layer,
                bytes: Bytes::Cached(cached.path),
            });
            if let Some(section) = manifest.get_mut(field).and_then(|s| s.as_object_mut()) {
                section.remove("oci");
                section.insert("module".to_owned(), json!(file));
            }
        }
        if let Some(fields) = manifest.as_object_mut() {
            fields.remove("configMap");
            fields.remove("oci");
            fields.insert("name".to_owned(), json!(job.name));
            fields.insert("module".to_owned(), json!("module.wasm"));
        }
        let [shadow, canary] = sides;
        Ok(Prepared {
            files,
            module: Module {
                resolved,
                content,
                manifest: serde_yaml_ng::to_string(&manifest).unwrap_or_default(),
                shadow,
                canary,
                layers,
                pinned,
            },
        })
    }

    /// The module `reference` names: from the disk cache, with no request, when the digest it
    /// (or `pin`) names was pulled before; pulled from its registry otherwise.
    async fn oci(
        &self,
        reference: &str,
        pin: Option<&str>,
        job: &Job,
    ) -> Result<Cached, FetchError> {
        let registry = self.registry.as_ref().ok_or(FetchError::NoRegistry)?;
        let parsed = oci_client::Reference::from_str(reference).ok();
        // A digest in the reference is what was asked for; a pin stands in only for a tag.
        let wanted = (parsed.as_ref())
            .and_then(|r| r.digest().map(str::to_owned))
            .or_else(|| pin.map(str::to_owned));
        if let Some(digest) = &wanted {
            if let Some(layer) = job.pins.layers.get(digest) {
                return Ok(Cached {
                    digest: digest.clone(),
                    path: registry.store().module_path(layer),
                    layer: layer.clone(),
                });
            }
            let store = registry.store().clone();
            let owned = digest.clone();
            let hit = blocking(move || {
                let layer = store.layer_of(digest_hex(&owned)?)?;
                let layer = digest_hex(&layer)?.to_owned();
                let path = store.module_path(&layer);
                path.is_file().then_some((layer, path))
            })
            .await;
            if let Some((layer, path)) = hit {
                return Ok(Cached {
                    digest: digest.clone(),
                    layer,
                    path,
                });
            }
        }
        let host = parsed.as_ref().map_or_else(
            || reference.split('/').next().unwrap_or_default().to_owned(),
            |r| r.resolve_registry().to_owned(),
        );
        let _slot = self
            .slot(Source::Registry(host), reference.to_owned(), job)
            .await;
        let pulled = registry
            .pull(reference, pin)
            .await
            .map_err(FetchError::Registry)?;
        let layer = digest_hex(&pulled.layer_digest)
            .unwrap_or_default()
            .to_owned();
        Ok(Cached {
            digest: pulled.digest,
            layer,
            path: pulled.path,
        })
    }

    /// The component in the ConfigMap `source` names.
    async fn config_map_module(&self, source: &Value, job: &Job) -> Result<Vec<u8>, FetchError> {
        let field = |key: &str| source[key].as_str().unwrap_or_default().to_owned();
        let (namespace, name, key) = (field("namespace"), field("name"), field("key"));
        let _slot = self
            .slot(
                Source::ApiServer,
                format!("ConfigMap {namespace}/{name}"),
                job,
            )
            .await;
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
}
