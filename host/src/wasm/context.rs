//! What a plugin's host imports answer from: its manifest (grants), its informer caches and the
//! API backend its calls go to.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;

use crate::informer::Store;
use crate::manifest::{Manifest, Shadow};
use crate::runtime::KindRef;
use crate::tenant::TenantShare;
use crate::wasm::api::SharedApi;
use crate::wasm::guest_log::{DroppedCounters, GuestLog};

/// One plugin's view of the host, shared by all its instances.
pub struct PluginContext {
    /// The plugin's name (logs, metrics, field manager, event reporter).
    pub name: Arc<str>,
    /// Its manifest.
    pub manifest: Arc<Manifest>,
    /// The caches its `cache` import reads, by kind (the `for`, `owns` and `cache` kinds).
    pub caches: HashMap<KindRef, Arc<Store>>,
    /// Where its `client` and `events` calls go.
    pub api: SharedApi,
    /// Its guest text's rate limit and dropped counters.
    pub log: Arc<GuestLog>,
    /// Counts `requeue-after` answers raised to `limits.minRequeueAfter`.
    pub hot_requeues: Counter,
    /// The tenant it belongs to: the calls at once and the memory its instances share with
    /// the tenant's other plugins; `None` for a plugin acting as the host.
    pub tenant: Option<Arc<TenantShare>>,
}

impl std::fmt::Debug for PluginContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginContext")
            .field("name", &self.name)
            .field("caches", &self.caches.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PluginContext {
    /// A context for `manifest` with these caches and API backend; dropped guest text is
    /// counted but not exported (see [`with_counters`](Self::with_counters)).
    #[must_use]
    pub fn new(
        manifest: Arc<Manifest>,
        caches: HashMap<KindRef, Arc<Store>>,
        api: SharedApi,
    ) -> Self {
        let name: Arc<str> = manifest.name.as_str().into();
        Self {
            log: Arc::new(GuestLog::new(
                Arc::clone(&name),
                manifest.limits.log_lines_per_second,
                DroppedCounters::default(),
            )),
            name,
            manifest,
            caches,
            api,
            hot_requeues: Counter::default(),
            tenant: None,
        }
    }

    /// The context of this plugin's `shadow`: the same name (the field manager its dry runs
    /// use), caches and API backend; the shadow's limits and environment, no instance reuse,
    /// and its guest text logged as `<plugin>/shadow`.
    #[must_use]
    pub fn shadow(&self, shadow: &Shadow) -> Self {
        let mut manifest = (*self.manifest).clone();
        manifest.limits = shadow.limits;
        manifest.env.clone_from(&shadow.env);
        manifest.instance_reuse = None;
        let label: Arc<str> = format!("{}/shadow", self.name).into();
        Self {
            name: Arc::clone(&self.name),
            log: Arc::new(GuestLog::new(
                label,
                shadow.limits.log_lines_per_second,
                DroppedCounters::default(),
            )),
            manifest: Arc::new(manifest),
            caches: self.caches.clone(),
            api: Arc::clone(&self.api),
            hot_requeues: Counter::default(),
            tenant: self.tenant.clone(),
        }
    }

    /// Counts the plugin's calls and memory in `tenant`'s share (`None`: in no tenant's).
    #[must_use]
    pub fn with_tenant(mut self, tenant: Option<Arc<TenantShare>>) -> Self {
        self.tenant = tenant;
        self
    }

    /// Counts the plugin's dropped guest text in `dropped` and its raised `requeue-after`
    /// answers in `hot_requeues` (its metrics).
    #[must_use]
    pub fn with_counters(mut self, dropped: DroppedCounters, hot_requeues: Counter) -> Self {
        self.log = Arc::new(GuestLog::new(
            Arc::clone(&self.name),
            self.manifest.limits.log_lines_per_second,
            dropped,
        ));
        self.hot_requeues = hot_requeues;
        self
    }
}
