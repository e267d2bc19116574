//! Puts a plugin into a runtime: its module loaded, its caches (shared informers) started, its
//! controller added.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::api::SharedApi;
use super::context::PluginContext;
use super::manifest::Manifest;
use super::module::{LoadError, ModuleLoader};
use super::reconciler::{FAILURE_REASONS, Plugin, PluginReconciler};
use crate::informer::{Predicates, Scope};
use crate::queue::ControllerLimiter;
use crate::runtime::{ControllerSpec, InformerError, KindRef, Runtime};

/// Why a plugin could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AddPluginError {
    /// Its module could not be loaded.
    #[error("plugin `{plugin}`")]
    Module {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// One of its kinds could not be watched, or its controller could not be built.
    #[error("plugin `{plugin}`")]
    Controller {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: InformerError,
    },
}

/// What the manifest's caches are built from: for each readable kind, the scope watched.
/// `cache` kinds are watched without the label selector, so listing one that is also the `for`
/// kind gives the guest every object of it, not only the selected ones.
#[must_use]
pub fn cache_scopes(manifest: &Manifest) -> Vec<(KindRef, Scope)> {
    let scope = |kind: &KindRef, selector: Option<String>| Scope {
        api_version: kind.api_version.clone(),
        kind: kind.kind.clone(),
        namespace: manifest.namespace.clone(),
        label_selector: selector,
    };
    let mut scopes: Vec<(KindRef, Scope)> = Vec::new();
    let mut put = |kind: &KindRef, scope: Scope| {
        scopes.retain(|(k, _)| k != kind);
        scopes.push((kind.clone(), scope));
    };
    put(
        &manifest.for_kind,
        scope(
            &manifest.for_kind,
            manifest.label_selector.as_ref().map(ToString::to_string),
        ),
    );
    for kind in &manifest.owns {
        put(kind, scope(kind, None));
    }
    for kind in &manifest.cache {
        put(kind, scope(kind, None));
    }
    scopes
}

/// The controller settings a manifest asks for.
#[must_use]
pub fn controller_spec(manifest: &Manifest) -> ControllerSpec {
    let limiter = &manifest.rate_limiter;
    ControllerSpec {
        name: manifest.name.clone(),
        for_kind: manifest.for_kind.clone(),
        owns: manifest.owns.clone(),
        namespace: manifest.namespace.clone(),
        label_selector: manifest.label_selector.as_ref().map(ToString::to_string),
        predicates: Predicates {
            generation_changed: manifest.generation_changed,
        },
        resync: manifest.resync,
        workers: manifest.concurrency,
        limiter: ControllerLimiter {
            base_delay: limiter.base_delay,
            max_delay: limiter.max_delay,
            qps: limiter.qps,
            burst: limiter.burst,
        },
    }
}

/// Loads `manifest`'s module, starts (or shares) the informers of its kinds, and adds its
/// controller to `runtime`, with calls to the API going to `api`.
///
/// # Errors
/// When the module does not load or a kind cannot be watched.
pub async fn add_plugin(
    runtime: &mut Runtime,
    loader: &ModuleLoader,
    manifest: Manifest,
    api: SharedApi,
) -> Result<Arc<Plugin>, AddPluginError> {
    let name = manifest.name.clone();
    let module = loader
        .load(&manifest.module)
        .await
        .map_err(|source| AddPluginError::Module {
            plugin: name.clone(),
            source,
        })?;
    let controller_error = |source| AddPluginError::Controller {
        plugin: name.clone(),
        source,
    };
    let mut caches = HashMap::new();
    for (kind, scope) in cache_scopes(&manifest) {
        let informer = runtime.informer(scope).await.map_err(controller_error)?;
        caches.insert(kind, Arc::clone(informer.store()));
    }
    let spec = controller_spec(&manifest);
    let failures = runtime
        .telemetry()
        .metrics()
        .plugin_failures(&name, &FAILURE_REASONS);
    let context = Arc::new(PluginContext::new(Arc::new(manifest), caches, api));
    let plugin = Arc::new(Plugin::new(context, module, Some(failures)));
    runtime
        .add_controller(spec, PluginReconciler::new(Arc::clone(&plugin)))
        .await
        .map_err(controller_error)?;
    tracing::info!(
        plugin = %name,
        module = %plugin.module().digest(),
        "plugin loaded"
    );
    Ok(plugin)
}

/// The manifest files named by `paths`: each path is a manifest, or a directory whose
/// `*/plugin.yaml` files are manifests (sorted by path).
///
/// # Errors
/// When a path does not exist or a directory cannot be read.
pub fn manifest_paths(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(Result::ok)
                .map(|entry| entry.path().join("plugin.yaml"))
                .filter(|candidate| candidate.is_file())
                .collect();
            inner.sort();
            found.extend(inner);
        } else if path.is_file() {
            found.push(path.clone());
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("plugin manifest {} does not exist", path.display()),
            ));
        }
    }
    Ok(found)
}
