//! What a guest's `Store` holds: its WASI context (stdio captured, nothing else granted), its
//! memory limiter, and the plugin context its host imports answer from.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::wasm::context::PluginContext;
use crate::wasm::cost::CostMeter;
use crate::wasm::guest_log::{CallLog, Source};
use crate::wasm::record::{self, SessionSlot};
use crate::wasm::stdio::LogStream;
use crate::wasm::tape::SharedTape;

/// The most table elements a guest may grow a table to.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// A guest memory grew past its plugin's limit; the trap carries this error.
#[derive(Debug, thiserror::Error)]
#[error(
    "memory limit exceeded: the guest asked for {desired} bytes of linear memory, the limit is {limit}"
)]
pub struct MemoryLimitExceeded {
    /// The size the guest asked for.
    pub desired: usize,
    /// The plugin's limit.
    pub limit: usize,
}

/// Caps each linear memory of an instance and records the largest size reached.
#[derive(Debug)]
pub struct MemoryLimiter {
    limit: usize,
    peak: usize,
}

impl MemoryLimiter {
    /// A limiter allowing `limit` bytes per linear memory.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self { limit, peak: 0 }
    }

    /// The largest linear memory size granted so far.
    #[must_use]
    pub fn peak(&self) -> usize {
        self.peak
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            return Err(MemoryLimitExceeded {
                desired,
                limit: self.limit,
            }
            .into());
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The data of one guest store.
pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) plugin: Arc<PluginContext>,
    /// When the current call must end.
    pub(crate) deadline: Instant,
    /// The call's guest text: stdout, stderr and the `log` import.
    pub(crate) call_log: Arc<parking_lot::Mutex<CallLog>>,
    /// Where the current call's writes are kept, when a shadow compares them.
    pub(crate) tape: Option<SharedTape>,
    /// The current call's recording or replay, shared with the WASI clocks and random sources.
    pub(crate) session: SessionSlot,
    /// The `wasi:random/insecure-seed` value this instance answers.
    pub(crate) insecure_seed: u128,
    /// What the current call's imports have spent.
    pub(crate) cost: CostMeter,
}

impl GuestState {
    /// A state for one instance of `plugin`: no preopened directories, only the environment
    /// variables the manifest grants; stdio logged. (The host implements no sockets at all; see
    /// [`crate::wasm::engine::WITHHELD_WASI`].)
    #[must_use]
    pub fn new(plugin: Arc<PluginContext>) -> Self {
        Self::with_seed(plugin, rand::random())
    }

    /// [`new`](Self::new), answering `seed` to `wasi:random/insecure-seed` (a replay gives the
    /// recorded one).
    #[must_use]
    pub fn with_seed(plugin: Arc<PluginContext>, seed: u128) -> Self {
        let call_log = Arc::new(parking_lot::Mutex::new(CallLog::new(Arc::clone(
            &plugin.log,
        ))));
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(LogStream::new(Arc::clone(&call_log), Source::Stdout))
            .stderr(LogStream::new(Arc::clone(&call_log), Source::Stderr));
        for (name, value) in &plugin.manifest.env {
            wasi.env(name, value);
        }
        let session = SessionSlot::default();
        record::install(&mut wasi, &session, seed);
        Self {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(
                usize::try_from(plugin.manifest.limits.memory).unwrap_or(usize::MAX),
            ),
            plugin,
            deadline: Instant::now(),
            call_log,
            tape: None,
            session,
            insecure_seed: seed,
            cost: CostMeter::default(),
        }
    }

    /// Starts a call: a fresh budget of guest text, nothing spent yet.
    pub fn begin_call(&mut self) {
        self.call_log.lock().begin();
        self.cost = CostMeter::default();
    }

    /// Logs the unterminated last lines of stdout and stderr (complete lines are logged as
    /// they are written).
    pub fn flush_stdio(&self) {
        self.call_log.lock().flush();
    }
}

impl wasmtime_wasi_io::IoView for GuestState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
