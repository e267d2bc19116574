//! What the runtime is told: each controller's spec, leader election and how the runtime runs.

use std::time::Duration;

use super::kind::KindRef;
use crate::election::ElectionConfig;
use crate::informer::Predicates;
use crate::queue::ControllerLimiter;
use crate::shard::Placement;

/// What a controller reconciles and how.
#[derive(Clone, Debug)]
pub struct ControllerSpec {
    /// Names the controller in logs and metrics.
    pub name: String,
    /// The kind whose keys are reconciled.
    pub for_kind: KindRef,
    /// Kinds whose changes enqueue their controlling owner of `for_kind`.
    pub owns: Vec<KindRef>,
    /// Only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// Only `for_kind` objects matching this label selector.
    pub label_selector: Option<String>,
    /// Update filters.
    pub predicates: Predicates,
    /// Re-enqueue every cached object this often.
    pub resync: Option<Duration>,
    /// Concurrent reconciles.
    pub workers: usize,
    /// How failed and requeued keys are delayed.
    pub limiter: ControllerLimiter,
    /// Sharded mode: how its keys are placed on the replicas.
    pub placement: Placement,
}

/// Leader election settings for the runtime.
#[derive(Clone, Debug)]
pub struct ElectionSettings {
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// The Lease's name.
    pub lease_name: String,
    /// Durations, identity, release on cancel.
    pub config: ElectionConfig,
    /// Whether to exit (instead of campaigning again) after losing leadership.
    pub exit_on_loss: bool,
    /// Sharded mode: every replica holds a membership Lease `<lease_name>-<identity>` and
    /// dispatches its share of the keys, instead of one leader dispatching them all.
    pub sharded: bool,
}

/// How the runtime runs.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// `None`: this replica always dispatches.
    pub election: Option<ElectionSettings>,
    /// How long reconciles in progress may run after shutdown starts before they are cancelled.
    pub drain_timeout: Duration,
}
