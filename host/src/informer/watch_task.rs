//! An informer's watch task: list, then watch, through kube-rs's watcher, feeding the cache;
//! a short, capped backoff on errors; a fresh list when the server refuses the version a watch
//! resumes from.
//!
//! # Flow
//! kube-rs's watcher lists, watches from the list's resourceVersion, resumes a closed watch
//! from the last version it saw and relists after `410 Gone` (SEMANTICS rule 13). Around it:
//!
//! - **Backoff.** After an error the task waits [`WatchBackoff::next`] before asking again:
//!   200 ms doubling to a cap of 5 s, times a random factor in `(1/2, 1]`, and back to 200 ms
//!   once the watcher makes progress again (a list completed, an object arrived). kube-rs's own
//!   default grows to 30 s and resets only after two quiet minutes, which left an informer
//!   without a watch for up to 30 s after the API server had recovered; with the 5 s cap a
//!   recovered server is watched again within 5 s. A `410 Gone` is not a failure of the server
//!   but history moving on: it waits only the first step and does not grow the backoff.
//! - **Starting over.** A server that lost its state (etcd restored or replaced) and came back
//!   on the same address has versions lower than the one the watch resumes from; a real API
//!   server answers such a watch `504 Timeout` "Too large resource version", and kube-rs would
//!   ask again from the same version forever. On that answer the task drops the watcher and
//!   starts a new one, which lists afresh; the cache is then replaced and the differences
//!   delivered as changes, like any relist. Until that list is in, the cache is *stale*.
//! - **A new store.** Not every server refuses such a watch: kube-apiserver may answer `200`
//!   and keep the stream open, silent. So the task also follows the store epoch of
//!   [`super::cluster_state`]: when it goes up, the cache is marked stale and the task starts
//!   over the same way.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::change::{Handlers, deliver};
use super::object::{CachedObject, WireObject};
use super::store::Store;

/// First wait after an error.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(200);
/// Longest wait between two attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Where the watch task puts what it learns.
pub(super) struct Sink {
    pub store: Arc<Store>,
    pub handlers: Arc<Handlers>,
    pub lists: Arc<AtomicU64>,
    pub synced: watch::Sender<bool>,
    /// True from the moment the cache is known to hold another store's objects until a new
    /// list replaced it.
    pub stale: Arc<AtomicBool>,
}

