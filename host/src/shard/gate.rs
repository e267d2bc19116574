//! The gate every dispatch passes in sharded mode: the key must be this replica's by the
//! current [`Assignment`] and the fence must be open, checked together under one lock, so the
//! member task can narrow the assignment and then wait until no reconcile admitted by an older
//! one is still running.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::view::Assignment;
use crate::election::Fence;

/// Sharded mode: `keys` spreads the plugin's keys over the replicas (default); `whole` puts the
/// whole plugin on one replica, for reconcilers that need to see everything at once.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Placement {
    /// Each key by its own hash (the default).
    #[default]
    Keys,
    /// The whole plugin on one replica, for reconcilers that need to see everything at once.
    Whole,
}

impl Placement {
    /// The key hashed for `key`.
    #[must_use]
    pub fn ring_key(self, key: &str) -> &str {
        match self {
            Self::Keys => key,
            Self::Whole => "",
        }
    }
}

struct State {
    assignment: Arc<Assignment>,
    epoch: u64,
    /// Reconciles running, by the epoch of the assignment that admitted them.
    running: BTreeMap<u64, usize>,
    /// Cancelled when this replica's lease lapses: reconciles admitted before are aborted.
    revoked: CancellationToken,
}

/// Admits dispatches by the current assignment and fence.
pub struct Gate {
    state: Mutex<State>,
    fence: Fence,
    finished: Notify,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Gate")
            .field("epoch", &state.epoch)
            .field("running", &state.running)
            .finish_non_exhaustive()
    }
}

/// What the gate says about a key.
#[derive(Debug)]
pub enum Admission {
    /// Dispatch it; drop the ticket when the reconcile ends.
    Admitted(Ticket),
    /// Another replica's key on a ring this one knows: drop it (its owner has it queued, or
    /// queues it from its cache when it takes it over).
    NotMine,
    /// Not now, but the key is not known to be another's: the fence is closed (the lease
    /// lapsed, or is being renewed late), or no ring is stable yet (before the first, after a
    /// lapse). Keep the key in hand and ask again.
    Wait,
}

/// A dispatch admitted by the gate; dropping it ends it.
#[derive(Debug)]
pub struct Ticket {
    gate: Arc<Gate>,
    epoch: u64,
    revoked: CancellationToken,
}

impl Ticket {
    /// Cancelled when the replica's lease lapsed while this reconcile ran: abort it.
    #[must_use]
    pub fn revoked(&self) -> &CancellationToken {
        &self.revoked
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.gate.state.lock();
        if let Some(count) = state.running.get_mut(&self.epoch) {
            *count -= 1;
            if *count == 0 {
                state.running.remove(&self.epoch);
            }
        }
        drop(state);
        self.gate.finished.notify_waiters();
    }
}

