//! Controller workers with a scripted native reconciler, on tokio's paused clock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::queue::{ItemExponential, RateLimitingQueue};

#[derive(Debug, thiserror::Error)]
#[error("scripted failure")]
struct Failure;

#[derive(Clone, Copy, Debug)]
enum Step {
    Return(Action),
    Fail,
    /// Takes this long, then returns the action.
    Slow(Duration, Action),
    /// Never returns.
    Hang,
}

#[derive(Clone, Debug, PartialEq)]
struct Call {
    key: String,
    object: Option<String>,
    requeues: u32,
    at: Duration,
    causes: Vec<&'static str>,
}

struct Scripted {
    start: Instant,
    steps: Mutex<HashMap<String, VecDeque<Step>>>,
    calls: Mutex<Vec<Call>>,
    finished: AtomicUsize,
    /// Keys whose reconcile ran to its end, in that order.
    ended: Mutex<Vec<String>>,
    running: Mutex<HashSet<String>>,
    max_running: AtomicUsize,
}

impl Scripted {
    fn new(steps: &[(&str, &[Step])]) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            steps: Mutex::new(
                steps
                    .iter()
                    .map(|(key, steps)| ((*key).to_owned(), steps.iter().copied().collect()))
                    .collect(),
            ),
            calls: Mutex::new(Vec::new()),
            finished: AtomicUsize::new(0),
            ended: Mutex::new(Vec::new()),
            running: Mutex::new(HashSet::new()),
            max_running: AtomicUsize::new(0),
        })
    }

    fn causes_for(&self, key: &str) -> Vec<Vec<&'static str>> {
        self.calls
            .lock()
            .iter()
            .filter(|call| call.key == key)
            .map(|call| call.causes.clone())
            .collect()
    }

    fn calls_for(&self, key: &str) -> Vec<(u32, Duration)> {
        self.calls
            .lock()
            .iter()
            .filter(|call| call.key == key)
            .map(|call| (call.requeues, call.at))
            .collect()
    }
}

impl Reconciler for Arc<Scripted> {
    type Object = String;
    type Error = Failure;

    async fn reconcile(&self, request: Request<String>) -> Result<Action, Failure> {
        let key = request.key.to_string();
        {
            let mut running = self.running.lock();
            assert!(
                running.insert(key.clone()),
                "{key} reconciled twice at once"
            );
            self.max_running.fetch_max(running.len(), Ordering::SeqCst);
        }
        // Cleared however the reconcile ends, an abort included.
        let _busy = Busy(&self.running, key.clone());
        self.calls.lock().push(Call {
            key: key.clone(),
            object: request.object.as_deref().cloned(),
            requeues: request.requeues,
            at: self.start.elapsed(),
            causes: request.causes.causes.iter().map(|c| c.why.name()).collect(),
        });
        let step = self
            .steps
            .lock()
            .get_mut(&key)
            .and_then(VecDeque::pop_front)
            .unwrap_or(Step::Return(Action::Done));
        let result = match step {
            Step::Return(action) => Ok(action),
            Step::Fail => Err(Failure),
            Step::Slow(took, action) => {
                tokio::time::sleep(took).await;
                Ok(action)
            }
            Step::Hang => std::future::pending().await,
        };
        self.finished.fetch_add(1, Ordering::SeqCst);
        self.ended.lock().push(key);
        result
    }
}

/// Marks a key as being reconciled until dropped.
struct Busy<'a>(&'a Mutex<HashSet<String>>, String);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn controller(
    reconciler: &Arc<Scripted>,
    objects: &[(&str, &str)],
    workers: usize,
) -> Arc<Controller<Arc<Scripted>>> {
    let objects: HashMap<String, Arc<String>> = objects
        .iter()
        .map(|(key, json)| ((*key).to_owned(), Arc::new((*json).to_owned())))
        .collect();
    let queue = RateLimitingQueue::new(ItemExponential::new(ms(5), Duration::from_secs(60)));
    let lookup = move |key: &ObjectKey| objects.get(&key.to_string()).cloned();
    Arc::new(Controller::new(
        "test",
        queue,
        Arc::clone(reconciler),
        lookup,
        workers,
    ))
}

