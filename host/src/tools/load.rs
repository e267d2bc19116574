//! Loading a manifest and its component as the host does, for `check` and `reconcile`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use crate::config::HostConfig;
use crate::manifest::Manifest;
use crate::wasm::engine::{EngineError, EngineSettings, PluginEngine};
use crate::wasm::module::{Module, ModuleLoader};

/// The `client` import, which needs grants.
pub(super) const CLIENT_IMPORT: &str = "kube:reconcile/client@";

/// A manifest with its compiled, checked component.
pub(super) struct Loaded {
    pub(super) manifest: Manifest,
    pub(super) module: Arc<Module>,
    pub(super) size: usize,
}

/// Loads the manifest at `path` and its component, as `run` does.
pub(super) async fn load(path: &Path, module_cache: Option<PathBuf>) -> anyhow::Result<Loaded> {
    let manifest = Manifest::load(path)?;
    let bytes = crate::bounded_read::read_async(
        &manifest.module,
        crate::bounded_read::MAX_MODULE_BYTES,
        "module",
    )
    .await
    .with_context(|| {
        format!(
            "plugin manifest {}: cannot read its `module` {}; build the component, or fix \
             `module:` (a relative path is resolved against the manifest's directory)",
            path.display(),
            manifest.module.display()
        )
    })?;
    let size = bytes.len();
    let cache = module_cache.or_else(|| HostConfig::default().module_cache_dir());
    let loader = ModuleLoader::new(engine(cache)?);
    let module = loader
        .load_bytes(&manifest.module, bytes)
        .await
        .with_context(|| format!("plugin manifest {}", path.display()))?;
    Ok(Loaded {
        manifest,
        module,
        size,
    })
}

/// An engine for one plugin (no instance pool), caching compiled modules in `cache` if usable.
pub(super) fn engine(cache: Option<PathBuf>) -> anyhow::Result<PluginEngine> {
    let settings = EngineSettings {
        pooling: false,
        module_cache: cache,
    };
    match PluginEngine::new(settings.clone()) {
        Err(error @ EngineError::Cache(..)) => {
            let error = anyhow::Error::from(error);
            tracing::warn!(
                error = format!("{error:#}"),
                "compiling without a module cache"
            );
            PluginEngine::new(EngineSettings {
                module_cache: None,
                ..settings
            })
        }
        other => other,
    }
    .context("cannot start the WebAssembly engine")
}
