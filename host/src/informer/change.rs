//! What an informer reports to its subscribers: one change of its cache at a time.

use std::sync::Arc;

use super::object::CachedObject;

/// What changed in an informer's cache; handlers map it to keys.
#[derive(Debug)]
pub enum Change<'a> {
    /// A new object.
    Added(&'a Arc<CachedObject>),
    /// An object that changed (or was relisted).
    Updated {
        /// The object as cached before.
        old: &'a Arc<CachedObject>,
        /// The object as cached now.
        new: &'a Arc<CachedObject>,
    },
    /// An object that is gone; the last state the cache knew.
    Deleted(&'a Arc<CachedObject>),
    /// A periodic re-delivery of a cached object (SEMANTICS rule 16); no API call behind it.
    Resync(&'a Arc<CachedObject>),
}

/// Receives every change of an informer's cache. Runs on the informer's task: keep it cheap
/// (map to keys and add them to a queue).
pub type Handler = Arc<dyn Fn(&Change<'_>) + Send + Sync>;

/// The subscribers of one informer, by subscription id.
pub(super) type Handlers = parking_lot::RwLock<Vec<(u64, Handler)>>;

/// Hands `change` to every subscriber.
pub(super) fn deliver(handlers: &[(u64, Handler)], change: &Change<'_>) {
    for (_, handler) in handlers {
        handler(change);
    }
}
