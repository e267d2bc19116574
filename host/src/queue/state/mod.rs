//! The basic queue's bookkeeping under its lock: which keys are queued, processing or dirty, in
//! what order (SEMANTICS rules 1–4), with one hash lookup per `add`, one per `done` and none
//! per `get`.
//!
//! Each key the queue holds lives once, in a slot of a slab (reused through a free list); the
//! index finds a key's slot by hashing the key, and the FIFOs hold slot numbers, so a key is
//! never copied between structures, taking one needs no lookup, and finishing one is a single
//! lookup that removes its index entry only when the key is released.
//!
//! Two FIFOs: keys added because something changed, and keys added *later* (their time came: a
//! requeue-after, a retry's backoff). `take` serves the first while it holds any, so a change is
//! never queued behind a wave of rechecks (controller-runtime's priority queue does the same for
//! its low priority). An add of a key waiting in the later FIFO moves it to the first; the entry
//! it leaves behind is stale, recognised by a ticket the slot no longer holds.
use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use tokio::time::Instant;

/// Where a key stands. Together these encode client-go's `dirty` and `processing` sets:
/// `dirty = Queued ∪ ProcessingDirty`, `processing = Processing ∪ ProcessingDirty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// In the FIFO exactly once, waiting for a worker.
    Queued,
    /// Handed to a worker, not added since.
    Processing,
    /// Handed to a worker and added again since: `done` puts it back into the FIFO.
    ProcessingDirty,
}

/// A key the queue holds, its phase and, when metrics are on, its timestamps.
#[derive(Debug)]
struct Slot<K> {
    /// `None` while the slot is free.
    key: Option<K>,
    phase: Phase,
    /// When the pending add happened (queue latency runs from here to `get`).
    added_at: Option<Instant>,
    /// When a worker took the key (work duration runs from here to `done`).
    started_at: Option<Instant>,
    /// Whether its pending add was a later one (it waits, or will wait, in the later FIFO).
    later: bool,
    /// The ticket of its entry in the later FIFO; other entries for this slot are stale.
    ticket: u32,
}

/// What [`State::add`] did with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Added {
    /// Put at the end of the FIFO.
    Queued,
    /// Marked dirty while processing: `done` will queue it.
    Dirtied,
    /// Already dirty: nothing to do (a later key added now moves to the front FIFO).
    Merged,
}

/// What [`State::done`] did with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Finished {
    /// Not being processed: ignored.
    Ignored,
    /// Finished; `started_at` is when it was taken (metrics on).
    Released(Option<Instant>),
    /// Finished and put back at the end of the FIFO (it was added while processing).
    Requeued(Option<Instant>),
}

/// A slab of at most this many slots is kept when the queue empties.
const KEEP_SLOTS: usize = 8192;

/// Whether an index entry (a slot number) is `key`'s.
fn holds<'a, K: PartialEq>(slots: &'a [Slot<K>], key: &'a K) -> impl Fn(&u32) -> bool + 'a {
    move |&at| slots[at as usize].key.as_ref() == Some(key)
}

pub(super) struct State<K> {
    /// The slot of every key the queue holds, found by the key's hash.
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    slots: Vec<Slot<K>>,
    free: Vec<u32>,
    /// The queued keys' slots, in order.
    fifo: VecDeque<u32>,
    /// The keys queued by later adds: slot and ticket, in order; entries whose slot no longer
    /// holds their ticket (or is not waiting there) are stale and skipped.
    later: VecDeque<(u32, u32)>,
    /// How many entries of `later` are live.
    queued_later: usize,
    next_ticket: u32,
    pub(super) processing: usize,
    pub(super) shutting_down: bool,
    /// An empty buffer with capacity, traded for the basic queue's intake when it is applied.
    pub(super) spare_intake: Vec<(K, Option<Instant>)>,
}

