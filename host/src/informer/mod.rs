//! Informers: watch the API server through kube-rs, keep a compact cache, and turn events into
//! keys (SEMANTICS §5).

mod handlers;
mod object;
mod shared;
mod store;

pub use handlers::{Predicates, enqueue_controller, enqueue_self};
pub use object::{CachedObject, Owner, WireObject};
pub use shared::{Change, Handler, Informer, Scope, Subscription};
pub use store::Store;
