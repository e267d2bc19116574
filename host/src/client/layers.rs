//! The tower layers placed under `kube::Client`: a shared client-side rate limit and retries.

use std::error::Error as StdError;
use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response, header};
use kube::client::Body;
use parking_lot::Mutex;
use tower::{BoxError, Layer, Service, ServiceExt};

use super::bucket::{SharedBudget, TokenBucket};
use super::limits::ClientLimits;
use super::policy::{self, Decision, Outcome, RequestClass};
use super::stats::ClientStats;

/// A service shared by the futures of its wrapper: kube's stack below our layers is a
/// `BoxService`, which is neither `Clone` nor `Sync`, yet every rate-limited or retried request
/// must call it later from its own future. The lock is held only to poll readiness and start a
/// call, never while the response is awaited. kube's stack is always ready (the hyper client
/// queues internally), so callers do not contend for readiness wake-ups.
struct Shared<S>(Arc<Mutex<S>>);

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<S> Shared<S> {
    async fn call<B>(&self, req: Request<Body>) -> Result<Response<B>, BoxError>
    where
        S: Service<Request<Body>, Response = Response<B>>,
        S::Error: Into<BoxError>,
    {
        let mut req = Some(req);
        let response = poll_fn(|cx| {
            let mut svc = self.0.lock();
            match svc.poll_ready(cx) {
                Poll::Ready(Ok(())) => match req.take() {
                    Some(req) => Poll::Ready(Ok(svc.call(req))),
                    None => Poll::Ready(Err(BoxError::from("request already sent"))),
                },
                Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
                Poll::Pending => Poll::Pending,
            }
        })
        .await?;
        response.await.map_err(Into::into)
    }
}

/// Adds the client-side token bucket of [`ClientLimits::qps`] and [`ClientLimits::burst`].
///
/// Every attempt — first tries and retries alike, as in client-go — waits for a token before it
/// is sent. The wait happens in the request's own future, so waiting requests never block the
/// others, and the bucket is shared by every clone of the client (they share one service). A
/// watch takes one token to open, like client-go, and its long-running stream is never throttled.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
    shared: Option<SharedBudget>,
    stats: ClientStats,
}

impl RateLimitLayer {
    /// A layer with a new, full bucket; counts attempts and waits in `stats`.
    ///
    /// `limits` must be valid ([`ClientLimits::validate`]).
    pub fn new(limits: &ClientLimits, stats: ClientStats) -> Self {
        RateLimitLayer {
            bucket: Arc::new(TokenBucket::new(limits.qps, limits.burst)),
            shared: None,
            stats,
        }
    }

    /// Also waits, after the layer's own token, for a token of `shared` (`None`: nothing more).
    #[must_use]
    pub fn sharing(mut self, shared: Option<SharedBudget>) -> Self {
        self.shared = shared;
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner: Shared(Arc::new(Mutex::new(inner))),
            bucket: self.bucket.clone(),
            shared: self.shared.clone(),
            stats: self.stats.clone(),
        }
    }
}

/// The service of [`RateLimitLayer`].
pub struct RateLimit<S> {
    inner: Shared<S>,
    bucket: Arc<TokenBucket>,
    shared: Option<SharedBudget>,
    stats: ClientStats,
}

impl<S> Clone for RateLimit<S> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            bucket: self.bucket.clone(),
            shared: self.shared.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<S, B> Service<Request<Body>> for RateLimit<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness of the inner service is awaited inside the request's future, after its token.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let mut waited = this.bucket.acquire().await;
            if let Some(shared) = &this.shared {
                waited += shared.0.acquire().await;
            }
            this.stats.record_request(waited);
            this.inner.call(req).await
        })
    }
}

/// Retries requests per the table in the [module docs](super), waiting `Retry-After` or an
/// exponential backoff with jitter between attempts.
///
/// Placed above [`RateLimitLayer`] so each retry also waits for a token. Request bodies are
/// buffered once (kube's are already in memory) so every attempt sends the same bytes. Watches
/// pass straight through: kube's watcher resumes them itself.
#[derive(Debug, Clone)]
pub struct RetryLayer {
    limits: ClientLimits,
    stats: ClientStats,
}

impl RetryLayer {
    /// A layer retrying per `limits` and counting retries in `stats`.
    ///
    /// `limits` must be valid ([`ClientLimits::validate`]).
    pub fn new(limits: &ClientLimits, stats: ClientStats) -> Self {
        RetryLayer {
            limits: limits.clone(),
            stats,
        }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            limits: Arc::new(self.limits.clone()),
            stats: self.stats.clone(),
        }
    }
}