impl<K: super::Key> State<K> {
    pub(super) fn new() -> Self {
        Self {
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            slots: Vec::new(),
            free: Vec::new(),
            fifo: VecDeque::new(),
            later: VecDeque::new(),
            queued_later: 0,
            next_ticket: 0,
            processing: 0,
            shutting_down: false,
            spare_intake: Vec::new(),
        }
    }

    /// Number of queued keys.
    pub(super) fn len(&self) -> usize {
        self.fifo.len() + self.queued_later
    }

    /// Puts slot `at` at the end of the later FIFO under a new ticket.
    fn push_later(&mut self, at: u32) {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.slots[at as usize].ticket = ticket;
        self.later.push_back((at, ticket));
        self.queued_later += 1;
        // Keys moved to the front FIFO leave stale entries; while changes keep the later FIFO
        // from being served they would pile up, so they are swept once they outnumber the live.
        if self.later.len() > 2 * self.queued_later + 64 {
            let mut later = std::mem::take(&mut self.later);
            later.retain(|&(at, ticket)| self.waits_later(at, ticket));
            self.later = later;
        }
    }

    /// Rule 1: queue `key`, or mark it dirty while it is processing, or merge it. A key waiting
    /// in the later FIFO moves to the end of the first.
    pub(super) fn add(&mut self, key: K, now: Option<Instant>) -> Added {
        self.insert(key, now, false)
    }

    /// Rule 1 for a key whose time came (a delayed add): queued behind every key added by
    /// [`add`](Self::add), in order among themselves.
    pub(super) fn add_later(&mut self, key: K, now: Option<Instant>) -> Added {
        self.insert(key, now, true)
    }

    fn insert(&mut self, key: K, now: Option<Instant>, later: bool) -> Added {
        let (slots, hasher) = (&self.slots, &self.hasher);
        let entry = self
            .index
            .entry(hasher.hash_one(&key), holds(slots, &key), |&at| {
                let key = slots[at as usize].key.as_ref();
                hasher.hash_one(key.expect("an indexed slot holds its key"))
            });
        let slots = &mut self.slots;
        match entry {
            Entry::Occupied(occupied) => {
                let at = *occupied.get();
                let slot = &mut slots[at as usize];
                match slot.phase {
                    Phase::Processing => {
                        slot.phase = Phase::ProcessingDirty;
                        slot.added_at = now;
                        slot.later = later;
                        Added::Dirtied
                    }
                    Phase::ProcessingDirty => {
                        slot.later &= later;
                        Added::Merged
                    }
                    Phase::Queued => {
                        if slot.later && !later {
                            // Its entry in the later FIFO goes stale.
                            slot.later = false;
                            self.queued_later -= 1;
                            self.fifo.push_back(at);
                        }
                        Added::Merged
                    }
                }
            }
            Entry::Vacant(vacant) => {
                let slot = Slot {
                    key: Some(key),
                    phase: Phase::Queued,
                    added_at: now,
                    started_at: None,
                    later,
                    ticket: 0,
                };
                let at = match self.free.pop() {
                    Some(at) => {
                        slots[at as usize] = slot;
                        at
                    }
                    None => {
                        slots.push(slot);
                        u32::try_from(slots.len() - 1).expect("fewer than 2^32 keys in one queue")
                    }
                };
                vacant.insert(at);
                if later {
                    self.push_later(at);
                } else {
                    self.fifo.push_back(at);
                }
                Added::Queued
            }
        }
    }

    /// Whether the later FIFO's entry (`at`, `ticket`) is live.
    fn waits_later(&self, at: u32, ticket: u32) -> bool {
        let slot = &self.slots[at as usize];
        slot.phase == Phase::Queued && slot.later && slot.ticket == ticket && slot.key.is_some()
    }

    /// The next live slot of the later FIFO, taken off it; stale entries before it are dropped.
    fn pop_later(&mut self) -> Option<u32> {
        while let Some((at, ticket)) = self.later.pop_front() {
            if self.waits_later(at, ticket) {
                self.queued_later -= 1;
                self.slots[at as usize].later = false;
                return Some(at);
            }
        }
        None
    }

