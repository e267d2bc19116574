//! The one wasmtime `Engine` of a host: async, epoch-interrupted, pooling-allocated; its epoch
//! ticker; and the linker every plugin instance is built from.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Linker, ResourceType};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::wasm::bindings::Reconciler;
use crate::wasm::compiled::CompiledCache;
use crate::wasm::state::GuestState;

/// How often the engine's epoch advances. A running guest yields to the async executor once per
/// tick and its deadline is checked then, so a deadline is honoured within about one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(2);

/// How many guest instances may exist at once across all plugins when the pooling allocator is
/// used (fresh instances per call plus reused ones). Beyond it, instantiation fails and the
/// reconcile is retried.
pub const POOL_INSTANCES: u32 = 1_000;

/// Bytes of each pooled linear memory kept resident (reset in place instead of returned to the
/// kernel) between instances: covers a typical guest's stack, data and first heap pages.
const MEMORY_KEEP_RESIDENT: usize = 2 << 20;

/// Bytes of each pooled table kept resident between instances.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Unused pool slots (memories, tables) kept warm per CPU: a slot freed by one call keeps its
/// module's image and up to [`MEMORY_KEEP_RESIDENT`] of touched pages, so the next call of the
/// same module resets it in place. wasmtime's default keeps 100 whatever the plugins do, which
/// holds one resident slot per idle plugin (about 1 MiB for a JavaScript guest). Tied to the
/// CPUs instead, the kept memory follows the calls that can run at once, not the number of plugins
/// loaded; the least recently used warm slot is the one reused for another module.
const WARM_SLOTS_PER_CPU: u32 = 4;

/// The most unused slots of each kind the pool keeps warm: [`WARM_SLOTS_PER_CPU`] per CPU, at
/// least 8.
#[must_use]
pub fn max_unused_warm_slots() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    u32::try_from(cpus)
        .unwrap_or(u32::MAX)
        .saturating_mul(WARM_SLOTS_PER_CPU)
        .max(8)
}

/// WASI interface families the host does not implement: plugins have no network (API calls go
/// through the `client` import). Language runtimes import them whether or not the code uses
/// them, so a component importing them still loads: each of their functions is a stub that
/// traps, naming itself ([`stub_withheld`]).
pub const WITHHELD_WASI: [&str; 2] = ["wasi:sockets/", "wasi:http/"];

/// Whether `import` (an interface name such as `wasi:sockets/tcp@0.2.6`) is withheld.
#[must_use]
pub fn is_withheld(import: &str) -> bool {
    WITHHELD_WASI
        .iter()
        .any(|family| import.starts_with(family))
}

