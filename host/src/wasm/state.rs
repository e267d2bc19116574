//! What a guest's `Store` holds: its WASI context (stdio captured, nothing else granted), its
//! memory limiter, and the plugin context its host imports answer from.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::tenant::TenantShare;
use crate::wasm::api_notes::ApiNotes;
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

/// A guest memory's growth would take its tenant past its memory ceiling; the trap carries
/// this error.
#[derive(Debug, thiserror::Error)]
#[error(
    "tenant memory ceiling reached: the guest asked for {asked} more bytes of linear memory, \
     the instances of tenant `{namespace}` hold {used} of its {ceiling}"
)]
pub struct TenantMemoryExceeded {
    /// The tenant's namespace.
    pub namespace: String,
    /// The bytes the growth asked for.
    pub asked: u64,
    /// The bytes the tenant's instances held.
    pub used: u64,
    /// The tenant's ceiling.
    pub ceiling: u64,
}

/// Caps each linear memory of an instance, records the largest size reached, and charges the
/// instance's memory to its tenant until the instance is dropped.
#[derive(Debug)]
pub struct MemoryLimiter {
    limit: usize,
    peak: usize,
    tenant: Option<Arc<TenantShare>>,
    /// Bytes charged to the tenant, given back on drop.
    charged: u64,
    /// The last growth charged, given back if the growth then fails.
    last_growth: u64,
}

impl MemoryLimiter {
    /// A limiter allowing `limit` bytes per linear memory.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            peak: 0,
            tenant: None,
            charged: 0,
            last_growth: 0,
        }
    }

    /// Also charges every growth to `tenant`, refusing one past its memory ceiling.
    #[must_use]
    pub fn charging(mut self, tenant: Option<Arc<TenantShare>>) -> Self {
        self.tenant = tenant;
        self
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
        current: usize,
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
        if let Some(tenant) = &self.tenant {
            let growth = u64::try_from(desired.saturating_sub(current)).unwrap_or(u64::MAX);
            if !tenant.charge_memory(growth) {
                return Err(TenantMemoryExceeded {
                    namespace: tenant.namespace().to_owned(),
                    asked: growth,
                    used: tenant.memory().used(),
                    ceiling: tenant.memory().ceiling(),
                }
                .into());
            }
            self.charged += growth;
            self.last_growth = growth;
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        if let Some(tenant) = &self.tenant {
            tenant.credit_memory(self.last_growth);
            self.charged -= self.last_growth;
            self.last_growth = 0;
        }
        Ok(())
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

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        if let Some(tenant) = &self.tenant {
            tenant.credit_memory(self.charged);
        }
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
    /// The API calls the current call made.
    pub(crate) api_notes: ApiNotes,
    /// The current call's reconcile span, when traced.
    pub(crate) trace: Option<opentelemetry::Context>,
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
            )
            .charging(plugin.tenant.clone()),
            plugin,
            deadline: Instant::now(),
            call_log,
            tape: None,
            session,
            insecure_seed: seed,
            cost: CostMeter::default(),
            api_notes: ApiNotes::default(),
            trace: None,
        }
    }

    /// Starts a call: a fresh budget of guest text, nothing spent yet.
    pub fn begin_call(&mut self) {
        self.call_log.lock().begin();
        self.cost = CostMeter::default();
        self.api_notes = ApiNotes::default();
    }

    /// Counts one call of `import` that began at `started` and ends now, and traces it when the
    /// call is traced.
    pub(crate) fn imported(&mut self, import: crate::wasm::cost::Import, started: Instant) {
        self.cost.import(import, started);
        if let Some(trace) = &self.trace {
            crate::wasm::call_trace::import_span(trace, import, started);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TenantCeilings;
    use crate::telemetry::TenantMetrics;

    const PAGE: u64 = 64 << 10;

    /// One page of memory, and `grow` by the pages asked for.
    const GROWS: &str = r#"(module (memory 1)
        (func (export "grow") (param i32) (result i32) local.get 0 memory.grow))"#;

    struct Instance {
        store: wasmtime::Store<MemoryLimiter>,
        grow: wasmtime::TypedFunc<i32, i32>,
    }

    fn instance(engine: &wasmtime::Engine, tenant: &Arc<TenantShare>) -> Instance {
        let module = wasmtime::Module::new(engine, GROWS).expect("the module compiles");
        let limiter = MemoryLimiter::new(16 << 20).charging(Some(Arc::clone(tenant)));
        let mut store = wasmtime::Store::new(engine, limiter);
        store.limiter(|limiter| limiter);
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiated");
        let grow = instance
            .get_typed_func(&mut store, "grow")
            .expect("the export");
        Instance { store, grow }
    }

    #[test]
    fn a_tenants_instances_hold_its_memory_together_until_they_are_dropped() {
        let ceilings = TenantCeilings {
            api_qps: 1.0,
            api_burst: 1,
            instances: 1,
            memory: 4 * PAGE,
        };
        let tenant = Arc::new(TenantShare::new(
            "team-a",
            ceilings,
            TenantMetrics::default(),
        ));
        let engine = wasmtime::Engine::default();

        let mut first = instance(&engine, &tenant);
        assert_eq!(tenant.memory().used(), PAGE, "its initial page");
        assert_eq!(first.grow.call(&mut first.store, 2).expect("grows"), 1);
        assert_eq!(tenant.memory().used(), 3 * PAGE);

        let mut second = instance(&engine, &tenant);
        assert_eq!(tenant.memory().used(), 4 * PAGE);
        let refused = second
            .grow
            .call(&mut second.store, 1)
            .expect_err("a fifth page is past the tenant's ceiling");
        let exceeded = refused
            .downcast_ref::<TenantMemoryExceeded>()
            .expect("the tenant's ceiling stopped it");
        assert_eq!(
            (exceeded.namespace.as_str(), exceeded.asked, exceeded.used),
            ("team-a", PAGE, 4 * PAGE)
        );
        assert_eq!(tenant.memory().used(), 4 * PAGE, "nothing charged for it");

        drop(first);
        assert_eq!(
            tenant.memory().used(),
            PAGE,
            "the first instance's pages came back"
        );
        assert_eq!(second.grow.call(&mut second.store, 3).expect("grows"), 1);
        drop(second);
        assert_eq!(tenant.memory().used(), 0);
    }
}