    /// Rule 2: hands out the first queued key with when it was added; `None` when none is
    /// queued. Keys added by [`add`](Self::add) come before those of
    /// [`add_later`](Self::add_later).
    pub(super) fn take(&mut self, now: Option<Instant>) -> Option<(K, Option<Instant>)> {
        let at = match self.fifo.pop_front() {
            Some(at) => at,
            None => self.pop_later()?,
        };
        let slot = &mut self.slots[at as usize];
        debug_assert_eq!(slot.phase, Phase::Queued);
        slot.phase = Phase::Processing;
        slot.started_at = now;
        self.processing += 1;
        let key = slot.key.clone().expect("a queued slot holds its key");
        Some((key, slot.added_at.take()))
    }

    /// Rule 3: finishes `key`; re-queues it if it was added while processing.
    pub(super) fn done(&mut self, key: &K) -> Finished {
        let hash = self.hasher.hash_one(key);
        let Ok(entry) = self.index.find_entry(hash, holds(&self.slots, key)) else {
            return Finished::Ignored;
        };
        let at = *entry.get();
        let slot = &mut self.slots[at as usize];
        match slot.phase {
            Phase::Queued => Finished::Ignored,
            Phase::Processing => {
                entry.remove();
                slot.key = None;
                let started_at = slot.started_at.take();
                self.free.push(at);
                self.processing -= 1;
                self.release_spare();
                Finished::Released(started_at)
            }
            Phase::ProcessingDirty => {
                // Depth already counted this key when it was re-added.
                slot.phase = Phase::Queued;
                let started_at = slot.started_at.take();
                if slot.later {
                    self.push_later(at);
                } else {
                    self.fifo.push_back(at);
                }
                self.processing -= 1;
                Finished::Requeued(started_at)
            }
        }
    }

    /// Empties both FIFOs, returning the queued keys in the order `take` would have handed them
    /// out; the queue forgets them.
    pub(super) fn take_queued(&mut self) -> Vec<K> {
        let mut order: Vec<u32> = std::mem::take(&mut self.fifo).into();
        order.extend(std::iter::from_fn(|| self.pop_later()));
        let mut taken = Vec::with_capacity(order.len());
        for at in order {
            let key = self.slots[at as usize]
                .key
                .take()
                .expect("a queued slot holds its key");
            let hash = self.hasher.hash_one(&key);
            if let Ok(entry) = self.index.find_entry(hash, |&other| other == at) {
                entry.remove();
            }
            self.free.push(at);
            taken.push(key);
        }
        self.release_spare();
        taken
    }

    /// Gives back the slab and FIFOs a wave of keys (every key at startup or on a relist) grew,
    /// once the queue holds no key: otherwise they would stay the size of the cache for the life
    /// of the host. Small ones are kept for reuse.
    fn release_spare(&mut self) {
        if self.index.is_empty() && self.slots.len() > KEEP_SLOTS {
            self.index = HashTable::new();
            self.slots = Vec::new();
            self.free = Vec::new();
            self.fifo = VecDeque::new();
            self.later = VecDeque::new();
            self.queued_later = 0;
        }
    }

    /// The keys the queue holds, with their slots.
    fn held(&self) -> impl Iterator<Item = (&K, &Slot<K>)> {
        self.slots
            .iter()
            .filter_map(|slot| slot.key.as_ref().map(|key| (key, slot)))
    }

    /// The dirty keys (queued, or re-added while processing), in no particular order.
    pub(super) fn dirty(&self) -> Vec<K> {
        self.held()
            .filter(|(_, slot)| slot.phase != Phase::Processing)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// When each key being processed was taken (metrics on).
    pub(super) fn started(&self) -> impl Iterator<Item = Instant> + '_ {
        self.held().filter_map(|(_, slot)| slot.started_at)
    }

    /// Keys the queue holds state for (queued, processing or dirty).
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests;
