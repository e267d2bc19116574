//! The client-side token bucket: `burst` requests at once, then one every `1/qps`.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// A token bucket kept as a theoretical arrival time (the generic cell rate algorithm), so every
/// send time is computed in whole nanoseconds and is exact on a paused clock.
///
/// Reserving is first come, first served: each caller takes the next free slot at once and then
/// waits for it without holding any lock, so many callers wait concurrently.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    /// Time one token takes to refill: `1/qps`.
    interval: Duration,
    /// How far ahead of the theoretical arrival time a request may go: `(burst - 1) × interval`.
    tolerance: Duration,
    /// When the bucket will be full again; `None` before the first request.
    full_at: Mutex<Option<Instant>>,
}

impl TokenBucket {
    /// A bucket refilling `qps` tokens per second and holding at most `burst` (validated by
    /// [`ClientLimits::validate`](super::ClientLimits::validate): `qps > 0`, `burst >= 1`).
    pub(crate) fn new(qps: f64, burst: u32) -> Self {
        let interval = Duration::from_secs_f64(1.0 / qps);
        TokenBucket {
            interval,
            tolerance: interval.saturating_mul(burst.saturating_sub(1)),
            full_at: Mutex::new(None),
        }
    }

    /// Takes the next token and returns the instant it becomes available (`now` when the
    /// bucket is not empty).
    pub(crate) fn reserve(&self, now: Instant) -> Instant {
        let mut full_at = self.full_at.lock();
        let start = full_at.map_or(now, |t| t.max(now));
        *full_at = Some(start + self.interval);
        start
            .checked_sub(self.tolerance)
            .map_or(now, |at| at.max(now))
    }

    /// Gives back a token reserved but not used (its waiter was cancelled).
    fn unreserve(&self) {
        let mut full_at = self.full_at.lock();
        if let Some(t) = *full_at {
            *full_at = t.checked_sub(self.interval);
        }
    }

    /// Waits until a token is available and takes it; returns how long it waited.
    ///
    /// Cancel-safe: dropping the future before the wait ends gives the token back.
    pub(crate) async fn acquire(&self) -> Duration {
        let now = Instant::now();
        let at = self.reserve(now);
        if at <= now {
            return Duration::ZERO;
        }
        let mut guard = Unreserve(Some(self));
        tokio::time::sleep_until(at).await;
        guard.0 = None;
        at - now
    }
}

/// A request budget several clients share (a tenant's, across its plugins' clients): each
/// request waits for a token of its own client's bucket, then for one of this.
#[derive(Clone, Debug)]
pub struct SharedBudget(pub(crate) std::sync::Arc<TokenBucket>);

impl SharedBudget {
    /// `qps` requests per second on average, `burst` at once.
    ///
    /// # Errors
    /// [`LimitsError`](super::LimitsError) when `qps` is not a positive number or `burst` is 0.
    pub fn new(qps: f64, burst: u32) -> Result<Self, super::LimitsError> {
        super::ClientLimits::default()
            .qps(qps)
            .burst(burst)
            .validate()?;
        Ok(Self(std::sync::Arc::new(TokenBucket::new(qps, burst))))
    }
}

/// Returns a reserved token when a waiting [`TokenBucket::acquire`] is dropped.
struct Unreserve<'a>(Option<&'a TokenBucket>);

impl Drop for Unreserve<'_> {
    fn drop(&mut self) {
        if let Some(bucket) = self.0 {
            bucket.unreserve();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// Acquires `n` tokens one after another and returns when each was granted, from `start`.
    async fn grant_times(bucket: &TokenBucket, n: usize) -> Vec<Duration> {
        let start = Instant::now();
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            bucket.acquire().await;
            times.push(start.elapsed());
        }
        times
    }

    #[tokio::test(start_paused = true)]
    async fn burst_passes_at_once_then_one_token_every_interval_exactly() {
        let bucket = TokenBucket::new(5.0, 10);
        let times = grant_times(&bucket, 14).await;
        let mut expected = vec![Duration::ZERO; 10];
        expected.extend([MS(200), MS(400), MS(600), MS(800)]);
        assert_eq!(times, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_spaced_by_the_interval_in_arrival_order() {
        let bucket = Arc::new(TokenBucket::new(10.0, 2));
        let start = Instant::now();
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let bucket = bucket.clone();
                tokio::spawn(async move {
                    let waited = bucket.acquire().await;
                    (waited, start.elapsed())
                })
            })
            .collect();
        let mut got = Vec::new();
        for w in waiters {
            got.push(w.await.expect("waiter joins"));
        }
        got.sort();
        assert_eq!(
            got,
            [
                (Duration::ZERO, Duration::ZERO),
                (Duration::ZERO, Duration::ZERO),
                (MS(100), MS(100)),
                (MS(200), MS(200)),
                (MS(300), MS(300)),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_time_refills_tokens_up_to_burst_and_no_further() {
        let bucket = TokenBucket::new(5.0, 3);
        assert_eq!(grant_times(&bucket, 3).await, [Duration::ZERO; 3]);
        // Two intervals refill two tokens.
        tokio::time::advance(MS(400)).await;
        assert_eq!(
            grant_times(&bucket, 3).await,
            [Duration::ZERO, Duration::ZERO, MS(200)]
        );
        // A long idle period refills only up to `burst`.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            grant_times(&bucket, 4).await,
            [Duration::ZERO, Duration::ZERO, Duration::ZERO, MS(200)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn burst_of_one_spaces_every_request_after_the_first() {
        let bucket = TokenBucket::new(4.0, 1);
        assert_eq!(
            grant_times(&bucket, 3).await,
            [Duration::ZERO, MS(250), MS(500)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_waiter_gives_its_token_back() {
        let bucket = TokenBucket::new(5.0, 1);
        assert_eq!(bucket.acquire().await, Duration::ZERO);
        // This waiter would be granted at 200 ms; it gives up at 50 ms.
        let gave_up = tokio::time::timeout(MS(50), bucket.acquire()).await;
        assert!(gave_up.is_err(), "the waiter is still waiting at 50 ms");
        // The next caller gets the slot at 200 ms instead of 400 ms.
        assert_eq!(bucket.acquire().await, MS(150));
    }
}
