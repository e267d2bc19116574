//! Rate limiters deciding how long a failed key waits before it is retried (SEMANTICS rule 10).

use std::time::Duration;

use parking_lot::Mutex;

use tokio::time::Instant;

use super::key::Key;

type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Decides when a key may be retried.
pub trait RateLimiter<K>: Send + Sync + 'static {
    /// How long `key` must wait before its next retry; counts one more failure where the
    /// limiter tracks failures.
    fn when(&self, key: &K) -> Duration;
    /// Clears what the limiter remembers about `key` (its failure count).
    fn forget(&self, key: &K);
    /// How many failures the limiter counts for `key`.
    fn num_requeues(&self, key: &K) -> u32;
}

/// Invalid rate limiter settings.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LimiterError {
    /// The token bucket's rate is not a positive, finite number.
    #[error("token bucket rate must be a positive, finite number of tokens per second, got {0}")]
    InvalidQps(f64),
    /// The token bucket holds no tokens, so no call could ever pass.
    #[error("token bucket burst must be at least 1")]
    ZeroBurst,
}

/// Per-key exponential backoff: `base * 2^failures`, capped at `max`, never overflowing.
#[derive(Debug)]
pub struct ItemExponential<K: Key> {
    base: Duration,
    max: Duration,
    failures: Mutex<Map<K, u32>>,
}

impl<K: Key> ItemExponential<K> {
    /// Backoff starting at `base` and doubling per failure up to `max`.
    #[must_use]
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(Map::default()),
        }
    }

    fn backoff(&self, exponent: u32) -> Duration {
        let factor = 1_u128.checked_shl(exponent).unwrap_or(u128::MAX);
        let nanos = self.base.as_nanos().saturating_mul(factor);
        if nanos >= self.max.as_nanos() {
            self.max
        } else {
            // Below `max`, so it fits a Duration.
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        }
    }
}

impl<K: Key> RateLimiter<K> for ItemExponential<K> {
    fn when(&self, key: &K) -> Duration {
        let exponent = {
            let mut failures = self.failures.lock();
            // Look up before inserting so a known key is not cloned.
            if let Some(count) = failures.get_mut(key) {
                let exponent = *count;
                *count = count.saturating_add(1);
                exponent
            } else {
                failures.insert(key.clone(), 1);
                0
            }
        };
        self.backoff(exponent)
    }

    fn forget(&self, key: &K) {
        self.failures.lock().remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}

/// One token bucket shared by all keys: the first `burst` calls pass at once, then one per
/// `1/qps`. Same reservations as Go's `rate.Limiter.Reserve`, kept exact in integer nanoseconds
/// (as a generic cell rate algorithm: `tat` is when the bucket would be full again).
#[derive(Debug)]
pub struct TokenBucket {
    /// Time one token takes to refill.
    interval: Duration,
    /// How far ahead of now reservations may run before callers wait: `(burst - 1) * interval`.
    tolerance: Duration,
    /// The theoretical arrival time of the next token once all reservations are served.
    tat: Mutex<Option<Instant>>,
}

impl TokenBucket {
    /// A bucket refilling `qps` tokens per second and holding at most `burst`.
    ///
    /// # Errors
    /// [`LimiterError::InvalidQps`] unless `qps` is positive and finite;
    /// [`LimiterError::ZeroBurst`] when `burst` is 0.
    pub fn new(qps: f64, burst: u32) -> Result<Self, LimiterError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(LimiterError::InvalidQps(qps));
        }
        if burst == 0 {
            return Err(LimiterError::ZeroBurst);
        }
        let interval = Duration::from_secs_f64(1.0 / qps);
        Ok(Self {
            interval,
            tolerance: interval.saturating_mul(burst - 1),
            tat: Mutex::new(None),
        })
    }
}

impl<K> RateLimiter<K> for TokenBucket {
    fn when(&self, _key: &K) -> Duration {
        let now = Instant::now();
        let mut tat = self.tat.lock();
        let arrival = tat.map_or(now, |tat| tat.max(now));
        *tat = Some(arrival + self.interval);
        arrival
            .checked_sub(self.tolerance)
            .map_or(Duration::ZERO, |start| start.saturating_duration_since(now))
    }

    fn forget(&self, _key: &K) {}

    fn num_requeues(&self, _key: &K) -> u32 {
        0
    }
}

/// `fast` for the first `max_fast` failures of a key, `slow` after.
#[derive(Debug)]
pub struct FastSlow<K: Key> {
    fast: Duration,
    slow: Duration,
    max_fast: u32,
    failures: Mutex<Map<K, u32>>,
}

