//! Fault injection driven from tests: dropped watches, compacted history, failing requests,
//! latency, and pausing the whole server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::ApiError;
use crate::store::Store;

/// A request verb, as Kubernetes authorization names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (any patch type, including apply).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

/// How a failing request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 500 InternalError.
    InternalError,
    /// 503 ServiceUnavailable, without `Retry-After`.
    Unavailable,
    /// 429 TooManyRequests with `Retry-After: <secs>`.
    TooManyRequests {
        /// The Retry-After value in seconds.
        retry_after_secs: u64,
    },
}

/// A rule: fail the next `count` requests that match `verb` and `resource`.
#[derive(Debug, Clone)]
pub struct FailRule {
    count: usize,
    verb: Option<Verb>,
    resource: Option<String>,
    failure: Failure,
}

impl FailRule {
    /// Fails the next `count` requests of any verb and resource with `failure`.
    pub fn new(count: usize, failure: Failure) -> Self {
        FailRule {
            count,
            verb: None,
            resource: None,
            failure,
        }
    }

    /// Only requests with this verb.
    #[must_use]
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Only requests for this resource (plural, e.g. `configmaps`).
    #[must_use]
    pub fn resource(mut self, plural: impl Into<String>) -> Self {
        self.resource = Some(plural.into());
        self
    }
}

/// The fault-injection handle of a running server; clones share state.
#[derive(Clone)]
pub struct Faults {
    inner: Arc<State>,
}

struct State {
    store: Arc<Store>,
    watch_epoch: watch::Sender<u64>,
    paused: watch::Sender<bool>,
    rules: Mutex<Vec<FailRule>>,
    latency: Mutex<Duration>,
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Faults {
            inner: Arc::new(State {
                store,
                watch_epoch: watch::channel(0).0,
                paused: watch::channel(false).0,
                rules: Mutex::new(Vec::new()),
                latency: Mutex::new(Duration::ZERO),
            }),
        }
    }

    /// Ends every open watch stream now (clients see the stream end and re-watch).
    pub fn close_watches(&self) {
        self.inner.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Forgets the whole watch history: the next watch (or exact list) from any version older
    /// than the current one gets `410 Gone`.
    pub fn compact_history(&self) {
        self.inner.store.compact();
    }

    /// Adds a rule failing the next matching requests; rules are checked in insertion order.
    pub fn fail_next(&self, rule: FailRule) {
        self.lock_rules().push(rule);
    }

    /// Delays every request by `latency` (zero turns it off).
    pub fn set_latency(&self, latency: Duration) {
        *self.inner.latency.lock().unwrap_or_else(|e| e.into_inner()) = latency;
    }

    /// Holds every new request until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.inner.paused.send_replace(true);
    }

    /// Releases held requests.
    pub fn resume(&self) {
        self.inner.paused.send_replace(false);
    }

    /// Clears every rule, latency and pause.
    pub fn reset(&self) {
        self.lock_rules().clear();
        self.set_latency(Duration::ZERO);
        self.resume();
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<FailRule>> {
        self.inner.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that changes whenever [`close_watches`](Self::close_watches) is called.
    pub(crate) fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.inner.watch_epoch.subscribe()
    }

    /// Applies pause, latency and failure rules to one request.
    pub(crate) async fn before(&self, verb: Verb, resource: &str) -> Result<(), ApiError> {
        let mut paused = self.inner.paused.subscribe();
        // An error means the sender is gone, which only happens at drop: nothing to wait for.
        let _ = paused.wait_for(|p| !*p).await;
        let latency = *self.inner.latency.lock().unwrap_or_else(|e| e.into_inner());
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let mut rules = self.lock_rules();
        let hit = rules.iter_mut().position(|r| {
            r.count > 0
                && r.verb.is_none_or(|v| v == verb)
                && r.resource.as_deref().is_none_or(|res| res == resource)
        });
        let Some(i) = hit else { return Ok(()) };
        rules[i].count -= 1;
        let failure = rules[i].failure;
        if rules[i].count == 0 {
            rules.remove(i);
        }
        Err(match failure {
            Failure::InternalError => {
                ApiError::Internal(format!("injected failure for {verb:?} {resource}"))
            }
            Failure::Unavailable => ApiError::ServiceUnavailable(format!(
                "injected unavailability for {verb:?} {resource}"
            )),
            Failure::TooManyRequests { retry_after_secs } => ApiError::TooManyRequests {
                message: format!("injected throttling for {verb:?} {resource}; retry later"),
                retry_after_secs,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults::new(Arc::new(Store::new(10, 10).0))
    }

    #[tokio::test]
    async fn rule_fails_exactly_the_next_matching_requests() {
        let f = faults();
        f.fail_next(
            FailRule::new(2, Failure::InternalError)
                .verb(Verb::Create)
                .resource("pods"),
        );
        assert!(f.before(Verb::Get, "pods").await.is_ok());
        assert!(f.before(Verb::Create, "configmaps").await.is_ok());
        assert_eq!(
            f.before(Verb::Create, "pods").await.unwrap_err().code(),
            500
        );
        assert_eq!(
            f.before(Verb::Create, "pods").await.unwrap_err().code(),
            500
        );
        assert!(f.before(Verb::Create, "pods").await.is_ok());
    }

    #[tokio::test]
    async fn throttling_rule_answers_429_with_retry_after() {
        let f = faults();
        f.fail_next(FailRule::new(
            1,
            Failure::TooManyRequests {
                retry_after_secs: 3,
            },
        ));
        let err = f.before(Verb::List, "leases").await.unwrap_err();
        assert_eq!(err.code(), 429);
        assert_eq!(err.status()["details"]["retryAfterSeconds"], 3);
    }

    #[tokio::test(start_paused = true)]
    async fn paused_server_holds_requests_until_resumed() {
        let f = faults();
        f.pause();
        let g = f.clone();
        let held = tokio::spawn(async move { g.before(Verb::Get, "pods").await });
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!held.is_finished());
        f.resume();
        tokio::time::timeout(Duration::from_secs(1), held)
            .await
            .expect("released")
            .expect("joined")
            .expect("ok");
    }
}
