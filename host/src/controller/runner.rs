//! A controller: a rate-limited workqueue, the workers that reconcile its keys, and the hooks
//! through which it reports its reconciles (controller-runtime's metrics).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::causes::{Cause, Causes, Why};
use super::key::ObjectKey;
use super::reconciler::{Action, ObjectLookup, Reconciler, Request};
use super::unhandled::Unhandled;
use crate::election::Fence;
use crate::queue::{Completion, RateLimitingQueue};
use crate::shard::{Admission, Gate, Placement, Ticket};

/// Sharded mode: how often a worker holding a key the gate says to wait for asks again.
const GATE_RETRY: Duration = Duration::from_millis(100);

/// How a reconcile ended, as controller-runtime labels it in `controller_runtime_reconcile_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `result="success"`.
    Success,
    /// `result="requeue"`.
    Requeue,
    /// `result="requeue_after"`.
    RequeueAfter,
    /// `result="error"`.
    Error,
}

impl Outcome {
    /// The `result` label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
        }
    }
}

struct Shared<R: Reconciler> {
    name: Arc<str>,
    queue: RateLimitingQueue<ObjectKey>,
    reconciler: R,
    lookup: Box<dyn ObjectLookup<R::Object>>,
    metrics: Arc<dyn ReconcileMetrics>,
    fence: Fence,
    /// Sharded mode: which keys are this replica's.
    gate: Option<(Arc<Gate>, Placement)>,
    /// Told of every reconcile that starts.
    unhandled: Option<Arc<Unhandled>>,
    /// Why each queued key is queued.
    causes: Arc<Causes>,
}

/// Reconciles the keys of one queue with a fixed number of workers.
///
/// # Guarantees
/// - A key is never reconciled by two workers at once, and at most `workers` reconciles run.
/// - Outcomes map onto the queue as SEMANTICS rule 11 says; a failure never stops the
///   controller.
/// - A reconcile aborted by [`run`](Controller::run)'s `abort` token loses nothing: its key goes
///   back into the queue.
pub struct Controller<R: Reconciler> {
    shared: Arc<Shared<R>>,
    workers: usize,
}

impl<R: Reconciler> std::fmt::Debug for Controller<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.shared.name)
            .field("workers", &self.workers)
            .field("queue", &self.shared.queue)
            .finish_non_exhaustive()
    }
}

impl<R: Reconciler> Controller<R> {
    /// A controller named `name` (used in logs and metrics) reconciling the keys of `queue`
    /// with `reconciler`, objects looked up in `lookup`, with `workers` workers (at least one).
    pub fn new(
        name: &str,
        queue: RateLimitingQueue<ObjectKey>,
        reconciler: R,
        lookup: impl ObjectLookup<R::Object>,
        workers: usize,
    ) -> Self {
        Self::with_metrics(
            name,
            queue,
            reconciler,
            lookup,
            workers,
            Arc::new(NoReconcileMetrics),
        )
    }