impl<K: Key> FastSlow<K> {
    /// Retries after `fast` up to `max_fast` times, then after `slow`.
    #[must_use]
    pub fn new(fast: Duration, slow: Duration, max_fast: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast,
            failures: Mutex::new(Map::default()),
        }
    }
}

impl<K: Key> RateLimiter<K> for FastSlow<K> {
    fn when(&self, key: &K) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(key.clone()).or_insert(0);
        *count = count.saturating_add(1);
        if *count <= self.max_fast {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, key: &K) {
        self.failures.lock().remove(key);
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}

/// Asks every limiter and obeys the strictest: the longest delay, the largest requeue count.
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> std::fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> MaxOf<K> {
    /// Combines `limiters`; with none, every delay is zero.
    #[must_use]
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K: 'static> RateLimiter<K> for MaxOf<K> {
    fn when(&self, key: &K) -> Duration {
        // Every limiter must see the call (each counts a failure or takes a token).
        self.limiters
            .iter()
            .map(|limiter| limiter.when(key))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, key: &K) {
        for limiter in &self.limiters {
            limiter.forget(key);
        }
    }

    fn num_requeues(&self, key: &K) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

/// The settings of a controller's limiter: the longer of per-key exponential backoff and an
/// overall token bucket. The default is client-go's `DefaultControllerRateLimiter`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ControllerLimiter {
    /// First per-key backoff.
    pub base_delay: Duration,
    /// Largest per-key backoff.
    pub max_delay: Duration,
    /// Overall requeues per second.
    pub qps: f64,
    /// Overall burst.
    pub burst: u32,
}

impl Default for ControllerLimiter {
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

impl ControllerLimiter {
    /// The limiter these settings describe.
    ///
    /// # Errors
    /// When `qps` or `burst` is not positive.
    pub fn build<K: Key>(&self) -> Result<MaxOf<K>, LimiterError> {
        Ok(MaxOf::new(vec![
            Box::new(ItemExponential::new(self.base_delay, self.max_delay)),
            Box::new(TokenBucket::new(self.qps, self.burst)?),
        ]))
    }
}

/// client-go's `DefaultControllerRateLimiter`: the longer of per-key exponential backoff
/// (5 ms doubling to 1000 s) and an overall 10 qps bucket with a burst of 100.
#[must_use]
pub fn default_controller_limiter<K: Key>() -> MaxOf<K> {
    ControllerLimiter::default()
        .build()
        .expect("10 qps with burst 100 is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_doubles_from_base_and_caps_at_max() {
        let limiter = ItemExponential::new(ms(5), Duration::from_secs(1000));
        let got: Vec<_> = (0..20).map(|_| limiter.when(&"k")).collect();
        let want: Vec<_> = (0..20)
            .map(|i| ms(5 * (1 << i)).min(Duration::from_secs(1000)))
            .collect();
        assert_eq!(got, want);
        assert_eq!(got[..4], [ms(5), ms(10), ms(20), ms(40)]);
        // 5 ms * 2^17 = 655.36 s, 2^18 would be 1310.72 s: capped.
        assert_eq!(got[17], Duration::from_millis(655_360));
        assert_eq!(got[18], Duration::from_secs(1000));
        assert_eq!(limiter.num_requeues(&"k"), 20);
    }

    #[test]
    fn exponential_never_overflows_after_many_failures() {
        let limiter = ItemExponential::new(ms(5), Duration::from_secs(1000));
        for _ in 0..300 {
            assert!(limiter.when(&"k") <= Duration::from_secs(1000));
        }
        assert_eq!(limiter.when(&"k"), Duration::from_secs(1000));
        assert_eq!(limiter.num_requeues(&"k"), 301);
        // A huge base with no meaningful cap saturates instead of wrapping.
        let huge = ItemExponential::new(Duration::MAX, Duration::MAX);
        for _ in 0..200 {
            assert_eq!(huge.when(&1), Duration::MAX);
        }
    }

    #[test]
    fn exponential_tracks_keys_separately_and_forget_resets_one() {
        let limiter = ItemExponential::new(ms(1), Duration::from_secs(1));
        assert_eq!(limiter.when(&"a"), ms(1));
        assert_eq!(limiter.when(&"a"), ms(2));
        assert_eq!(limiter.when(&"b"), ms(1));
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.num_requeues(&"b"), 1);
        assert_eq!(limiter.when(&"a"), ms(1));
        assert_eq!(limiter.when(&"b"), ms(2));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_passes_the_burst_then_spaces_calls_one_interval_apart() {
        let bucket = TokenBucket::new(10.0, 100).unwrap();
        for _ in 0..100 {
            assert_eq!(RateLimiter::<u8>::when(&bucket, &0), Duration::ZERO);
        }
        let got: Vec<_> = (0..5)
            .map(|_| RateLimiter::<u8>::when(&bucket, &0))
            .collect();
        assert_eq!(got, [ms(100), ms(200), ms(300), ms(400), ms(500)]);
        assert_eq!(RateLimiter::<u8>::num_requeues(&bucket, &0), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_refills_with_time_and_never_beyond_burst() {
        let bucket = TokenBucket::new(10.0, 3).unwrap();
        for _ in 0..3 {
            assert_eq!(RateLimiter::<u8>::when(&bucket, &0), Duration::ZERO);
        }
        assert_eq!(RateLimiter::<u8>::when(&bucket, &0), ms(100));
        // 150 ms later the reservation above is paid and half a token accrued.
        tokio::time::advance(ms(150)).await;
        assert_eq!(RateLimiter::<u8>::when(&bucket, &0), ms(50));
        // A long idle period refills only `burst` tokens.
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..3 {
            assert_eq!(RateLimiter::<u8>::when(&bucket, &0), Duration::ZERO);
        }
        assert_eq!(RateLimiter::<u8>::when(&bucket, &0), ms(100));
    }

    #[test]
    fn bucket_rejects_settings_that_cannot_work() {
        assert_eq!(
            TokenBucket::new(0.0, 1).unwrap_err(),
            LimiterError::InvalidQps(0.0)
        );
        assert!(matches!(
            TokenBucket::new(f64::NAN, 1),
            Err(LimiterError::InvalidQps(_))
        ));
        assert!(TokenBucket::new(f64::INFINITY, 1).is_err());
        assert_eq!(
            TokenBucket::new(1.0, 0).unwrap_err(),
            LimiterError::ZeroBurst
        );
    }

    #[test]
    fn fast_slow_switches_after_max_fast_failures() {
        let limiter = FastSlow::new(ms(5), Duration::from_secs(10), 3);
        let got: Vec<_> = (0..5).map(|_| limiter.when(&"k")).collect();
        assert_eq!(
            got,
            [
                ms(5),
                ms(5),
                ms(5),
                Duration::from_secs(10),
                Duration::from_secs(10)
            ]
        );
        assert_eq!(limiter.num_requeues(&"k"), 5);
        limiter.forget(&"k");
        assert_eq!(limiter.num_requeues(&"k"), 0);
        assert_eq!(limiter.when(&"k"), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn max_of_picks_the_longest_delay_and_largest_count() {
        let limiter: MaxOf<&str> = MaxOf::new(vec![
            Box::new(ItemExponential::new(ms(1), Duration::from_secs(1))),
            Box::new(FastSlow::new(ms(3), ms(100), 1)),
        ]);
        // exp: 1, 2, 4, 8; fast-slow: 3, 100, 100, 100.
        let got: Vec<_> = (0..4).map(|_| limiter.when(&"k")).collect();
        assert_eq!(got, [ms(3), ms(100), ms(100), ms(100)]);
        assert_eq!(limiter.num_requeues(&"k"), 4);
        limiter.forget(&"k");
        assert_eq!(limiter.num_requeues(&"k"), 0);
        assert_eq!(limiter.when(&"k"), ms(3));
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_limiter_is_exponential_until_the_bucket_runs_dry() {
        let limiter = default_controller_limiter::<u32>();
        // One key failing: pure exponential backoff, the bucket has tokens to spare.
        let got: Vec<_> = (0..4).map(|_| limiter.when(&500)).collect();
        assert_eq!(got, [ms(5), ms(10), ms(20), ms(40)]);
        limiter.forget(&500);
        // 96 more distinct keys empty the 100-token bucket; the next keys wait 100 ms apart,
        // which beats their 5 ms first backoff.
        for key in 0..96 {
            assert_eq!(limiter.when(&key), ms(5));
        }
        assert_eq!(limiter.when(&1000), ms(100));
        assert_eq!(limiter.when(&1001), ms(200));
        assert_eq!(limiter.num_requeues(&1000), 1);
        assert_eq!(limiter.num_requeues(&500), 0);
    }
}
