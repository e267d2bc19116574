//! Plugin modules: a component file compiled, checked against the `reconciler` world and
//! pre-linked once (one `InstancePre` per content digest), ready to instantiate per call.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::bounded_read::MAX_MODULE_BYTES;
use crate::wasm::bindings::ReconcilerPre;
use crate::wasm::engine::{PluginEngine, is_withheld, stub_withheld};
use crate::wasm::pool::InstancePool;
use crate::wasm::state::GuestState;

/// The WIT package every component must be built against.
pub const WIT_PACKAGE: &str = "kube:reconcile@0.1.0";

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read plugin module {path}")]
    Read {
        /// The module's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error(
        "{path} is not a valid WebAssembly component (a core module, or corrupt); build it as a \
         component, e.g. `cargo build --release --target wasm32-wasip2`"
    )]
    Compile {
        /// The module's path.
        path: PathBuf,
        /// What wasmtime reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The component imports something the host does not provide.
    #[error(
        "component {path} imports something the host does not provide (only WASI and \
         {WIT_PACKAGE} are available); rebuild it against wit/ ({WIT_PACKAGE})"
    )]
    Imports {
        /// The module's path.
        path: PathBuf,
        /// What wasmtime reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A module unloaded while idle cannot be brought back: the module cache no longer holds
    /// its compiled form and its file no longer holds its content.
    #[error(
        "cannot load the idle plugin module {digest} again: the module cache no longer holds it \
         and {path} has changed since; the plugin takes up the new content when its source \
         change is picked up (keep the module cache directory from being cleaned while the \
         host runs)"
    )]
    Gone {
        /// The module's path.
        path: PathBuf,
        /// The content it had.
        digest: String,
    },
    /// The component does not export `reconcile` with the world's signature.
    #[error(
        "component {path} does not match the `reconciler` world: it must export `reconcile: \
         func(request: request) -> result<action, reconcile-error>`; rebuild it against wit/ \
         ({WIT_PACKAGE})"
    )]
    World {
        /// The module's path.
        path: PathBuf,
        /// What wasmtime reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A compiled, checked component. Its compiled code stays mapped while it is used; once
/// [`ModuleLoader::unload_idle`] finds it unused for a while, the code is unmapped (and the
/// instances kept for reuse dropped), and the next call maps it again from the module cache.
pub struct Module {
    digest: String,
    imports: Vec<String>,
    exports: Vec<String>,
    /// Where its bytes were read: read again, and checked against `digest`, when the module
    /// cache no longer holds its compiled form.
    source: PathBuf,
    engine: PluginEngine,
    /// The pre-linked component; `None` while unloaded.
    linked: Mutex<Option<ReconcilerPre<GuestState>>>,
    /// Milliseconds since [`origin`] of its last call.
    used: AtomicU64,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// The reuse pools of the plugins running it, emptied when it is unloaded.
    pools: Mutex<Vec<Weak<InstancePool>>>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("digest", &self.digest)
            .field("imports", &self.imports)
            .field("exports", &self.exports)
            .field("loaded", &self.is_loaded())
            .finish_non_exhaustive()
    }
}

/// Where module use times are counted from.
fn origin() -> Instant {
    static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);
    *ORIGIN
}

