//! The basic queue's tests, rule by rule, and what it reports to its metrics hooks.

use std::time::Duration;

use futures::FutureExt;

use super::shared::KEEP_INTAKE;
use super::*;

/// Runs other tasks until `cond` holds; fails after a bounded number of turns.
async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

fn drain_now(q: &Queue<&'static str>) -> Vec<&'static str> {
    let mut out = Vec::new();
    while let Some(Some(key)) = q.try_get() {
        out.push(key);
    }
    out
}

// Rule 1.
#[tokio::test]
async fn add_is_ignored_while_shutting_down() {
    let q = Queue::new();
    q.shut_down();
    q.add("a");
    assert_eq!(q.len(), 0);
    assert_eq!(q.get().await, None);
}

#[tokio::test]
async fn adding_a_dirty_key_again_does_nothing() {
    let q = Queue::new();
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(drain_now(&q), ["a", "b"]);
}

#[tokio::test]
async fn key_added_while_processing_waits_for_done() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add("a");
    assert_eq!(q.len(), 0, "a processing key is not queued again");
    assert_eq!(q.try_get(), None, "nothing to hand out while `a` is held");
    q.done(&a);
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("a"));
}

#[tokio::test]
async fn add_wakes_a_waiting_get() {
    let q = Queue::new();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
    q.add("a");
    assert_eq!(worker.await.unwrap(), Some("a"));
    assert_eq!(q.inner.parked.load(Ordering::SeqCst), 0);
}

// Rule 2.
#[tokio::test]
async fn get_waits_while_the_queue_is_empty() {
    let q: Queue<&str> = Queue::new();
    assert_eq!(q.get().now_or_never(), None, "get must not complete");
    assert_eq!(q.try_get(), None);
}

#[tokio::test]
async fn get_returns_shut_down_to_every_caller_current_and_future() {
    let q: Queue<&str> = Queue::new();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    until(|| q.inner.parked.load(Ordering::SeqCst) == 3).await;
    q.shut_down();
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap(), None);
    }
    assert_eq!(q.get().await, None);
    assert_eq!(q.try_get(), Some(None));
}

#[tokio::test]
async fn a_dropped_get_loses_no_key() {
    let q = Queue::new();
    let pending = q.get();
    drop(pending);
    let mut pending = Box::pin(q.get());
    assert!((&mut pending).now_or_never().is_none());
    drop(pending);
    q.add("a");
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.inner.parked.load(Ordering::SeqCst), 0);
}

// Rule 3.
#[tokio::test]
async fn done_forgets_a_key_that_was_not_added_again() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.done(&a);
    assert_eq!(q.len(), 0);
    assert_eq!(q.processing(), 0);
    assert_eq!(q.inner.lock().live(), 0, "no state is left for `a`");
    q.add("a");
    assert_eq!(q.len(), 1, "a finished key can be added again");
}

#[tokio::test]
async fn done_for_a_key_not_being_processed_is_ignored() {
    let q = Queue::new();
    q.done(&"never-added");
    q.add("a");
    q.done(&"a");
    assert_eq!(q.len(), 1);
    assert_eq!(q.processing(), 0);
    assert_eq!(drain_now(&q), ["a"], "`a` is still queued exactly once");
}

// Rule 4.
#[tokio::test]
async fn many_adds_while_processing_yield_exactly_one_more_get() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    for _ in 0..10 {
        q.add("a");
    }
    q.done(&a);
    let again = q.get().await.unwrap();
    assert_eq!(again, "a");
    q.done(&again);
    assert_eq!(q.len(), 0);
    assert_eq!(q.try_get(), None);
}

#[tokio::test]
async fn distinct_keys_come_out_in_order_of_first_pending_add() {
    let q = Queue::new();
    for key in ["c", "a", "b", "a", "c", "d"] {
        q.add(key);
    }
    assert_eq!(drain_now(&q), ["c", "a", "b", "d"]);
}

#[tokio::test]
async fn a_re_added_key_goes_to_the_back_after_done() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add("a");
    q.add("b");
    q.done(&a);
    assert_eq!(drain_now(&q), ["b", "a"]);
}

#[tokio::test]
async fn a_key_is_never_held_by_two_workers() {
    let q = Queue::new();
    q.add("a");
    let first = q.get().await.unwrap();
    q.add("a");
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
    assert!(!second.is_finished());
    q.done(&first);
    assert_eq!(second.await.unwrap(), Some("a"));
}

// Rule 5.
#[tokio::test]
async fn workers_drain_queued_keys_after_shut_down() {
    let q = Queue::new();
    q.add("a");
    q.add("b");
    q.shut_down();
    q.add("c");
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert_eq!(q.get().await, None);
}

