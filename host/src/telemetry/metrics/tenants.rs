//! A tenant's series: time its guest calls waited for its `instances` ceiling, the memory its
//! instances hold, and the growths its `memory` ceiling refused.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::Metrics;
use super::families::{FloatCounter, label};

impl Metrics {
    /// The series of the tenant `namespace`.
    #[must_use]
    pub fn tenant(&self, namespace: &str) -> TenantMetrics {
        let f = &self.inner.families;
        let labels = label("namespace", namespace);
        TenantMetrics {
            instance_wait_seconds: f.tenant_instance_wait_seconds.get_or_create_owned(&labels),
            memory_bytes: f.tenant_memory_bytes.get_or_create_owned(&labels),
            memory_refusals: f.tenant_memory_refusals.get_or_create_owned(&labels),
        }
    }
}

/// One tenant's series; the default counts into series nobody exports.
#[derive(Clone, Debug, Default)]
pub struct TenantMetrics {
    /// `reconcile_host_tenant_instance_wait_seconds_total`.
    pub instance_wait_seconds: FloatCounter,
    /// `reconcile_host_tenant_memory_bytes`.
    pub memory_bytes: Gauge,
    /// `reconcile_host_tenant_memory_refusals_total`.
    pub memory_refusals: Counter,
}