fn millis_now() -> u64 {
    u64::try_from(origin().elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Module {
    /// The SHA-256 of the component's bytes, in hex.
    #[must_use]
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The interfaces the component imports (`wasi:cli/stdout@0.2.x`, `kube:reconcile/client@0.1.0`, ...).
    #[must_use]
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// The interfaces and functions the component exports (`kube:reconcile/reconciler@0.1.0`, ...).
    #[must_use]
    pub fn exports(&self) -> &[String] {
        &self.exports
    }

    /// Whether its compiled code is mapped (not unloaded).
    #[must_use]
    pub fn is_loaded(&self) -> bool {
        self.linked.lock().is_some()
    }

    /// Marks the module as used now: every call does, before it takes an instance, fresh or
    /// reused.
    pub(crate) fn touch(&self) {
        self.used.store(millis_now(), Ordering::Relaxed);
    }

    /// Empties `pool` when the module is unloaded, so that its idle instances do not keep the
    /// compiled code mapped.
    pub(crate) fn keep_pool(&self, pool: &Arc<InstancePool>) {
        let mut pools = self.pools.lock();
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(Arc::downgrade(pool));
    }

    /// The pre-linked component, mapped again from the module cache if it was unloaded. Does not
    /// count as a use: a call marks that with [`touch`](Self::touch) first.
    ///
    /// # Errors
    /// When an unloaded module cannot be brought back: the module cache no longer holds it and
    /// its source file no longer holds its content (or cannot be compiled).
    pub(crate) async fn pre(&self) -> Result<ReconcilerPre<GuestState>, LoadError> {
        if let Some(pre) = &*self.linked.lock() {
            return Ok(pre.clone());
        }
        let _one_at_a_time = self.reloading.lock().await;
        if let Some(pre) = &*self.linked.lock() {
            return Ok(pre.clone());
        }
        let (engine, source, digest) = (
            self.engine.clone(),
            self.source.clone(),
            self.digest.clone(),
        );
        let started = Instant::now();
        let pre = tokio::task::spawn_blocking(move || relink(&engine, &source, &digest))
            .await
            .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))?;
        tracing::debug!(digest = %self.digest, elapsed = ?started.elapsed(),
            "idle plugin module loaded again");
        *self.linked.lock() = Some(pre.clone());
        Ok(pre)
    }

    /// Unloads the module when its last call is `idle` or longer ago; whether it was loaded.
    /// The reuse pools are emptied at every look while it is idle: a call that began before
    /// an unload returns its instance to the pool after it.
    fn unload_if_idle(&self, idle: Duration) -> bool {
        let idle = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        if millis_now().saturating_sub(self.used.load(Ordering::Relaxed)) < idle {
            return false;
        }
        for pool in self.pools.lock().iter().filter_map(Weak::upgrade) {
            pool.clear();
        }
        self.linked.lock().take().is_some()
    }
}

/// Loads modules, compiling each distinct content once while any plugin still uses it.
#[derive(Debug)]
pub struct ModuleLoader {
    engine: PluginEngine,
    loaded: Mutex<HashMap<String, Weak<Module>>>,
}

impl ModuleLoader {
    /// A loader compiling for `engine`.
    #[must_use]
    pub fn new(engine: PluginEngine) -> Self {
        Self {
            engine,
            loaded: Mutex::default(),
        }
    }

    /// The engine modules are compiled for.
    #[must_use]
    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// Reads, compiles (on a blocking thread) and checks the component at `path`.
    ///
    /// # Errors
    /// When the file cannot be read, is not a component, or does not match the world.
    pub async fn load(&self, path: &Path) -> Result<Arc<Module>, LoadError> {
        let bytes = crate::bounded_read::read_async(path, MAX_MODULE_BYTES, "module")
            .await
            .map_err(|source| LoadError::Read {
                path: path.to_owned(),
                source,
            })?;
        self.load_bytes(path, bytes).await
    }