#[tokio::test]
async fn dirty_key_is_requeued_by_done_after_shut_down_and_drained() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add("a");
    q.shut_down();
    q.done(&a);
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert_eq!(q.get().await, None);
}

#[tokio::test]
async fn shut_down_with_drain_returns_only_after_every_key_is_done() {
    let q = Queue::new();
    q.add("a");
    q.add("b");
    let a = q.get().await.unwrap();
    let b = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    until(|| q.shutting_down()).await;
    q.done(&a);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!drain.is_finished(), "`b` is still being processed");
    q.done(&b);
    tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .expect("drain returns once processing is empty")
        .unwrap();
}

#[tokio::test]
async fn shut_down_with_drain_returns_at_once_when_nothing_is_processing() {
    let q: Queue<&str> = Queue::new();
    q.add("queued-only");
    q.shut_down_with_drain()
        .now_or_never()
        .expect("returns at once");
}

#[tokio::test]
async fn pending_lists_queued_and_re_added_keys_but_not_plain_processing_ones() {
    let q = Queue::new();
    for key in ["a", "b", "c"] {
        q.add(key);
    }
    let (a, b) = (q.get().await.unwrap(), q.get().await.unwrap());
    assert_eq!((a, b), ("a", "b"));
    q.add("a");
    let mut pending = q.pending();
    pending.sort_unstable();
    assert_eq!(pending, vec!["a", "c"]);
}

// Rule 6.
#[tokio::test]
async fn len_counts_queued_keys_not_processing_ones() {
    let q = Queue::new();
    assert!(q.is_empty());
    q.add("a");
    q.add("b");
    assert_eq!(q.len(), 2);
    let a = q.get().await.unwrap();
    assert_eq!((q.len(), q.processing()), (1, 1));
    q.done(&a);
    assert_eq!((q.len(), q.processing()), (1, 0));
}

// Adds that find the lock held (the intake).
#[tokio::test]
async fn adds_made_while_the_lock_is_held_keep_their_order_and_merge() {
    let q = Queue::new();
    q.add("x");
    {
        let _held = q.hold_lock();
        for key in ["b", "a", "x", "b"] {
            q.add(key);
        }
        assert!(
            q.inner.intake_pending.load(Ordering::SeqCst),
            "the adds wait in the intake"
        );
    }
    q.add("c");
    assert_eq!(
        drain_now(&q),
        ["x", "b", "a", "c"],
        "applied before the next add, in call order, merged"
    );
    assert!(q.inner.intake.lock().is_empty());
}

#[tokio::test]
async fn an_applied_intake_keeps_its_buffer_for_the_next_batch_unless_a_burst_grew_it() {
    let q = Queue::new();
    let batch = |keys: std::ops::Range<usize>| {
        {
            let _held = q.hold_lock();
            for key in keys {
                q.add(key);
            }
        }
        q.len() // applies the intake
    };
    assert_eq!(batch(0..10), 10);
    let kept = q.hold_lock().spare_intake.capacity();
    assert!(kept >= 10, "a small batch's buffer is kept ({kept})");
    assert_eq!(batch(10..20), 20);
    assert!(
        q.hold_lock().spare_intake.capacity() >= 10,
        "and traded back and forth"
    );
    assert_eq!(batch(20..20 + 2 * KEEP_INTAKE), 20 + 2 * KEEP_INTAKE);
    assert_eq!(
        q.hold_lock().spare_intake.capacity(),
        0,
        "a burst's buffer is let go"
    );
}

#[tokio::test]
async fn an_add_made_while_the_lock_is_held_marks_a_processing_key_dirty() {
    let q = Queue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    {
        let _held = q.hold_lock();
        q.add("a");
    }
    assert_eq!(q.try_get(), None, "`a` is still held");
    q.done(&a);
    assert_eq!(q.try_get(), Some(Some("a")), "re-queued by done");
}

#[tokio::test]
async fn an_add_made_while_the_lock_is_held_wakes_a_parked_getter() {
    let q = Queue::new();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    until(|| q.inner.parked.load(Ordering::SeqCst) == 1).await;
    {
        let _held = q.hold_lock();
        q.add("a");
    }
    let got = tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .expect("the parked getter wakes and applies the intake");
    assert_eq!(got.unwrap(), Some("a"));
}

