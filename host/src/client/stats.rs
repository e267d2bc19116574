//! Counters of the client's requests, throttled waits and retries, ready to export as metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::policy::RetryReason;

/// A handle to one client's counters; clones share them. Plain atomics, so any metrics registry
/// can read a [`snapshot`](Self::snapshot) on scrape.
///
/// The nearest client-go metrics: `requests` ↔ `rest_client_requests_total`, `throttled_wait` ↔
/// the sum of `rest_client_rate_limiter_duration_seconds`, the retry counters ↔
/// `rest_client_request_retries_total` (client-go labels by code and verb rather than reason).
#[derive(Debug, Clone, Default)]
pub struct ClientStats {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    throttled: AtomicU64,
    throttled_wait_nanos: AtomicU64,
    retries_too_many_requests: AtomicU64,
    retries_server_error: AtomicU64,
    retries_connect_refused: AtomicU64,
    retries_exhausted: AtomicU64,
}

/// The counters of a [`ClientStats`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStatsSnapshot {
    /// Attempts sent to the API server, retries included.
    pub requests: u64,
    /// Attempts that had to wait for a token of the client-side rate limit.
    pub throttled: u64,
    /// Total time attempts spent waiting for tokens.
    pub throttled_wait: Duration,
    /// Retries after 429 Too Many Requests.
    pub retries_too_many_requests: u64,
    /// Retries after 500, 502, 503 or 504.
    pub retries_server_error: u64,
    /// Retries after the connection was refused before the request was sent.
    pub retries_connect_refused: u64,
    /// Requests whose last attempt was retryable but `max_retries` were used up.
    pub retries_exhausted: u64,
}

impl ClientStatsSnapshot {
    /// Retries for every reason.
    pub fn retries(&self) -> u64 {
        self.retries_too_many_requests + self.retries_server_error + self.retries_connect_refused
    }
}

impl ClientStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> ClientStatsSnapshot {
        let c = &*self.inner;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClientStatsSnapshot {
            requests: get(&c.requests),
            throttled: get(&c.throttled),
            throttled_wait: Duration::from_nanos(get(&c.throttled_wait_nanos)),
            retries_too_many_requests: get(&c.retries_too_many_requests),
            retries_server_error: get(&c.retries_server_error),
            retries_connect_refused: get(&c.retries_connect_refused),
            retries_exhausted: get(&c.retries_exhausted),
        }
    }

    /// Counts one attempt that waited `waited` for a token.
    pub(crate) fn record_request(&self, waited: Duration) {
        let c = &*self.inner;
        c.requests.fetch_add(1, Ordering::Relaxed);
        if !waited.is_zero() {
            c.throttled.fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
            c.throttled_wait_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// Counts one retry.
    pub(crate) fn record_retry(&self, reason: RetryReason) {
        let c = &*self.inner;
        let counter = match reason {
            RetryReason::TooManyRequests => &c.retries_too_many_requests,
            RetryReason::ServerError => &c.retries_server_error,
            RetryReason::ConnectRefused => &c.retries_connect_refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request that ran out of retries.
    pub(crate) fn record_exhausted(&self) {
        self.inner.retries_exhausted.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_counters_and_snapshot_reads_each_one() {
        let stats = ClientStats::default();
        let clone = stats.clone();
        clone.record_request(Duration::ZERO);
        clone.record_request(Duration::from_millis(200));
        clone.record_request(Duration::from_millis(300));
        clone.record_retry(RetryReason::TooManyRequests);
        clone.record_retry(RetryReason::ServerError);
        clone.record_retry(RetryReason::ServerError);
        clone.record_retry(RetryReason::ConnectRefused);
        clone.record_exhausted();
        let snap = stats.snapshot();
        assert_eq!(
            snap,
            ClientStatsSnapshot {
                requests: 3,
                throttled: 2,
                throttled_wait: Duration::from_millis(500),
                retries_too_many_requests: 1,
                retries_server_error: 2,
                retries_connect_refused: 1,
                retries_exhausted: 1,
            }
        );
        assert_eq!(snap.retries(), 4);
    }
}
