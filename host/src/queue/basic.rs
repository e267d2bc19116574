//! The basic workqueue: a FIFO with dirty/processing bookkeeping (SEMANTICS rules 1–6).

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

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
        self.state.lock()
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

    /// The keys waiting for a worker or re-added while processing (the dirty set), in no
    /// particular order: what a replacement queue must take over so no pending key is lost.
    #[must_use]
    pub fn pending(&self) -> Vec<K> {
        let state = self.inner.lock();
        state
            .slots
            .iter()
            .filter(|(_, slot)| slot.phase != Phase::Processing)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Empties the queue of its queued keys and returns them in queue order; the depth metric
    /// drops by as many. Keys being processed are left to their `done`. For handing a retired
    /// queue's keys to its successor: the successor counts them again when they are added to it.
    pub fn take_pending(&self) -> Vec<K> {
        let mut state = self.inner.lock();
        let keys: Vec<K> = state.fifo.drain(..).collect();
        for key in &keys {
            state.slots.remove(key);
        }
        drop(state);
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;
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
        until(|| q.inner.lock().parked == 1).await;
        q.add("a");
        assert_eq!(worker.await.unwrap(), Some("a"));
        assert_eq!(q.inner.lock().parked, 0);
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
        until(|| q.inner.lock().parked == 3).await;
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
        assert_eq!(q.inner.lock().parked, 0);
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
        assert!(q.inner.lock().slots.is_empty());
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
        until(|| q.inner.lock().parked == 1).await;
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

    #[tokio::test]
    async fn shutting_down_tells_the_state() {
        let q: Queue<u8> = Queue::new();
        assert!(!q.shutting_down());
        q.shut_down();
        assert!(q.shutting_down());
    }

    #[derive(Default)]
    struct Recorded {
        adds: usize,
        depth: i64,
        latencies: Vec<Duration>,
        work: Vec<Duration>,
        unfinished: Option<(f64, f64)>,
    }

    #[derive(Default)]
    struct Recorder(StdMutex<Recorded>);

    impl QueueMetrics for Recorder {
        fn add(&self) {
            self.0.lock().unwrap().adds += 1;
        }
        fn depth(&self, delta: i64) {
            self.0.lock().unwrap().depth += delta;
        }
        fn queue_latency(&self, waited: Duration) {
            self.0.lock().unwrap().latencies.push(waited);
        }
        fn work_duration(&self, held: Duration) {
            self.0.lock().unwrap().work.push(held);
        }
        fn unfinished_work(&self, total: f64, longest: f64) {
            self.0.lock().unwrap().unfinished = Some((total, longest));
        }
    }

    #[test]
    fn taking_the_pending_keys_empties_the_queue_and_its_depth() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(Arc::clone(&recorder) as Arc<dyn QueueMetrics>);
        for key in ["a", "b", "c"] {
            q.add(key);
        }
        let taken = q.try_get().flatten();
        assert_eq!(taken, Some("a"));
        assert_eq!(q.take_pending(), ["b", "c"]);
        assert_eq!(recorder.0.lock().unwrap().depth, 0);
        assert_eq!(q.len(), 0);
        q.done(&"a");
        q.add("b");
        assert_eq!(
            recorder.0.lock().unwrap().depth,
            1,
            "a taken key can be added again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_hooks_see_adds_depth_latency_work_and_unfinished_work() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(recorder.clone());
        q.add("a");
        q.add("a"); // dedup: not counted
        q.add("b");
        tokio::time::advance(Duration::from_millis(30)).await;
        let a = q.get().await.unwrap();
        tokio::time::advance(Duration::from_millis(20)).await;
        let b = q.get().await.unwrap();
        q.add("a"); // while processing: counted, depth +1
        tokio::time::advance(Duration::from_millis(100)).await;
        q.report_unfinished_work();
        q.done(&a);
        q.done(&b);
        let r = recorder.0.lock().unwrap();
        assert_eq!(r.adds, 3);
        assert_eq!(r.depth, 1, "`a` is dirty again");
        assert_eq!(
            r.latencies,
            [Duration::from_millis(30), Duration::from_millis(50)]
        );
        assert_eq!(
            r.work,
            [Duration::from_millis(120), Duration::from_millis(100)]
        );
        let (total, longest) = r.unfinished.unwrap();
        assert!((total - 0.22).abs() < 1e-9, "total {total}");
        assert!((longest - 0.12).abs() < 1e-9, "longest {longest}");
    }
}
