//! Writes that outlive the fence: a write whose answer has not come when the replica's
//! [`Fence`] closes is given up, so the guest learns at once that it may have been applied or
//! not, instead of waiting for the read timeout. A write is given up too when the fence has
//! closed and opened again since it was admitted (a frozen process that renewed before the
//! write was looked at again): it belongs to the old term.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use kube::client::{Body, DynBody};
use tower::{BoxError, Service};

use crate::election::{Fence, Term};

/// Why a write under way was given up.
#[derive(Debug, thiserror::Error)]
#[error(
    "abandoned: this replica's lease lapsed by its own clock before the API server answered \
     the write, so the write may or may not have reached the API server; read the object again \
     before acting on it (the key goes back to the queue and is reconciled by the replica that \
     holds the lease)"
)]
pub struct Abandoned;

/// Fails a request with [`Abandoned`] once `fence` has closed since the request was admitted:
/// checked before every poll of the answer and woken at the fence's deadline or when it is
/// closed early. Dropped unsent, the request is never sent (hyper skips a request whose
/// caller is gone).
#[derive(Clone, Debug)]
pub struct AbandonService<S> {
    inner: S,
    fence: Fence,
}

impl<S> AbandonService<S> {
    /// Sends through `inner` while `fence` is open.
    #[must_use]
    pub fn new(inner: S, fence: Fence) -> Self {
        Self { inner, fence }
    }
}

impl<S> Service<Request<Body>> for AbandonService<S>
where
    S: Service<Request<Body>, Response = Response<Incoming>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let term = self.fence.term();
        let call = self.inner.call(request);
        let fence = self.fence.clone();
        Box::pin(async move {
            // Closed already (the fence layer above checked it just before): nothing is sent.
            let term = term.ok_or(super::fenced::Fenced)?;
            let response = fenced(call, &fence, term).await?.map_err(Into::into)?;
            Ok(response.map(|body| Box::new(Answer(body)) as Box<DynBody>))
        })
    }
}

/// `call`, unless `fence` closes (ends `term`) first.
async fn fenced<F: Future>(call: F, fence: &Fence, term: Term) -> Result<F::Output, Abandoned> {
    let mut call = pin!(call);
    let mut closed = pin!(fence.wait_closed());
    std::future::poll_fn(|cx| {
        if !fence.is_open_in(term) {
            return Poll::Ready(Err(Abandoned));
        }
        if let Poll::Ready(output) = call.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        closed.as_mut().poll(cx).map(|()| Err(Abandoned))
    })
    .await
}

/// An answer's body, its errors boxed as kube's stack expects.
struct Answer(Incoming);

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.0)
            .poll_frame(cx)
            .map(|frame| frame.map(|frame| frame.map_err(BoxError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_write_unanswered_at_the_fence_deadline_is_abandoned() {
        let fence = Fence::closed();
        let start = Instant::now();
        fence.open_until(start + Duration::from_secs(10));
        let term = fence.term().expect("open");
        let never = futures::future::pending::<()>();
        let abandoned = fenced(never, &fence, term).await.expect_err("abandoned");
        assert_eq!(Instant::now(), start + Duration::from_secs(10));
        let message = abandoned.to_string();
        assert!(
            message.contains("may or may not have reached the API server"),
            "{message}"
        );
        // A closed fence gives up before the call is polled at all.
        let polled = std::sync::atomic::AtomicBool::new(false);
        let call = std::future::poll_fn(|_| {
            polled.store(true, std::sync::atomic::Ordering::Relaxed);
            Poll::Ready(())
        });
        assert!(fenced(call, &fence, term).await.is_err());
        assert!(!polled.load(std::sync::atomic::Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_admitted_before_a_lapse_is_abandoned_unpolled_after_the_renewal() {
        let fence = Fence::closed();
        fence.open_until(Instant::now() + Duration::from_secs(2));
        let term = fence.term().expect("open");
        // Frozen past the deadline; the lease thread renews before the write is looked at.
        tokio::time::advance(Duration::from_secs(3)).await;
        fence.open_until(Instant::now() + Duration::from_secs(2));
        assert!(fence.is_open());
        let polled = std::sync::atomic::AtomicBool::new(false);
        let call = std::future::poll_fn(|_| {
            polled.store(true, std::sync::atomic::Ordering::Relaxed);
            Poll::Ready(())
        });
        assert!(fenced(call, &fence, term).await.is_err());
        assert!(
            !polled.load(std::sync::atomic::Ordering::Relaxed),
            "the write of the old term was not sent"
        );
        // A write admitted in the new term goes through.
        let term = fence.term().expect("open");
        assert!(fenced(std::future::ready(()), &fence, term).await.is_ok());
    }
}
