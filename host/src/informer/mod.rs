//! Informers: watch the API server through kube-rs, keep a compact cache, and turn events into
//! keys (SEMANTICS §5).

mod change;
pub mod cluster_state;
mod handlers;
mod object;
mod shared;
mod store;
mod strip;
mod watch_task;

pub use change::{Change, Handler};
pub use cluster_state::StoreEpoch;
pub use handlers::{Enqueue, KeyFilter, Predicates, enqueue_controller, enqueue_self};
pub use object::{CachedObject, Owner, WireObject};
pub use shared::{Informer, Scope, Subscription};
pub use store::Store;
