//! What every handle of a basic queue shares: the state behind its lock, the intake where adds
//! that find the lock held wait for its next holder, and the parked getters to wake.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::queue::key::Key;
use crate::queue::metrics::QueueMetrics;
use crate::queue::state::{Added, State};

pub(super) struct Inner<K> {
    pub(super) state: Mutex<State<K>>,
    /// Adds that found `state` locked, in call order, with when they happened (metrics on):
    /// whoever takes the lock next applies them before anything else, so an add never waits for
    /// the lock and a producer never queues behind its own workers.
    pub(super) intake: Mutex<Vec<(K, Option<Instant>)>>,
    /// True while `intake` may hold adds; set and cleared under the intake's lock.
    pub(super) intake_pending: Padded<AtomicBool>,
    /// Set (under the state lock) when the queue shuts down: later adds go nowhere.
    pub(super) closed: AtomicBool,
    /// Getters parked in `Queue::get` (counted before their last look at the queue); adds only
    /// notify when this is non-zero.
    pub(super) parked: Padded<AtomicUsize>,
    /// Wakes parked getters (one per queued key, all on shutdown).
    pub(super) ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties.
    pub(super) drained: Notify,
    /// Cancelled on shutdown so the layers above can stop their background tasks.
    pub(super) shutdown: CancellationToken,
    pub(super) metrics: Option<Arc<dyn QueueMetrics>>,
}

/// The most adds an intake buffer kept for reuse holds.
pub(super) const KEEP_INTAKE: usize = 4096;

/// A value on cache lines of its own, so that writing it does not slow down readers of its
/// neighbours (the lock, above all).
#[repr(align(128))]
pub(super) struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What applying adds did: keys newly queued, and keys marked dirty while processing.
#[derive(Clone, Copy, Default)]
pub(super) struct Applied {
    pub(super) queued: usize,
    pub(super) dirtied: usize,
}

impl Applied {
    pub(super) fn add(&mut self, added: Added) {
        match added {
            Added::Queued => self.queued += 1,
            Added::Dirtied => self.dirtied += 1,
            Added::Merged => {}
        }
    }
}

/// The locked state with every pending intake applied. On release it reports what was applied
/// to the metrics hook and wakes a parked getter per newly queued key still queued, both outside
/// the lock.
pub(super) struct Locked<'a, K: Key> {
    inner: &'a Inner<K>,
    guard: Option<MutexGuard<'a, State<K>>>,
    applied: Applied,
}

impl<K: Key> Locked<'_, K> {
    /// Applies `keys` as adds that happened at `at`.
    pub(super) fn apply(&mut self, keys: impl IntoIterator<Item = (K, Option<Instant>)>) {
        let state = self.guard.as_mut().expect("held until drop");
        if state.shutting_down {
            return;
        }
        for (key, at) in keys {
            self.applied.add(state.add(key, at));
        }
    }

    /// Applies `keys` as later adds (see `State::add_later`) that happened at `at`.
    pub(super) fn apply_later(&mut self, keys: impl IntoIterator<Item = K>, at: Option<Instant>) {
        let state = self.guard.as_mut().expect("held until drop");
        if state.shutting_down {
            return;
        }
        for key in keys {
            self.applied.add(state.add_later(key, at));
        }
    }
}

impl<K: Key> std::ops::Deref for Locked<'_, K> {
    type Target = State<K>;
    fn deref(&self) -> &State<K> {
        self.guard.as_ref().expect("held until drop")
    }
}

impl<K: Key> std::ops::DerefMut for Locked<'_, K> {
    fn deref_mut(&mut self) -> &mut State<K> {
        self.guard.as_mut().expect("held until drop")
    }
}

