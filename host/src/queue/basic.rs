//! The basic workqueue: a FIFO with dirty/processing bookkeeping (SEMANTICS rules 1–6).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::key::Key;
use super::metrics::QueueMetrics;
use super::state::{Added, Finished, State};

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Adds that found `state` locked, in call order, with when they happened (metrics on):
    /// whoever takes the lock next applies them before anything else, so an add never waits for
    /// the lock and a producer never queues behind its own workers.
    intake: Mutex<Vec<(K, Option<Instant>)>>,
    /// True while `intake` may hold adds; set and cleared under the intake's lock.
    intake_pending: Padded<AtomicBool>,
    /// Set (under the state lock) when the queue shuts down: later adds go nowhere.
    closed: AtomicBool,
    /// Getters parked in `Queue::get` (counted before their last look at the queue); adds only
    /// notify when this is non-zero.
    parked: Padded<AtomicUsize>,
    /// Wakes parked getters (one per queued key, all on shutdown).
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
            .field("len", &state.len())
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

/// The most adds an intake buffer kept for reuse holds.
const KEEP_INTAKE: usize = 4096;

/// A value on cache lines of its own, so that writing it does not slow down readers of its
/// neighbours (the lock, above all).
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What applying adds did: keys newly queued, and keys marked dirty while processing.
#[derive(Clone, Copy, Default)]
struct Applied {
    queued: usize,
    dirtied: usize,
}

