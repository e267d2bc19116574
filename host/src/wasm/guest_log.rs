//! Guest text in the host's log — stdout, stderr, the `log` import — bounded per call,
//! rate-limited per plugin and escaped, so a guest can neither stall the host by writing nor
//! write a line that looks like the host's.
//!
//! # Limits
//! - A line is at most [`MAX_LINE`] bytes; a longer one is logged in pieces of that size.
//! - One call (one reconcile) logs at most [`MAX_CALL_BYTES`] bytes of guest text, stdout,
//!   stderr and `log` together; the rest of the call's text is dropped unread: the work the
//!   host does for a write is bounded by the budget, not by the size of the write.
//! - A plugin logs at most `limits.logLinesPerSecond` lines a second on average (default
//!   [`LINES_PER_SECOND`]), [`BURST_SECONDS`] seconds' worth at once, across all its instances;
//!   lines over the rate are dropped.
//! - Dropped text is counted in `reconcile_host_plugin_log_dropped_lines_total{plugin}` and
//!   `reconcile_host_plugin_log_dropped_bytes_total{plugin}`, and the host warns at most once per
//!   [`WARN_EVERY`] per plugin with the counts since its last warning.
//! - Guest text is never the log message: it is the `text` field, quoted with newlines, quotes
//!   and control characters escaped. Error text a guest returns is cut at [`MAX_ERROR`] bytes
//!   and its control characters escaped ([`guest_text`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;

/// The longest line logged; a longer one is logged in pieces of this size.
pub const MAX_LINE: usize = 8 << 10;
/// Guest text logged per call, stdout, stderr and `log` together.
pub const MAX_CALL_BYTES: usize = 64 << 10;
/// Average guest log lines a second per plugin, unless its manifest sets
/// `limits.logLinesPerSecond`.
pub const LINES_PER_SECOND: u32 = 100;
/// How many seconds' worth of lines a plugin may write at once.
pub const BURST_SECONDS: u32 = 5;
/// Guest log lines a plugin may write at once, by default.
pub const LINE_BURST: u32 = LINES_PER_SECOND * BURST_SECONDS;
/// The longest error text kept from a guest's `reconcile-error`.
pub const MAX_ERROR: usize = 4 << 10;
/// How often, at most, the host warns about a plugin's dropped text.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Where a line of guest text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// stdout, logged at info.
    Stdout,
    /// stderr, logged at warn.
    Stderr,
    /// The `log` import, at the level the guest chose.
    Log(tracing::Level),
}

/// Counters of dropped guest text, exported as metrics.
#[derive(Clone, Debug, Default)]
pub struct DroppedCounters {
    /// Lines dropped (over the rate, or cut short by the per-call budget).
    pub lines: Counter,
    /// Bytes dropped.
    pub bytes: Counter,
}

/// One plugin's guest log: its line rate, shared by all its instances, and what it dropped.
#[derive(Debug)]
pub struct GuestLog {
    plugin: Arc<str>,
    rate: u32,
    bucket: Mutex<Bucket>,
    counters: DroppedCounters,
    /// Dropped since the last warning: lines, bytes.
    unreported: Mutex<(u64, u64, Option<Instant>)>,
    lines_logged: AtomicU64,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl GuestLog {
    /// The log of `plugin`, at most `rate` lines a second, counting dropped text in
    /// `counters`.
    #[must_use]
    pub fn new(plugin: Arc<str>, rate: u32, counters: DroppedCounters) -> Self {
        let rate = rate.max(1);
        Self {
            plugin,
            rate,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(rate.saturating_mul(BURST_SECONDS)),
                refilled: Instant::now(),
            }),
            counters,
            unreported: Mutex::new((0, 0, None)),
            lines_logged: AtomicU64::new(0),
        }
    }

    /// Lines logged so far.
    #[must_use]
    pub fn lines_logged(&self) -> u64 {
        self.lines_logged.load(Ordering::Relaxed)
    }

    /// Takes a line's token, if the rate allows.
    fn admit(&self, now: Instant) -> bool {
        let mut bucket = self.bucket.lock();
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        let burst = f64::from(self.rate.saturating_mul(BURST_SECONDS));
        bucket.tokens = (bucket.tokens + elapsed * f64::from(self.rate)).min(burst);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Logs one line of guest text, if the rate allows; counts it as dropped otherwise.
    fn line(&self, source: Source, text: &[u8]) {
        if !self.admit(Instant::now()) {
            self.dropped(1, text.len() as u64);
            return;
        }
        self.lines_logged.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(text);
        let text = text.trim_end_matches('\r');
        let plugin = &*self.plugin;
        match source {
            Source::Stdout => tracing::info!(plugin, stream = "stdout", text, "guest output"),
            Source::Stderr => tracing::warn!(plugin, stream = "stderr", text, "guest output"),
            Source::Log(level) => match level {
                tracing::Level::TRACE => tracing::trace!(plugin, text, "guest log"),
                tracing::Level::DEBUG => tracing::debug!(plugin, text, "guest log"),
                tracing::Level::INFO => tracing::info!(plugin, text, "guest log"),
                tracing::Level::WARN => tracing::warn!(plugin, text, "guest log"),
                tracing::Level::ERROR => tracing::error!(plugin, text, "guest log"),
            },
        }
    }

    /// Counts dropped text and warns if the last warning is old enough.
    fn dropped(&self, lines: u64, bytes: u64) {
        self.counters.lines.inc_by(lines);
        self.counters.bytes.inc_by(bytes);
        let now = Instant::now();
        let mut unreported = self.unreported.lock();
        unreported.0 += lines;
        unreported.1 += bytes;
        if unreported
            .2
            .is_some_and(|warned| now.duration_since(warned) < WARN_EVERY)
        {
            return;
        }
        let (lines, bytes) = (unreported.0, unreported.1);
        *unreported = (0, 0, Some(now));
        drop(unreported);
        tracing::warn!(
            plugin = &*self.plugin,
            dropped_lines = lines,
            dropped_bytes = bytes,
            lines_per_second = self.rate,
            "guest output dropped: a call may log {MAX_CALL_BYTES} bytes and a plugin \
             limits.logLinesPerSecond lines a second ({BURST_SECONDS} s worth at once); see \
             reconcile_host_plugin_log_dropped_lines_total"
        );
    }
}

