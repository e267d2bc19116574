//! A wake-up at a given instant, to within about 0.1 ms: a `timerfd` on the runtime's own I/O
//! driver. Tokio's timer rounds every deadline up to its next millisecond tick, and the I/O
//! driver sleeps in whole milliseconds again, so a key due at `t` would reach a worker 1–2 ms
//! after `t`; a timerfd fires within the kernel's timer slack (50 µs by default).
//!
//! Used beside `tokio::time::sleep_until`, never instead of it: it runs on the real clock only,
//! so under a paused test clock, or where no timerfd can be had, tokio's timer still fires.

use std::time::Duration;

use tokio::time::Instant;

/// The shortest wait [`Precise::arm`] sets: keys due closer together than this are handed over
/// together, so a stream of ready times a microsecond apart costs one wake-up per 0.1 ms
/// instead of one per key.
const MIN_WAIT: Duration = Duration::from_micros(100);

/// A one-shot timer, armed again for each deadline; [`Precise::fired`] waits for it.
pub(super) struct Precise {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl Precise {
    /// A timer on the current runtime's I/O driver, or one that never fires when no timerfd
    /// can be had (not Linux, a runtime without I/O, no file descriptor left).
    pub(super) fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
            let fd = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )
            .ok()
            // `AsyncFd::new` is deprecated because a type that merely reports a raw descriptor
            // could close it while registered; an `OwnedFd` moved into the `AsyncFd` is owned
            // by the registration for its whole life.
            .and_then(|fd| {
                #[allow(deprecated)]
                tokio::io::unix::AsyncFd::new(fd).ok()
            });
            Self { fd }
        }
        #[cfg(not(target_os = "linux"))]
        Self {}
    }

    /// Arms the timer for `at` by the real clock (at least [`MIN_WAIT`] from now), or disarms
    /// it for `None`.
    pub(super) fn arm(&self, at: Option<Instant>) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
            let wait = at.map_or(Duration::ZERO, |at| {
                at.into_std()
                    .saturating_duration_since(std::time::Instant::now())
                    .max(MIN_WAIT)
            });
            let timespec = |d: Duration| Timespec {
                tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(d.subsec_nanos()),
            };
            // Relative to now; a zero value disarms. Failing leaves tokio's timer in charge.
            let _ = timerfd_settime(
                fd.get_ref(),
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: timespec(Duration::ZERO),
                    it_value: timespec(wait),
                },
            );
        }
        #[cfg(not(target_os = "linux"))]
        let _ = at;
    }

    /// Waits until the armed instant has passed; pending forever without a timerfd.
    pub(super) async fn fired(&self) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            loop {
                let Ok(mut ready) = fd.readable().await else {
                    break;
                };
                let mut expirations = [0_u8; 8];
                match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut expirations)?)) {
                    Ok(Ok(_)) => return,
                    Ok(Err(_)) => break,
                    Err(_would_block) => {}
                }
            }
        }
        std::future::pending::<()>().await;
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_once_the_instant_has_passed_never_before() {
        let timer = Precise::new();
        assert!(timer.fd.is_some(), "a timerfd on a runtime with I/O");
        for wait_us in [0, 150, 3_000] {
            let at = Instant::now() + Duration::from_micros(wait_us);
            timer.arm(Some(at));
            tokio::time::timeout(Duration::from_secs(5), timer.fired())
                .await
                .expect("the armed timer fires");
            assert!(Instant::now() >= at, "fired before {wait_us} µs");
        }
    }

    #[tokio::test]
    async fn a_disarmed_timer_does_not_fire() {
        let timer = Precise::new();
        timer.arm(Some(Instant::now() + Duration::from_millis(5)));
        timer.arm(None);
        let fired = tokio::time::timeout(Duration::from_millis(50), timer.fired()).await;
        assert!(fired.is_err(), "disarmed, yet it fired");
    }
}
