//! Which ring a replica dispatches by: the membership protocol, without I/O (docs/sharding.md
//! tells it in prose; `member` drives it with Leases).
//!
//! Each replica publishes in its membership Lease the id of the ring it has *acknowledged*:
//! "I dispatch no key this ring gives to someone else". A replica dispatches a key only if it
//! owns it on its *stable* ring — the last ring it saw acknowledged by every member of it, in
//! one consistent list that also shows its own acknowledgement — and on every ring it has
//! acknowledged since. When the live members change it first narrows what it dispatches to the
//! new ring (and waits for reconciles in progress outside it to end), then acknowledges it;
//! when every member has acknowledged it, the new ring becomes stable and it takes its new keys.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ring::{Ring, ViewId};

/// Rings acknowledged while waiting for one to become stable; past this, dispatch nothing until
/// one does (safe, and only reached when membership changes faster than it can settle).
const MAX_PENDING: usize = 8;

/// One membership Lease as read in a list.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The member: its Lease's name.
    pub member: Arc<str>,
    /// Its resourceVersion: any change means it renewed.
    pub resource_version: String,
    /// The ring it acknowledged, if any.
    pub ack: Option<ViewId>,
}

/// What a replica may dispatch: the keys it owns on its stable ring and on every ring it has
/// acknowledged since.
#[derive(Clone, Debug)]
pub struct Assignment {
    me: Arc<str>,
    stable: Option<Arc<Ring>>,
    pending: Vec<Arc<Ring>>,
}

impl Assignment {
    /// Nothing: before the first stable ring, and after the lease lapsed.
    #[must_use]
    pub fn none(me: &Arc<str>) -> Self {
        Self {
            me: Arc::clone(me),
            stable: None,
            pending: Vec::new(),
        }
    }

    /// Whether `key` of `plugin` may be dispatched here.
    #[must_use]
    pub fn admits(&self, plugin: &str, key: &str) -> bool {
        let Some(stable) = &self.stable else {
            return false;
        };
        let mine = |ring: &Ring| ring.owner(plugin, key) == Some(&*self.me);
        mine(stable)
            && self
                .pending
                .iter()
                .all(|ring| Arc::ptr_eq(ring, stable) || mine(ring))
    }

    /// The stable ring, if any.
    #[must_use]
    pub fn stable(&self) -> Option<&Arc<Ring>> {
        self.stable.as_ref()
    }

    /// Whether the stable ring is the only one: nothing is being handed over.
    #[must_use]
    pub fn settled(&self) -> bool {
        match (&self.stable, self.pending.as_slice()) {
            (Some(stable), [only]) => Arc::ptr_eq(stable, only),
            _ => false,
        }
    }
}

/// What the caller must do after an observation.
#[derive(Clone, Debug)]
pub enum Step {
    /// Nothing changed.
    Wait,
    /// The live members changed: dispatch by this narrower assignment, wait for reconciles
    /// admitted by the previous one to end, then publish [`Membership::ack`].
    Narrow(Assignment),
    /// The acknowledged ring is stable: dispatch by this assignment (it may be wider; requeue
    /// the keys it adds).
    Widen(Assignment),
}

struct Seen {
    resource_version: String,
    changed_at: Instant,
}

/// One replica's side of the protocol.
pub struct Membership {
    me: Arc<str>,
    lease_duration: Duration,
    seen: HashMap<Arc<str>, Seen>,
    stable: Option<Arc<Ring>>,
    pending: Vec<Arc<Ring>>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("me", &self.me)
            .field("stable", &self.stable.as_ref().map(|r| r.id().clone()))
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Membership {
    /// `me` (its Lease's name); members whose Lease has not changed for `lease_duration` (by
    /// this replica's clock, from when it saw the change) are gone.
    #[must_use]
    pub fn new(me: &str, lease_duration: Duration) -> Self {
        Self {
            me: me.into(),
            lease_duration,
            seen: HashMap::new(),
            stable: None,
            pending: Vec::new(),
        }
    }

    /// This replica's member name.
    #[must_use]
    pub fn me(&self) -> &Arc<str> {
        &self.me
    }

    /// The ring to publish as acknowledged.
    #[must_use]
    pub fn ack(&self) -> Option<&ViewId> {
        self.pending.last().map(|ring| ring.id())
    }

    /// What may be dispatched now.
    #[must_use]
    pub fn assignment(&self) -> Assignment {
        Assignment {
            me: Arc::clone(&self.me),
            stable: self.stable.clone(),
            pending: self.pending.clone(),
        }
    }

    /// Forgets every ring: this replica's lease lapsed, so others may have taken its keys.
    pub fn reset(&mut self) -> Assignment {
        self.stable = None;
        self.pending.clear();
        self.assignment()
    }

    /// The members live at `now`, this one included.
    #[must_use]
    pub fn live(&self, now: Instant) -> Vec<Arc<str>> {
        let mut live: Vec<Arc<str>> = self
            .seen
            .iter()
            .filter(|(_, seen)| {
                now.saturating_duration_since(seen.changed_at) < self.lease_duration
            })
            .map(|(member, _)| Arc::clone(member))
            .collect();
        live.push(Arc::clone(&self.me));
        live
    }

    /// When the next live member (other than this one) expires if it does not renew: look
    /// then, so its keys are taken as soon as they may be.
    #[must_use]
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.seen
            .iter()
            .filter(|(member, _)| **member != self.me)
            .map(|(_, seen)| seen.changed_at + self.lease_duration)
            .filter(|expiry| *expiry > now)
            .min()
    }

    /// Whether `member`'s Lease has not changed for `period` (by this replica's clock).
    #[must_use]
    pub fn unchanged_for(&self, member: &str, now: Instant, period: Duration) -> bool {
        self.seen
            .get(member)
            .is_some_and(|seen| now.saturating_duration_since(seen.changed_at) >= period)
    }

    /// Takes a consistent list of the membership Leases, read at `now`, after this replica's
    /// last successful write left its Lease at `written` (resourceVersion).
    pub fn observe(&mut self, leases: &[Observed], written: Option<&str>, now: Instant) -> Step {
        self.seen
            .retain(|member, _| leases.iter().any(|lease| &lease.member == member));
        for lease in leases {
            let changed = self
                .seen
                .get(&lease.member)
                .is_none_or(|seen| seen.resource_version != lease.resource_version);
            if changed {
                self.seen.insert(
                    Arc::clone(&lease.member),
                    Seen {
                        resource_version: lease.resource_version.clone(),
                        changed_at: now,
                    },
                );
            }
        }
        let target = Ring::new(self.live(now));
        if self.ack() != Some(target.id()) {
            if self.pending.len() >= MAX_PENDING {
                self.stable = None;
                self.pending.clear();
            }
            self.pending.push(Arc::new(target));
            return Step::Narrow(self.assignment());
        }
        let acknowledged = |member: &str, ack: &ViewId| {
            leases.iter().any(|lease| {
                &*lease.member == member
                    && lease.ack.as_ref() == Some(ack)
                    && (member != &*self.me || Some(lease.resource_version.as_str()) == written)
            })
        };
        let Some(current) = self.pending.last().cloned() else {
            return Step::Wait;
        };
        let converged = current
            .members()
            .iter()
            .all(|member| acknowledged(member, current.id()));
        let already = self
            .stable
            .as_ref()
            .is_some_and(|stable| Arc::ptr_eq(stable, &current));
        if !converged || (already && self.pending.len() == 1) {
            return Step::Wait;
        }
        self.stable = Some(Arc::clone(&current));
        self.pending = vec![current];
        Step::Widen(self.assignment())
    }
}
