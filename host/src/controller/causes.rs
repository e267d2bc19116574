//! Why a key is queued: every add notes its cause beside the key, and a reconcile takes the
//! causes gathered since the last one took its key.
//!
//! # Rules
//! - A cause is noted when its key is added, by whoever adds it: an informer's handler (the
//!   watch event: kind, event type, the object and its resourceVersion), the controller itself
//!   (a requeue, a requeue-after, a retry after an error), sharded mode (a key gained in a
//!   handover), a module swap, a plugin's start or rebuild, a recording request.
//! - A worker takes a key's causes when it takes the key from the queue; a key handed back
//!   without a reconcile (fence closed, reconcile aborted) gets its causes back.
//! - A cause of a delayed add (a requeue, a requeue-after, a retry) is due when the delay ends:
//!   a reconcile that starts before then, for another cause, leaves it for the reconcile the
//!   delayed add brings. As the queue keeps only the earliest delayed add of a key, a key keeps
//!   only its earliest cause not yet due.
//! - A key keeps its first [`KEPT`] − 1 causes and its latest one; the rest are counted, not
//!   kept. A key dropped from the queue without a reconcile (sharded mode: not this replica's)
//!   drops its causes.
//! - A cause may carry the span context of a trace that saw it happen; a traced reconcile links
//!   to it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::key::ObjectKey;

/// How many causes a key keeps between reconciles.
pub const KEPT: usize = 8;

/// What queued a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// A watch event: the object was added (or first listed).
    Added,
    /// A watch event: the object changed.
    Modified,
    /// A watch event: the object was deleted.
    Deleted,
    /// The informer's periodic resync (nothing changed).
    Resync,
    /// The last reconcile asked to run again (rate-limited).
    Requeue,
    /// The last reconcile asked to run again after this delay.
    RequeueAfter(Duration),
    /// The last reconcile failed: a retry with backoff.
    Retry(String),
    /// Sharded mode: this replica gained the key in a handover.
    Handover,
    /// The plugin's module was swapped: every key runs on the new one.
    ModuleSwap(String),
    /// The plugin started: every cached key runs once.
    Started,
    /// The plugin's controller was rebuilt (its manifest changed); its queued keys carried over.
    Rebuilt,
    /// A recording of the key's next reconcile was requested.
    Requested,
}

impl Why {
    /// A short name: `added`, `modified`, `deleted`, `resync`, `requeue`, `requeue-after`,
    /// `retry`, `handover`, `module-swap`, `started`, `rebuilt`, `requested`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Resync => "resync",
            Self::Requeue => "requeue",
            Self::RequeueAfter(_) => "requeue-after",
            Self::Retry(_) => "retry",
            Self::Handover => "handover",
            Self::ModuleSwap(_) => "module-swap",
            Self::Started => "started",
            Self::Rebuilt => "rebuilt",
            Self::Requested => "requested",
        }
    }
}

/// The object a watch event was about (an owned object's event queues its owner's key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// Its kind.
    pub kind: Arc<str>,
    /// `namespace/name`, or `name` when cluster-scoped.
    pub key: ObjectKey,
    /// The resourceVersion the event carried.
    pub resource_version: String,
}

/// One cause of a key being queued.
#[derive(Clone, Debug)]
pub struct Cause {
    /// What it was.
    pub why: Why,
    /// When it was noted.
    pub at: SystemTime,
    /// For a watch event: the object it was about.
    pub origin: Option<Origin>,
    /// The span that saw it, when tracing is on.
    pub link: Option<opentelemetry::trace::SpanContext>,
    /// For a delayed add: when the queue gives the key back.
    pub due: Option<Instant>,
}

impl Cause {
    /// A cause noted now, with no object and no span.
    #[must_use]
    pub fn now(why: Why) -> Self {
        Self {
            why,
            at: SystemTime::now(),
            origin: None,
            link: None,
            due: None,
        }
    }

    /// A cause noted now of an add that takes effect after `delay`.
    #[must_use]
    pub fn after(why: Why, delay: Duration) -> Self {
        Self {
            due: Some(Instant::now() + delay),
            ..Self::now(why)
        }
    }

    fn is_due(&self, now: Instant) -> bool {
        self.due.is_none_or(|due| due <= now)
    }

    /// This cause, about `origin`.
    #[must_use]
    pub fn about(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }
}

/// The causes a reconcile took with its key.
#[derive(Clone, Debug, Default)]
pub struct Taken {
    /// The causes kept, oldest first.
    pub causes: Vec<Cause>,
    /// How many more were noted and not kept.
    pub dropped: u32,
}

/// The causes of one controller's queued keys (see the module docs).
#[derive(Debug, Default)]
pub struct Causes {
    pending: Mutex<HashMap<ObjectKey, Taken>>,
}

impl Causes {
    /// Notes `cause` for `key`, which is being added (now, or after a delay).
    pub fn note(&self, key: &ObjectKey, cause: Cause) {
        let mut pending = self.pending.lock();
        let taken = match pending.get_mut(key) {
            Some(taken) => taken,
            None => pending.entry(key.clone()).or_default(),
        };
        if let Some(due) = cause.due {
            let now = Instant::now();
            let waiting = taken.causes.iter().position(|kept| !kept.is_due(now));
            if let Some(at) = waiting {
                // The queue keeps the earlier of two delayed adds.
                if taken.causes[at].due.is_some_and(|kept| kept <= due) {
                    return;
                }
                taken.causes.remove(at);
            }
        }
        push(taken, cause);
    }

