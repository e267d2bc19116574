//! The bottom of a plugin's write path: TCP streams that refuse to send a byte once the
//! replica's [`Fence`] has closed since the stream was opened, checked on every write to the
//! socket, below TLS — after every wait a write can meet on its way (pool, connect, TLS
//! handshake, hyper's dispatch). A stream opened before a lapse never writes again, even once
//! the replica has renewed: whatever it still holds was admitted in the old term.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::{BoxError, Service};

use crate::election::{Fence, Term};

/// Why a stream refused to send: the error inside the `PermissionDenied` [`io::Error`] a
/// write fails with.
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: this replica's lease lapsed by its own clock while the write waited for its \
     connection, so no further byte of it leaves this replica (the key goes back to the queue \
     and is reconciled by the replica that holds the lease)"
)]
pub struct FenceClosed;

/// A stream whose writes fail unless `fence` is open in the term it was opened in; reads pass.
#[derive(Debug)]
pub struct FencedIo<T> {
    inner: T,
    fence: Fence,
    term: Option<Term>,
}

impl<T> FencedIo<T> {
    /// Wraps `inner`, opened in `term` (`None`: the fence was closed), checking before every
    /// write that `fence` is still open in that term.
    #[must_use]
    pub fn new(inner: T, fence: Fence, term: Option<Term>) -> Self {
        Self { inner, fence, term }
    }

    fn check(&self) -> io::Result<()> {
        if self.term.is_some_and(|term| self.fence.is_open_in(term)) {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, FenceClosed))
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FencedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FencedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for FencedIo<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

/// hyper's TCP connector whose streams are [`FencedIo`]s of one fence: TLS goes on top.
#[derive(Clone, Debug)]
pub struct FencedConnector {
    inner: HttpConnector,
    fence: Fence,
}

impl FencedConnector {
    /// Connects with `inner`, fencing every stream with `fence`.
    #[must_use]
    pub fn new(inner: HttpConnector, fence: Fence) -> Self {
        Self { inner, fence }
    }
}

impl Service<Uri> for FencedConnector {
    type Response = TokioIo<FencedIo<TcpStream>>;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // The term of the request that asked for the connection, before any wait.
        let term = self.fence.term();
        let connecting = self.inner.call(uri);
        let fence = self.fence.clone();
        Box::pin(async move {
            let stream = connecting.await?.into_inner();
            Ok(TokioIo::new(FencedIo::new(stream, fence, term)))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::Request;
    use kube::client::Body;
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_request_prepared_before_the_fence_closed_sends_no_byte() {
        let fence = Fence::closed();
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(3600));
        let (ours, mut server) = tokio::io::duplex(64 * 1024);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(
            FencedIo::new(ours, fence.clone(), fence.term()),
        ))
        .await
        .expect("handshake");
        let driver = tokio::spawn(connection);
        let request = Request::post("http://api.invalid/api/v1/namespaces/default/configmaps")
            .body(Body::from(b"{}".to_vec()))
            .expect("request");
        let answer = sender.send_request(request);
        fence.close();
        let error = tokio::time::timeout(Duration::from_secs(60), answer)
            .await
            .expect("the request is refused, not sent and left waiting for an answer")
            .expect_err("refused");
        let driven = driver.await.expect("driver");
        let message = match driven {
            Ok(()) => crate::error_chain(&error),
            Err(driven) => format!(
                "{} / {}",
                crate::error_chain(&error),
                crate::error_chain(&driven)
            ),
        };
        assert!(message.contains("lease lapsed"), "{message}");
        let mut received = Vec::new();
        server.read_to_end(&mut received).await.expect("read");
        assert_eq!(
            String::from_utf8_lossy(&received),
            "",
            "the server received bytes"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_opened_before_a_lapse_sends_nothing_once_the_replica_renewed() {
        let fence = Fence::closed();
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(2));
        let (ours, mut server) = tokio::io::duplex(1024);
        let mut old = FencedIo::new(ours, fence.clone(), fence.term());
        tokio::io::AsyncWriteExt::write_all(&mut old, b"before")
            .await
            .expect("sent while open");
        // Frozen past its deadline, then renewed: open again, in a new term.
        tokio::time::advance(Duration::from_secs(3)).await;
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(2));
        assert!(fence.is_open());
        let refused = tokio::io::AsyncWriteExt::write_all(&mut old, b"after")
            .await
            .expect_err("a stream of the old term is refused");
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        drop(old);
        let mut received = Vec::new();
        server.read_to_end(&mut received).await.expect("read");
        assert_eq!(String::from_utf8_lossy(&received), "before");
        // A stream opened in the new term writes.
        let (ours, mut server) = tokio::io::duplex(1024);
        let mut new = FencedIo::new(ours, fence.clone(), fence.term());
        tokio::io::AsyncWriteExt::write_all(&mut new, b"new term")
            .await
            .expect("sent in the new term");
        drop(new);
        let mut received = Vec::new();
        server.read_to_end(&mut received).await.expect("read");
        assert_eq!(String::from_utf8_lossy(&received), "new term");
    }

    #[tokio::test]
    async fn reads_pass_a_closed_fence() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut fenced = FencedIo::new(ours, Fence::closed(), None);
        tokio::io::AsyncWriteExt::write_all(&mut theirs, b"answer")
            .await
            .expect("write");
        let mut read = [0; 6];
        fenced.read_exact(&mut read).await.expect("read");
        assert_eq!(&read, b"answer");
        let refused = tokio::io::AsyncWriteExt::write_all(&mut fenced, b"x")
            .await
            .expect_err("refused");
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
    }
}