    /// Compiles and checks `bytes`, read from `path`.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub async fn load_bytes(&self, path: &Path, bytes: Vec<u8>) -> Result<Arc<Module>, LoadError> {
        let (bytes, digest) = hex_sha256_blocking(bytes).await;
        if let Some(module) = self.loaded.lock().get(&digest).and_then(Weak::upgrade) {
            return Ok(module);
        }
        let engine = self.engine.clone();
        let owned_path = path.to_owned();
        let module =
            tokio::task::spawn_blocking(move || compile(&engine, &owned_path, &bytes, digest))
                .await
                .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))?;
        let module = Arc::new(module);
        let mut loaded = self.loaded.lock();
        loaded.retain(|_, weak| weak.strong_count() > 0);
        loaded.insert(module.digest.clone(), Arc::downgrade(&module));
        Ok(module)
    }

    /// Unloads every module whose last call is `idle` or longer ago (see [`Module`]); how
    /// many it unloaded. Does nothing without a module cache, where loading again would mean
    /// compiling again.
    pub fn unload_idle(&self, idle: Duration) -> usize {
        if !self.engine.has_module_cache() {
            return 0;
        }
        self.modules()
            .iter()
            .filter(|module| module.unload_if_idle(idle))
            .count()
    }

    /// How many modules in use are loaded, and how many unloaded.
    #[must_use]
    pub fn counts(&self) -> (usize, usize) {
        let modules = self.modules();
        let loaded = modules.iter().filter(|module| module.is_loaded()).count();
        (loaded, modules.len() - loaded)
    }

    /// The modules some plugin still holds.
    fn modules(&self) -> Vec<Arc<Module>> {
        self.loaded
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

fn compile(
    engine: &PluginEngine,
    path: &Path,
    bytes: &[u8],
    digest: String,
) -> Result<Module, LoadError> {
    let component = engine
        .component(&digest, bytes)
        .map_err(|error| LoadError::Compile {
            path: path.to_owned(),
            source: error.into(),
        })?;
    let imports = imports_of(engine, &component);
    let exports = names(component.component_type().exports(engine.engine()));
    let pre = link(engine, path, &component, &imports)?;
    Ok(Module {
        digest,
        imports,
        exports,
        source: path.to_owned(),
        engine: engine.clone(),
        linked: Mutex::new(Some(pre)),
        used: AtomicU64::new(millis_now()),
        reloading: tokio::sync::Mutex::new(()),
        pools: Mutex::default(),
    })
}

/// The interfaces `component` imports.
fn imports_of(engine: &PluginEngine, component: &Component) -> Vec<String> {
    names(component.component_type().imports(engine.engine()))
}

/// The names of a component type's imports or exports.
fn names<'a, T>(items: impl Iterator<Item = (&'a str, T)>) -> Vec<String> {
    items.map(|(name, _)| name.to_owned()).collect()
}

/// `component` (read from `path`, importing `imports`) linked with the host's interfaces and
/// checked against the world.
fn link(
    engine: &PluginEngine,
    path: &Path,
    component: &Component,
    imports: &[String],
) -> Result<ReconcilerPre<GuestState>, LoadError> {
    let boxed =
        |error: wasmtime::Error| -> Box<dyn std::error::Error + Send + Sync> { error.into() };
    let stubbed;
    let linker = if imports.iter().any(|name| is_withheld(name)) {
        let mut linker = engine.linker().clone();
        stub_withheld(&mut linker, component).map_err(|error| LoadError::Imports {
            path: path.to_owned(),
            source: boxed(error),
        })?;
        stubbed = linker;
        &stubbed
    } else {
        engine.linker()
    };
    let instance_pre = linker
        .instantiate_pre(component)
        .map_err(|error| LoadError::Imports {
            path: path.to_owned(),
            source: boxed(error),
        })?;
    ReconcilerPre::new(instance_pre).map_err(|error| LoadError::World {
        path: path.to_owned(),
        source: boxed(error),
    })
}

/// An unloaded module (content `digest`, read from `source`) linked again: mapped from the
/// module cache, else compiled again from `source` if it still holds that content.
fn relink(
    engine: &PluginEngine,
    source: &Path,
    digest: &str,
) -> Result<ReconcilerPre<GuestState>, LoadError> {
    let component = match engine.cached(digest) {
        Some(component) => component,
        None => {
            let bytes =
                crate::bounded_read::read(source, MAX_MODULE_BYTES, "module").map_err(|error| {
                    LoadError::Read {
                        path: source.to_owned(),
                        source: error,
                    }
                })?;
            if hex_sha256(&bytes) != digest {
                return Err(LoadError::Gone {
                    path: source.to_owned(),
                    digest: digest.to_owned(),
                });
            }
            engine
                .component(digest, &bytes)
                .map_err(|error| LoadError::Compile {
                    path: source.to_owned(),
                    source: error.into(),
                })?
        }
    };
    let imports = imports_of(engine, &component);
    link(engine, source, &component, &imports)
}

