//! The delaying layer: keys that become adds once their delay has elapsed (SEMANTICS rules 7–8).
//!
//! `add_after` only appends the key and its ready time to an intake buffer under a short lock;
//! the timer task folds the buffer into its timers (deduplicating, bucketing) when it wakes, and
//! a caller folds it itself every [`FOLD_AT`] entries, handing over the keys already due while it
//! holds the timers. So a producer adding delayed keys as fast as it can takes the timers' lock
//! once per batch instead of once per key, never holds up the timer task that is handing due keys
//! to the workers (client-go's delaying queue decouples the two the same way, with a channel), and
//! does part of that handing over on its own thread, not on the one the timer task shares with
//! workers. While a fold holds the timers, the timer task yields
//! rather than block the worker thread it shares with workers, and the waiting keys live in a
//! [`LayeredMap`](super::layered_map::LayeredMap), whose growth moves a bounded number of
//! entries, so no fold holds the timers for long.

mod shared;
#[cfg(test)]
mod tests;
mod timers;

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::basic::Queue;
use super::key::Key;
use super::metrics::QueueMetrics;
use super::precise::Precise;

use shared::{Shared, nanos_since};

/// A delay so long it stands for "never" where `now + delay` would overflow the clock.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Intake entries after which the caller of `add_after` folds the buffer into the timers itself,
/// which bounds the buffer when the timer task cannot run (a current-thread runtime whose only
/// task keeps adding).
const FOLD_AT: usize = 1024;

/// A workqueue with [`add_after`](DelayingQueue::add_after); dereferences to the basic
/// [`Queue`] for everything else.
///
/// One tokio task per queue sleeps until the earliest ready time (no polling, no task per key);
/// it stops when the queue shuts down or the last handle is dropped. Keys still waiting at
/// shutdown are dropped, as in client-go. A key reaches the queue within about 0.1 ms of its
/// ready time on Linux (a timerfd on the runtime's I/O driver), within a millisecond or two
/// elsewhere (tokio's timer).
///
/// # Panics
/// Constructors panic outside a Tokio runtime (they spawn the timer task).
pub struct DelayingQueue<K: Key> {
    queue: Queue<K>,
    shared: Arc<Shared<K>>,
}

impl<K: Key> Clone for DelayingQueue<K> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Key> fmt::Debug for DelayingQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl<K: Key> Deref for DelayingQueue<K> {
    type Target = Queue<K>;
    fn deref(&self) -> &Queue<K> {
        &self.queue
    }
}

impl<K: Key> Default for DelayingQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> DelayingQueue<K> {
    /// An empty delaying queue without metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::on(Queue::new())
    }

    /// An empty delaying queue reporting to `metrics`.
    #[must_use]
    pub fn with_metrics(metrics: Arc<dyn QueueMetrics>) -> Self {
        Self::on(Queue::with_metrics(metrics))
    }

    fn on(queue: Queue<K>) -> Self {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<K>>| {
            let task = tokio::spawn(timer_task(
                weak.clone(),
                Arc::clone(&wake),
                queue.clone(),
                queue.shutdown_token().clone(),
            ));
            Shared::new(wake, task.abort_handle())
        });
        Self { queue, shared }
    }

    /// Adds `key` once `delay` has elapsed (rule 7), as a later add: queued behind keys added
    /// by [`add`](Queue::add) (see `Queue::add_all_later`). Ignored while shutting down; a zero
    /// delay queues it at once. A key already waiting keeps the earlier ready time.
    pub fn add_after(&self, key: K, delay: Duration) {
        if self.queue.shutting_down() {
            return;
        }
        if delay.is_zero() {
            self.queue.add_all_later(std::iter::once(key));
            return;
        }
        let shared = &*self.shared;
        let now = Instant::now();
        let ready = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        let full = {
            let mut intake = shared.intake.lock();
            intake.push((key, ready));
            intake.len() >= FOLD_AT
        };
        if full {
            // Holding the timers anyway, hand over what is due: while a producer adds at full
            // speed, that work lands on its thread rather than on the one the timer task shares
            // with the workers.
            let (_, early) = shared.fire_due(shared.timers(), &self.queue);
            if early {
                shared.wake.notify_one();
            }
        }
        shared.wake_for(nanos_since(shared.origin, ready));
    }

    /// The keys waiting for their delay to elapse, in no particular order.
    #[must_use]
    pub fn waiting_keys(&self) -> Vec<K> {
        self.shared.timers().live.keys().cloned().collect()
    }

    /// Number of keys waiting for their delay to elapse.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.shared.timers().live.len()
    }
}

/// Sleeps until the earliest ready time or until woken for an earlier one, then fires what is
/// due. Holds the shared state only weakly, so dropping the last handle ends it.
///
/// Two clocks wake it: tokio's timer, which rounds up to its millisecond tick and is the one a
/// paused test clock drives, and a [`Precise`] timer on the real clock.
async fn timer_task<K: Key>(
    shared: Weak<Shared<K>>,
    wake: Arc<Notify>,
    queue: Queue<K>,
    shutdown: CancellationToken,
) {
    let precise = Precise::new();
    let mut next: Option<Instant> = None;
    loop {
        let deadline = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            () = wake.notified() => {}
            () = precise.fired() => {}
            () = deadline => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let early;
        let timers = shared.timers_yielding().await;
        (next, early) = shared.fire_due(timers, &queue);
        if early {
            shared.wake.notify_one();
        }
        precise.arm(next);
    }
}
