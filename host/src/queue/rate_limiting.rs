//! The rate-limiting layer: retries spaced by a [`RateLimiter`] (SEMANTICS rules 9 and 11).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::delaying::DelayingQueue;
use super::key::Key;
use super::limiter::{RateLimiter, default_controller_limiter};
use super::metrics::QueueMetrics;

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
        self.complete_then(key, completion, |_| {});
    }

    /// [`complete`](Self::complete), telling `before_add` the delay after which the key comes
    /// back (not called for `Done`) just before it is added.
    pub fn complete_then(&self, key: K, completion: Completion, before_add: impl FnOnce(Duration)) {
        match completion {
            Completion::Done => self.forget(&key),
            Completion::Failed | Completion::Requeue => {
                let delay = self.limiter.when(&key);
                if let Some(m) = self.metrics() {
                    m.retry();
                }
                before_add(delay);
                self.add_after(key.clone(), delay);
            }
            Completion::RequeueAfter(delay) => {
                self.forget(&key);
                before_add(delay);
                self.add_after(key.clone(), delay);
            }
        }
        self.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::queue::ItemExponential;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn exponential() -> RateLimitingQueue<&'static str> {
        RateLimitingQueue::new(ItemExponential::new(ms(5), Duration::from_secs(1000)))
    }

    // Rule 9.
    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_waits_the_limiters_delay_each_time() {
        let q = exponential();
        let mut arrivals = Vec::new();
        for _ in 0..4 {
            let start = Instant::now();
            q.add_rate_limited("a");
            let a = q.get().await.unwrap();
            arrivals.push(start.elapsed());
            q.done(&a);
        }
        assert_eq!(arrivals, [ms(5), ms(10), ms(20), ms(40)]);
        assert_eq!(q.num_requeues(&"a"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_clears_the_failure_count_but_not_the_queued_key() {
        let q = exponential();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        assert_eq!(q.num_requeues(&"a"), 2);
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!(q.waiting(), 1, "still waiting to be added");
        assert_eq!(q.get().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn default_queue_uses_the_default_controller_limiter() {
        let q = RateLimitingQueue::<&str>::default();
        let start = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), ms(5));
    }

    // Rule 11.
    #[tokio::test(start_paused = true)]
    async fn completing_done_forgets_and_releases_the_key() {
        let q = exponential();
        q.add_rate_limited("a");
        let a = q.get().await.unwrap();
        q.complete(a, Completion::Done);
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!((q.len(), q.processing(), q.waiting()), (0, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn completing_failed_or_requeue_retries_with_growing_backoff() {
        let q = exponential();
        q.add("a");
        let mut waits = Vec::new();
        for completion in [Completion::Failed, Completion::Requeue, Completion::Failed] {
            let a = q.get().await.unwrap();
            let start = Instant::now();
            q.complete(a, completion);
            assert_eq!(q.processing(), 0, "done ran");
            assert_eq!(q.get().await, Some("a"));
            waits.push(start.elapsed());
            q.done(&"a");
            q.add("a");
        }
        assert_eq!(waits, [ms(5), ms(10), ms(20)]);
        assert_eq!(q.num_requeues(&"a"), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn completing_requeue_after_forgets_then_delays_exactly() {
        let q = exponential();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        let a = q.get().await.unwrap();
        let start = Instant::now();
        q.complete(a, Completion::RequeueAfter(Duration::from_secs(30)));
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!(q.processing(), 0);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_dirtied_during_a_failed_reconcile_runs_once_more_at_once() {
        let q = exponential();
        q.add("a");
        let a = q.get().await.unwrap();
        q.add("a"); // a watch event arrives meanwhile
        let start = Instant::now();
        q.complete(a, Completion::Failed);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the event's add is not delayed"
        );
        q.done(&"a");
        // The failure's delayed add still arrives, and dedups into one more run.
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), ms(5));
    }
}
