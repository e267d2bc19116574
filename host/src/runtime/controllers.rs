//! The controllers a runtime dispatches, added and removed while it runs: each runs in its own
//! task during a term of leadership, with intake and abort tokens that are children of the
//! term's, so a term's end stops them all and a removal stops one.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::controller::Unhandled;
use crate::informer::{Scope, Subscription};
use crate::shard::Assignment;
use crate::telemetry::{ScrapeHook, ShardMetrics};

/// Sharded mode: queues the cached keys `now` admits and `before` did not; returns how many
/// keys `now` admits.
pub(super) type Rescan = Box<dyn Fn(&Assignment, &Assignment) -> usize + Send + Sync>;

/// A boxed future of a controller's run.
pub(super) type Work<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A controller of any reconciler type.
pub(super) trait Runnable: Send + Sync + 'static {
    fn run(&self, intake: CancellationToken, abort: CancellationToken) -> Work<'_>;
}

/// The tokens of one term: `intake` stops taking keys, `abort` cancels reconciles in progress.
#[derive(Clone, Debug, Default)]
pub(super) struct Term {
    pub(super) intake: CancellationToken,
    pub(super) abort: CancellationToken,
}

/// A registered controller: what it runs and what keeps its inputs alive.
pub(super) struct Slot {
    pub(super) runnable: Arc<dyn Runnable>,
    pub(super) subscriptions: Vec<Subscription>,
    pub(super) scopes: Vec<Scope>,
    /// The queue's and the unhandled changes' scrape hooks.
    pub(super) scrape: Vec<ScrapeHook>,
    rescan: Rescan,
    /// The changes waiting for this controller's reconciles.
    unhandled: Arc<Unhandled>,
    running: Option<Running>,
}

impl Slot {
    pub(super) fn new(
        runnable: Arc<dyn Runnable>,
        subscriptions: Vec<Subscription>,
        scopes: Vec<Scope>,
        scrape: Vec<ScrapeHook>,
        rescan: Rescan,
        unhandled: Arc<Unhandled>,
    ) -> Self {
        Self {
            runnable,
            subscriptions,
            scopes,
            scrape,
            rescan,
            unhandled,
            running: None,
        }
    }
}

struct Running {
    intake: CancellationToken,
    abort: CancellationToken,
    task: JoinHandle<()>,
}

/// Every controller, by name, and the current term.
#[derive(Default)]
pub(super) struct Controllers {
    slots: Mutex<BTreeMap<String, Slot>>,
    term: Mutex<Option<Term>>,
}

impl Controllers {
    /// How many controllers are registered.
    pub(super) fn len(&self) -> usize {
        self.slots.lock().len()
    }

    /// Whether `name` is registered.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.slots.lock().contains_key(name)
    }

    /// Registers `slot` as `name`, starting it at once if a term is on. Returns the slot back
    /// if the name is taken.
    pub(super) fn insert(&self, name: &str, mut slot: Slot) -> Result<(), Box<Slot>> {
        let mut slots = self.slots.lock();
        if slots.contains_key(name) {
            return Err(Box::new(slot));
        }
        if let Some(term) = self.term.lock().as_ref()
            && !term.intake.is_cancelled()
        {
            slot.running = Some(start(&slot.runnable, term));
        }
        slots.insert(name.to_owned(), slot);
        Ok(())
    }

    /// Sharded mode: every controller reports how many cached keys `now` gives it (and queues
    /// those `before` did not).
    pub(super) fn rescan(&self, before: &Assignment, now: &Assignment, metrics: &ShardMetrics) {
        let slots = self.slots.lock();
        for (name, slot) in slots.iter() {
            metrics.keys_owned(name, (slot.rescan)(before, now));
        }
    }

    /// Sharded mode: the assignment changed from `before` to `now`; every controller queues the
    /// cached keys it gained.
    pub(super) fn requeue_gained(&self, before: &Assignment, now: &Assignment) {
        let slots = self.slots.lock();
        for slot in slots.values() {
            slot.unhandled.restart();
            (slot.rescan)(before, now);
        }
    }

    /// Starts every controller in `term`.
    pub(super) fn begin_term(&self, term: Term) {
        let mut slots = self.slots.lock();
        for slot in slots.values_mut() {
            slot.unhandled.restart();
            slot.running = Some(start(&slot.runnable, &term));
        }
        *self.term.lock() = Some(term);
    }

    /// Ends the term (its intake must be cancelled already) and hands over the tasks to wait
    /// for.
    pub(super) fn end_term(&self) -> Vec<JoinHandle<()>> {
        let mut slots = self.slots.lock();
        *self.term.lock() = None;
        slots
            .values_mut()
            .filter_map(|slot| slot.running.take().map(|running| running.task))
            .collect()
    }

    /// Unregisters `name`: its subscriptions are dropped (no more keys), its intake stops, its
    /// reconciles in progress get `drain` to finish before they are cancelled. Returns the
    /// slot's scopes and scrape hook once it has stopped, or `None` if there was no such
    /// controller.
    pub(super) async fn remove(&self, name: &str, drain: Duration) -> Option<Slot> {
        let mut slot = self.slots.lock().remove(name)?;
        slot.subscriptions.clear();
        if let Some(running) = slot.running.take() {
            running.intake.cancel();
            let mut task = running.task;
            if tokio::time::timeout(drain, &mut task).await.is_err() {
                tracing::warn!(controller = name, timeout = ?drain,
                    "drain timeout passed; cancelling the removed controller's reconciles");
                running.abort.cancel();
                let _ = task.await;
            }
        }
        Some(slot)
    }
}

fn start(runnable: &Arc<dyn Runnable>, term: &Term) -> Running {
    let intake = term.intake.child_token();
    let abort = term.abort.child_token();
    let runnable = Arc::clone(runnable);
    let (run_intake, run_abort) = (intake.clone(), abort.clone());
    let task = tokio::spawn(async move { runnable.run(run_intake, run_abort).await });
    Running {
        intake,
        abort,
        task,
    }
}