impl<K: Key> Drop for Locked<'_, K> {
    #[inline]
    fn drop(&mut self) {
        let Applied { queued, dirtied } = self.applied;
        if queued + dirtied == 0 {
            return; // the guard unlocks as the fields drop
        }
        // Keys queued earlier had a getter woken when they were queued.
        let unclaimed = queued.min(self.guard.as_ref().map_or(0, |guard| guard.len()));
        drop(self.guard.take());
        self.inner.report(self.applied);
        self.inner.wake(unclaimed);
    }
}

impl<K: Key> Inner<K> {
    /// An empty queue's shared part, reporting to `metrics` if any.
    pub(super) fn new(metrics: Option<Arc<dyn QueueMetrics>>) -> Self {
        Self {
            state: Mutex::new(State::new()),
            intake: Mutex::new(Vec::new()),
            intake_pending: Padded(AtomicBool::new(false)),
            closed: AtomicBool::new(false),
            parked: Padded(AtomicUsize::new(0)),
            ready: Notify::new(),
            drained: Notify::new(),
            shutdown: CancellationToken::new(),
            metrics,
        }
    }

    /// The state, waiting for its lock.
    pub(super) fn lock(&self) -> Locked<'_, K> {
        self.locked(self.state.lock())
    }

    #[inline]
    pub(super) fn locked<'a>(&'a self, guard: MutexGuard<'a, State<K>>) -> Locked<'a, K> {
        let mut locked = Locked {
            inner: self,
            guard: Some(guard),
            applied: Applied::default(),
        };
        // Pairs with the store in `Inner::push_intake` (see `Queue::get`).
        if self.intake_pending.load(Ordering::SeqCst) {
            self.apply_intake(&mut locked);
        }
        locked
    }

    #[inline(never)]
    fn apply_intake(&self, locked: &mut Locked<'_, K>) {
        // The intake's buffer and the state's spare trade places, so that neither the producer
        // nor the applier allocates once both have grown to the batch size (under contention
        // the allocator's lock showed up beside the queue's own). A buffer grown past
        // `KEEP_INTAKE` by a burst is let go rather than kept for the life of the queue.
        let mut adds = std::mem::take(&mut locked.spare_intake);
        {
            let mut intake = self.intake.lock();
            self.intake_pending.store(false, Ordering::SeqCst);
            std::mem::swap(&mut *intake, &mut adds);
        }
        locked.apply(adds.drain(..));
        if adds.capacity() <= KEEP_INTAKE {
            locked.spare_intake = adds;
        }
    }

    /// Leaves `keys` to the next holder of the state's lock.
    #[inline(never)]
    pub(super) fn push_intake(&self, keys: impl IntoIterator<Item = K>, now: Option<Instant>) {
        let first = {
            let mut intake = self.intake.lock();
            let first = intake.is_empty();
            intake.extend(keys.into_iter().map(|key| (key, now)));
            // Set by the push to an empty intake, cleared only by whoever empties it: later
            // pushes find it set and leave its cache line alone (getters read it on every lock).
            if first {
                self.intake_pending.store(true, Ordering::SeqCst);
            }
            first
        };
        // Whether a key is new is known only once applied: wake one getter to apply the intake,
        // which then wakes others for what it queued. Adds to an intake that already waits are
        // applied by whoever applies the first.
        if first {
            self.wake(1);
        }
    }

    /// Reports applied adds to the metrics hook.
    pub(super) fn report(&self, Applied { queued, dirtied }: Applied) {
        if let Some(m) = self.metrics.as_ref().filter(|_| queued + dirtied > 0) {
            for _ in 0..queued + dirtied {
                m.add();
            }
            m.depth(i64::try_from(queued + dirtied).unwrap_or(i64::MAX));
        }
    }

    /// Wakes up to `n` parked getters.
    pub(super) fn wake(&self, n: usize) {
        if n == 0 {
            return;
        }
        for _ in 0..n.min(self.parked.load(Ordering::SeqCst)) {
            self.ready.notify_one();
        }
    }

    pub(super) fn now(&self) -> Option<Instant> {
        self.metrics.as_ref().map(|_| Instant::now())
    }
}