impl Applied {
    fn add(&mut self, added: Added) {
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
struct Locked<'a, K: Key> {
    inner: &'a Inner<K>,
    guard: Option<MutexGuard<'a, State<K>>>,
    applied: Applied,
}

impl<K: Key> Locked<'_, K> {
    /// Applies `keys` as adds that happened at `at`.
    fn apply(&mut self, keys: impl IntoIterator<Item = (K, Option<Instant>)>) {
        let state = self.guard.as_mut().expect("held until drop");
        if state.shutting_down {
            return;
        }
        for (key, at) in keys {
            self.applied.add(state.add(key, at));
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
    /// The state, waiting for its lock.
    fn lock(&self) -> Locked<'_, K> {
        self.locked(self.state.lock())
    }

    #[inline]
    fn locked<'a>(&'a self, guard: MutexGuard<'a, State<K>>) -> Locked<'a, K> {
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
    fn push_intake(&self, keys: impl IntoIterator<Item = K>, now: Option<Instant>) {
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
    fn report(&self, Applied { queued, dirtied }: Applied) {
        if let Some(m) = self.metrics.as_ref().filter(|_| queued + dirtied > 0) {
            for _ in 0..queued + dirtied {
                m.add();
            }
            m.depth(i64::try_from(queued + dirtied).unwrap_or(i64::MAX));
        }
    }

    /// Wakes up to `n` parked getters.
    fn wake(&self, n: usize) {
        if n == 0 {
            return;
        }
        for _ in 0..n.min(self.parked.load(Ordering::SeqCst)) {
            self.ready.notify_one();
        }
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
                state: Mutex::new(State::new()),
                intake: Mutex::new(Vec::new()),
                intake_pending: Padded(AtomicBool::new(false)),
                closed: AtomicBool::new(false),
                parked: Padded(AtomicUsize::new(0)),
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
    ///
    /// When another thread holds the lock (a worker taking or finishing a key), the keys go to
    /// the intake instead, which the next holder of the lock applies first: the order of adds
    /// is kept, and the producer goes on at once.
    pub(super) fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let inner = &*self.inner;
        let now = inner.now();
        let Some(mut state) = inner.state.try_lock() else {
            if !inner.closed.load(Ordering::Acquire) {
                inner.push_intake(keys, now);
            }
            return;
        };
        if inner.intake_pending.load(Ordering::SeqCst) {
            let mut state = inner.locked(state);
            state.apply(keys.into_iter().map(|key| (key, now)));
            return;
        }
        // `Locked` spelled out for the common case (no intake): its guard bookkeeping cost the
        // single-task add + get + done about 10 % (`benches/peers` workload A).
        if state.shutting_down {
            return;
        }
        let mut applied = Applied::default();
        for key in keys {
            applied.add(state.add(key, now));
        }
        let unclaimed = applied.queued.min(state.len());
        drop(state);
        inner.report(applied);
        inner.wake(unclaimed);
    }

    /// Waits for a key and hands it to the caller, who must call [`done`](Queue::done) with it
    /// (rule 2). Returns `None` once the queue is shut down and empty.
    ///
    /// Cancel-safe: a key is taken only in the poll that returns it.
    pub async fn get(&self) -> Option<K> {
        if let Some(taken) = self.try_get() {
            return taken;
        }
        // Under a steady stream of adds the next key usually arrives while this task lets the
        // others on its thread run a few times; taking it then spares the producer a wake-up and
        // this worker's thread a park and an unpark (`benches/peers` workloads B and C).
        for _ in 0..3 {
            tokio::task::yield_now().await;
            if let Some(taken) = self.try_get() {
                return taken;
            }
        }
        let inner = &*self.inner;
        loop {
            let notified = inner.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Counted before the last look (which reads `intake_pending`): an add either sees
            // this getter parked and notifies it, or is seen by that look.
            inner.parked.fetch_add(1, Ordering::SeqCst);
            let unpark = Unpark(inner);
            if let Some(taken) = self.try_get() {
                return taken;
            }
            notified.await;
            drop(unpark);
        }
    }

    /// [`get`](Queue::get) without waiting: `None` when nothing is queued and the queue is still
    /// running, `Some(None)` once it is shut down and empty, `Some(Some(key))` otherwise.
    pub fn try_get(&self) -> Option<Option<K>> {
        let inner = &*self.inner;
        let mut state = inner.state.lock();
        if inner.intake_pending.load(Ordering::SeqCst) {
            let mut state = inner.locked(state);
            return self.take_locked(&mut state);
        }
        self.take_locked(&mut state)
    }

    fn take_locked(&self, state: &mut State<K>) -> Option<Option<K>> {
        let inner = &*self.inner;
        let now = inner.now();
        let Some((key, added_at)) = state.take(now) else {
            return state.shutting_down.then_some(None);
        };
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
        // Adds waiting in the intake need not be applied first: one for `key` queues it once
        // whether it lands before this (dirty, re-queued here) or after (queued then).
        let mut state = inner.state.lock();
        let (started, requeued) = match state.done(key) {
            Finished::Ignored => return,
            Finished::Released(started) => (started, false),
            Finished::Requeued(started) => (started, true),
        };
        let drained = state.processing == 0 && state.shutting_down;
        drop(state);
        if requeued {
            inner.wake(1);
        }
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
        self.inner.lock().len()
    }

    /// True when no key is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys waiting for a worker or re-added while processing (the dirty set), in no
    /// particular order: what a replacement queue must take over so no pending key is lost.
    #[must_use]
    pub fn pending(&self) -> Vec<K> {
        self.inner.lock().dirty()
    }

    /// Empties the queue of its queued keys and returns them in queue order; the depth metric
    /// drops by as many. Keys being processed are left to their `done`. For handing a retired
    /// queue's keys to its successor: the successor counts them again when they are added to it.
    pub fn take_pending(&self) -> Vec<K> {
        let keys = self.inner.lock().take_queued();
        if let Some(m) = self.inner.metrics.as_ref().filter(|_| !keys.is_empty()) {
            m.depth(-i64::try_from(keys.len()).unwrap_or(i64::MAX));
        }
        keys
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
        {
            // Adds made before this call are applied (and drained); later ones are ignored.
            let mut state = inner.lock();
            state.shutting_down = true;
            inner.closed.store(true, Ordering::Release);
        }
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
        self.inner.closed.load(Ordering::Acquire)
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
                .started()
                .map(|since| now - since)
                .fold((0.0_f64, 0.0_f64), |(sum, max), age| {
                    let age = age.as_secs_f64();
                    (sum + age, max.max(age))
                })
        };
        m.unfinished_work(total, longest);
    }

    /// Holds the state's lock, as a worker on another thread would: adds meanwhile go to the
    /// intake.
    #[cfg(test)]
    pub(super) fn hold_lock(&self) -> MutexGuard<'_, State<K>> {
        self.inner.state.lock()
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
        self.0.parked.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    /// Runs other tasks until `cond` holds; fails after a bounded number of turns.
    async fn until(mut cond: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if cond() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("condition not reached");
    }

    fn drain_now(q: &Queue<&'static str>) -> Vec<&'static str> {
        let mut out = Vec::new();
        while let Some(Some(key)) = q.try_get() {
            out.push(key);
        }
        out
    }

    // Rule 1.
    #[tokio::test]
    async fn add_is_ignored_while_shutting_down() {
        let q = Queue::new();
        q.shut_down();
        q.add("a");
        assert_eq!(q.len(), 0);
        assert_eq!(q.get().await, None);
    }

    #[tokio::test]
    async fn adding_a_dirty_key_again_does_nothing() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(drain_now(&q), ["a", "b"]);
    }

    #[tokio::test]
    async fn key_added_while_processing_waits_for_done() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        q.add("a");
        assert_eq!(q.len(), 0, "a processing key is not queued again");
        assert_eq!(q.try_get(), None, "nothing to hand out while `a` is held");
        q.done(&a);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
    }

    #[tokio::test]
    async fn add_wakes_a_waiting_get() {
        let q = Queue::new();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
        q.add("a");
        assert_eq!(worker.await.unwrap(), Some("a"));
        assert_eq!(q.inner.parked.load(Ordering::SeqCst), 0);
    }

    // Rule 2.
    #[tokio::test]
    async fn get_waits_while_the_queue_is_empty() {
        let q: Queue<&str> = Queue::new();
        assert_eq!(q.get().now_or_never(), None, "get must not complete");
        assert_eq!(q.try_get(), None);
    }

    #[tokio::test]
    async fn get_returns_shut_down_to_every_caller_current_and_future() {
        let q: Queue<&str> = Queue::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        until(|| q.inner.parked.load(Ordering::SeqCst) == 3).await;
        q.shut_down();
        for waiter in waiters {
            assert_eq!(waiter.await.unwrap(), None);
        }
        assert_eq!(q.get().await, None);
        assert_eq!(q.try_get(), Some(None));
    }

    #[tokio::test]
    async fn a_dropped_get_loses_no_key() {
        let q = Queue::new();
        let pending = q.get();
        drop(pending);
        let mut pending = Box::pin(q.get());
        assert!((&mut pending).now_or_never().is_none());
        drop(pending);
        q.add("a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.inner.parked.load(Ordering::SeqCst), 0);
    }

    // Rule 3.
    #[tokio::test]
    async fn done_forgets_a_key_that_was_not_added_again() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        q.done(&a);
        assert_eq!(q.len(), 0);
        assert_eq!(q.processing(), 0);
        assert_eq!(q.inner.lock().live(), 0, "no state is left for `a`");
        q.add("a");
        assert_eq!(q.len(), 1, "a finished key can be added again");
    }

    #[tokio::test]
    async fn done_for_a_key_not_being_processed_is_ignored() {
        let q = Queue::new();
        q.done(&"never-added");
        q.add("a");
        q.done(&"a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.processing(), 0);
        assert_eq!(drain_now(&q), ["a"], "`a` is still queued exactly once");
    }

    // Rule 4.
    #[tokio::test]
    async fn many_adds_while_processing_yield_exactly_one_more_get() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        for _ in 0..10 {
            q.add("a");
        }
        q.done(&a);
        let again = q.get().await.unwrap();
        assert_eq!(again, "a");
        q.done(&again);
        assert_eq!(q.len(), 0);
        assert_eq!(q.try_get(), None);
    }

    #[tokio::test]
    async fn distinct_keys_come_out_in_order_of_first_pending_add() {
        let q = Queue::new();
        for key in ["c", "a", "b", "a", "c", "d"] {
            q.add(key);
        }
        assert_eq!(drain_now(&q), ["c", "a", "b", "d"]);
    }

    #[tokio::test]
    async fn a_re_added_key_goes_to_the_back_after_done() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        q.add("a");
        q.add("b");
        q.done(&a);
        assert_eq!(drain_now(&q), ["b", "a"]);
    }