/// Defines every withheld interface `component` imports in `linker`: its resources as one
/// opaque host resource type (never created), its functions as stubs that trap when called.
///
/// # Errors
/// When `linker` already defines one of them.
pub fn stub_withheld(
    linker: &mut Linker<GuestState>,
    component: &Component,
) -> wasmtime::Result<()> {
    /// The host resource standing in for a withheld interface's resources (never created).
    struct Withheld;

    let engine = component.engine().clone();
    // Resources the withheld interfaces only use (`pollable`, `input-stream`, … of wasi:io) are
    // the linked interfaces' own: leave them to those.
    let linked_resources: Vec<ResourceType> = component
        .component_type()
        .imports(&engine)
        .filter(|(name, _)| !is_withheld(name))
        .filter_map(|(_, item)| match item.ty {
            ComponentItem::ComponentInstance(instance) => Some(instance),
            _ => None,
        })
        .flat_map(|instance| {
            instance
                .exports(&engine)
                .filter_map(|(_, item)| match item.ty {
                    ComponentItem::Resource(ty) => Some(ty),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (name, item) in component.component_type().imports(&engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if !is_withheld(name) {
            continue;
        }
        let mut linked = linker.instance(name)?;
        for (export, item) in instance.exports(&engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let message = format!(
                        "`{name}#{export}` called: plugins have no network access (the host \
                         does not implement wasi:sockets or wasi:http; Kubernetes API calls go \
                         through the `client` import)"
                    );
                    linked.func_new(export, move |_, _, _, _| {
                        Err(wasmtime::Error::msg(message.clone()))
                    })?;
                }
                ComponentItem::Resource(ty) if !linked_resources.contains(&ty) => {
                    // One host type for all: a withheld interface using another's resource
                    // (tcp's `network`) sees the same type.
                    linked.resource(export, ResourceType::host::<Withheld>(), |_, _| Ok(()))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Links the WASI 0.2 interfaces a plugin may import: `wasi:io`, `wasi:clocks`, `wasi:random`,
/// `wasi:cli` (environment as granted, stdout/stderr logged, no stdin) and `wasi:filesystem` with
/// no preopened directory (so language runtimes that look for one start, and find none).
/// `wasi:sockets` and `wasi:http` are not linked (see [`WITHHELD_WASI`]).
fn link_wasi(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::WasiView as _;
    use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
    use wasmtime_wasi::random::WasiRandom;

    wasmtime_wasi_io::add_to_linker_async(linker)?;
    let l = linker;
    clocks::wall_clock::add_to_linker::<_, WasiClocks>(l, GuestState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<_, WasiClocks>(l, GuestState::clocks)?;
    random::random::add_to_linker::<_, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<_, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<_, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::environment::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::stdin::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::stdout::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::stderr::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(l, GuestState::cli)?;
    filesystem::preopens::add_to_linker::<_, WasiFilesystem>(l, GuestState::filesystem)?;
    filesystem::types::add_to_linker::<_, WasiFilesystem>(l, GuestState::filesystem)?;
    Ok(())
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// Use the pooling instance allocator (falls back to on-demand allocation, with a warning,
    /// where the pool cannot be reserved).
    pub pooling: bool,
    /// Keep compiled modules here, keyed by content digest, compiler settings and wasmtime
    /// version, so a restart or a reload of an unchanged module does not recompile it. `None`:
    /// compile every time.
    pub module_cache: Option<PathBuf>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            pooling: true,
            module_cache: None,
        }
    }
}

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// wasmtime refused the configuration.
    #[error("cannot configure the WebAssembly engine")]
    Config(#[source] wasmtime::Error),
    /// The compiled-module cache directory is unusable.
    #[error("cannot use {0} as the compiled-module cache; pick another directory or disable it")]
    Cache(PathBuf, #[source] Box<dyn std::error::Error + Send + Sync>),
    /// WASI or the reconcile interfaces could not be added to the linker.
    #[error("cannot link the host interfaces")]
    Link(#[source] wasmtime::Error),
}

/// The engine, the linker with every host interface, and the epoch ticker (which stops when the
/// last handle to the engine is dropped).
#[derive(Clone)]
pub struct PluginEngine {
    engine: Engine,
    linker: Arc<Linker<GuestState>>,
    pooling: bool,
    compiled: Option<Arc<CompiledCache>>,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine")
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// Builds the engine and starts its epoch ticker.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration or the host interfaces cannot be linked.
    pub fn new(settings: EngineSettings) -> Result<Self, EngineError> {
        let (engine, pooling) = if settings.pooling {
            match Engine::new(&config(true)) {
                Ok(engine) => (engine, true),
                Err(error) => {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "cannot reserve the instance pool; allocating instances on demand"
                    );
                    (
                        Engine::new(&config(false)).map_err(EngineError::Config)?,
                        false,
                    )
                }
            }
        } else {
            (
                Engine::new(&config(false)).map_err(EngineError::Config)?,
                false,
            )
        };
        let mut linker = Linker::new(&engine);
        link_wasi(&mut linker).map_err(EngineError::Link)?;
        Reconciler::add_to_linker::<_, HasSelf<GuestState>>(&mut linker, |state| state)
            .map_err(EngineError::Link)?;
        let compiled = match &settings.module_cache {
            Some(dir) => Some(Arc::new(
                CompiledCache::open(dir, &engine)
                    .map_err(|error| EngineError::Cache(dir.clone(), error.into()))?,
            )),
            None => None,
        };
        start_ticker(&engine);
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            pooling,
            compiled,
        })
    }

    /// The wasmtime engine.
    #[must_use]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The component with content `bytes` (SHA-256 `digest`), compiled, or mapped from the
    /// module cache when it holds it.
    ///
    /// # Errors
    /// When `bytes` is not a component this engine can compile.
    pub fn component(&self, digest: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        match &self.compiled {
            Some(cache) => cache.component(digest, bytes),
            None => Component::new(&self.engine, bytes),
        }
    }

    /// The component with SHA-256 `digest` mapped from the module cache, when it holds it:
    /// how an unloaded module comes back without its bytes or a compiler.
    #[must_use]
    pub fn cached(&self, digest: &str) -> Option<Component> {
        self.compiled.as_ref()?.mapped(digest)
    }

    /// Whether compiled modules are kept on disk, so that a module unloaded while idle can be
    /// mapped again in about a millisecond instead of being compiled again.
    #[must_use]
    pub fn has_module_cache(&self) -> bool {
        self.compiled.is_some()
    }

    /// The linker with WASI and the reconcile interfaces.
    #[must_use]
    pub fn linker(&self) -> &Linker<GuestState> {
        &self.linker
    }

    /// Whether the pooling allocator is in use.
    #[must_use]
    pub fn pooling(&self) -> bool {
        self.pooling
    }
}

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        // The component-model-async task bookkeeping would otherwise run on every call.
        .concurrency_support(false)
        // The native-to-wasm offset map serves only the offsets in a trap's backtrace (the
        // function names stay); it is a third of a QuickJS module's non-code memory, resident
        // for as long as the plugin is loaded, and loading it slows start-up.
        .generate_address_map(false);
    if pooling {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 4)
            .total_memories(POOL_INSTANCES * 2)
            .total_tables(POOL_INSTANCES * 4)
            .total_stacks(POOL_INSTANCES)
            .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .max_unused_warm_slots(max_unused_warm_slots())
            // PAGEMAP_SCAN (Linux ≥ 6.7) resets only the pages a guest touched; off elsewhere.
            .pagemap_scan(Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

/// Advances the epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("wasm-epoch".to_owned())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the epoch ticker; guest deadlines fall back to timers");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A component whose start function writes one byte on each of the first 16 pages (64 KiB)
    /// of its memory; `k` makes each one a different module.
    fn touching_component(k: usize) -> String {
        format!(
            r#"(component
                 (core module $m
                   (memory 2)
                   (global i32 (i32.const {k}))
                   (func $touch (local $i i32)
                     (loop $l
                       (i32.store8 (local.get $i) (i32.const 1))
                       (local.set $i (i32.add (local.get $i) (i32.const 4096)))
                       (br_if $l (i32.lt_u (local.get $i) (i32.const 65536)))))
                   (start $touch))
                 (core instance (instantiate (module $m))))"#
        )
    }

    #[test]
    fn idle_modules_keep_no_more_warm_slots_than_the_cpus_can_use() {
        // One instance of each of many modules, one after the other, as plugins that reconciled
        // once and went idle. What the pool keeps resident for them must follow the CPUs, not
        // the number of modules (wasmtime's default would keep 100 warm slots, one per module).
        let engine = Engine::new(&config(true)).expect("a pooling engine");
        let Some(metrics) = engine.pooling_allocator_metrics() else {
            panic!("the engine uses the pooling allocator");
        };
        let linker = Linker::<()>::new(&engine);
        let modules = usize::try_from(max_unused_warm_slots()).expect("fits") + 40;
        // Kept alive, as loaded plugins are: dropping a module clears the slots it warmed.
        let mut loaded = Vec::new();
        for k in 0..modules {
            let component = Component::new(&engine, touching_component(k)).expect("compiles");
            loaded.push(component.clone());
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_epoch_deadline(u64::MAX / 2);
            let instance = linker.instantiate(&mut store, &component);
            instance.expect("instantiates");
        }
        let warm = metrics.unused_warm_memories();
        assert!(
            warm <= max_unused_warm_slots(),
            "{warm} warm memory slots kept after {modules} idle modules; at most {} expected",
            max_unused_warm_slots()
        );
        let resident = metrics.unused_memory_bytes_resident();
        let bound = usize::try_from(max_unused_warm_slots()).expect("fits") * (64 << 10);
        assert!(
            resident <= bound,
            "{resident} bytes resident in unused memory slots; at most {bound} expected"
        );
        assert!(
            resident > 0,
            "the warm slots keep their touched pages resident"
        );
    }

    #[test]
    fn a_relative_module_cache_is_taken_from_the_working_directory() {
        // Unit tests run in host/.
        let relative = Path::new("../target/unit-test-relative-module-cache");
        let engine = PluginEngine::new(EngineSettings {
            pooling: false,
            module_cache: Some(relative.to_owned()),
        })
        .expect("a relative cache directory is usable");
        assert!(relative.is_dir());
        engine
            .component("empty", b"\0asm\x0d\0\x01\0")
            .expect("the empty component compiles");
        assert!(
            relative
                .read_dir()
                .expect("listed")
                .flatten()
                .any(|engine_dir| { engine_dir.path().join("empty.cwasm").is_file() })
        );
    }
}
