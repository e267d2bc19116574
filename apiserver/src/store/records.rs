//! What the store keeps and hands out: object keys, stored objects, watch events, mutations and
//! their outcomes, garbage-collection signals and list pages.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

/// Key of an object inside one resource's table: namespace ("" for cluster-scoped) then name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// Namespace, empty for cluster-scoped objects.
    pub ns: String,
    /// Object name.
    pub name: String,
}

impl ObjKey {
    /// Builds a key.
    pub fn new(ns: &str, name: &str) -> Self {
        ObjKey {
            ns: ns.to_string(),
            name: name.to_string(),
        }
    }
}

/// One stored object: its JSON bytes (with `metadata.resourceVersion` filled in) and version.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The serialized object.
    pub bytes: Bytes,
    /// uids of its owners (from `metadata.ownerReferences`), if any.
    pub(super) owners: Option<Box<[String]>>,
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// One change, as kept in the history and sent to watchers.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// The resource table (store key) it belongs to.
    pub table: Arc<str>,
    /// Namespace of the object.
    pub ns: String,
    /// Kind of change.
    pub kind: EventType,
    /// The object as of the change.
    pub bytes: Bytes,
    /// For a modification, the object before it (so filtered watches can tell an object that
    /// starts or stops matching).
    pub prev: Option<Bytes>,
}

/// A new watcher's history replay and its receiver of later events.
pub type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// What a mutation closure decided.
pub enum Mutation {
    /// Store this object (create or replace).
    Put(Value),
    /// Remove the object; the value is its final state (sent in the DELETED event).
    Delete(Value),
    /// Change nothing; answer with this object.
    Keep(Value),
}

/// The result of a mutation.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The object bytes after the change (or the final state for a delete).
    pub bytes: Bytes,
    /// Whether the object was removed.
    pub deleted: bool,
}

/// A change the garbage collector acts on.
#[derive(Debug, Clone)]
pub enum GcSignal {
    /// An object was removed: its dependents may be orphaned now.
    Removed(Removal),
    /// An object was written with owner references it did not have before: if one of those
    /// owners is already gone (a controller re-applied a child of a deleted owner), the object
    /// is collected as a real API server's garbage collector would.
    Owned {
        /// Table of the object.
        table: Arc<str>,
        /// Its key.
        key: ObjKey,
    },
}

/// A removal, reported to the garbage collector.
#[derive(Debug, Clone)]
pub struct Removal {
    /// Table of the removed object.
    pub table: Arc<str>,
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// uid of the removed object.
    pub uid: String,
}

pub struct Page {
    /// The collection's resourceVersion.
    pub rv: u64,
    /// The objects, in (namespace, name) order.
    pub items: Vec<(ObjKey, Bytes)>,
    /// The key of the last item when more matching items remain.
    pub next: Option<ObjKey>,
    /// How many matching items remain after this page.
    pub remaining: usize,
}