    /// [`new`](Controller::new), reporting to `metrics`.
    pub fn with_metrics(
        name: &str,
        queue: RateLimitingQueue<ObjectKey>,
        reconciler: R,
        lookup: impl ObjectLookup<R::Object>,
        workers: usize,
        metrics: Arc<dyn ReconcileMetrics>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                name: name.into(),
                queue,
                reconciler,
                lookup: Box::new(lookup),
                metrics,
                fence: Fence::always_open(),
                gate: None,
                unhandled: None,
                causes: Arc::default(),
            }),
            workers: workers.max(1),
        }
    }

    /// Dispatches only while `fence` is open (default: always): a key taken while it is closed
    /// goes back to the queue, and the worker waits for its intake to stop.
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.fence = fence;
        }
        self
    }

    /// Sharded mode: dispatches only the keys `gate` admits (it checks the fence too); the
    /// others are dropped when taken, for the replica that owns them has them queued.
    #[must_use]
    pub fn with_gate(mut self, gate: Arc<Gate>, placement: Placement) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.gate = Some((gate, placement));
        }
        self
    }

    /// Tells `unhandled` of every reconcile that starts (see [`Unhandled`]).
    #[must_use]
    pub fn with_unhandled(mut self, unhandled: Arc<Unhandled>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.unhandled = Some(unhandled);
        }
        self
    }

    /// Notes the causes of its keys in `causes` (shared with whoever adds keys to its queue),
    /// and hands each reconcile those of its key.
    #[must_use]
    pub fn with_causes(mut self, causes: Arc<Causes>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.causes = causes;
        }
        self
    }

    /// Why its queued keys are queued.
    #[must_use]
    pub fn causes(&self) -> &Arc<Causes> {
        &self.shared.causes
    }

    /// The queue informers feed.
    #[must_use]
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.shared.queue
    }

    /// Runs the workers until `intake` is cancelled (no new keys are taken; reconciles in
    /// progress finish) or the queue shuts down. Cancelling `abort` also cancels reconciles in
    /// progress and puts their keys back. Returns when every worker has stopped.
    pub async fn run(&self, intake: CancellationToken, abort: CancellationToken) {
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            let shared = Arc::clone(&self.shared);
            workers.spawn(worker(shared, intake.clone(), abort.clone()));
        }
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined
                && error.is_panic()
            {
                tracing::error!(controller = %self.shared.name, "a worker panicked");
            }
        }
    }
}