impl Gate {
    /// A gate admitting nothing until the first assignment, checking `fence` too.
    #[must_use]
    pub fn new(initial: Assignment, fence: Fence) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                assignment: Arc::new(initial),
                epoch: 0,
                running: BTreeMap::new(),
                revoked: CancellationToken::new(),
            }),
            fence,
            finished: Notify::new(),
        })
    }

    /// Admits `key` of `plugin` placed by `placement`, or says why not.
    pub fn admit(self: &Arc<Self>, plugin: &str, placement: Placement, key: &str) -> Admission {
        let mut state = self.state.lock();
        if !self.fence.is_open() || state.assignment.stable().is_none() {
            return Admission::Wait;
        }
        if !state.assignment.admits(plugin, placement.ring_key(key)) {
            return Admission::NotMine;
        }
        let epoch = state.epoch;
        *state.running.entry(epoch).or_default() += 1;
        Admission::Admitted(Ticket {
            gate: Arc::clone(self),
            epoch,
            revoked: state.revoked.child_token(),
        })
    }

    /// The current assignment.
    #[must_use]
    pub fn assignment(&self) -> Arc<Assignment> {
        Arc::clone(&self.state.lock().assignment)
    }

    /// Dispatches by `assignment` from now on; returns the previous one and the new epoch.
    pub fn set(&self, assignment: Assignment) -> (Arc<Assignment>, u64) {
        let mut state = self.state.lock();
        state.epoch += 1;
        let previous = std::mem::replace(&mut state.assignment, Arc::new(assignment));
        (previous, state.epoch)
    }

    /// Dispatches nothing by `assignment` (empty) and aborts every reconcile admitted so far:
    /// the lease lapsed. Returns the new epoch.
    pub fn revoke(&self, assignment: Assignment) -> u64 {
        let mut state = self.state.lock();
        state.revoked.cancel();
        state.revoked = CancellationToken::new();
        state.epoch += 1;
        state.assignment = Arc::new(assignment);
        state.epoch
    }

    /// Whether no reconcile admitted before `epoch` runs.
    #[must_use]
    pub fn is_drained(&self, epoch: u64) -> bool {
        self.state
            .lock()
            .running
            .first_key_value()
            .is_none_or(|(oldest, _)| *oldest >= epoch)
    }

    /// Waits until no reconcile admitted before `epoch` runs.
    pub async fn drained(&self, epoch: u64) {
        loop {
            let finished = self.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            if self.is_drained(epoch) {
                return;
            }
            finished.await;
        }
    }

    /// Reconciles running now.
    #[must_use]
    pub fn running(&self) -> usize {
        self.state.lock().running.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::shard::{Membership, Observed, Step};

    /// A gate for member `a` whose assignment is the stable ring of `members`.
    fn settled(members: &[&str]) -> (Arc<Gate>, Fence, Assignment) {
        let mut membership = Membership::new("a", Duration::from_secs(15));
        let now = std::time::Instant::now();
        let leases = |ack: Option<&crate::shard::ViewId>| -> Vec<Observed> {
            members
                .iter()
                .map(|m| Observed {
                    member: (*m).into(),
                    resource_version: "1".to_owned(),
                    ack: ack.cloned(),
                })
                .collect()
        };
        assert!(matches!(
            membership.observe(&leases(None), Some("1"), now),
            Step::Narrow(_)
        ));
        let ack = membership.ack().cloned();
        let Step::Widen(assignment) = membership.observe(&leases(ack.as_ref()), Some("1"), now)
        else {
            panic!("every member acknowledged the ring: it is stable");
        };
        let fence = Fence::closed();
        let gate = Gate::new(Assignment::none(membership.me()), fence.clone());
        (gate, fence, assignment)
    }

    fn owned_by(assignment: &Assignment, mine: bool) -> String {
        (0..100)
            .map(|i| format!("ns/k{i}"))
            .find(|key| assignment.admits("p", key) == mine)
            .expect("a key")
    }

    #[tokio::test]
    async fn a_key_is_admitted_only_when_it_is_mine_and_the_fence_is_open() {
        let (gate, fence, assignment) = settled(&["a", "b"]);
        let (mine, theirs) = (owned_by(&assignment, true), owned_by(&assignment, false));
        assert!(matches!(
            gate.admit("p", Placement::Keys, &mine),
            Admission::Wait
        ));
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(60));
        // Before the first stable ring no key is known to be anyone's: it waits.
        for key in [&mine, &theirs] {
            assert!(matches!(
                gate.admit("p", Placement::Keys, key),
                Admission::Wait
            ));
        }
        gate.set(assignment.clone());
        assert!(matches!(
            gate.admit("p", Placement::Keys, &mine),
            Admission::Admitted(_)
        ));
        assert!(matches!(
            gate.admit("p", Placement::Keys, &theirs),
            Admission::NotMine
        ));
        // Whole placement: every key of the plugin goes where the empty key goes.
        let whole = assignment.admits("p", "");
        for key in [&mine, &theirs] {
            let admitted = matches!(
                gate.admit("p", Placement::Whole, key),
                Admission::Admitted(_)
            );
            assert_eq!(admitted, whole);
        }
    }

    #[tokio::test]
    async fn narrowing_waits_for_reconciles_admitted_before_and_a_lapse_revokes_them() {
        let (gate, fence, assignment) = settled(&["a", "b"]);
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(60));
        gate.set(assignment.clone());
        let key = owned_by(&assignment, true);
        let Admission::Admitted(old) = gate.admit("p", Placement::Keys, &key) else {
            panic!("admitted");
        };
        let (_, epoch) = gate.set(assignment.clone());
        let Admission::Admitted(new) = gate.admit("p", Placement::Keys, &key) else {
            panic!("admitted");
        };
        assert!(
            !gate.is_drained(epoch),
            "a reconcile from before still runs"
        );
        let waiter = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.drained(epoch).await }
        });
        drop(old);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("drained once the old reconcile ended")
            .expect("waiter");
        assert_eq!(gate.running(), 1, "the newer reconcile is not waited for");
        assert!(!new.revoked().is_cancelled());
        let epoch = gate.revoke(Assignment::none(&"a".into()));
        assert!(new.revoked().is_cancelled(), "a lapse aborts what runs");
        drop(new);
        gate.drained(epoch).await;
        assert!(
            matches!(gate.admit("p", Placement::Keys, &key), Admission::Wait),
            "after a lapse no ring is known: the key is kept, not dropped"
        );
    }
}
