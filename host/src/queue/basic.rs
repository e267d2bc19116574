//! The basic workqueue: a FIFO with dirty/processing bookkeeping (SEMANTICS rules 1–6).

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Key;
use super::metrics::QueueMetrics;

type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

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

/// A key's phase and, when metrics are on, its timestamps.
#[derive(Clone, Copy, Debug)]
struct Slot {
    phase: Phase,
    /// When the pending add happened (queue latency runs from here to `get`).
    added_at: Option<Instant>,
    /// When a worker took the key (work duration runs from here to `done`).
    started_at: Option<Instant>,
}

struct State<K> {
    fifo: VecDeque<K>,
    slots: Map<K, Slot>,
    processing: usize,
    shutting_down: bool,
    /// Getters currently parked in [`Queue::get`]; adds only notify when this is non-zero.
    parked: usize,
}

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Wakes parked getters (one per add, all on shutdown).
    ready: Notify,
    /// Wakes `shut_down_with_drain` when the processing set empties.
    drained: Notify,
    /// Cancelled on shutdown so the layers above can stop their background tasks.
    shutdown: CancellationToken,
    metrics: Option<Arc<dyn QueueMetrics>>,
}

/// The basic workqueue: deduplicating FIFO that never hands one key to two workers at once.
///
/// A cheap clonable handle: every clone refers to the same queue, so producers and workers each
/// hold their own.
///
/// # Guarantees
/// - A key is queued at most once; any number of `add(k)` before `k` is taken yields one `get`.
/// - A key is never held by two workers: `add(k)` while `k` is processing marks it dirty, and
///   [`done`](Queue::done) re-queues it, so exactly one more `get` of `k` follows.
/// - Distinct keys come out in the order of their first pending `add`.
/// - After [`shut_down`](Queue::shut_down) adds are ignored, workers drain what is queued and then
///   `get` returns `None`, to every caller, current and future.
pub struct Queue<K: Key> {
    inner: Arc<Inner<K>>,
}

impl<K: Key> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: Key> fmt::Debug for Queue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("Queue")
            .field("len", &state.fifo.len())
            .field("processing", &state.processing)
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<K: Key> Default for Queue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> Inner<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Nothing in a critical section panics except a key's own Hash/Eq; the state stays
        // consistent even then, so a poisoned lock is safe to keep using.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Option<Instant> {
        self.metrics.as_ref().map(|_| Instant::now())
    }
}

