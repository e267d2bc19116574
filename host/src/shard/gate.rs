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

    /// Admits `key` of `plugin` placed by `placement`, or `None` when it is not this replica's
    /// now (or the fence is closed).
    #[must_use]
    pub fn admit(
        self: &Arc<Self>,
        plugin: &str,
        placement: Placement,
        key: &str,
    ) -> Option<Ticket> {
        let mut state = self.state.lock();
        if !self.fence.is_open() || !state.assignment.admits(plugin, placement.ring_key(key)) {
            return None;
        }
        let epoch = state.epoch;
        *state.running.entry(epoch).or_default() += 1;
        Some(Ticket {
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
