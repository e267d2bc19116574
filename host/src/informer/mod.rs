//! Informers: watch the API server through kube-rs, keep a compact cache, and turn events into
//! keys (SEMANTICS §5).

mod object;

pub use object::{CachedObject, Owner, WireObject};
