//! Plugin modules: a component file compiled, checked against the `reconciler` world and
//! pre-linked once (one `InstancePre` per content digest), ready to instantiate per call.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::bindings::ReconcilerPre;
use super::engine::{PluginEngine, is_withheld, stub_withheld};
use super::state::GuestState;

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

/// A compiled, checked component.
pub struct Module {
    digest: String,
    pre: ReconcilerPre<GuestState>,
    imports: Vec<String>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("digest", &self.digest)
            .field("imports", &self.imports)
            .finish_non_exhaustive()
    }
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

    pub(crate) fn pre(&self) -> &ReconcilerPre<GuestState> {
        &self.pre
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
        let bytes = tokio::fs::read(path)
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
        let digest = hex_sha256(&bytes);
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
}

fn compile(
    engine: &PluginEngine,
    path: &Path,
    bytes: &[u8],
    digest: String,
) -> Result<Module, LoadError> {
    let boxed =
        |error: wasmtime::Error| -> Box<dyn std::error::Error + Send + Sync> { error.into() };
    let component = engine
        .component(&digest, bytes)
        .map_err(|error| LoadError::Compile {
            path: path.to_owned(),
            source: boxed(error),
        })?;
    let imports = component
        .component_type()
        .imports(engine.engine())
        .map(|(name, _)| name.to_owned())
        .collect::<Vec<String>>();
    let stubbed;
    let linker = if imports.iter().any(|name| is_withheld(name)) {
        let mut linker = engine.linker().clone();
        stub_withheld(&mut linker, &component).map_err(|error| LoadError::Imports {
            path: path.to_owned(),
            source: boxed(error),
        })?;
        stubbed = linker;
        &stubbed
    } else {
        engine.linker()
    };
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(|error| LoadError::Imports {
            path: path.to_owned(),
            source: boxed(error),
        })?;
    let pre = ReconcilerPre::new(instance_pre).map_err(|error| LoadError::World {
        path: path.to_owned(),
        source: boxed(error),
    })?;
    Ok(Module {
        digest,
        pre,
        imports,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::engine::EngineSettings;

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
