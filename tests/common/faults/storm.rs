//! The lapse storm, in sharded mode once the schedule's faults stop: one replica is frozen for a
//! little longer than its renew deadline and shorter than its Lease, again and again. At every
//! wake it has lapsed by its own clock while the others still count it a member, so it rejoins
//! the same ring and gains every key it owns once more. Every witness object, changed once as
//! the storm begins, must be reconciled at its last change while the storm goes on: a replica
//! that keeps lapsing still gets through its keys, not through the same ones after every lapse.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use tokio::time::Instant;

use super::replicas::Durations;
use super::run::behind;
use super::world::World;

/// What each object's reconcile waits from the storm on, with no work before (a sleep, so the
/// storm's pace does not hang on the CPU the machine has to spare): long enough that the lapsing
/// replica cannot reconcile all its keys between two lapses.
pub const WAIT: Duration = Duration::from_millis(800);

/// What the storm found.
#[derive(Debug)]
pub struct Storm {
    /// Freezes of the lapsing replica.
    pub lapses: usize,
    /// How long after the storm began every object was reconciled at its last change.
    pub converged_after: Option<Duration>,
    /// The objects still behind when the storm ended (empty when they converged).
    pub behind: Vec<String>,
}

/// Runs the storm on one of `world`'s replicas until every object is reconciled at its last
/// change, or `bound` has passed.
pub async fn storm(
    world: &mut World<'_>,
    objects: &Api<ConfigMap>,
    durations: Durations,
    bound: Duration,
) -> Storm {
    let Some(slot) = world.replicas.choose(0) else {
        return Storm {
            lapses: 0,
            converged_after: None,
            behind: vec!["no replica runs for the lapse storm".to_owned()],
        };
    };
    let list = objects
        .list(&ListParams::default())
        .await
        .expect("the witness objects listed");
    for object in &list.items {
        let name = object.metadata.name.as_deref().unwrap_or_default();
        let version: u64 = object
            .data
            .as_ref()
            .and_then(|data| data.get("v"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let patch = serde_json::json!({"data": {
            "v": (version + 1).to_string(),
            "ms": "0",
            "waitMs": WAIT.as_millis().to_string(),
        }});
        objects
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("a witness object changed for the storm");
    }
    // Past the fence (the renew deadline from the last renewal, at most half a retry period
    // before the freeze), and short of the Lease by most of the margin, so the others still
    // count it a member when it wakes.
    let frozen_for = durations.renew + (durations.lease - durations.renew) / 5;
    let started = Instant::now();
    let mut lapses = 0;
    loop {
        let late = behind(objects).await;
        if late.is_empty() {
            return Storm {
                lapses,
                converged_after: Some(started.elapsed()),
                behind: late,
            };
        }
        if started.elapsed() >= bound {
            return Storm {
                lapses,
                converged_after: None,
                behind: late,
            };
        }
        world.flap(slot, true);
        tokio::time::sleep(frozen_for).await;
        world.flap(slot, false);
        lapses += 1;
        tokio::time::sleep(durations.lease).await;
    }
}