/// The SHA-256 of `bytes` in hex: a module's digest.
#[must_use]
pub fn hex_sha256(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(bytes) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// [`hex_sha256`] on a blocking thread, so hashing a module of up to 64 MiB does not hold one of
/// the runtime's workers (and the reconciles and renewals waiting for it); gives the bytes back.
pub async fn hex_sha256_blocking(bytes: Vec<u8>) -> (Vec<u8>, String) {
    tokio::task::spawn_blocking(move || {
        let digest = hex_sha256(&bytes);
        (bytes, digest)
    })
    .await
    .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::engine::EngineSettings;

    #[test]
    fn a_modules_digest_is_taken_off_the_runtimes_worker() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let bytes = vec![7_u8; 64 * 1024 * 1024];
            let expected = hex_sha256(&bytes);
            let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
            let ticker = tokio::spawn({
                let ticks = std::sync::Arc::clone(&ticks);
                async move {
                    loop {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                        ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
            // The runtime's only worker runs the ticker while the digest is taken elsewhere.
            let (bytes, digest) = hex_sha256_blocking(bytes).await;
            ticker.abort();
            assert_eq!(digest, expected);
            assert_eq!(bytes.len(), 64 * 1024 * 1024, "the bytes come back");
            assert!(
                ticks.load(std::sync::atomic::Ordering::Relaxed) > 0,
                "the worker was held while hashing"
            );
        });
    }

    fn engine() -> PluginEngine {
        PluginEngine::new(EngineSettings {
            pooling: false,
            module_cache: None,
        })
        .expect("engine")
    }

    fn load(text: &str) -> Result<Module, LoadError> {
        compile(&engine(), Path::new("m.wasm"), text.as_bytes(), "d".into())
    }

    #[test]
    fn networking_imports_are_satisfied_by_stubs() {
        // Functions and resources of the withheld families resolve (to stubs that trap), so
        // the component gets as far as the world check.
        for interface in ["wasi:sockets/tcp@0.2.6", "wasi:http/outgoing-handler@0.2.6"] {
            let text = format!(
                r#"(component (import "{interface}" (instance
                    (export "thing" (type (sub resource)))
                    (export "call" (func (param "x" u32) (result u32))))))"#
            );
            let Err(error) = load(&text) else {
                panic!("a component without `reconcile` loaded");
            };
            assert!(
                matches!(error, LoadError::World { .. }),
                "{interface}: {error}"
            );
        }
    }

    #[test]
    fn an_interface_the_host_does_not_know_is_refused() {
        let text = r#"(component (import "example:unknown/thing@1.0.0" (instance
            (export "call" (func)))))"#;
        let Err(error) = load(text) else {
            panic!("loaded");
        };
        assert!(matches!(error, LoadError::Imports { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains("imports something the host does not provide"),
            "{error}"
        );
    }

    #[test]
    fn the_wasi_interfaces_runtimes_need_are_linked() {
        // Resolved by the linker: a component importing them gets as far as the world check.
        for interface in [
            "wasi:cli/environment@0.2.6",
            "wasi:clocks/wall-clock@0.2.6",
            "wasi:random/random@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
            "wasi:io/streams@0.2.6",
        ] {
            let text = format!(r#"(component (import "{interface}" (instance)))"#);
            let Err(error) = load(&text) else {
                panic!("a component without `reconcile` loaded");
            };
            assert!(
                matches!(error, LoadError::World { .. }),
                "{interface}: {error}"
            );
        }
    }
}
