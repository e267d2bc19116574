//! The basic queue's bookkeeping under its lock: which keys are queued, processing or dirty, in
//! what order (SEMANTICS rules 1–4), with one hash lookup per `add`, one per `done` and none
//! per `get`.
//!
//! Each key the queue holds lives once, in a slot of a slab (reused through a free list); the
//! index finds a key's slot by hashing the key, and the FIFO holds slot numbers, so a key is
//! never copied between structures, taking one needs no lookup, and finishing one is a single
//! lookup that removes its index entry only when the key is released.

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
}

/// What [`State::add`] did with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Added {
    /// Put at the end of the FIFO.
    Queued,
    /// Marked dirty while processing: `done` will queue it.
    Dirtied,
    /// Already dirty: nothing to do.
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
            processing: 0,
            shutting_down: false,
            spare_intake: Vec::new(),
        }
    }

    /// Number of queued keys.
    pub(super) fn len(&self) -> usize {
        self.fifo.len()
    }

    /// Rule 1: queue `key`, or mark it dirty while it is processing, or merge it.
    pub(super) fn add(&mut self, key: K, now: Option<Instant>) -> Added {
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
                let slot = &mut slots[*occupied.get() as usize];
                if slot.phase == Phase::Processing {
                    slot.phase = Phase::ProcessingDirty;
                    slot.added_at = now;
                    Added::Dirtied
                } else {
                    Added::Merged
                }
            }
            Entry::Vacant(vacant) => {
                let slot = Slot {
                    key: Some(key),
                    phase: Phase::Queued,
                    added_at: now,
                    started_at: None,
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
                self.fifo.push_back(at);
                Added::Queued
            }
        }
    }

    /// Rule 2: hands out the first queued key with when it was added; `None` when none is queued.
    pub(super) fn take(&mut self, now: Option<Instant>) -> Option<(K, Option<Instant>)> {
        let at = self.fifo.pop_front()?;
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
                self.free.push(at);
                self.processing -= 1;
                Finished::Released(slot.started_at.take())
            }
            Phase::ProcessingDirty => {
                // Depth already counted this key when it was re-added.
                slot.phase = Phase::Queued;
                self.fifo.push_back(at);
                self.processing -= 1;
                Finished::Requeued(slot.started_at.take())
            }
        }
    }

    /// Empties the FIFO, returning the queued keys in order; the queue forgets them.
    pub(super) fn take_queued(&mut self) -> Vec<K> {
        let mut taken = Vec::with_capacity(self.fifo.len());
        for at in std::mem::take(&mut self.fifo) {
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
        taken
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
mod tests {
    use super::*;

    fn cycle(state: &mut State<u32>, key: u32) {
        assert_eq!(state.add(key, None), Added::Queued);
        let (taken, _) = state.take(None).expect("queued");
        assert_eq!(taken, key);
        assert_eq!(state.done(&key), Finished::Released(None));
    }

    #[test]
    fn a_finished_key_is_forgotten_and_its_slot_reused() {
        let mut state = State::new();
        for key in 0..1_000 {
            cycle(&mut state, key);
        }
        assert_eq!(state.live(), 0);
        assert_eq!(state.slots.len(), 1, "one slot served every key in turn");
        assert_eq!(
            state.done(&1),
            Finished::Ignored,
            "forgotten, not processing"
        );
    }

    #[test]
    fn the_queue_holds_one_copy_of_a_key_and_lets_it_go_when_released() {
        use std::sync::Arc;
        let key: Arc<str> = "default/web".into();
        let mut state = State::new();
        state.add(Arc::clone(&key), None);
        assert_eq!(state.add(Arc::clone(&key), None), Added::Merged);
        assert_eq!(Arc::strong_count(&key), 2, "ours and the queue's");
        let (taken, _) = state.take(None).expect("queued");
        assert_eq!(Arc::strong_count(&key), 3, "and the worker's");
        assert_eq!(state.add(Arc::clone(&key), None), Added::Dirtied);
        assert_eq!(Arc::strong_count(&key), 3);
        assert!(matches!(state.done(&taken), Finished::Requeued(_)));
        drop(taken);
        let (again, _) = state.take(None).expect("re-queued");
        assert!(matches!(state.done(&again), Finished::Released(_)));
        drop(again);
        assert_eq!(Arc::strong_count(&key), 1, "released: the queue let go");
        state.add(Arc::clone(&key), None);
        assert_eq!(state.take_queued(), [Arc::clone(&key)]);
        assert_eq!((Arc::strong_count(&key), state.live()), (1, 0));
    }

    #[test]
    fn done_on_a_queued_key_leaves_it_queued() {
        let mut state = State::new();
        state.add(7, None);
        assert_eq!(state.done(&7), Finished::Ignored);
        assert_eq!((state.len(), state.live()), (1, 1));
        assert_eq!(state.take(None).map(|(k, _)| k), Some(7));
        assert_eq!(state.done(&7), Finished::Released(None));
        assert_eq!(state.live(), 0);
    }

    #[test]
    fn reused_slots_never_mix_up_keys() {
        let mut state = State::new();
        for key in 0..5_000 {
            state.add(key, None);
        }
        let taken: Vec<u32> = std::iter::from_fn(|| state.take(None).map(|(k, _)| k)).collect();
        assert_eq!(taken, (0..5_000).collect::<Vec<_>>());
        for key in (0..5_000).step_by(2) {
            assert_eq!(state.add(key, None), Added::Dirtied);
        }
        for key in &taken {
            let finished = state.done(key);
            if key % 2 == 0 {
                assert!(matches!(finished, Finished::Requeued(_)), "{key}");
            } else {
                assert!(matches!(finished, Finished::Released(_)), "{key}");
            }
        }
        for key in 5_000..7_500 {
            assert_eq!(state.add(key, None), Added::Queued);
        }
        let order: Vec<u32> = std::iter::from_fn(|| state.take(None).map(|(k, _)| k)).collect();
        let expected: Vec<u32> = (0..5_000).step_by(2).chain(5_000..7_500).collect();
        assert_eq!(order, expected);
        for key in &order {
            assert!(matches!(state.done(key), Finished::Released(_)));
        }
        assert_eq!((state.live(), state.processing), (0, 0));
        assert_eq!(state.slots.len(), 5_000, "slots freed by done are reused");
    }
}
