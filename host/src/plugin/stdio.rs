//! A guest's stdout and stderr, turned into log lines attributed to its plugin (and, through the
//! caller's span, to the key being reconciled) as they are written.

use std::sync::Arc;

use parking_lot::Mutex;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi_io::bytes::Bytes;

/// The longest line kept; a longer one is logged in pieces of this size.
pub const MAX_LINE: usize = 8 << 10;

/// Which of the guest's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout, logged at info.
    Stdout,
    /// stderr, logged at warn.
    Stderr,
}

/// One guest stream: bytes in, complete lines out to `tracing`.
#[derive(Clone, Debug)]
pub struct LogStream {
    plugin: Arc<str>,
    stream: Stream,
    pending: Arc<Mutex<Vec<u8>>>,
}

impl LogStream {
    /// A stream logging for `plugin`.
    #[must_use]
    pub fn new(plugin: Arc<str>, stream: Stream) -> Self {
        Self {
            plugin,
            stream,
            pending: Arc::default(),
        }
    }

    /// Logs what is left of an unterminated last line.
    pub fn flush_partial(&self) {
        let rest = std::mem::take(&mut *self.pending.lock());
        if !rest.is_empty() {
            self.emit(&rest);
        }
    }

    fn append(&self, mut bytes: &[u8]) {
        let mut pending = self.pending.lock();
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            pending.extend_from_slice(&bytes[..end]);
            self.emit(&pending);
            pending.clear();
            bytes = &bytes[end + 1..];
        }
        pending.extend_from_slice(bytes);
        while pending.len() >= MAX_LINE {
            let piece: Vec<u8> = pending.drain(..MAX_LINE).collect();
            self.emit(&piece);
        }
    }

    fn emit(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        let plugin = &*self.plugin;
        match self.stream {
            Stream::Stdout => tracing::info!(plugin, stream = "stdout", "{line}"),
            Stream::Stderr => tracing::warn!(plugin, stream = "stderr", "{line}"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_writes_are_joined_and_long_lines_cut() {
        let stream = LogStream::new("p".into(), Stream::Stdout);
        stream.append(b"hel");
        stream.append(b"lo\nwor");
        assert_eq!(&*stream.pending.lock(), b"wor");
        stream.append(&vec![b'x'; MAX_LINE + 5]);
        assert_eq!(stream.pending.lock().len(), 3 + MAX_LINE + 5 - MAX_LINE);
        stream.flush_partial();
        assert!(stream.pending.lock().is_empty());
    }
}
