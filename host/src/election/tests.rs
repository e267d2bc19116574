//! Leader election rules 18–22 on tokio's paused clock, with an in-memory Lease.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::memory::{MemoryLease, SharedLease};
use super::*;

const LEASE: Duration = Duration::from_secs(15);
const RENEW: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);
/// The longest jittered acquire retry: `RETRY * (1 + 1.2)`.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(4_400);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

struct Replica {
    leadership: watch::Receiver<Leadership>,
    shutdown: CancellationToken,
    lock: MemoryLease,
    run: JoinHandle<Result<(), ElectionError>>,
}

fn start(lease: &SharedLease, id: &str) -> Replica {
    start_with(lease, id, true)
}

fn start_with(lease: &SharedLease, id: &str, campaign_after_loss: bool) -> Replica {
    let lock = lease.handle();
    let config = ElectionConfig {
        identity: id.to_owned(),
        ..ElectionConfig::default()
    };
    let elector = LeaderElector::new(lock.clone(), config)
        .expect("valid config")
        .campaign_after_loss(campaign_after_loss);
    let leadership = elector.subscribe();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(elector.run(shutdown.clone()));
    Replica {
        leadership,
        shutdown,
        lock,
        run,
    }
}

impl Replica {
    /// Waits (bounded, in virtual time) until this replica leads; returns its term.
    async fn leads_within(&mut self, limit: Duration) -> CancellationToken {
        let wait = self.leadership.wait_for(Leadership::is_leading);
        let state = tokio::time::timeout(limit, wait)
            .await
            .expect("did not lead in time")
            .expect("elector alive");
        match &*state {
            Leadership::Leading { term } => term.clone(),
            Leadership::Following { .. } => unreachable!(),
        }
    }

    fn is_leading(&self) -> bool {
        self.leadership.borrow().is_leading()
    }

    fn observed_leader(&self) -> Option<String> {
        match &*self.leadership.borrow() {
            Leadership::Following { leader } => leader.clone(),
            Leadership::Leading { .. } => None,
        }
    }
}

