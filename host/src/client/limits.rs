//! Client-side limits for the host's API calls: request rate (qps/burst) and retry bounds.

use std::time::Duration;

use thiserror::Error;

/// client-go's default client-side request rate (`rest.Config.QPS`).
pub const DEFAULT_QPS: f64 = 5.0;
/// client-go's default burst above the steady rate (`rest.Config.Burst`).
pub const DEFAULT_BURST: u32 = 10;
/// Default number of retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 5;
/// Default first backoff delay; each further retry doubles it.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Default cap on one backoff delay and on an honoured `Retry-After`.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// How fast the host (or one plugin's client) may call the API server, and how it retries.
///
/// # Defaults
/// - `qps` 5 and `burst` 10: client-go's `rest.Config` defaults, so a host behaves like any other
///   Go controller towards API Priority and Fairness.
/// - `max_retries` 5 with exponential backoff from 200 ms: the delays before the retries are at
///   most 200, 400, 800, 1600 and 3200 ms (half to all of that with jitter), so an API server that
///   is restarting — typically back within a few seconds — is ridden out, while a call never spends
///   more than about 6 s in backoff before its error reaches the reconciler, whose own requeue
///   backoff then takes over.
/// - `backoff_max` 10 s: caps one delay, including an honoured `Retry-After`, so a server asking
///   for a long wait cannot park a reconcile worker for minutes; with the defaults the cap only
///   matters for `Retry-After`, since the exponential delays stay below it.
///
/// Every setting is validated by [`validate`](Self::validate), which [`client`](super::client)
/// calls before building anything.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientLimits {
    /// Steady request rate in requests per second; finite and above zero.
    pub qps: f64,
    /// Requests that may go out at once after an idle period; at least 1.
    pub burst: u32,
    /// Retries after the first attempt; 0 disables retrying.
    pub max_retries: u32,
    /// Delay before the first retry of a 5xx or connection failure; above zero.
    pub backoff_base: Duration,
    /// Cap on any single retry delay, including `Retry-After`; at least `backoff_base`.
    pub backoff_max: Duration,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
        }
    }
}

impl ClientLimits {
    /// Sets the steady request rate in requests per second.
    #[must_use]
    pub fn qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }

    /// Sets how many requests may go out at once after an idle period.
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// Sets the number of retries after the first attempt (0 disables retrying).
    #[must_use]
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the delay before the first retry; each further retry doubles it.
    #[must_use]
    pub fn backoff_base(mut self, backoff_base: Duration) -> Self {
        self.backoff_base = backoff_base;
        self
    }

    /// Sets the cap on any single retry delay, including an honoured `Retry-After`.
    #[must_use]
    pub fn backoff_max(mut self, backoff_max: Duration) -> Self {
        self.backoff_max = backoff_max;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    /// [`LimitsError`] naming the first invalid field and how to fix it.
    pub fn validate(&self) -> Result<(), LimitsError> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Err(LimitsError::Qps(self.qps));
        }
        if self.burst == 0 {
            return Err(LimitsError::Burst);
        }
        if self.backoff_base.is_zero() {
            return Err(LimitsError::BackoffBase);
        }
        if self.backoff_max < self.backoff_base {
            return Err(LimitsError::BackoffMax {
                max: self.backoff_max,
                base: self.backoff_base,
            });
        }
        Ok(())
    }

    /// The exponential delay before retry number `retries_done + 1`, before jitter:
    /// `backoff_base × 2^retries_done`, capped at `backoff_max`.
    pub(crate) fn exponential_delay(&self, retries_done: u32) -> Duration {
        let factor = 2u32.checked_pow(retries_done).unwrap_or(u32::MAX);
        self.backoff_base
            .checked_mul(factor)
            .map_or(self.backoff_max, |d| d.min(self.backoff_max))
    }
}

/// An invalid [`ClientLimits`] setting.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LimitsError {
    /// `qps` is zero, negative, NaN or infinite.
    #[error(
        "client limit `qps` is {0}; set it to a finite number of requests per second above 0 \
         (client-go's default is 5)"
    )]
    Qps(f64),
    /// `burst` is zero, which would never let a request through.
    #[error("client limit `burst` is 0; set it to at least 1 (client-go's default is 10)")]
    Burst,
    /// `backoff_base` is zero, which would retry in a tight loop.
    #[error("client limit `backoff_base` is 0; set it above zero (the default is 200ms)")]
    BackoffBase,
    /// `backoff_max` is below `backoff_base`.
    #[error(
        "client limit `backoff_max` ({max:?}) is below `backoff_base` ({base:?}); raise \
         `backoff_max` or lower `backoff_base`"
    )]
    BackoffMax {
        /// The configured cap.
        max: Duration,
        /// The configured first delay.
        base: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_client_go_and_are_valid() {
        let limits = ClientLimits::default();
        assert_eq!(limits.qps, 5.0);
        assert_eq!(limits.burst, 10);
        assert_eq!(limits.max_retries, 5);
        assert_eq!(limits.backoff_base, Duration::from_millis(200));
        assert_eq!(limits.backoff_max, Duration::from_secs(10));
        assert_eq!(limits.validate(), Ok(()));
    }

    #[test]
    fn setters_chain_and_change_only_their_field() {
        let limits = ClientLimits::default()
            .qps(50.0)
            .burst(100)
            .max_retries(2)
            .backoff_base(Duration::from_millis(10))
            .backoff_max(Duration::from_secs(1));
        assert_eq!(
            limits,
            ClientLimits {
                qps: 50.0,
                burst: 100,
                max_retries: 2,
                backoff_base: Duration::from_millis(10),
                backoff_max: Duration::from_secs(1),
            }
        );
    }

    #[test]
    fn non_positive_or_non_finite_qps_is_rejected_naming_the_field() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = ClientLimits::default().qps(qps).validate().unwrap_err();
            assert!(matches!(err, LimitsError::Qps(_)), "{qps}: {err:?}");
            assert!(err.to_string().contains("`qps`"), "{err}");
        }
    }

    #[test]
    fn zero_burst_is_rejected_naming_the_field() {
        let err = ClientLimits::default().burst(0).validate().unwrap_err();
        assert_eq!(err, LimitsError::Burst);
        assert!(err.to_string().contains("`burst`"));
    }

    #[test]
    fn zero_backoff_base_is_rejected_naming_the_field() {
        let err = ClientLimits::default()
            .backoff_base(Duration::ZERO)
            .validate()
            .unwrap_err();
        assert_eq!(err, LimitsError::BackoffBase);
        assert!(err.to_string().contains("`backoff_base`"));
    }

    #[test]
    fn backoff_max_below_base_is_rejected_with_the_fix() {
        let err = ClientLimits::default()
            .backoff_base(Duration::from_secs(2))
            .backoff_max(Duration::from_secs(1))
            .validate()
            .unwrap_err();
        assert_eq!(
            err,
            LimitsError::BackoffMax {
                max: Duration::from_secs(1),
                base: Duration::from_secs(2)
            }
        );
        assert!(err.to_string().contains("raise `backoff_max`"), "{err}");
    }

    #[test]
    fn exponential_delay_doubles_from_base_and_stops_at_the_cap() {
        let limits = ClientLimits::default();
        let delays: Vec<_> = (0..8).map(|n| limits.exponential_delay(n)).collect();
        let ms = Duration::from_millis;
        assert_eq!(
            delays,
            [
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(6400),
                ms(10_000),
                ms(10_000)
            ]
        );
        assert_eq!(limits.exponential_delay(u32::MAX), ms(10_000));
    }
}
