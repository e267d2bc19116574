//! What a controller calls for each key: the `Reconciler` trait and its outcomes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::causes::Taken;
use super::key::ObjectKey;

/// What a successful reconcile asks of the queue (SEMANTICS rule 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The object is where it should be: forget its failures, wait for the next event.
    Done,
    /// Run again soon, after the rate limiter's backoff.
    Requeue,
    /// Run again after this delay (failures forgotten).
    RequeueAfter(Duration),
}

/// One reconcile: level-based, it gets the key and the current cached object, never the event
/// (SEMANTICS rule 12).
#[derive(Debug)]
pub struct Request<O> {
    /// The key being reconciled.
    pub key: ObjectKey,
    /// The object as cached now; `None` when it is gone.
    pub object: Option<Arc<O>>,
    /// How many times this key has been requeued for failure since its last success.
    pub requeues: u32,
    /// Why the key was queued since its last reconcile.
    pub causes: Arc<Taken>,
    /// The reconcile's span, when tracing is on: what the reconciler does is traced under it.
    pub trace: Option<opentelemetry::Context>,
}

/// Reconciles one key. Errors become rate-limited retries; they never stop the controller.
pub trait Reconciler: Send + Sync + 'static {
    /// The cached object type handed to [`reconcile`](Reconciler::reconcile).
    type Object: Send + Sync + 'static;
    /// What a failed reconcile reports; logged with its source chain, then retried.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Brings the world in line with `request.object` and says when to look again.
    fn reconcile(
        &self,
        request: Request<Self::Object>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// Finds the cached object for a key (an informer's store).
pub trait ObjectLookup<O>: Send + Sync + 'static {
    /// The object cached under `key`, if any.
    fn lookup(&self, key: &ObjectKey) -> Option<Arc<O>>;
}

impl<O, F> ObjectLookup<O> for F
where
    F: Fn(&ObjectKey) -> Option<Arc<O>> + Send + Sync + 'static,
{
    fn lookup(&self, key: &ObjectKey) -> Option<Arc<O>> {
        self(key)
    }
}
