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
//! - A guest's write passes the fence up to its last byte: the connections that carry writes
//!   check it before every write to the socket, below TLS, and a write whose answer has not
//!   come when the fence closes is abandoned (`crate::client`).
//! - A fence opened again after it closed is in a new *term*. A write admitted in a term
//!   (`Fence::term`) passes only while the fence is open in that same term
//!   (`Fence::is_open_in`): a connection or a request left over from before a lapse never
//!   writes after the replica has renewed again.
//! - Not guaranteed: bytes the kernel accepted before the process froze (in the socket's send
//!   buffer, or on the wire) can still land. A guest protects a write from that with a
//!   precondition (`replace` carries the resourceVersion it read).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;
use tokio::time::Instant;

/// One stretch of time during which a [`Fence`] stayed open: it ends when the fence closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term(u64);

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
    /// Incremented whenever the fence opens while closed (by the clock or by `close`): what a
    /// [`Term`] names.
    term: AtomicU64,
    /// Writes refused while closed.
    refused: AtomicU64,
    /// Woken whenever the fence is moved, so [`Fence::wait_closed`] notices an early close.
    moved: Notify,
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
                term: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                moved: Notify::new(),
            }),
        }
    }

    /// Opens the fence until `until` (a renewal that started at `until - renewDeadline`). When
    /// the fence was closed (it lapsed by the clock, or was closed), a new term begins: what
    /// was admitted before may no longer write.
    pub fn open_until(&self, until: Instant) {
        if !self.is_open() {
            // Before the new deadline is stored: whoever sees the fence open again sees the new
            // term too.
            self.inner.term.fetch_add(1, Ordering::SeqCst);
        }
        let nanos = until
            .checked_duration_since(self.inner.base)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1)
            });
        self.inner.until.store(nanos.max(1), Ordering::SeqCst);
        self.inner.moved.notify_waiters();
    }

    /// Closes the fence now.
    pub fn close(&self) {
        self.inner.until.store(0, Ordering::SeqCst);
        self.inner.moved.notify_waiters();
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

    /// The term the fence is open in now; `None` while it is closed. Take it when a write is
    /// admitted and check it with [`is_open_in`](Self::is_open_in) before each of its bytes.
    #[must_use]
    pub fn term(&self) -> Option<Term> {
        self.is_open()
            .then(|| Term(self.inner.term.load(Ordering::SeqCst)))
    }

    /// Whether the fence is open now and has not closed since `term` was taken.
    #[must_use]
    pub fn is_open_in(&self, term: Term) -> bool {
        self.is_open() && self.inner.term.load(Ordering::SeqCst) == term.0
    }

    /// Whether this replica may dispatch and write now.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.deadline()
            .is_none_or(|deadline| Instant::now() < deadline)
    }

    /// The instant the fence closes by itself (the lease would expire by this replica's
    /// clock), unless renewed first; in the past when it is closed; `None` when it is always
    /// open.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        match self.inner.until.load(Ordering::SeqCst) {
            0 => Some(self.inner.base),
            u64::MAX => None,
            until => Some(self.inner.base + std::time::Duration::from_nanos(until)),
        }
    }

    /// Resolves once the fence is closed: at its deadline unless renewed meanwhile, or when
    /// [`close`](Self::close) is called. Pending forever on an always-open fence.
    pub async fn wait_closed(&self) {
        loop {
            let moved = self.inner.moved.notified();
            let mut moved = std::pin::pin!(moved);
            // Registered before the look at the deadline, so no move between the two is missed.
            moved.as_mut().enable();
            match self.deadline() {
                None => moved.await,
                Some(deadline) if Instant::now() >= deadline => return,
                Some(deadline) => {
                    tokio::select! {
                        () = moved => {}
                        () = tokio::time::sleep_until(deadline) => {}
                    }
                }
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

    #[tokio::test(start_paused = true)]
    async fn a_term_outlives_renewals_but_not_a_lapse_or_a_close() {
        let fence = Fence::closed();
        assert_eq!(fence.term(), None, "no term while closed");
        fence.open_until(Instant::now() + Duration::from_secs(2));
        let first = fence.term().expect("open");
        // Renewed before the deadline: the same term.
        tokio::time::advance(Duration::from_millis(1_500)).await;
        fence.open_until(Instant::now() + Duration::from_secs(2));
        assert!(fence.is_open_in(first));
        // Lapsed by the clock (a frozen process), then renewed again: a new term.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!fence.is_open_in(first));
        fence.open_until(Instant::now() + Duration::from_secs(2));
        assert!(fence.is_open());
        assert!(
            !fence.is_open_in(first),
            "a write admitted before the lapse"
        );
        let second = fence.term().expect("open");
        assert_ne!(first, second);
        assert!(fence.is_open_in(second));
        // Closed and opened again: a new term.
        fence.close();
        fence.open_until(Instant::now() + Duration::from_secs(2));
        assert!(!fence.is_open_in(second));
        // An always-open fence has one term.
        let always = Fence::always_open();
        let term = always.term().expect("open");
        assert!(always.is_open_in(term));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_closed_resolves_at_the_deadline_after_renewals_and_at_once_on_close() {
        let fence = Fence::closed();
        fence.wait_closed().await;
        let start = Instant::now();
        fence.open_until(start + Duration::from_secs(10));
        assert_eq!(fence.deadline(), Some(start + Duration::from_secs(10)));
        let waiter = tokio::spawn({
            let fence = fence.clone();
            async move {
                fence.wait_closed().await;
                Instant::now()
            }
        });
        tokio::time::advance(Duration::from_secs(5)).await;
        fence.open_until(start + Duration::from_secs(20));
        let closed_at = waiter.await.expect("waiter");
        assert_eq!(closed_at, start + Duration::from_secs(20));

        fence.open_until(Instant::now() + Duration::from_secs(60));
        let waiter = tokio::spawn({
            let fence = fence.clone();
            async move { fence.wait_closed().await }
        });
        tokio::task::yield_now().await;
        fence.close();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("close wakes the waiter before the deadline")
            .expect("waiter");
        assert_eq!(Fence::always_open().deadline(), None);
    }
}