struct Running {
    intake: CancellationToken,
    abort: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

fn run(controller: &Arc<Controller<Arc<Scripted>>>) -> Running {
    let (intake, abort) = (CancellationToken::new(), CancellationToken::new());
    let done = tokio::spawn({
        let (controller, intake, abort) = (Arc::clone(controller), intake.clone(), abort.clone());
        async move { controller.run(intake, abort).await }
    });
    Running {
        intake,
        abort,
        done,
    }
}

fn add(controller: &Controller<Arc<Scripted>>, key: &str) {
    controller.queue().add(ObjectKey::parse(key));
}

#[tokio::test(start_paused = true)]
async fn each_reconcile_is_told_why_its_key_was_queued() {
    let reconciler = Scripted::new(&[(
        "ns/a",
        &[
            Step::Fail,
            Step::Return(Action::Requeue),
            Step::Return(Action::RequeueAfter(Duration::from_secs(1))),
            Step::Return(Action::Done),
        ],
    )]);
    let controller = controller(&reconciler, &[], 1);
    let key = ObjectKey::parse("ns/a");
    controller.causes().note(&key, Cause::now(Why::Added));
    controller.causes().note(&key, Cause::now(Why::Modified));
    let running = run(&controller);
    add(&controller, "ns/a");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        reconciler.causes_for("ns/a"),
        [
            vec!["added", "modified"],
            vec!["retry"],
            vec!["requeue"],
            vec!["requeue-after"],
        ]
    );
    assert!(controller.causes().is_empty(), "nothing left behind");
    running.intake.cancel();
    running.done.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_aborted_reconcile_gives_its_causes_back_to_the_next() {
    let reconciler = Scripted::new(&[("ns/a", &[Step::Hang, Step::Return(Action::Done)])]);
    let controller = controller(&reconciler, &[], 1);
    let key = ObjectKey::parse("ns/a");
    controller.causes().note(&key, Cause::now(Why::Added));
    let running = run(&controller);
    add(&controller, "ns/a");
    tokio::time::sleep(ms(10)).await;
    controller.causes().note(&key, Cause::now(Why::Modified));
    add(&controller, "ns/a");
    running.intake.cancel();
    running.abort.cancel();
    running.done.await.unwrap();
    let running = run(&controller);
    tokio::time::sleep(ms(10)).await;
    assert_eq!(
        reconciler.causes_for("ns/a"),
        [vec!["added"], vec!["added", "modified"]]
    );
    running.intake.cancel();
    running.done.await.unwrap();
}

// Rule 11.
#[tokio::test(start_paused = true)]
async fn outcomes_map_onto_the_queue_as_rule_11_says() {
    let reconciler = Scripted::new(&[
        ("ns/done", &[Step::Return(Action::Done)]),
        (
            "ns/flaky",
            &[Step::Fail, Step::Fail, Step::Return(Action::Done)],
        ),
        (
            "ns/later",
            &[Step::Return(Action::RequeueAfter(Duration::from_secs(30)))],
        ),
        ("ns/again", &[Step::Return(Action::Requeue)]),
    ]);
    let controller = controller(&reconciler, &[], 2);
    let running = run(&controller);
    for key in ["ns/done", "ns/flaky", "ns/later", "ns/again"] {
        add(&controller, key);
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(reconciler.calls_for("ns/done"), [(0, ms(0))]);
    assert_eq!(
        reconciler.calls_for("ns/flaky"),
        [(0, ms(0)), (1, ms(5)), (2, ms(15))],
        "failures retry with exponential backoff and count requeues"
    );
    assert_eq!(
        reconciler.calls_for("ns/later"),
        [(0, ms(0)), (0, Duration::from_secs(30))]
    );
    assert_eq!(reconciler.calls_for("ns/again"), [(0, ms(0)), (1, ms(5))]);
    let queue = controller.queue();
    assert_eq!(
        queue.num_requeues(&ObjectKey::parse("ns/flaky")),
        0,
        "forgotten"
    );
    assert_eq!(
        (queue.len(), queue.waiting(), queue.processing()),
        (0, 0, 0)
    );
    running.intake.cancel();
    running.done.await.unwrap();
}

// Rule 12.
#[tokio::test(start_paused = true)]
async fn reconcile_gets_the_cached_object_or_none_when_it_is_gone() {
    let reconciler = Scripted::new(&[]);
    let controller = controller(&reconciler, &[("ns/present", r#"{"kind":"ConfigMap"}"#)], 1);
    let running = run(&controller);
    add(&controller, "ns/present");
    add(&controller, "ns/gone");
    tokio::time::sleep(ms(1)).await;
    let calls = reconciler.calls.lock().clone();
    let objects: Vec<_> = calls
        .iter()
        .map(|c| (c.key.as_str(), c.object.as_deref()))
        .collect();
    assert_eq!(
        objects,
        [
            ("ns/present", Some(r#"{"kind":"ConfigMap"}"#)),
            ("ns/gone", None)
        ]
    );
    running.intake.cancel();
    running.done.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn aborting_cancels_reconciles_in_progress_and_puts_their_keys_back() {
    let reconciler = Scripted::new(&[("ns/stuck", &[Step::Hang])]);
    let controller = controller(&reconciler, &[], 2);
    let running = run(&controller);
    add(&controller, "ns/stuck");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(controller.queue().processing(), 1);
    running.intake.cancel();
    running.abort.cancel();
    running.done.await.unwrap();
    let queue = controller.queue();
    assert_eq!(
        (queue.len(), queue.processing()),
        (1, 0),
        "the key is queued again"
    );
    assert_eq!(queue.try_get(), Some(Some(ObjectKey::parse("ns/stuck"))));
}

#[tokio::test(start_paused = true)]
async fn stopping_intake_lets_reconciles_in_progress_finish_and_takes_no_new_keys() {
    let slow = Step::Slow(Duration::from_secs(5), Action::Done);
    let reconciler = Scripted::new(&[("ns/slow", &[slow])]);
    let controller = controller(&reconciler, &[], 1);
    let running = run(&controller);
    add(&controller, "ns/slow");
    tokio::time::sleep(Duration::from_secs(1)).await;
    add(&controller, "ns/next");
    running.intake.cancel();
    running.done.await.unwrap();
    assert_eq!(reconciler.start.elapsed(), Duration::from_secs(5));
    assert_eq!(reconciler.finished.load(Ordering::SeqCst), 1);
    assert_eq!(reconciler.calls_for("ns/next"), []);
    assert_eq!(
        controller.queue().len(),
        1,
        "ns/next waits for the next run"
    );
}

#[tokio::test(start_paused = true)]
async fn workers_bound_concurrency_and_never_share_a_key() {
    let slow = Step::Slow(Duration::from_secs(1), Action::Done);
    let steps: Vec<(String, Vec<Step>)> = (0..12)
        .map(|i| (format!("ns/k{i}"), vec![slow; 3]))
        .collect();
    let borrowed: Vec<(&str, &[Step])> = steps
        .iter()
        .map(|(key, steps)| (key.as_str(), steps.as_slice()))
        .collect();
    let reconciler = Scripted::new(&borrowed);
    let controller = controller(&reconciler, &[], 3);
    let running = run(&controller);
    for round in 0..3 {
        for i in 0..12 {
            add(&controller, &format!("ns/k{i}"));
        }
        tokio::time::sleep(Duration::from_millis(300 + round)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(reconciler.max_running.load(Ordering::SeqCst), 3);
    for i in 0..12 {
        let calls = reconciler.calls_for(&format!("ns/k{i}"));
        assert!(
            (1..=3).contains(&calls.len()),
            "k{i} reconciled {} times",
            calls.len()
        );
    }
    running.intake.cancel();
    running.done.await.unwrap();
}

#[derive(Default)]
struct Counted {
    outcomes: Mutex<Vec<(Outcome, Duration)>>,
    active: Mutex<(i64, i64)>,
}

impl ReconcileMetrics for Counted {
    fn reconciled(&self, outcome: Outcome, took: Duration) {
        self.outcomes.lock().push((outcome, took));
    }
    fn active_workers(&self, delta: i64) {
        let mut active = self.active.lock();
        active.0 += delta;
        active.1 = active.1.max(active.0);
    }
}

#[tokio::test(start_paused = true)]
async fn metrics_see_each_outcome_its_duration_and_active_workers() {
    let reconciler = Scripted::new(&[
        ("ns/a", &[Step::Slow(ms(40), Action::Requeue), Step::Fail]),
        ("ns/b", &[Step::Return(Action::RequeueAfter(ms(1)))]),
    ]);
    let metrics = Arc::new(Counted::default());
    let queue = RateLimitingQueue::new(ItemExponential::new(ms(5), Duration::from_secs(60)));
    let controller = Arc::new(Controller::with_metrics(
        "test",
        queue,
        Arc::clone(&reconciler),
        |_: &ObjectKey| None,
        2,
        metrics.clone(),
    ));
    let running = run(&controller);
    add(&controller, "ns/a");
    add(&controller, "ns/b");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut outcomes = metrics.outcomes.lock().clone();
    outcomes.sort_by_key(|(outcome, took)| (outcome.label(), *took));
    assert_eq!(
        outcomes,
        [
            (Outcome::Error, Duration::ZERO),
            (Outcome::Requeue, ms(40)),
            (Outcome::RequeueAfter, Duration::ZERO),
            (Outcome::Success, Duration::ZERO),
            (Outcome::Success, Duration::ZERO),
        ]
    );
    assert_eq!(*metrics.active.lock(), (0, 2));
    running.intake.cancel();
    running.done.await.unwrap();
}

/// Sharded mode, as `crate::shard` drives the gate: the stable ring of this member alone.
fn stable_alone() -> crate::shard::Assignment {
    use crate::shard::{Membership, Observed, Step as Ring};
    let mut membership = Membership::new("a", Duration::from_secs(15));
    let lease = |ack: Option<crate::shard::ViewId>| Observed {
        member: "a".into(),
        resource_version: "1".to_owned(),
        ack,
    };
    let now = std::time::Instant::now();
    membership.observe(&[lease(None)], Some("1"), now);
    let ack = membership.ack().cloned();
    let Ring::Widen(assignment) = membership.observe(&[lease(ack)], Some("1"), now) else {
        panic!("the only member acknowledged the ring: it is stable");
    };
    assignment
}

#[tokio::test(start_paused = true)]
async fn keys_keep_their_places_across_lapses_so_none_starves_when_lapses_outpace_the_queue() {
    // 30 keys of 100 ms each on 2 workers: 1.5 s to drain, and a lapse every 0.7 s. Each lapse
    // aborts what runs and, once the ring is stable again, queues every owned key in the
    // cache's order, as the member task does.
    let keys: Vec<String> = (0..30).map(|i| format!("ns/k{i:02}")).collect();
    let slow = Step::Slow(ms(100), Action::Done);
    let steps: Vec<(&str, Vec<Step>)> = keys.iter().map(|k| (k.as_str(), vec![slow; 40])).collect();
    let borrowed: Vec<(&str, &[Step])> = steps.iter().map(|(k, s)| (*k, s.as_slice())).collect();
    let reconciler = Scripted::new(&borrowed);
    let assignment = stable_alone();
    let fence = crate::election::Fence::closed();
    let gate = crate::shard::Gate::new(crate::shard::Assignment::none(&"a".into()), fence.clone());
    let queue = RateLimitingQueue::new(ItemExponential::new(ms(5), Duration::from_secs(60)));
    let controller = Arc::new(
        Controller::new("p", queue, Arc::clone(&reconciler), |_: &ObjectKey| None, 2)
            .with_gate(Arc::clone(&gate), crate::shard::Placement::Keys),
    );
    let rejoin = || {
        fence.open_until(Instant::now() + Duration::from_secs(3600));
        gate.set(assignment.clone());
        for key in &keys {
            add(&controller, key);
        }
    };
    let running = run(&controller);
    rejoin();
    for _ in 0..12 {
        tokio::time::sleep(ms(500)).await;
        fence.close();
        let epoch = gate.revoke(crate::shard::Assignment::none(&"a".into()));
        gate.drained(epoch).await;
        // Renewed again, and rejoining: the fence is open before the next ring is stable.
        fence.open_until(Instant::now() + Duration::from_secs(3600));
        tokio::time::sleep(ms(200)).await;
        rejoin();
    }
    let ended: HashSet<String> = reconciler.ended.lock().iter().cloned().collect();
    let starved: Vec<&String> = keys.iter().filter(|k| !ended.contains(*k)).collect();
    assert!(
        starved.is_empty(),
        "keys never reconciled through 12 lapses: {starved:?}"
    );
    running.intake.cancel();
    running.done.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_revoked_by_a_lapse_runs_again_first_once_the_ring_is_stable() {
    let slow = Step::Slow(Duration::from_secs(1), Action::Done);
    let reconciler = Scripted::new(&[("ns/a", &[slow, slow]), ("ns/b", &[slow])]);
    let assignment = stable_alone();
    let fence = crate::election::Fence::closed();
    fence.open_until(Instant::now() + Duration::from_secs(3600));
    let gate = crate::shard::Gate::new(assignment.clone(), fence.clone());
    gate.set(assignment.clone());
    let queue = RateLimitingQueue::new(ItemExponential::new(ms(5), Duration::from_secs(60)));
    let controller = Arc::new(
        Controller::new("p", queue, Arc::clone(&reconciler), |_: &ObjectKey| None, 1)
            .with_gate(Arc::clone(&gate), crate::shard::Placement::Keys),
    );
    let running = run(&controller);
    add(&controller, "ns/a");
    add(&controller, "ns/b");
    tokio::time::sleep(ms(500)).await;
    let epoch = gate.revoke(crate::shard::Assignment::none(&"a".into()));
    gate.drained(epoch).await;
    tokio::time::sleep(ms(300)).await;
    gate.set(assignment);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let order: Vec<String> = reconciler
        .calls
        .lock()
        .iter()
        .map(|c| c.key.clone())
        .collect();
    assert_eq!(order, ["ns/a", "ns/a", "ns/b"], "the revoked key first");
    assert_eq!(*reconciler.ended.lock(), ["ns/a", "ns/b"]);
    running.intake.cancel();
    running.done.await.unwrap();
}
