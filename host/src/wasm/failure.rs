//! How a call into a guest failed: an error it returned, a trap, its deadline, its memory limit,
//! or no instance; each with the fix in its message and a short label for metrics.

use std::time::Duration;

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
    Trapped(#[source] Box<dyn std::error::Error + Send + Sync>),
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
    /// No instance could be created (e.g. the instance pool is exhausted).
    #[error("the guest could not be instantiated")]
    Instantiate(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl GuestFailure {
    /// A short label for metrics: `error`, `trap`, `deadline`, `memory` or `instantiate`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Returned(_) => "error",
            Self::Trapped(_) => "trap",
            Self::Deadline(_) => "deadline",
            Self::Memory(_) => "memory",
            Self::Instantiate(_) => "instantiate",
        }
    }
}
