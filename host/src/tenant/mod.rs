//! Fair shares between tenants: the ceilings all the plugins of one tenant share (the
//! configuration's `tenants:`), so one team saturating its share leaves the others theirs.
//!
//! A plugin's tenant is the namespace of the ServiceAccount it acts as (a
//! `NamespacedReconcilerPlugin`'s own namespace); a plugin acting as the host has none.
//!
//! # Guarantees
//! - **API requests**: every request a tenant's plugins cause waits for a token of the
//!   tenant's bucket (`apiQps`, `apiBurst`) after one of its plugin's own.
//! - **Instances at once**: at most `instances` guest calls of a tenant's plugins run at once
//!   (reconciles, canaries and shadow runs); a call waits for a place before its deadline
//!   starts, so waiting does not eat into the guest's time.
//! - **Memory**: the linear memory of a tenant's instances, kept ones included, stays within
//!   `memory`; a growth past it fails like the instance's own limit (the call fails as out of
//!   memory, its instance is dropped) and the bytes come back when the instance is dropped.

mod memory;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};

pub use memory::MemoryBudget;

use crate::client::SharedBudget;
use crate::config::{TenantCeilings, TenantsConfig};
use crate::manifest::Manifest;
use crate::telemetry::{Metrics, TenantMetrics};

/// The shares of every tenant this host has seen, made on first use from the configuration.
pub struct Tenants {
    config: TenantsConfig,
    metrics: Option<Metrics>,
    shares: Mutex<HashMap<String, Arc<TenantShare>>>,
}

impl std::fmt::Debug for Tenants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenants")
            .field("config", &self.config)
            .field("tenants", &self.shares.lock().len())
            .finish_non_exhaustive()
    }
}

impl Default for Tenants {
    /// Every tenant with the default ceilings; no metrics.
    fn default() -> Self {
        Self::new(TenantsConfig::default())
    }
}

impl Tenants {
    /// Shares with the ceilings of `config` (validated by [`TenantsConfig::validate`]).
    #[must_use]
    pub fn new(config: TenantsConfig) -> Self {
        Self {
            config,
            metrics: None,
            shares: Mutex::default(),
        }
    }

    /// Exports each tenant's series in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The share of the tenant `manifest`'s plugin belongs to: the namespace of the
    /// ServiceAccount it acts as; `None` for a plugin acting as the host.
    #[must_use]
    pub fn of(&self, manifest: &Manifest) -> Option<Arc<TenantShare>> {
        let account = manifest.service_account.as_ref()?;
        Some(self.share(&account.namespace))
    }

    /// The share of the tenant `namespace`, the same for every plugin of it.
    #[must_use]
    pub fn share(&self, namespace: &str) -> Arc<TenantShare> {
        let mut shares = self.shares.lock();
        if let Some(share) = shares.get(namespace) {
            return Arc::clone(share);
        }
        let metrics = self
            .metrics
            .as_ref()
            .map(|metrics| metrics.tenant(namespace))
            .unwrap_or_default();
        let share = Arc::new(TenantShare::new(
            namespace,
            self.config.ceilings(namespace),
            metrics,
        ));
        shares.insert(namespace.to_owned(), Arc::clone(&share));
        share
    }
}

/// What one tenant's plugins share.
#[derive(Debug)]
pub struct TenantShare {
    namespace: Arc<str>,
    ceilings: TenantCeilings,
    api: SharedBudget,
    running: Semaphore,
    memory: MemoryBudget,
    metrics: TenantMetrics,
}

impl TenantShare {
    /// A share of `ceilings` for the tenant `namespace`, counted in `metrics`.
    #[must_use]
    pub fn new(namespace: &str, ceilings: TenantCeilings, metrics: TenantMetrics) -> Self {
        // A ceiling [`TenantsConfig::validate`] refused is never resolved, so these hold; the
        // fallback keeps a share usable rather than failing a plugin on it.
        let api = SharedBudget::new(ceilings.api_qps, ceilings.api_burst).unwrap_or_else(|_| {
            SharedBudget::new(100.0, 200).expect("the default budget is valid")
        });
        Self {
            namespace: namespace.into(),
            ceilings,
            api,
            running: Semaphore::new(usize::try_from(ceilings.instances.max(1)).unwrap_or(1)),
            memory: MemoryBudget::new(ceilings.memory),
            metrics,
        }
    }

    /// The tenant's namespace.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its ceilings.
    #[must_use]
    pub fn ceilings(&self) -> TenantCeilings {
        self.ceilings
    }

    /// The API request budget its plugins' clients share.
    #[must_use]
    pub fn api(&self) -> SharedBudget {
        self.api.clone()
    }

    /// Waits for a place among the tenant's guest calls running at once; the call holds it
    /// until the permit is dropped.
    pub async fn run_slot(&self) -> SemaphorePermit<'_> {
        let started = Instant::now();
        let permit = self
            .running
            .acquire()
            .await
            .expect("the tenant's semaphore is never closed");
        let waited = started.elapsed();
        if !waited.is_zero() {
            self.metrics
                .instance_wait_seconds
                .inc_by(waited.as_secs_f64());
        }
        permit
    }

    /// Takes `bytes` of the tenant's memory; `false` (counted as a refusal) when they do not
    /// fit under its ceiling.
    pub fn charge_memory(&self, bytes: u64) -> bool {
        let charged = self.memory.try_charge(bytes);
        if charged {
            self.record_memory();
        } else {
            self.metrics.memory_refusals.inc();
        }
        charged
    }

    /// Gives back `bytes` taken by [`charge_memory`](Self::charge_memory).
    pub fn credit_memory(&self, bytes: u64) {
        self.memory.credit(bytes);
        self.record_memory();
    }

    /// The tenant's memory: its ceiling and what its instances hold.
    #[must_use]
    pub fn memory(&self) -> &MemoryBudget {
        &self.memory
    }

    fn record_memory(&self) {
        self.metrics
            .memory_bytes
            .set(i64::try_from(self.memory.used()).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests;