impl<K: Key> Queue<K> {
    /// An empty queue without metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::build(None)
    }

    /// An empty queue reporting to `metrics`.
    #[must_use]
    pub fn with_metrics(metrics: Arc<dyn QueueMetrics>) -> Self {
        Self::build(Some(metrics))
    }

    fn build(metrics: Option<Arc<dyn QueueMetrics>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    fifo: VecDeque::new(),
                    slots: Map::default(),
                    processing: 0,
                    shutting_down: false,
                    parked: 0,
                }),
                ready: Notify::new(),
                drained: Notify::new(),
                shutdown: CancellationToken::new(),
                metrics,
            }),
        }
    }

    /// Marks `key` as needing processing (rule 1). Ignored while shutting down; a no-op when
    /// `key` is already dirty; deferred to [`done`](Queue::done) when `key` is being processed.
    pub fn add(&self, key: K) {
        self.add_all(std::iter::once(key));
    }

    /// [`add`](Queue::add) for each key in order, under one lock.
    pub(super) fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let inner = &*self.inner;
        let mut state = inner.lock();
        if state.shutting_down {
            return;
        }
        let now = inner.now();
        let (mut queued, mut dirtied) = (0_usize, 0_usize);
        for key in keys {
            match state.slots.entry(key) {
                Entry::Vacant(vacant) => {
                    let key = vacant.key().clone();
                    vacant.insert(Slot {
                        phase: Phase::Queued,
                        added_at: now,
                        started_at: None,
                    });
                    state.fifo.push_back(key);
                    queued += 1;
                }
                Entry::Occupied(mut occupied) => {
                    let slot = occupied.get_mut();
                    if slot.phase == Phase::Processing {
                        // Dirty again while a worker holds it: `done` will queue it.
                        slot.phase = Phase::ProcessingDirty;
                        slot.added_at = now;
                        dirtied += 1;
                    }
                }
            }
        }
        let wakes = queued.min(state.parked);
        drop(state);
        if let Some(m) = inner.metrics.as_ref().filter(|_| queued + dirtied > 0) {
            for _ in 0..queued + dirtied {
                m.add();
            }
            m.depth(i64::try_from(queued + dirtied).unwrap_or(i64::MAX));
        }
        for _ in 0..wakes {
            inner.ready.notify_one();
        }
    }

    /// Waits for a key and hands it to the caller, who must call [`done`](Queue::done) with it
    /// (rule 2). Returns `None` once the queue is shut down and empty.
    ///
    /// Cancel-safe: a key is taken only in the poll that returns it.
    pub async fn get(&self) -> Option<K> {
        if let Some(taken) = self.try_get() {
            return taken;
        }
        let inner = &*self.inner;
        loop {
            let notified = inner.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = inner.lock();
                if let Some(taken) = self.take_locked(&mut state) {
                    return taken;
                }
                state.parked += 1;
            }
            let _unpark = Unpark(inner);
            notified.await;
        }
    }

    /// [`get`](Queue::get) without waiting: `None` when nothing is queued and the queue is still
    /// running, `Some(None)` once it is shut down and empty, `Some(Some(key))` otherwise.
    pub fn try_get(&self) -> Option<Option<K>> {
        let mut state = self.inner.lock();
        self.take_locked(&mut state)
    }

    fn take_locked(&self, state: &mut State<K>) -> Option<Option<K>> {
        let Some(key) = state.fifo.pop_front() else {
            return state.shutting_down.then_some(None);
        };
        let inner = &*self.inner;
        let now = inner.now();
        let slot = state
            .slots
            .get_mut(&key)
            .expect("a queued key always has a slot");
        debug_assert_eq!(slot.phase, Phase::Queued);
        slot.phase = Phase::Processing;
        slot.started_at = now;
        let added_at = slot.added_at.take();
        state.processing += 1;
        if let Some(m) = &inner.metrics {
            m.depth(-1);
            if let (Some(added), Some(now)) = (added_at, now) {
                m.queue_latency(now - added);
            }
        }
        Some(Some(key))
    }

    /// Marks `key` as processed (rule 3). If it was added while being processed it goes back to
    /// the end of the queue. A key that is not being processed is ignored.
    pub fn done(&self, key: &K) {
        let inner = &*self.inner;
        let mut state = inner.lock();
        let Some(slot) = state.slots.get_mut(key) else {
            return;
        };
        let started = slot.started_at.take();
        match slot.phase {
            Phase::Queued => return,
            Phase::Processing => {
                state.slots.remove(key);
            }
            Phase::ProcessingDirty => {
                // Depth already counted this key when it was re-added.
                slot.phase = Phase::Queued;
                state.fifo.push_back(key.clone());
                if state.parked > 0 {
                    inner.ready.notify_one();
                }
            }
        }
        state.processing -= 1;
        let drained = state.processing == 0 && state.shutting_down;
        drop(state);
        if let (Some(m), Some(start)) = (&inner.metrics, started) {
            m.work_duration(start.elapsed());
        }
        if drained {
            inner.drained.notify_waiters();
        }
    }

    /// Number of queued keys, not counting keys being processed (rule 6).
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.lock().fifo.len()
    }

    /// True when no key is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys handed out and not yet `done`.
    #[must_use]
    pub fn processing(&self) -> usize {
        self.inner.lock().processing
    }

    /// Stops intake (rule 5): later adds are ignored; workers drain what is queued, then `get`
    /// returns `None`.
    pub fn shut_down(&self) {
        let inner = &*self.inner;
        inner.lock().shutting_down = true;
        inner.shutdown.cancel();
        inner.ready.notify_waiters();
        inner.drained.notify_waiters();
    }

    /// [`shut_down`](Queue::shut_down), then waits until every key handed out has been `done`.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.inner.lock().processing == 0 {
                return;
            }
            drained.await;
        }
    }

    /// True once [`shut_down`](Queue::shut_down) has been called (rule 6).
    #[must_use]
    pub fn shutting_down(&self) -> bool {
        self.inner.lock().shutting_down
    }

    /// Reports the age of unfinished work to the metrics hook: the sum of the processing times
    /// so far of every key being processed, and the longest of them. Called periodically by the
    /// metrics exporter (client-go does the same every 500 ms).
    pub fn report_unfinished_work(&self) {
        let Some(m) = &self.inner.metrics else {
            return;
        };
        let now = Instant::now();
        let (total, longest) = {
            let state = self.inner.lock();
            state
                .slots
                .values()
                .filter_map(|slot| slot.started_at)
                .map(|since| now - since)
                .fold((0.0_f64, 0.0_f64), |(sum, max), age| {
                    let age = age.as_secs_f64();
                    (sum + age, max.max(age))
                })
        };
        m.unfinished_work(total, longest);
    }

    /// A token cancelled when the queue shuts down; layers above stop their tasks on it.
    pub(super) fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// The metrics hook, if any, for layers above.
    pub(super) fn metrics(&self) -> Option<&Arc<dyn QueueMetrics>> {
        self.inner.metrics.as_ref()
    }
}

/// Decrements the parked-getter count when a waiting `get` wakes or is dropped.
struct Unpark<'a, K: Key>(&'a Inner<K>);

impl<K: Key> Drop for Unpark<'_, K> {
    fn drop(&mut self) {
        self.0.lock().parked -= 1;
    }
}