fn held_by(holder: &str, renewed: Timestamp, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.to_owned()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(MicroTime(renewed)),
        renew_time: Some(MicroTime(renewed)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// One term of leadership: who, from when, until when (`None` while it lasts).
type Term = (String, Instant, Option<Instant>);

/// Records every term of every replica, independently of the electors' own bookkeeping.
#[derive(Clone, Default)]
struct Terms(Arc<Mutex<Vec<Term>>>);

impl Terms {
    fn watch(&self, id: &str, replica: &Replica) {
        let (terms, id, mut leadership) = (self.clone(), id.to_owned(), replica.leadership.clone());
        tokio::spawn(async move {
            loop {
                let term = match &*leadership.borrow_and_update() {
                    Leadership::Leading { term } => Some(term.clone()),
                    Leadership::Following { .. } => None,
                };
                if let Some(term) = term {
                    let index = {
                        let mut all = terms.0.lock();
                        all.push((id.clone(), Instant::now(), None));
                        all.len() - 1
                    };
                    term.cancelled().await;
                    terms.0.lock()[index].2 = Some(Instant::now());
                }
                if leadership.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Asserts that no two terms overlapped; returns how many terms there were.
    fn assert_disjoint(&self) -> usize {
        let mut all = self.0.lock().clone();
        all.sort_by_key(|(_, start, _)| *start);
        for pair in all.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let a_end = a.2.unwrap_or_else(Instant::now);
            assert!(
                a_end <= b.1,
                "{} led until {:?} but {} started leading at {:?}",
                a.0,
                a_end,
                b.0,
                b.1
            );
        }
        all.len()
    }
}

// Rule 19a.
#[tokio::test(start_paused = true)]
async fn an_absent_lease_is_created_with_this_replica_as_holder() {
    let lease = SharedLease::default();
    let started = Instant::now();
    let mut a = start(&lease, "a");
    a.leads_within(secs(1)).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    let record = lease.record().expect("created");
    assert_eq!(record.holder_identity.as_deref(), Some("a"));
    assert_eq!(record.lease_duration_seconds, Some(15));
    assert_eq!(record.lease_transitions, Some(0));
    assert_eq!(record.acquire_time, record.renew_time);
}

// Rule 19d.
#[tokio::test(start_paused = true)]
async fn renewals_keep_the_acquire_time_and_transition_count() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    a.leads_within(secs(1)).await;
    let acquired = lease.record().unwrap();
    tokio::time::sleep(secs(7)).await; // renewals at 2, 4 and 6 s
    assert_eq!(lease.writes(), 4, "one create and three renewals");
    let renewed = lease.record().unwrap();
    assert_eq!(renewed.acquire_time, acquired.acquire_time);
    assert_eq!(renewed.lease_transitions, Some(0));
    assert_eq!(renewed.holder_identity.as_deref(), Some("a"));
    assert!(a.is_leading());
}

// Rules 19b, 19c, 19d.
#[tokio::test(start_paused = true)]
async fn a_follower_waits_the_lease_duration_from_its_own_observation_whatever_the_remote_times() {
    for remote_renewal in [Timestamp::UNIX_EPOCH, Timestamp::MAX] {
        let lease = SharedLease::default();
        lease.overwrite(held_by("other", remote_renewal, 3));
        let started = Instant::now();
        let mut b = start(&lease, "b");
        tokio::time::sleep(secs(1)).await;
        assert_eq!(b.observed_leader().as_deref(), Some("other"));
        b.leads_within(LEASE + MAX_RETRY_WAIT).await;
        let waited = started.elapsed();
        assert!(waited >= LEASE, "took over after {waited:?}");
        let record = lease.record().unwrap();
        assert_eq!(record.holder_identity.as_deref(), Some("b"));
        assert_eq!(
            record.lease_transitions,
            Some(4),
            "takeover counts a transition"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_record_that_keeps_changing_is_never_taken_over() {
    let lease = SharedLease::default();
    lease.overwrite(held_by("other", Timestamp::UNIX_EPOCH, 0));
    let mut b = start(&lease, "b");
    for second in 1..=12 {
        tokio::time::sleep(secs(5)).await;
        assert!(!b.is_leading(), "took a live lease at {second}");
        lease.overwrite(held_by("other", Timestamp::from_second(second).unwrap(), 0));
    }
    let last_change = Instant::now();
    // Seen at b's next attempt (one jittered retry), expired a lease later, taken at the next.
    b.leads_within(MAX_RETRY_WAIT + LEASE + MAX_RETRY_WAIT)
        .await;
    assert!(last_change.elapsed() >= LEASE);
}

// Rule 19e.
#[tokio::test(start_paused = true)]
async fn simultaneous_candidates_elect_exactly_one_leader() {
    let lease = SharedLease::default();
    let terms = Terms::default();
    let replicas: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let replica = start(&lease, id);
            terms.watch(id, &replica);
            replica
        })
        .collect();
    tokio::time::sleep(secs(60)).await;
    let leaders: Vec<_> = replicas.iter().filter(|r| r.is_leading()).collect();
    assert_eq!(leaders.len(), 1);
    assert_eq!(terms.assert_disjoint(), 1, "one term, never interrupted");
}

// Rules 20 and 22.
#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_steps_down_within_the_renew_deadline() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    let term = a.leads_within(secs(1)).await;
    let last_renewal = Instant::now();
    a.lock.fail_next(usize::MAX);
    tokio::time::timeout(LEASE, term.cancelled())
        .await
        .expect("stepped down");
    let held = last_renewal.elapsed();
    assert!(
        held <= RENEW,
        "acted as leader {held:?} after its last renewal"
    );
    assert!(held > RENEW - RETRY, "gave up early, after {held:?}");
    assert!(!a.is_leading());
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_calls_hang_steps_down_within_the_renew_deadline() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    let term = a.leads_within(secs(1)).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await; // renewed at 2 s
    let last_renewal = Instant::now() - Duration::from_millis(500);
    a.lock.freeze(true);
    term.cancelled().await;
    assert_eq!(last_renewal.elapsed(), RENEW);
}

#[tokio::test(start_paused = true)]
async fn a_frozen_leader_stops_before_a_peer_takes_over() {
    let lease = SharedLease::default();
    let terms = Terms::default();
    let mut a = start(&lease, "a");
    terms.watch("a", &a);
    a.leads_within(secs(1)).await;
    let mut b = start(&lease, "b");
    terms.watch("b", &b);
    tokio::time::sleep(secs(3)).await;
    assert_eq!(b.observed_leader().as_deref(), Some("a"));
    a.lock.freeze(true);
    let frozen = Instant::now();
    // a's last renewal (at most one retry period before the freeze) is seen at b's next
    // attempt, expires a lease later, and is taken at b's attempt after that.
    b.leads_within(RETRY + MAX_RETRY_WAIT + LEASE + MAX_RETRY_WAIT)
        .await;
    assert!(frozen.elapsed() >= LEASE - RETRY, "{:?}", frozen.elapsed());
    assert!(!a.is_leading());
    assert_eq!(terms.assert_disjoint(), 2);
}

// Rule 19e, and losing to a write seen during renewal.
#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_steps_down_at_its_next_renewal() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    let term = a.leads_within(secs(1)).await;
    lease.overwrite(held_by("intruder", Timestamp::now(), 1));
    let overwritten = Instant::now();
    term.cancelled().await;
    assert!(overwritten.elapsed() <= RETRY);
    assert_eq!(a.observed_leader().as_deref(), Some("intruder"));
}

// Rule 21.
#[tokio::test(start_paused = true)]
async fn release_on_cancel_hands_over_within_one_retry_period() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    let term = a.leads_within(secs(1)).await;
    let mut b = start(&lease, "b");
    tokio::time::sleep(secs(5)).await;
    assert_eq!(b.observed_leader().as_deref(), Some("a"));
    a.shutdown.cancel();
    let released = Instant::now();
    a.run.await.unwrap().expect("clean exit");
    assert!(term.is_cancelled());
    let record = lease.record().unwrap();
    assert_eq!(record.holder_identity, None);
    assert_eq!(record.lease_duration_seconds, Some(1));
    b.leads_within(MAX_RETRY_WAIT).await;
    assert!(released.elapsed() <= MAX_RETRY_WAIT);
    assert_eq!(lease.record().unwrap().lease_transitions, Some(1));
}

// Rule 20: stopped-leading on every exit.
#[tokio::test(start_paused = true)]
async fn every_exit_publishes_following() {
    let lease = SharedLease::default();
    let mut a = start(&lease, "a");
    a.leads_within(secs(1)).await;
    let mut b = start(&lease, "b");
    tokio::time::sleep(secs(1)).await;
    b.shutdown.cancel();
    (&mut b.run).await.unwrap().unwrap();
    assert_eq!(b.observed_leader().as_deref(), Some("a"));
    a.shutdown.cancel();
    (&mut a.run).await.unwrap().unwrap();
    assert!(!a.is_leading());
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_ends_the_run_when_not_campaigning_again() {
    let lease = SharedLease::default();
    let mut a = start_with(&lease, "a", false);
    a.leads_within(secs(1)).await;
    a.lock.fail_next(usize::MAX);
    let result = tokio::time::timeout(LEASE, a.run).await.expect("run ended");
    let error = result.unwrap().expect_err("lost");
    assert!(matches!(error, ElectionError::Lost { .. }));
    assert!(
        error.to_string().contains("a lost lease test/memory"),
        "{error}"
    );
}

// Rule 22, under random faults.
#[tokio::test(start_paused = true)]
async fn three_replicas_under_random_freezes_and_failures_never_lead_at_once() {
    let lease = SharedLease::default();
    let terms = Terms::default();
    let ids = ["a", "b", "c"];
    let mut replicas: Vec<_> = ids
        .iter()
        .map(|id| {
            let replica = start(&lease, id);
            terms.watch(id, &replica);
            replica
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(18);
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..6_000))).await;
        let replica = &replicas[rng.random_range(0..replicas.len())];
        match rng.random_range(0..3) {
            0 => replica.lock.freeze(true),
            1 => replica.lock.freeze(false),
            _ => replica.lock.fail_next(rng.random_range(1..8)),
        }
    }
    for replica in &replicas {
        replica.lock.freeze(false);
        replica.lock.fail_next(0);
    }
    tokio::time::sleep(LEASE + MAX_RETRY_WAIT).await;
    let leading = replicas.iter_mut().filter(|r| r.is_leading()).count();
    assert_eq!(leading, 1, "one leader once the faults stop");
    let count = terms.assert_disjoint();
    assert!(
        count >= 3,
        "faults should have moved leadership; saw {count} terms"
    );
}

#[tokio::test(start_paused = true)]
async fn the_fence_is_open_while_leading_and_closes_at_the_renew_deadline_by_the_clock() {
    let lease = SharedLease::default();
    let lock = lease.handle();
    let config = ElectionConfig {
        identity: "a".to_owned(),
        ..ElectionConfig::default()
    };
    let fence = Fence::always_open();
    let elector = LeaderElector::new(lock.clone(), config)
        .expect("valid config")
        .with_fence(fence.clone());
    assert!(!fence.is_open(), "closed until the lease is won");
    let mut leadership = elector.subscribe();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(elector.run(shutdown.clone()));
    tokio::time::timeout(secs(1), leadership.wait_for(Leadership::is_leading))
        .await
        .expect("leads")
        .expect("alive");
    assert!(fence.is_open());
    tokio::time::sleep(Duration::from_millis(2_500)).await; // renewed at 2 s
    let renewed = Instant::now() - Duration::from_millis(500);
    // From now on no renewal succeeds; the fence stays open exactly until the renew deadline
    // after the last one began.
    lock.freeze(true);
    tokio::time::sleep_until(renewed + RENEW - Duration::from_millis(1)).await;
    assert!(fence.is_open());
    tokio::time::sleep_until(renewed + RENEW).await;
    assert!(!fence.is_open());
    shutdown.cancel();
    let _ = run.await;
    assert!(!fence.is_open());
}