/// The service of [`RetryLayer`]; the inner service must be `Clone` (as [`RateLimit`] is).
#[derive(Clone)]
pub struct Retry<S> {
    inner: S,
    limits: Arc<ClientLimits>,
    stats: ClientStats,
}

impl<S, B> Service<Request<Body>> for Retry<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // Take the service that was driven ready, leaving a fresh clone (tower's clone-and-swap).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits.clone();
        let stats = self.stats.clone();
        Box::pin(send_with_retries(inner, req, limits, stats))
    }
}

/// Sends `req` through `inner`, retrying as [`policy::decide`] says.
async fn send_with_retries<S, B>(
    mut inner: S,
    req: Request<Body>,
    limits: Arc<ClientLimits>,
    stats: ClientStats,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>, Error = BoxError>,
{
    let class = policy::classify(
        req.method(),
        req.uri().query(),
        req.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    if class == RequestClass::Watch || limits.max_retries == 0 {
        return inner.call(req).await;
    }
    let (parts, body) = req.into_parts();
    let body = match body.try_clone() {
        Some(_) => body,
        None => Body::from(body.collect_bytes().await?),
    };
    let head = Request::from_parts(parts, ());
    let mut retries_done = 0;
    loop {
        let attempt = {
            let (parts, ()) = head.clone().into_parts();
            let body = body
                .try_clone()
                .ok_or_else(|| BoxError::from("a buffered request body cannot be cloned"))?;
            Request::from_parts(parts, body)
        };
        let result = inner.ready().await?.call(attempt).await;
        let outcome = match &result {
            Ok(response) => Outcome::Response {
                status: response.status(),
                retry_after: response
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok()),
            },
            Err(e) if is_connection_refused(e.as_ref()) => Outcome::ConnectRefused,
            Err(_) => Outcome::TransportError,
        };
        match policy::decide(class, outcome, retries_done, &limits, rand::random()) {
            Decision::Return => {
                log_final_failure(&head, &result, retries_done);
                return result;
            }
            Decision::Exhausted(reason) => {
                stats.record_exhausted();
                tracing::debug!(?reason, retries_done, "API request out of retries");
                log_final_failure(&head, &result, retries_done);
                return result;
            }
            Decision::Retry { after, reason } => {
                stats.record_retry(reason);
                tracing::debug!(?reason, ?after, retries_done, "retrying API request");
                // Drop the failed response (and its connection) before waiting.
                drop(result);
                tokio::time::sleep(after).await;
                retries_done += 1;
            }
        }
    }
}

/// Logs a request that failed for good (a 5xx or a transport error) once, at `ERROR`, with the
/// retries spent on it; failed attempts that a retry recovered are only debug lines (see
/// `crate::telemetry::logs`). 4xx answers are the caller's to judge and are not logged here.
fn log_final_failure<B>(
    head: &Request<()>,
    result: &Result<Response<B>, BoxError>,
    retries_done: u32,
) {
    let (method, path) = (head.method(), head.uri().path());
    match result {
        Ok(response) if response.status().is_server_error() => {
            tracing::error!(%method, path, status = response.status().as_u16(), retries = retries_done,
                "API request failed");
        }
        Ok(_) => {}
        // A write held back by the fence is the fence's decision, logged where it closes.
        Err(error) if error.downcast_ref::<super::fenced::Fenced>().is_some() => {}
        Err(error) => {
            tracing::error!(%method, path, error = error.as_ref() as &dyn StdError,
                retries = retries_done, "API request failed");
        }
    }
}

/// Whether `err` or any of its causes is a refused TCP connection: the request was never sent.
fn is_connection_refused(err: &(dyn StdError + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::StatusCode;
    use tokio::time::Instant;
    use tower::util::BoxService;

    use super::*;

    /// What the mock server saw: when each attempt arrived and its body.
    type Seen = Arc<Mutex<Vec<(Duration, Vec<u8>)>>>;

    /// The mock server's service type.
    type Mock = BoxService<Request<Body>, Response<()>, BoxError>;

    /// A mock API server answering `script` in order (status, Retry-After), then 200, behind a
    /// non-`Clone` `BoxService` like kube's own stack.
    fn mock(script: Vec<(u16, Option<&'static str>)>, seen: Seen) -> Mock {
        let start = Instant::now();
        let script = Arc::new(Mutex::new(script.into_iter()));
        BoxService::new(tower::service_fn(move |req: Request<Body>| {
            let (script, seen) = (script.clone(), seen.clone());
            async move {
                let body = req.into_body().collect_bytes().await?.to_vec();
                seen.lock().push((start.elapsed(), body));
                let (code, retry_after) = script.lock().next().unwrap_or((200, None));
                let mut response = Response::builder().status(code);
                if let Some(secs) = retry_after {
                    response = response.header(header::RETRY_AFTER, secs);
                }
                Ok::<_, BoxError>(response.body(())?)
            }
        }))
    }

    fn stack(
        limits: &ClientLimits,
        script: Vec<(u16, Option<&'static str>)>,
    ) -> (Retry<RateLimit<Mock>>, Seen, ClientStats) {
        let seen = Seen::default();
        let stats = ClientStats::default();
        let svc = RetryLayer::new(limits, stats.clone())
            .layer(RateLimitLayer::new(limits, stats.clone()).layer(mock(script, seen.clone())));
        (svc, seen, stats)
    }

    fn put(body: &str) -> Request<Body> {
        Request::put("/api/v1/namespaces/default/configmaps/app")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.as_bytes().to_vec()))
            .expect("request")
    }

    #[tokio::test(start_paused = true)]
    async fn retries_resend_the_same_body_after_retry_after_then_backoff() {
        let limits = ClientLimits::default().backoff_base(Duration::from_millis(100));
        let (svc, seen, stats) = stack(&limits, vec![(429, Some("3")), (503, None)]);

        let response = svc.oneshot(put("{\"data\":1}")).await.expect("response");

        assert_eq!(response.status(), StatusCode::OK);
        let seen = seen.lock().clone();
        assert_eq!(seen.len(), 3);
        assert!(
            seen.iter().all(|(_, body)| body == b"{\"data\":1}"),
            "{seen:?}"
        );
        assert_eq!(
            seen[1].0,
            Duration::from_secs(3),
            "Retry-After honoured exactly"
        );
        // The second retry backs off 100 ms × 2¹ = 200 ms, less up to half of it as jitter.
        let backoff = seen[2].0 - seen[1].0;
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(200));
        assert!(
            backoff > min && backoff <= max,
            "second retry after {backoff:?}"
        );
        let snapshot = stats.snapshot();
        assert_eq!(
            (
                snapshot.retries_too_many_requests,
                snapshot.retries_server_error
            ),
            (1, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_retry_also_waits_for_a_token() {
        let limits = ClientLimits::default()
            .qps(10.0)
            .burst(1)
            .backoff_base(Duration::from_millis(1));
        let (svc, seen, stats) = stack(&limits, vec![(503, None), (503, None)]);

        let response = svc.oneshot(put("x")).await.expect("response");

        assert_eq!(response.status(), StatusCode::OK);
        let times: Vec<_> = seen.lock().iter().map(|(t, _)| *t).collect();
        let ms = Duration::from_millis;
        assert_eq!(times, [ms(0), ms(100), ms(200)]);
        assert_eq!(stats.snapshot().throttled, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn clients_sharing_a_budget_send_at_its_rate_together() {
        let own = ClientLimits::default().qps(100.0).burst(100);
        let shared = SharedBudget::new(10.0, 1).expect("a valid budget");
        let seen = Seen::default();
        let client = || {
            RateLimitLayer::new(&own, ClientStats::default())
                .sharing(Some(shared.clone()))
                .layer(mock(vec![], seen.clone()))
        };
        let (a, b) = (client(), client());
        let sends = (0..3).flat_map(|_| [a.clone().oneshot(put("a")), b.clone().oneshot(put("b"))]);
        for response in futures::future::join_all(sends).await {
            assert_eq!(response.expect("response").status(), StatusCode::OK);
        }
        let times: Vec<_> = seen.lock().iter().map(|(t, _)| *t).collect();
        let ms = Duration::from_millis;
        assert_eq!(
            times,
            [ms(0), ms(100), ms(200), ms(300), ms(400), ms(500)],
            "each client's own bucket would pass all six at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn watch_passes_through_once_whatever_the_status() {
        let (svc, seen, stats) = stack(&ClientLimits::default(), vec![(503, None)]);
        let watch = Request::get("/api/v1/configmaps?watch=true&resourceVersion=1")
            .body(Body::empty())
            .expect("request");

        let response = svc.oneshot(watch).await.expect("response");

        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(seen.lock().len(), 1);
        assert_eq!(stats.snapshot().retries(), 0);
    }

    #[test]
    fn refused_connection_is_found_anywhere_in_the_cause_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Wrapper(#[source] io::Error);

        let refused = Wrapper(io::Error::from(io::ErrorKind::ConnectionRefused));
        let reset = Wrapper(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(is_connection_refused(&refused));
        assert!(!is_connection_refused(&reset));
        assert!(!is_connection_refused(&*BoxError::from("something else")));
    }
}
