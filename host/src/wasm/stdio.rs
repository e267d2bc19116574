//! A guest's stdout and stderr as WASI output streams, feeding its call's [`CallLog`], which
//! turns them into bounded log lines attributed to the plugin (and, through the caller's span, to
//! the key being reconciled).

use std::sync::Arc;

use parking_lot::Mutex;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi_io::bytes::Bytes;

use crate::wasm::guest_log::{CallLog, Source};

/// One guest stream: bytes into the call's [`CallLog`], which bounds and logs them.
#[derive(Clone, Debug)]
pub struct LogStream {
    source: Source,
    call: Arc<Mutex<CallLog>>,
}

impl LogStream {
    /// The stream `source` (stdout or stderr) of the call log `call`.
    #[must_use]
    pub fn new(call: Arc<Mutex<CallLog>>, source: Source) -> Self {
        Self { source, call }
    }

    fn append(&self, bytes: &[u8]) {
        self.call.lock().write(self.source, bytes);
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for LogStream {
    async fn ready(&mut self) {}
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(usize::MAX)
    }
}

impl tokio::io::AsyncWrite for LogStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