    #[tokio::test]
    async fn a_key_is_never_held_by_two_workers() {
        let q = Queue::new();
        q.add("a");
        let first = q.get().await.unwrap();
        q.add("a");
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
        assert!(!second.is_finished());
        q.done(&first);
        assert_eq!(second.await.unwrap(), Some("a"));
    }

    // Rule 5.
    #[tokio::test]
    async fn workers_drain_queued_keys_after_shut_down() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.shut_down();
        q.add("c");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test]
    async fn dirty_key_is_requeued_by_done_after_shut_down_and_drained() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        q.add("a");
        q.shut_down();
        q.done(&a);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert_eq!(q.get().await, None);
    }

    #[tokio::test]
    async fn shut_down_with_drain_returns_only_after_every_key_is_done() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        let a = q.get().await.unwrap();
        let b = q.get().await.unwrap();
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        until(|| q.shutting_down()).await;
        q.done(&a);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!drain.is_finished(), "`b` is still being processed");
        q.done(&b);
        tokio::time::timeout(Duration::from_secs(10), drain)
            .await
            .expect("drain returns once processing is empty")
            .unwrap();
    }

    #[tokio::test]
    async fn shut_down_with_drain_returns_at_once_when_nothing_is_processing() {
        let q: Queue<&str> = Queue::new();
        q.add("queued-only");
        q.shut_down_with_drain()
            .now_or_never()
            .expect("returns at once");
    }

    #[tokio::test]
    async fn pending_lists_queued_and_re_added_keys_but_not_plain_processing_ones() {
        let q = Queue::new();
        for key in ["a", "b", "c"] {
            q.add(key);
        }
        let (a, b) = (q.get().await.unwrap(), q.get().await.unwrap());
        assert_eq!((a, b), ("a", "b"));
        q.add("a");
        let mut pending = q.pending();
        pending.sort_unstable();
        assert_eq!(pending, vec!["a", "c"]);
    }

    // Rule 6.
    #[tokio::test]
    async fn len_counts_queued_keys_not_processing_ones() {
        let q = Queue::new();
        assert!(q.is_empty());
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get().await.unwrap();
        assert_eq!((q.len(), q.processing()), (1, 1));
        q.done(&a);
        assert_eq!((q.len(), q.processing()), (1, 0));
    }

    // Adds that find the lock held (the intake).
    #[tokio::test]
    async fn adds_made_while_the_lock_is_held_keep_their_order_and_merge() {
        let q = Queue::new();
        q.add("x");
        {
            let _held = q.hold_lock();
            for key in ["b", "a", "x", "b"] {
                q.add(key);
            }
            assert!(
                q.inner.intake_pending.load(Ordering::SeqCst),
                "the adds wait in the intake"
            );
        }
        q.add("c");
        assert_eq!(
            drain_now(&q),
            ["x", "b", "a", "c"],
            "applied before the next add, in call order, merged"
        );
        assert!(q.inner.intake.lock().is_empty());
    }

    #[tokio::test]
    async fn an_applied_intake_keeps_its_buffer_for_the_next_batch_unless_a_burst_grew_it() {
        let q = Queue::new();
        let batch = |keys: std::ops::Range<usize>| {
            {
                let _held = q.hold_lock();
                for key in keys {
                    q.add(key);
                }
            }
            q.len() // applies the intake
        };
        assert_eq!(batch(0..10), 10);
        let kept = q.hold_lock().spare_intake.capacity();
        assert!(kept >= 10, "a small batch's buffer is kept ({kept})");
        assert_eq!(batch(10..20), 20);
        assert!(
            q.hold_lock().spare_intake.capacity() >= 10,
            "and traded back and forth"
        );
        assert_eq!(batch(20..20 + 2 * KEEP_INTAKE), 20 + 2 * KEEP_INTAKE);
        assert_eq!(
            q.hold_lock().spare_intake.capacity(),
            0,
            "a burst's buffer is let go"
        );
    }

    #[tokio::test]
    async fn an_add_made_while_the_lock_is_held_marks_a_processing_key_dirty() {
        let q = Queue::new();
        q.add("a");
        let a = q.get().await.unwrap();
        {
            let _held = q.hold_lock();
            q.add("a");
        }
        assert_eq!(q.try_get(), None, "`a` is still held");
        q.done(&a);
        assert_eq!(q.try_get(), Some(Some("a")), "re-queued by done");
    }

    #[tokio::test]
    async fn an_add_made_while_the_lock_is_held_wakes_a_parked_getter() {
        let q = Queue::new();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
        {
            let _held = q.hold_lock();
            q.add("a");
        }
        let got = tokio::time::timeout(Duration::from_secs(10), worker)
            .await
            .expect("the parked getter wakes and applies the intake");
        assert_eq!(got.unwrap(), Some("a"));
    }

    #[tokio::test]
    async fn every_parked_getter_wakes_for_the_keys_one_of_them_applied() {
        let q = Queue::new();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        until(|| q.inner.parked.load(Ordering::SeqCst) == 3).await;
        {
            let _held = q.hold_lock();
            for key in ["a", "b", "c"] {
                q.add(key);
            }
        }
        let mut got = Vec::new();
        for worker in workers {
            let key = tokio::time::timeout(Duration::from_secs(10), worker)
                .await
                .expect("each parked getter gets a key without a further add");
            got.push(key.unwrap().unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn adds_in_the_intake_before_shut_down_are_drained_and_later_ones_ignored() {
        let q = Queue::new();
        {
            let _held = q.hold_lock();
            q.add("a");
        }
        q.shut_down();
        {
            let _held = q.hold_lock();
            q.add("late");
        }
        assert!(
            q.inner.intake.lock().is_empty(),
            "nothing waits after shut down"
        );
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test]
    async fn shutting_down_tells_the_state() {
        let q: Queue<u8> = Queue::new();
        assert!(!q.shutting_down());
        q.shut_down();
        assert!(q.shutting_down());
    }
}
