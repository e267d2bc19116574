//! The bottom of a plugin's write path: TCP streams that refuse to send a byte once the
//! replica's [`Fence`] is closed, checked on every write to the socket, below TLS — after
//! every wait a write can meet on its way (pool, connect, TLS handshake, hyper's dispatch).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::{BoxError, Service};

use crate::election::Fence;

/// Why a stream refused to send: the error inside the `PermissionDenied` [`io::Error`] a
/// write fails with.
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: this replica's lease lapsed by its own clock while the write waited for its \
     connection, so no further byte of it leaves this replica (the key goes back to the queue \
     and is reconciled by the replica that holds the lease)"
)]
pub struct FenceClosed;

/// A stream whose writes fail while `fence` is closed; reads pass.
#[derive(Debug)]
pub struct FencedIo<T> {
    inner: T,
    fence: Fence,
}

impl<T> FencedIo<T> {
    /// Wraps `inner`, checking `fence` before every write.
    #[must_use]
    pub fn new(inner: T, fence: Fence) -> Self {
        Self { inner, fence }
    }

    fn check(&self) -> io::Result<()> {
        if self.fence.is_open() {
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
        let connecting = self.inner.call(uri);
        let fence = self.fence.clone();
        Box::pin(async move {
            let stream = connecting.await?.into_inner();
            Ok(TokioIo::new(FencedIo::new(stream, fence)))
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
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(FencedIo::new(ours, fence.clone())))
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

    #[tokio::test]
    async fn reads_pass_a_closed_fence() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut fenced = FencedIo::new(ours, Fence::closed());
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