async fn worker<R: Reconciler>(
    shared: Arc<Shared<R>>,
    intake: CancellationToken,
    abort: CancellationToken,
) {
    let queue = &shared.queue;
    // A key whose reconcile a lapse revoked: dispatched again first (see `admit`).
    let mut held: Option<ObjectKey> = None;
    loop {
        let key = match held.take() {
            Some(key) if intake.is_cancelled() => {
                queue.add(key.clone());
                queue.done(&key);
                return;
            }
            Some(key) => key,
            None => tokio::select! {
                biased;
                () = intake.cancelled() => return,
                key = queue.get() => match key {
                    Some(key) => key,
                    None => return,
                },
            },
        };
        let ticket = match &shared.gate {
            Some((gate, placement)) => {
                match admit(&shared, gate, *placement, &key, &intake).await {
                    Some(ticket) => Some(ticket),
                    None => continue,
                }
            }
            None => None,
        };
        if ticket.is_none() && !shared.fence.is_open() {
            // The lease lapsed by this replica's clock: hand the key back and wait for the
            // term to end (the elector is about to notice).
            queue.add(key.clone());
            queue.done(&key);
            tracing::debug!(controller = %shared.name, %key, "lease lapsed; key handed back");
            intake.cancelled().await;
            return;
        }
        let causes = Arc::new(shared.causes.take(&key));
        let requeues = queue.num_requeues(&key);
        let trace = super::span::start(&shared.name, &key, requeues, &causes);
        let request = Request {
            object: shared.lookup.lookup(&key),
            requeues,
            key: key.clone(),
            causes: Arc::clone(&causes),
            trace: trace.clone(),
        };
        if let Some(unhandled) = &shared.unhandled {
            unhandled.started(&key);
        }
        let span = tracing::info_span!("reconcile", controller = %shared.name, key = %key);
        shared.metrics.active_workers(1);
        let started = Instant::now();
        let revoked = async {
            match &ticket {
                Some(ticket) => ticket.revoked().cancelled().await,
                None => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            biased;
            () = abort.cancelled() => None,
            () = revoked => None,
            result = shared.reconciler.reconcile(request).instrument(span.clone()) => Some(result),
        };
        let elapsed = started.elapsed();
        shared.metrics.active_workers(-1);
        drop(ticket);
        let Some(result) = result else {
            super::span::aborted(trace.as_ref());
            shared.causes.restore(&key, Arc::unwrap_or_clone(causes));
            if abort.is_cancelled() {
                // Aborted mid-reconcile: hand the key back so the next run reconciles it.
                queue.add(key.clone());
                queue.done(&key);
                return;
            }
            // Revoked by a lapse: kept in hand and dispatched again first once the gate admits
            // it. Put back behind every key queued, the keys whose turn comes just before each
            // lapse would be revoked again and again when lapses come often.
            held = Some(key);
            continue;
        };
        let (completion, outcome, again) = match result {
            Ok(Action::Done) => (Completion::Done, Outcome::Success, None),
            Ok(Action::Requeue) => (Completion::Requeue, Outcome::Requeue, Some(Why::Requeue)),
            Ok(Action::RequeueAfter(delay)) => (
                Completion::RequeueAfter(delay),
                Outcome::RequeueAfter,
                Some(Why::RequeueAfter(delay)),
            ),
            Err(error) => {
                tracing::warn!(parent: &span, error = &error as &dyn std::error::Error,
                    "reconcile failed; retrying with backoff");
                let why = Why::Retry(retry_reason(&error));
                (Completion::Failed, Outcome::Error, Some(why))
            }
        };
        if outcome != Outcome::Error {
            tracing::debug!(parent: &span, result = outcome.label(), took = ?elapsed, "reconciled");
        }
        shared.metrics.reconciled(outcome, elapsed);
        let link = super::span::end(trace.as_ref(), outcome.label(), again.as_ref());
        // The cause of the key's next run, due when the queue gives the key back.
        let causes = &shared.causes;
        queue.complete_then(key.clone(), completion, |delay| {
            if let Some(why) = again {
                let mut cause = Cause::after(why, delay);
                cause.link = link;
                causes.note(&key, cause);
            }
        });
    }
}

/// Sharded mode: a ticket for `key` once the gate admits it, or `None` when the key is
/// another's (dropped: its owner has it queued, or queues it from its cache when it takes it)
/// or intake stopped while it waited (handed back to the queue).
///
/// While the gate says wait (the fence is closed, or no ring is stable) the worker keeps the key
/// in hand instead of putting it back: the keys queued behind it keep their places. A lapse
/// queues every key the replica owns again, in the cache's order, when the next ring is stable;
/// keys put back at each lapse would lose their places to that order, and when lapses come
/// faster than the queue drains the same keys would be reconciled after every lapse and the
/// last ones never.
async fn admit<R: Reconciler>(
    shared: &Shared<R>,
    gate: &Arc<Gate>,
    placement: Placement,
    key: &ObjectKey,
    intake: &CancellationToken,
) -> Option<Ticket> {
    let queue = &shared.queue;
    loop {
        match gate.admit(&shared.name, placement, key.as_str()) {
            Admission::Admitted(ticket) => return Some(ticket),
            Admission::NotMine => {
                shared.causes.forget(key);
                queue.forget(key);
                queue.done(key);
                return None;
            }
            Admission::Wait => {
                tokio::select! {
                    biased;
                    () = intake.cancelled() => {
                        queue.add(key.clone());
                        queue.done(key);
                        return None;
                    }
                    () = tokio::time::sleep(GATE_RETRY) => {}
                }
            }
        }
    }
}

/// The longest error text a retry's cause keeps.
const RETRY_REASON_MAX: usize = 512;

/// What a failed reconcile's retry says of the failure: its error chain, cut to
/// [`RETRY_REASON_MAX`] bytes.
fn retry_reason(error: &dyn std::error::Error) -> String {
    let mut text = crate::error_chain(error);
    if text.len() > RETRY_REASON_MAX {
        let mut end = RETRY_REASON_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Hooks for controller-runtime's reconcile metrics; every method has a no-op default.
pub trait ReconcileMetrics: Send + Sync + 'static {
    /// `controller_runtime_reconcile_total{result}`, `controller_runtime_reconcile_errors_total`
    /// and `controller_runtime_reconcile_time_seconds`: one reconcile ended.
    fn reconciled(&self, outcome: Outcome, took: Duration) {
        let _ = (outcome, took);
    }
    /// `controller_runtime_active_workers`: a worker started (+1) or finished (−1) a reconcile.
    fn active_workers(&self, delta: i64) {
        let _ = delta;
    }
}

/// Reconcile metrics that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReconcileMetrics;

impl ReconcileMetrics for NoReconcileMetrics {}
