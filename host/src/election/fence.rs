//! The fence: until when this replica may act on the authority of its lease, by its own
//! monotonic clock. Dispatch and every guest write check it; the elector moves it.
//!
//! # Guarantees
//! - The fence is open only until the renew deadline after the *start* of the last successful
//!   acquisition or renewal. Followers wait the whole lease duration (longer than the renew
//!   deadline, by validation) from their observation of that write, so the fence closes at
//!   least `leaseDuration - renewDeadline` before another replica can take the lease, when the
//!   replicas' clocks run at the same rate.
//! - A process frozen past its lease (SIGSTOP, a stall) finds the fence closed when it wakes,
//!   before its elector has run: the check reads the clock, not a flag set by another task.
//! - Not guaranteed: a request already on the wire when the process froze can still land. A
//!   guest protects a write from that with a precondition (`replace` carries the
//!   resourceVersion it read).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

/// Until when this replica may dispatch and write; cheap to clone and to check.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The instant `until` counts from.
    base: Instant,
    /// Nanoseconds after `base` until which the fence is open; 0: closed; `u64::MAX`: always
    /// open.
    until: AtomicU64,
    /// Writes refused while closed.
    refused: AtomicU64,
}

impl Fence {
    /// A closed fence: nothing may be dispatched or written until the elector opens it.
    #[must_use]
    pub fn closed() -> Self {
        Self::with_until(0)
    }

    /// A fence that is always open: for a host without leader election.
    #[must_use]
    pub fn always_open() -> Self {
        Self::with_until(u64::MAX)
    }

    fn with_until(until: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                base: Instant::now(),
                until: AtomicU64::new(until),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Opens the fence until `until` (a renewal that started at `until - renewDeadline`).
    pub fn open_until(&self, until: Instant) {
        let nanos = until
            .checked_duration_since(self.inner.base)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1)
            });
        self.inner.until.store(nanos.max(1), Ordering::Release);
    }

    /// Closes the fence now.
    pub fn close(&self) {
        self.inner.until.store(0, Ordering::Release);
    }

    /// Counts a write refused because the fence was closed.
    pub fn refuse_write(&self) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes refused so far.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Whether this replica may dispatch and write now.
    #[must_use]
    pub fn is_open(&self) -> bool {
        match self.inner.until.load(Ordering::Acquire) {
            0 => false,
            u64::MAX => true,
            until => {
                let now = Instant::now().saturating_duration_since(self.inner.base);
                now.as_nanos() < u128::from(until)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_fence_is_open_until_the_deadline_by_the_clock_alone() {
        let fence = Fence::closed();
        assert!(!fence.is_open());
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert!(fence.is_open());
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(fence.is_open());
        // Nobody closed it: time passing is enough (a frozen process wakes to a closed fence).
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!fence.is_open());
        fence.open_until(Instant::now() + Duration::from_secs(1));
        assert!(fence.is_open());
        fence.close();
        assert!(!fence.is_open());
        assert!(Fence::always_open().is_open());
    }
}
