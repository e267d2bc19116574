//! Constructors for the [`Action`] a successful reconcile returns.

use std::time::Duration;

use crate::bindings::kube::reconcile::types::Action;

impl Action {
    /// Nothing more to do until the object or an owned object changes, or the plugin's resync
    /// period passes.
    #[must_use]
    pub const fn done() -> Self {
        Self::Done
    }

    /// Reconcile again soon, after the key's rate-limiter backoff.
    #[must_use]
    pub const fn requeue() -> Self {
        Self::Requeue
    }

    /// Reconcile again after `delay`, for periodic checks of things the host cannot watch.
    ///
    /// The delay crosses the boundary as `u32` milliseconds: longer delays saturate at
    /// `u32::MAX` ms (about 49 days), and a non-zero delay shorter than a millisecond becomes
    /// 1 ms rather than zero.
    #[must_use]
    pub fn requeue_after(delay: Duration) -> Self {
        let millis = u32::try_from(delay.as_millis()).unwrap_or(u32::MAX);
        let millis = if millis == 0 && !delay.is_zero() {
            1
        } else {
            millis
        };
        Self::RequeueAfter(millis)
    }

    /// The delay of a [`Action::RequeueAfter`], `None` for the other actions.
    #[must_use]
    pub fn delay(&self) -> Option<Duration> {
        match self {
            Self::RequeueAfter(millis) => Some(Duration::from_millis(u64::from(*millis))),
            Self::Done | Self::Requeue => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_build_the_wit_variants() {
        assert_eq!(Action::done(), Action::Done);
        assert_eq!(Action::requeue(), Action::Requeue);
        assert_eq!(
            Action::requeue_after(Duration::from_secs(30)),
            Action::RequeueAfter(30_000)
        );
    }

    #[test]
    fn requeue_after_truncates_to_whole_milliseconds() {
        assert_eq!(
            Action::requeue_after(Duration::from_micros(2_999)),
            Action::RequeueAfter(2)
        );
    }

    #[test]
    fn requeue_after_a_sub_millisecond_delay_waits_one_millisecond() {
        assert_eq!(
            Action::requeue_after(Duration::from_nanos(1)),
            Action::RequeueAfter(1)
        );
        assert_eq!(
            Action::requeue_after(Duration::ZERO),
            Action::RequeueAfter(0)
        );
    }

    #[test]
    fn requeue_after_saturates_at_u32_milliseconds() {
        assert_eq!(
            Action::requeue_after(Duration::from_secs(60 * 24 * 3600)),
            Action::RequeueAfter(u32::MAX)
        );
        assert_eq!(
            Action::requeue_after(Duration::MAX),
            Action::RequeueAfter(u32::MAX)
        );
    }

    #[test]
    fn delay_reads_back_requeue_after() {
        assert_eq!(
            Action::requeue_after(Duration::from_millis(1500)).delay(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(Action::done().delay(), None);
    }
}