#[tokio::test]
async fn every_parked_getter_wakes_for_the_keys_one_of_them_applied() {
    let q = Queue::new();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    until(|| q.inner.parked.load(Ordering::SeqCst) == 3).await;
    {
        let _held = q.hold_lock();
        for key in ["a", "b", "c"] {
            q.add(key);
        }
    }
    let mut got = Vec::new();
    for worker in workers {
        let key = tokio::time::timeout(Duration::from_secs(10), worker)
            .await
            .expect("each parked getter gets a key without a further add");
        got.push(key.unwrap().unwrap());
    }
    got.sort_unstable();
    assert_eq!(got, ["a", "b", "c"]);
}

#[tokio::test]
async fn adds_in_the_intake_before_shut_down_are_drained_and_later_ones_ignored() {
    let q = Queue::new();
    {
        let _held = q.hold_lock();
        q.add("a");
    }
    q.shut_down();
    {
        let _held = q.hold_lock();
        q.add("late");
    }
    assert!(
        q.inner.intake.lock().is_empty(),
        "nothing waits after shut down"
    );
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, None);
}

#[tokio::test]
async fn shutting_down_tells_the_state() {
    let q: Queue<u8> = Queue::new();
    assert!(!q.shutting_down());
    q.shut_down();
    assert!(q.shutting_down());
}

/// What the basic queue reports to the hooks.
mod hooks {
    use std::sync::{Arc, Mutex as StdMutex};

    use super::*;

    #[derive(Default)]
    struct Recorded {
        adds: usize,
        depth: i64,
        latencies: Vec<Duration>,
        work: Vec<Duration>,
        unfinished: Option<(f64, f64)>,
    }

    #[derive(Default)]
    struct Recorder(StdMutex<Recorded>);

    impl QueueMetrics for Recorder {
        fn add(&self) {
            self.0.lock().unwrap().adds += 1;
        }
        fn depth(&self, delta: i64) {
            self.0.lock().unwrap().depth += delta;
        }
        fn queue_latency(&self, waited: Duration) {
            self.0.lock().unwrap().latencies.push(waited);
        }
        fn work_duration(&self, held: Duration) {
            self.0.lock().unwrap().work.push(held);
        }
        fn unfinished_work(&self, total: f64, longest: f64) {
            self.0.lock().unwrap().unfinished = Some((total, longest));
        }
    }

    #[test]
    fn taking_the_pending_keys_empties_the_queue_and_its_depth() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(Arc::clone(&recorder) as Arc<dyn QueueMetrics>);
        for key in ["a", "b", "c"] {
            q.add(key);
        }
        let taken = q.try_get().flatten();
        assert_eq!(taken, Some("a"));
        assert_eq!(q.take_pending(), ["b", "c"]);
        assert_eq!(recorder.0.lock().unwrap().depth, 0);
        assert_eq!(q.len(), 0);
        q.done(&"a");
        q.add("b");
        assert_eq!(
            recorder.0.lock().unwrap().depth,
            1,
            "a taken key can be added again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn adds_made_while_the_lock_is_held_are_counted_with_their_own_time() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(recorder.clone());
        {
            let _held = q.hold_lock();
            q.add("a");
            q.add("a"); // dedup: not counted
            assert_eq!(recorder.0.lock().unwrap().adds, 0, "counted when applied");
        }
        tokio::time::advance(Duration::from_millis(40)).await;
        assert_eq!(q.len(), 1);
        let a = q.get().await.unwrap();
        q.done(&a);
        let r = recorder.0.lock().unwrap();
        assert_eq!((r.adds, r.depth), (1, 0));
        assert_eq!(
            r.latencies,
            [Duration::from_millis(40)],
            "waited from the add, not from when it was applied"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_hooks_see_adds_depth_latency_work_and_unfinished_work() {
        let recorder = Arc::new(Recorder::default());
        let q = Queue::with_metrics(recorder.clone());
        q.add("a");
        q.add("a"); // dedup: not counted
        q.add("b");
        tokio::time::advance(Duration::from_millis(30)).await;
        let a = q.get().await.unwrap();
        tokio::time::advance(Duration::from_millis(20)).await;
        let b = q.get().await.unwrap();
        q.add("a"); // while processing: counted, depth +1
        tokio::time::advance(Duration::from_millis(100)).await;
        q.report_unfinished_work();
        q.done(&a);
        q.done(&b);
        let r = recorder.0.lock().unwrap();
        assert_eq!(r.adds, 3);
        assert_eq!(r.depth, 1, "`a` is dirty again");
        assert_eq!(
            r.latencies,
            [Duration::from_millis(30), Duration::from_millis(50)]
        );
        assert_eq!(
            r.work,
            [Duration::from_millis(120), Duration::from_millis(100)]
        );
        let (total, longest) = r.unfinished.unwrap();
        assert!((total - 0.22).abs() < 1e-9, "total {total}");
        assert!((longest - 0.12).abs() < 1e-9, "longest {longest}");
    }
}