    /// Takes `key`'s causes that are due (a reconcile of it starts); one not yet due stays.
    #[must_use]
    pub fn take(&self, key: &ObjectKey) -> Taken {
        let mut pending = self.pending.lock();
        let Some(mut taken) = pending.remove(key) else {
            return Taken::default();
        };
        let now = Instant::now();
        if let Some(at) = taken.causes.iter().position(|cause| !cause.is_due(now)) {
            let waiting = taken.causes.remove(at);
            pending.insert(
                key.clone(),
                Taken {
                    causes: vec![waiting],
                    dropped: 0,
                },
            );
        }
        if pending.is_empty() && pending.capacity() > 1024 {
            pending.shrink_to(1024);
        }
        taken
    }

    /// Gives `taken` back to `key` (handed back without a reconcile), before any noted since.
    pub fn restore(&self, key: &ObjectKey, taken: Taken) {
        if taken.causes.is_empty() && taken.dropped == 0 {
            return;
        }
        let mut pending = self.pending.lock();
        let since = pending.remove(key).unwrap_or_default();
        let mut merged = taken;
        merged.dropped += since.dropped;
        for cause in since.causes {
            push(&mut merged, cause);
        }
        pending.insert(key.clone(), merged);
    }

    /// Forgets `key`'s causes (dropped from the queue without a reconcile).
    pub fn forget(&self, key: &ObjectKey) {
        self.pending.lock().remove(key);
    }

    /// How many keys have causes noted.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pending.lock().len()
    }

    /// Whether no key has causes noted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Adds `cause` to `taken`: kept while there is room, else in the last place.
fn push(taken: &mut Taken, cause: Cause) {
    if taken.causes.len() < KEPT {
        taken.causes.push(cause);
    } else {
        taken.dropped += 1;
        taken.causes[KEPT - 1] = cause;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::in_namespace(Some("ns"), name)
    }

    fn names(taken: &Taken) -> Vec<&'static str> {
        taken.causes.iter().map(|cause| cause.why.name()).collect()
    }

    #[test]
    fn a_reconcile_takes_the_causes_noted_since_the_last_one() {
        let causes = Causes::default();
        causes.note(&key("a"), Cause::now(Why::Added));
        causes.note(&key("a"), Cause::now(Why::Modified));
        causes.note(&key("b"), Cause::now(Why::Resync));
        assert_eq!(names(&causes.take(&key("a"))), ["added", "modified"]);
        assert!(causes.take(&key("a")).causes.is_empty());
        causes.note(&key("a"), Cause::now(Why::Requeue));
        assert_eq!(names(&causes.take(&key("a"))), ["requeue"]);
        assert_eq!(names(&causes.take(&key("b"))), ["resync"]);
        assert!(causes.is_empty());
    }

    #[test]
    fn past_the_kept_number_the_first_and_the_latest_are_kept_and_the_rest_counted() {
        let causes = Causes::default();
        causes.note(&key("a"), Cause::now(Why::Added));
        for _ in 0..20 {
            causes.note(&key("a"), Cause::now(Why::Modified));
        }
        causes.note(&key("a"), Cause::now(Why::Deleted));
        let taken = causes.take(&key("a"));
        assert_eq!(taken.causes.len(), KEPT);
        assert_eq!(taken.causes[0].why, Why::Added);
        assert_eq!(taken.causes[KEPT - 1].why, Why::Deleted);
        assert_eq!(taken.dropped, 22 - u32::try_from(KEPT).unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_cause_waits_for_its_delay_and_only_the_earliest_waits() {
        let causes = Causes::default();
        let later = |ms| {
            Cause::after(
                Why::RequeueAfter(Duration::from_millis(ms)),
                Duration::from_millis(ms),
            )
        };
        causes.note(&key("a"), Cause::now(Why::Added));
        causes.note(&key("a"), later(1000));
        causes.note(&key("a"), later(5000));
        assert_eq!(
            names(&causes.take(&key("a"))),
            ["added"],
            "the requeue is not due"
        );
        causes.note(&key("a"), later(500));
        tokio::time::advance(Duration::from_millis(600)).await;
        let taken = causes.take(&key("a"));
        assert_eq!(names(&taken), ["requeue-after"]);
        assert_eq!(
            taken.causes[0].why,
            Why::RequeueAfter(Duration::from_millis(500))
        );
        assert!(causes.is_empty(), "the later delays were superseded");
    }

    #[test]
    fn causes_handed_back_come_before_those_noted_meanwhile() {
        let causes = Causes::default();
        causes.note(&key("a"), Cause::now(Why::Added));
        let taken = causes.take(&key("a"));
        causes.note(&key("a"), Cause::now(Why::Modified));
        causes.restore(&key("a"), taken);
        assert_eq!(names(&causes.take(&key("a"))), ["added", "modified"]);
        causes.note(&key("b"), Cause::now(Why::Handover));
        causes.forget(&key("b"));
        assert!(causes.is_empty());
    }
}
