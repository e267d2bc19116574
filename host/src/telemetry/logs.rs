//! The host's log: which lines of its dependencies it keeps.
//!
//! kube's HTTP trace layer writes an `ERROR` line for every failed attempt of a request,
//! including each 5xx that the host's retry layer then retries successfully; an operator's
//! error-rate alert would fire on noise. The host drops those lines: the retry layer logs each
//! retry at debug with its count, and a request's final failure at `ERROR` once
//! (`crate::client`).

use tracing::{Level, Metadata};

/// The target of kube's HTTP trace layer.
const KUBE_TRACE_TARGET: &str = "kube_client::client::builder";

/// Whether the host's log keeps the event or span described by `meta`: everything but kube's
/// per-attempt `ERROR` lines.
#[must_use]
pub fn keeps(meta: &Metadata<'_>) -> bool {
    !(meta.is_event() && *meta.level() == Level::ERROR && meta.target() == KUBE_TRACE_TARGET)
}
