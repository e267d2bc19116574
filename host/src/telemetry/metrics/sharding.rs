//! Sharded mode's series: the live members of a ring, the rings that settled, and the keys of
//! each plugin this replica dispatches.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::Metrics;
use super::families::{OneLabel, label};

impl Metrics {
    /// Sharded mode's series for the ring `ring`.
    #[must_use]
    pub fn sharding(&self, ring: &str) -> ShardMetrics {
        let f = &self.inner.families;
        ShardMetrics {
            members: f.shard_members.get_or_create_owned(&label("ring", ring)),
            handovers: f.shard_handovers.get_or_create_owned(&label("ring", ring)),
            keys_owned: f.shard_keys_owned.clone(),
        }
    }
}

/// Sharded mode's series for one ring.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    members: Gauge,
    handovers: Counter,
    keys_owned: Family<OneLabel, Gauge>,
}

impl ShardMetrics {
    /// A ring of `members` settled.
    pub fn settled(&self, members: usize) {
        self.members.set(i64::try_from(members).unwrap_or(i64::MAX));
        self.handovers.inc();
    }

    /// This replica dispatches `keys` cached keys of `plugin`.
    pub fn keys_owned(&self, plugin: &str, keys: usize) {
        self.keys_owned
            .get_or_create(&label("plugin", plugin))
            .set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// `plugin` is gone: its series with it.
    pub fn forget(&self, plugin: &str) {
        self.keys_owned.remove(&label("plugin", plugin));
    }
}
