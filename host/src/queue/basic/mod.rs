//! The basic workqueue: a FIFO with dirty/processing bookkeeping (SEMANTICS rules 1–6).

mod shared;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::key::Key;
use super::metrics::QueueMetrics;
use super::state::{Finished, State};

use shared::{Applied, Inner};

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
            inner: Arc::new(Inner::new(metrics)),
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

    /// [`add`](Queue::add) for keys whose time came (the delaying layer's): each is queued
    /// behind every key added by `add`, in order among themselves, so that a change is never
    /// served after a wave of rechecks or retries. An `add` of a key waiting so moves it up.
    /// Takes the lock (the intake, applied first, keeps earlier adds in order).
    pub(super) fn add_all_later(&self, keys: impl IntoIterator<Item = K>) {
        let inner = &*self.inner;
        let now = inner.now();
        inner.lock().apply_later(keys, now);
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
    pub(super) fn hold_lock(&self) -> parking_lot::MutexGuard<'_, State<K>> {
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
