//! How a call into a guest failed: an error it returned, a trap, its deadline, its memory limit,
//! or no instance; each with the fix in its message and a short label for metrics.
//!
//! # Guarantees
//! - Text a guest module controls never reaches the host's log as lines of its own: a trap's
//!   message and wasm backtrace (the function and module names of the module's name section)
//!   and an instantiation error are kept as one [`GuestText`], control and bidirectional
//!   formatting characters escaped, cut at [`MAX_TRAP`] bytes.

use std::time::Duration;

use crate::wasm::guest_log::guest_text;

/// The most bytes of a trap's or an instantiation error's text kept, backtrace included.
pub const MAX_TRAP: usize = 4 << 10;

/// An error's text that may come from a guest module, escaped into one line and bounded: every
/// cause of the error joined by `: `, newlines, other control characters and bidirectional
/// overrides written as escapes (`\n`, `\u{202e}`), cut at [`MAX_TRAP`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GuestText(String);

impl GuestText {
    /// The text of `error` and its causes, made safe.
    #[must_use]
    pub fn of(error: &wasmtime::Error) -> Self {
        let causes: Vec<String> = error.chain().map(ToString::to_string).collect();
        Self::new(&causes.join(": "))
    }

    /// `text`, made safe.
    #[must_use]
    pub fn new(text: &str) -> Self {
        Self(guest_text(text, MAX_TRAP))
    }

    /// The escaped text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a call into a guest failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestFailure {
    /// The guest returned `err`; its message cut at
    /// [`MAX_ERROR`](crate::wasm::guest_log::MAX_ERROR) bytes, control characters
    /// escaped.
    #[error("the guest returned an error: {0}")]
    Returned(String),
    /// The guest trapped (a panic, an `unreachable`, an out-of-bounds access, ...).
    #[error("the guest trapped")]
    Trapped(#[source] GuestText),
    /// The guest ran past its deadline.
    #[error(
        "the guest ran past its deadline of {0:?}; raise `limits.deadline` in the manifest if \
         the work is legitimately this long"
    )]
    Deadline(Duration),
    /// The guest grew its memory past the limit.
    #[error(
        "the guest exceeded its memory limit of {0} bytes; raise `limits.memory` in the manifest \
         if it legitimately needs more"
    )]
    Memory(u64),
    /// The guest's memory growth would take its tenant past the tenant's memory ceiling.
    #[error(
        "{0}; the tenant's plugins hold too much memory together: lower their concurrency or \
         their instanceReuse.maxMemory, or ask the platform team to raise the tenant's \
         `memory` ceiling (tenants: in the host's configuration)"
    )]
    TenantMemory(crate::wasm::state::TenantMemoryExceeded),
    /// No instance could be created (e.g. the instance pool is exhausted).
    #[error("the guest could not be instantiated")]
    Instantiate(#[source] GuestText),
}

impl GuestFailure {
    /// A short label for metrics: `error`, `trap`, `deadline`, `memory` or `instantiate`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Returned(_) => "error",
            Self::Trapped(_) => "trap",
            Self::Deadline(_) => "deadline",
            Self::Memory(_) | Self::TenantMemory(_) => "memory",
            Self::Instantiate(_) => "instantiate",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose function name (in its name section) carries a forged log line.
    const FORGED: &str = r#"(module
        (func (@name "x\n2026-01-01T00:00:00Z ERROR reconcile_host::controller: FORGED plugin=good\r\u{202e}")
            (export "run") unreachable))"#;

    #[test]
    fn a_trap_whose_backtrace_names_forge_log_lines_is_one_escaped_line() {
        let engine = wasmtime::Engine::default();
        let module = wasmtime::Module::new(&engine, FORGED).expect("the module compiles");
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiated");
        let run = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .expect("the export");
        let error = run.call(&mut store, ()).expect_err("it traps");
        let raw = format!("{error:?}");
        assert!(
            raw.contains("\n2026-01-01T00:00:00Z ERROR"),
            "the backtrace carries the name as written: {raw}"
        );

        let failure = GuestFailure::Trapped(GuestText::of(&error));
        let text = std::error::Error::source(&failure)
            .expect("the trap's text")
            .to_string();
        assert!(!text.contains(['\n', '\r', '\u{202e}']), "{text}");
        assert!(
            text.contains("x\\n2026-01-01T00:00:00Z ERROR reconcile_host::controller: FORGED"),
            "{text}"
        );
        assert!(text.contains("\\r\\u{202e}"), "{text}");
        assert!(
            text.contains("unreachable"),
            "the trap's message stays: {text}"
        );
    }

    #[test]
    fn a_guest_text_is_cut_at_its_bound() {
        let text = GuestText::new(&"n".repeat(MAX_TRAP * 4));
        assert!(
            text.as_str().len() < MAX_TRAP + 64,
            "{}",
            text.as_str().len()
        );
        assert!(text.as_str().ends_with("more bytes cut)"));
    }
}