/// Runs until the task is aborted (the informer dropped). Objects get `resource`'s `apiVersion`
/// and `kind` where the server left them out (a real API server's list items).
pub(super) async fn run(
    api: Api<WireObject>,
    resource: ApiResource,
    config: watcher::Config,
    sink: Sink,
    kind: String,
    mut epoch: Option<watch::Receiver<u64>>,
) {
    let cached = |wire: WireObject| Arc::new(CachedObject::from(wire.with_type_of(&resource)));
    let mut backoff = WatchBackoff::default();
    loop {
        let mut events = pin!(watcher::watcher(api.clone(), config.clone()));
        let mut relist: Option<Vec<Arc<CachedObject>>> = None;
        loop {
            let event = tokio::select! {
                event = events.next() => match event {
                    Some(event) => event,
                    None => break,
                },
                () = super::cluster_state::changed(&mut epoch) => {
                    sink.stale.store(true, Ordering::Relaxed);
                    tracing::warn!(kind = %kind,
                        "the API server's store was replaced; listing again");
                    break;
                }
            };
            match event {
                Ok(Event::Init) => relist = Some(Vec::new()),
                Ok(Event::InitApply(wire)) => {
                    relist.get_or_insert_with(Vec::new).push(cached(wire));
                }
                Ok(Event::InitDone) => {
                    let listed = relist.take().unwrap_or_default();
                    let handlers = sink.handlers.read();
                    sink.store
                        .replace(listed, |change| deliver(&handlers, &change));
                    sink.lists.fetch_add(1, Ordering::Relaxed);
                    sink.synced.send_replace(true);
                    sink.stale.store(false, Ordering::Relaxed);
                    backoff.reset();
                }
                Ok(Event::Apply(wire)) => {
                    let object = cached(wire);
                    let handlers = sink.handlers.read();
                    sink.store
                        .apply(object, |change| deliver(&handlers, &change));
                    backoff.reset();
                }
                Ok(Event::Delete(wire)) => {
                    let object = cached(wire);
                    let handlers = sink.handlers.read();
                    sink.store
                        .delete(&object, |change| deliver(&handlers, &change));
                    backoff.reset();
                }
                Err(error) => {
                    let answer = status(&error);
                    let start_over = answer.is_some_and(version_too_large);
                    let delay = if answer.is_some_and(|s| s.code == 410) {
                        WatchBackoff::jitter(BACKOFF_FIRST)
                    } else {
                        backoff.next()
                    };
                    tracing::warn!(kind = %kind, error = &error as &dyn std::error::Error,
                        retry_in = ?delay, relist = start_over, "watch failed; retrying");
                    tokio::time::sleep(delay).await;
                    if start_over {
                        sink.stale.store(true, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
    }
}

/// The API server's answer inside a watcher error, if the server answered.
fn status(error: &watcher::Error) -> Option<&kube::core::Status> {
    match error {
        watcher::Error::WatchError(status) => Some(status),
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status),
        _ => None,
    }
}

/// True when the server says the version asked for is newer than anything it has: it lost its
/// state, and only a fresh list helps. A real API server answers `504` with reason `Timeout`
/// and the message "Too large resource version" (cause `ResourceVersionTooLarge`).
fn version_too_large(status: &kube::core::Status) -> bool {
    status.code == 504
        || status.reason == "ResourceVersionTooLarge"
        || status.message.contains("Too large resource version")
}

/// Exponential backoff with jitter for the watch task (see the module docs).
#[derive(Debug, Default)]
pub(super) struct WatchBackoff {
    failures: u32,
}

impl WatchBackoff {
    /// The wait before the next attempt; grows with each call until [`reset`](Self::reset).
    pub(super) fn next(&mut self) -> Duration {
        let ceiling = Self::ceiling(self.failures);
        self.failures = self.failures.saturating_add(1);
        Self::jitter(ceiling)
    }

    /// Back to the first step: the watcher made progress.
    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }

    /// The un-jittered wait after `failures` earlier failures.
    fn ceiling(failures: u32) -> Duration {
        BACKOFF_FIRST
            .saturating_mul(1 << failures.min(16))
            .min(BACKOFF_MAX)
    }

    /// `delay` times a random factor in `(1/2, 1]`, so informers that failed together do not
    /// retry together.
    fn jitter(delay: Duration) -> Duration {
        delay.mul_f64(1.0 - rand::random::<f64>() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_a_five_second_cap_and_starts_over_after_progress() {
        let mut backoff = WatchBackoff::default();
        let waits: Vec<Duration> = (0..40).map(|_| backoff.next()).collect();
        assert!(
            waits[0] <= BACKOFF_FIRST && waits[0] > BACKOFF_FIRST / 2,
            "{waits:?}"
        );
        assert!(waits.iter().all(|w| *w <= BACKOFF_MAX), "{waits:?}");
        assert!(
            waits[10..].iter().all(|w| *w > BACKOFF_MAX / 2),
            "{waits:?}"
        );
        for failures in 0..5 {
            assert_eq!(
                WatchBackoff::ceiling(failures),
                BACKOFF_FIRST * 2u32.pow(failures)
            );
        }
        backoff.reset();
        assert!(backoff.next() <= BACKOFF_FIRST);
    }

    fn status(code: u16, reason: &str, message: &str) -> kube::core::Status {
        serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": reason, "message": message,
        }))
        .unwrap()
    }

    #[test]
    fn only_a_too_large_version_makes_the_watch_start_over() {
        let too_large = status(
            504,
            "Timeout",
            "Timeout: Too large resource version: 90, current: 12",
        );
        assert!(version_too_large(&too_large));
        let error = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(too_large)));
        assert!(super::status(&error).is_some_and(version_too_large));
        for (code, reason) in [
            (500, "InternalError"),
            (429, "TooManyRequests"),
            (410, "Expired"),
        ] {
            assert!(!version_too_large(&status(code, reason, "no")), "{code}");
        }
        assert!(super::status(&watcher::Error::NoResourceVersion).is_none());
    }
}
