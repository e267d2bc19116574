//! What the delaying queue's handles and its timer task share: the timers, the intake of keys
//! added since the last fold, and the deadline the task is armed for.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::timers::Timers;
use crate::queue::basic::Queue;
use crate::queue::key::Key;

/// `armed` when the timer task sleeps without a deadline.
const DISARMED: u64 = u64::MAX;

pub(super) fn nanos_since(origin: Instant, at: Instant) -> u64 {
    u64::try_from((at - origin).as_nanos()).unwrap_or(DISARMED - 1)
}

pub(super) struct Shared<K: Key> {
    timers: Mutex<Timers<K>>,
    /// Keys added since the last fold, with their ready times, in call order.
    pub(super) intake: Mutex<Vec<(K, Instant)>>,
    /// Where ready times are counted from (`armed`, bucket numbers).
    pub(super) origin: Instant,
    /// Nanoseconds since `origin` of the earliest ready time the timer task will wake for
    /// ([`DISARMED`]: none). An `add_after` earlier than this lowers it and wakes the task.
    pub(super) armed: AtomicU64,
    /// Wakes the timer task when a key is due earlier than what it sleeps until.
    pub(super) wake: Arc<Notify>,
    task: AbortHandle,
}

impl<K: Key> Drop for Shared<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<K: Key> Shared<K> {
    /// No key waiting; `wake` wakes the timer task, `task` is aborted when the last handle goes.
    pub(super) fn new(wake: Arc<Notify>, task: AbortHandle) -> Self {
        Self {
            timers: Mutex::new(Timers::new()),
            intake: Mutex::new(Vec::new()),
            origin: Instant::now(),
            armed: AtomicU64::new(DISARMED),
            wake,
            task,
        }
    }

    /// The timers with every pending intake folded in.
    pub(super) fn timers(&self) -> MutexGuard<'_, Timers<K>> {
        let mut timers = self.timers.lock();
        self.fold(&mut timers);
        timers
    }

    /// Moves the intake into the timers.
    ///
    /// The timer task may have re-armed without seeing the entries a fold takes: a fold by
    /// `add_after` can take them between the task's look at the timers and its look at the
    /// intake. So a fold that inserts a key due before what the task is armed for lowers
    /// `armed` and wakes it, as `add_after` does.
    fn fold(&self, timers: &mut Timers<K>) {
        let intake = std::mem::take(&mut *self.intake.lock());
        let Some(earliest) = intake.iter().map(|&(_, ready)| ready).min() else {
            return;
        };
        for (key, ready) in intake {
            timers.insert(self.origin, key, ready);
        }
        self.wake_for(nanos_since(self.origin, earliest));
    }

    /// Lowers `armed` to `at` and wakes the timer task if it sleeps until later.
    pub(super) fn wake_for(&self, at: u64) {
        // Most keys are due after what the task sleeps until: a load spares them the write that
        // would take the line from the timer task.
        if self.armed.load(Ordering::SeqCst) > at && self.armed.fetch_min(at, Ordering::SeqCst) > at
        {
            self.wake.notify_one();
        }
    }

    /// The timers with every pending intake folded in, for the timer task: while a producer
    /// holds them (folding its intake), the task yields instead of blocking its worker thread,
    /// so the workers sharing that thread go on with the keys already handed over.
    pub(super) async fn timers_yielding(&self) -> MutexGuard<'_, Timers<K>> {
        let mut timers = loop {
            if let Some(timers) = self.timers.try_lock() {
                break timers;
            }
            tokio::task::yield_now().await;
        };
        self.fold(&mut timers);
        timers
    }

    /// Moves every due key into `queue` in ready-time order; returns the next deadline, and
    /// whether a key added meanwhile is due before it (fire again at once).
    pub(super) fn fire_due(
        &self,
        mut guard: MutexGuard<'_, Timers<K>>,
        queue: &Queue<K>,
    ) -> (Option<Instant>, bool) {
        let mut due = Vec::new();
        let next = {
            let next = guard.take_due(Instant::now(), &mut due);
            let armed = next.map_or(DISARMED, |at| nanos_since(self.origin, at));
            self.armed.store(armed, Ordering::SeqCst);
            drop(guard);
            next
        };
        queue.add_all_later(due);
        // An add that compared its ready time with the `armed` just replaced may have found
        // no reason to wake the task although it is due before `next`: look for one.
        let early = self
            .intake
            .lock()
            .iter()
            .any(|&(_, ready)| next.is_none_or(|next| ready < next));
        (next, early)
    }
}