/// One call's share of guest text: the bytes it may still log, and the unterminated last line
/// of each stream. Shared by the instance's stdout, stderr and `log` import.
#[derive(Debug)]
pub struct CallLog {
    log: Arc<GuestLog>,
    left: usize,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl CallLog {
    /// A call log for `log`, with a full budget.
    #[must_use]
    pub fn new(log: Arc<GuestLog>) -> Self {
        Self {
            log,
            left: MAX_CALL_BYTES,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }

    /// Starts a new call: a full budget (unterminated lines of the last call were flushed).
    pub fn begin(&mut self) {
        self.left = MAX_CALL_BYTES;
    }

    /// A message of the `log` import: one line (its newlines escaped), cut at [`MAX_LINE`].
    pub fn message(&mut self, level: tracing::Level, message: &str) {
        let bytes = message.as_bytes();
        let kept = bytes.len().min(MAX_LINE).min(self.left);
        self.left -= kept;
        if kept > 0 {
            self.log.line(Source::Log(level), &bytes[..kept]);
        }
        if kept < bytes.len() {
            self.log
                .dropped(u64::from(kept == 0), (bytes.len() - kept) as u64);
        }
    }

    /// Bytes written to stdout or stderr: complete lines are logged, the unterminated rest is
    /// kept for the next write. Work is bounded by the call's budget: past it, bytes are
    /// counted and dropped without being read.
    pub fn write(&mut self, source: Source, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.left == 0 {
                let pending = std::mem::take(self.pending(source));
                self.log.dropped(1, (bytes.len() + pending.len()) as u64);
                return;
            }
            let window = &bytes[..bytes.len().min(self.left)];
            let (piece, consumed, complete) = match window.iter().position(|&b| b == b'\n') {
                Some(end) => (&window[..end], end + 1, true),
                None => (window, window.len(), false),
            };
            self.left -= consumed;
            bytes = &bytes[consumed..];
            let log = Arc::clone(&self.log);
            let pending = self.pending(source);
            let mut piece = piece;
            let mut cut = false;
            // A line longer than MAX_LINE goes out in pieces; at most `left / MAX_LINE` of them.
            while pending.len() + piece.len() >= MAX_LINE {
                let take = MAX_LINE - pending.len();
                pending.extend_from_slice(&piece[..take]);
                log.line(source, pending);
                pending.clear();
                piece = &piece[take..];
                cut = true;
            }
            pending.extend_from_slice(piece);
            if complete && !(cut && pending.is_empty()) {
                log.line(source, pending);
                pending.clear();
            }
        }
    }

    /// Logs the unterminated last lines of stdout and stderr.
    pub fn flush(&mut self) {
        for source in [Source::Stdout, Source::Stderr] {
            let pending = std::mem::take(self.pending(source));
            if !pending.is_empty() {
                self.log.line(source, &pending);
            }
        }
    }

    fn pending(&mut self, source: Source) -> &mut Vec<u8> {
        match source {
            Source::Stderr => &mut self.stderr,
            Source::Stdout | Source::Log(_) => &mut self.stdout,
        }
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
#[must_use]
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Text from a guest made safe to show in the host's messages: at most `max` bytes (cut at a
/// character boundary, the cut said), newlines and other control characters escaped, and so are
/// the bidirectional formatting characters that reorder how a terminal shows a line (U+202A–E,
/// U+2066–9, U+200E–F, U+061C).
#[must_use]
pub fn guest_text(text: &str, max: usize) -> String {
    let end = prefix(text, max).len();
    let mut shown = String::with_capacity(end + 32);
    for c in text[..end].chars() {
        if c.is_control() || reorders_text(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    if end < text.len() {
        shown.push_str(&format!(" … ({} more bytes cut)", text.len() - end));
    }
    shown
}

/// A bidirectional formatting character: shown as nothing, it reorders the text around it.
fn reorders_text(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> (CallLog, Arc<GuestLog>, DroppedCounters) {
        let counters = DroppedCounters::default();
        let log = Arc::new(GuestLog::new(
            "p".into(),
            LINES_PER_SECOND,
            counters.clone(),
        ));
        (CallLog::new(Arc::clone(&log)), log, counters)
    }

    #[test]
    fn lines_split_across_writes_are_joined_and_long_lines_cut() {
        let (mut call, log, _) = call();
        call.write(Source::Stdout, b"hel");
        call.write(Source::Stdout, b"lo\nwor");
        assert_eq!(call.stdout, b"wor");
        assert_eq!(log.lines_logged(), 1);
        call.write(Source::Stdout, &vec![b'x'; MAX_LINE + 5]);
        assert_eq!(call.stdout.len(), 3 + 5);
        assert_eq!(log.lines_logged(), 2);
        call.write(Source::Stderr, b"err");
        call.flush();
        assert!(call.stdout.is_empty() && call.stderr.is_empty());
        assert_eq!(log.lines_logged(), 4);
    }

    #[test]
    fn a_write_larger_than_the_budget_logs_the_budget_and_counts_the_rest() {
        let (mut call, log, counters) = call();
        let huge = vec![b'y'; 100 << 20];
        call.write(Source::Stdout, &huge);
        call.flush();
        assert_eq!(log.lines_logged(), (MAX_CALL_BYTES / MAX_LINE) as u64);
        assert_eq!(counters.bytes.get(), (huge.len() - MAX_CALL_BYTES) as u64);
        // The budget is spent for this call, also for the log import.
        call.message(tracing::Level::INFO, "more");
        assert_eq!(log.lines_logged(), (MAX_CALL_BYTES / MAX_LINE) as u64);
        assert_eq!(
            counters.bytes.get(),
            (huge.len() - MAX_CALL_BYTES + 4) as u64
        );
        // The next call starts afresh.
        call.begin();
        call.message(tracing::Level::INFO, "next");
        assert_eq!(log.lines_logged(), (MAX_CALL_BYTES / MAX_LINE) as u64 + 1);
    }

    #[test]
    fn log_messages_are_cut_at_the_line_limit() {
        let (mut call, log, counters) = call();
        call.message(tracing::Level::WARN, &"z".repeat(MAX_LINE * 3));
        assert_eq!(log.lines_logged(), 1);
        assert_eq!(counters.bytes.get(), (MAX_LINE * 2) as u64);
        assert_eq!(call.left, MAX_CALL_BYTES - MAX_LINE);
    }

    #[test]
    fn the_line_rate_refills_at_its_rate_up_to_the_burst() {
        let (_, log, _) = call();
        let start = Instant::now();
        let admitted = (0..LINE_BURST + 10).filter(|_| log.admit(start)).count();
        assert_eq!(admitted, LINE_BURST as usize);
        let later = start + Duration::from_secs(1);
        let admitted = (0..LINE_BURST).filter(|_| log.admit(later)).count();
        assert_eq!(admitted, LINES_PER_SECOND as usize);
        let much_later = later + Duration::from_secs(3600);
        let admitted = (0..LINE_BURST * 2)
            .filter(|_| log.admit(much_later))
            .count();
        assert_eq!(admitted, LINE_BURST as usize);
    }

    #[test]
    fn lines_over_the_plugin_rate_are_dropped_and_counted() {
        let (mut call, log, counters) = call();
        for _ in 0..3 {
            call.begin();
            for _ in 0..LINE_BURST {
                call.write(Source::Stderr, b"x\n");
            }
        }
        assert!(counters.lines.get() > 0);
        assert_eq!(
            counters.lines.get() + log.lines_logged(),
            u64::from(LINE_BURST) * 3
        );
        assert_eq!(counters.bytes.get(), counters.lines.get());
    }

    #[test]
    fn guest_text_is_cut_at_a_char_boundary_and_escaped() {
        assert_eq!(guest_text("a\nb\u{1b}[31m", 100), "a\\nb\\u{1b}[31m");
        assert_eq!(guest_text("ééé", 3), "é … (4 more bytes cut)");
        let long = guest_text(&"e".repeat(10 << 20), MAX_ERROR);
        assert!(long.len() < MAX_ERROR + 40, "{}", long.len());
    }

    #[test]
    fn guest_text_escapes_the_characters_that_reorder_a_line() {
        assert_eq!(
            guest_text("ok \u{202e}dlrow\u{2066}\u{200f}\u{061c}", 100),
            "ok \\u{202e}dlrow\\u{2066}\\u{200f}\\u{61c}"
        );
    }
}
