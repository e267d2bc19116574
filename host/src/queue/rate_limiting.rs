//! The rate-limiting layer: retries spaced by a [`RateLimiter`] (SEMANTICS rules 9 and 11).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::limiter::{RateLimiter, default_controller_limiter};
use super::metrics::QueueMetrics;
use super::{DelayingQueue, Key};

/// What a worker reports for a key it processed; [`RateLimitingQueue::complete`] turns it into
/// queue operations exactly as client-go's controller loop does (rule 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Reconciled: the key's failure history is forgotten.
    Done,
    /// Failed: retried after the rate limiter's backoff.
    Failed,
    /// Asked to run again soon: retried after the rate limiter's backoff.
    Requeue,
    /// Asked to run again after a fixed delay: failure history forgotten, then delayed.
    RequeueAfter(Duration),
}

/// A workqueue whose retries are spaced by a rate limiter; dereferences to [`DelayingQueue`]
/// (and through it to [`Queue`](super::Queue)).
pub struct RateLimitingQueue<K: Key> {
    delaying: DelayingQueue<K>,
    limiter: Arc<dyn RateLimiter<K>>,
}

impl<K: Key> Clone for RateLimitingQueue<K> {
    fn clone(&self) -> Self {
        Self {
            delaying: self.delaying.clone(),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<K: Key> fmt::Debug for RateLimitingQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.delaying)
            .finish_non_exhaustive()
    }
}

impl<K: Key> Deref for RateLimitingQueue<K> {
    type Target = DelayingQueue<K>;
    fn deref(&self) -> &DelayingQueue<K> {
        &self.delaying
    }
}

impl<K: Key> Default for RateLimitingQueue<K> {
    /// A queue with client-go's default controller limiter.
    fn default() -> Self {
        Self::new(default_controller_limiter())
    }
}

impl<K: Key> RateLimitingQueue<K> {
    /// An empty queue spacing retries with `limiter`.
    ///
    /// # Panics
    /// Outside a Tokio runtime (see [`DelayingQueue`]).
    #[must_use]
    pub fn new(limiter: impl RateLimiter<K>) -> Self {
        Self {
            delaying: DelayingQueue::new(),
            limiter: Arc::new(limiter),
        }
    }

    /// An empty queue spacing retries with `limiter` and reporting to `metrics`.
    #[must_use]
    pub fn with_metrics(limiter: impl RateLimiter<K>, metrics: Arc<dyn QueueMetrics>) -> Self {
        Self {
            delaying: DelayingQueue::with_metrics(metrics),
            limiter: Arc::new(limiter),
        }
    }

    /// Adds `key` after the delay the limiter gives it (rule 9).
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.limiter.when(&key);
        if let Some(m) = self.metrics() {
            m.retry();
        }
        self.add_after(key, delay);
    }

    /// Clears the limiter's memory of `key`. The key stays queued if it is queued.
    pub fn forget(&self, key: &K) {
        self.limiter.forget(key);
    }

    /// How many failures the limiter counts for `key`.
    #[must_use]
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.limiter.num_requeues(key)
    }

    /// Finishes processing `key` with `completion` (rule 11): `Done` forgets it; `Failed` and
    /// `Requeue` re-add it rate-limited; `RequeueAfter(d)` forgets it then adds it after `d`.
    /// Then, always, [`done`](super::Queue::done).
    pub fn complete(&self, key: K, completion: Completion) {
        match completion {
            Completion::Done => self.forget(&key),
            Completion::Failed | Completion::Requeue => self.add_rate_limited(key.clone()),
            Completion::RequeueAfter(delay) => {
                self.forget(&key);
                self.add_after(key.clone(), delay);
            }
        }
        self.done(&key);
    }
}
