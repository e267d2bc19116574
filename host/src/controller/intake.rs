//! Where keys enter a controller: its queue, with the cause of each add noted beside the key.

use std::sync::Arc;

use super::causes::{Cause, Causes, Why};
use super::key::ObjectKey;
use crate::queue::RateLimitingQueue;

/// A controller's queue and the causes of its keys. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Intake {
    queue: RateLimitingQueue<ObjectKey>,
    causes: Arc<Causes>,
}

impl Intake {
    /// Keys added through it go to `queue`, their causes to `causes`.
    #[must_use]
    pub fn new(queue: RateLimitingQueue<ObjectKey>, causes: Arc<Causes>) -> Self {
        Self { queue, causes }
    }

    /// Queues `key` for `why`.
    pub fn add(&self, key: ObjectKey, why: Why) {
        self.add_cause(key, Cause::now(why));
    }

    /// Queues `key` for `cause`.
    pub fn add_cause(&self, key: ObjectKey, cause: Cause) {
        self.causes.note(&key, cause);
        self.queue.add(key);
    }

    /// The queue itself (to read what it holds).
    #[must_use]
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }
}
