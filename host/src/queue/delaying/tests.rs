//! The delaying queue's tests, rule by rule, on the paused and the real clock.

use std::sync::atomic::Ordering;

use futures::FutureExt;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

// Rule 7.
#[tokio::test(start_paused = true)]
async fn waiting_keys_lists_keys_whose_delay_has_not_elapsed() {
    let q = DelayingQueue::new();
    q.add_after("later", Duration::from_secs(60));
    q.add_after("soon", Duration::from_millis(10));
    let mut waiting = q.waiting_keys();
    waiting.sort_unstable();
    assert_eq!(waiting, vec!["later", "soon"]);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(q.waiting_keys(), vec!["later"]);
}

#[tokio::test(start_paused = true)]
async fn key_is_added_exactly_when_its_delay_elapses() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("a", ms(250));
    assert_eq!(q.len(), 0);
    assert_eq!(q.waiting(), 1);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(start.elapsed(), ms(250), "neither early nor late");
    assert_eq!(q.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn zero_delay_is_a_plain_add() {
    let q = DelayingQueue::new();
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_after_is_ignored_while_shutting_down() {
    let q = DelayingQueue::new();
    q.shut_down();
    q.add_after("a", ms(10));
    q.add_after("b", Duration::ZERO);
    assert_eq!(q.waiting(), 0);
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_key_keeps_the_earlier_ready_time() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("later-first", ms(100));
    q.add_after("later-first", ms(40));
    q.add_after("earlier-first", ms(30));
    q.add_after("earlier-first", ms(500));
    assert_eq!(q.waiting(), 2);
    assert_eq!(q.get().await, Some("earlier-first"));
    assert_eq!(start.elapsed(), ms(30));
    assert_eq!(q.get().await, Some("later-first"));
    assert_eq!(start.elapsed(), ms(40));
    // Nothing else fires: the superseded entries at 100 ms and 500 ms are stale.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(q.len(), 0);
    assert_eq!(q.waiting(), 0);
}

// Rule 7: a key reaches the queue at its ready time even when the timer task re-armed for
// a later one without seeing it, as when its fold and the task's look at the intake cross.
#[tokio::test(start_paused = true)]
async fn a_fold_wakes_the_timer_task_for_a_key_due_before_it_is_armed() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("late", Duration::from_secs(10));
    // The timer task takes "late" and sleeps until it is due.
    tokio::task::yield_now().await;
    assert_eq!(
        q.shared.armed.load(Ordering::SeqCst),
        nanos_since(q.shared.origin, start + Duration::from_secs(10))
    );
    // An entry the task has not been told about, as a fold would hold it.
    q.shared
        .intake
        .lock()
        .push(("soon", start + Duration::from_secs(1)));
    assert_eq!(q.waiting(), 2, "the fold took it");
    assert_eq!(q.get().await, Some("soon"));
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

// Rule 8.
#[tokio::test(start_paused = true)]
async fn waiting_keys_fire_in_ready_time_order() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    for (key, delay) in [("c", 30), ("a", 10), ("d", 40), ("b", 20), ("b2", 20)] {
        q.add_after(key, ms(delay));
    }
    let mut fired = Vec::new();
    for _ in 0..5 {
        let key = q.get().await.unwrap();
        fired.push((key, start.elapsed()));
        q.done(&key);
    }
    assert_eq!(
        fired,
        [
            ("a", ms(10)),
            ("b", ms(20)),
            ("b2", ms(20)),
            ("c", ms(30)),
            ("d", ms(40))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn keys_within_one_millisecond_fire_in_exact_ready_order_and_never_early() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    let us = Duration::from_micros;
    q.add_after("a", us(10_200));
    q.add_after("b", us(10_800));
    tokio::time::advance(us(10_500)).await;
    // Joins a's and b's bucket and wakes the timer, which fires `a` alone.
    q.add_after("c", us(100));
    until_len(&q, 1).await;
    // Lands in the same, now partially fired, bucket.
    q.add_after("d", us(50));
    let mut fired = Vec::new();
    let ready = [("a", 10_200), ("d", 10_550), ("c", 10_600), ("b", 10_800)];
    for (want, ready_us) in ready {
        let key = q.get().await.unwrap();
        assert!(start.elapsed() >= us(ready_us), "{key} fired early");
        fired.push(key);
        assert_eq!(key, want, "fired so far: {fired:?}");
    }
}

async fn until_len(q: &DelayingQueue<&'static str>, len: usize) {
    for _ in 0..1000 {
        if q.len() == len {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("queue length never reached {len}: {q:?}");
}

#[tokio::test(start_paused = true)]
async fn a_fired_key_dedups_with_its_queued_copy() {
    let q = DelayingQueue::new();
    q.add("a");
    q.add_after("a", ms(5));
    tokio::time::sleep(ms(10)).await;
    assert_eq!(q.waiting(), 0);
    assert_eq!(q.len(), 1, "the delayed add met the queued `a`");
}

#[tokio::test(start_paused = true)]
async fn a_key_firing_while_processing_comes_back_after_done() {
    let q = DelayingQueue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add_after("a", ms(5));
    tokio::time::sleep(ms(10)).await;
    assert_eq!(q.len(), 0);
    q.done(&a);
    assert_eq!(q.get().now_or_never(), Some(Some("a")));
}

#[tokio::test(start_paused = true)]
async fn an_earlier_key_added_later_wakes_the_timer() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("slow", Duration::from_secs(60));
    tokio::time::sleep(ms(1)).await; // the timer task now sleeps until 60 s
    q.add_after("fast", ms(9));
    assert_eq!(q.get().await, Some("fast"));
    assert_eq!(start.elapsed(), ms(10));
}

#[tokio::test(start_paused = true)]
async fn shut_down_stops_the_timer_task_and_drops_waiting_keys() {
    let before = alive_tasks();
    let q = DelayingQueue::new();
    q.add_after("a", ms(10));
    assert_eq!(alive_tasks(), before + 1);
    q.shut_down();
    tokio::time::sleep(ms(20)).await;
    assert_eq!(alive_tasks(), before);
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_handle_stops_the_timer_task() {
    let before = alive_tasks();
    let q = DelayingQueue::new();
    let clone = q.clone();
    q.add_after(1_u32, Duration::from_secs(3600));
    drop(q);
    tokio::task::yield_now().await;
    assert_eq!(alive_tasks(), before + 1, "a clone still holds the queue");
    drop(clone);
    for _ in 0..100 {
        if alive_tasks() == before {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("timer task still alive after the last handle was dropped");
}

#[tokio::test(start_paused = true)]
async fn a_caller_folds_the_intake_itself_when_the_timer_task_cannot_run() {
    let q = DelayingQueue::new();
    let keys = u32::try_from(FOLD_AT * 3 + 1).expect("small");
    for key in 0..keys {
        q.add_after(key, ms(u64::from(key % 50) + 1));
        assert!(q.shared.intake.lock().len() < FOLD_AT, "intake bounded");
    }
    assert_eq!(q.waiting(), FOLD_AT * 3 + 1, "intake counted as waiting");
    assert!(q.shared.intake.lock().is_empty());
    tokio::time::sleep(ms(60)).await;
    assert_eq!(q.len(), FOLD_AT * 3 + 1);
}

// On the real clock, on this test's one thread, which never yields: no timer task runs.
#[tokio::test]
async fn a_caller_folding_the_intake_hands_over_the_keys_already_due_and_no_others() {
    let q = DelayingQueue::new();
    q.add_after(u32::MAX, ms(1));
    let due = Instant::now() + ms(1);
    while Instant::now() < due {
        std::hint::spin_loop();
    }
    assert_eq!(q.len(), 0, "nothing folded yet");
    let later = u32::try_from(FOLD_AT - 1).expect("small");
    for key in 0..later {
        q.add_after(key, Duration::from_secs(60));
    }
    assert_eq!(q.len(), 1, "the fold handed the due key over");
    assert_eq!(q.try_get(), Some(Some(u32::MAX)));
    assert_eq!(q.waiting(), FOLD_AT - 1, "the others wait");
}

// Real clock: the timerfd (Linux) or tokio's timer hands every key over, none early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_clock_keys_arrive_in_order_and_never_early() {
    let q = DelayingQueue::new();
    let mut ready = Vec::new();
    for key in 0..200_u64 {
        let delay = Duration::from_micros(500 + (key * 7_919) % 5_000);
        ready.push(Instant::now() + delay);
        q.add_after(key, delay);
    }
    let mut seen = 0;
    while seen < 200 {
        let key = tokio::time::timeout(Duration::from_secs(10), q.get())
            .await
            .expect("every key arrives")
            .expect("running queue");
        let index = usize::try_from(key).expect("small");
        assert!(Instant::now() >= ready[index], "key {key} handed out early");
        q.done(&key);
        seen += 1;
    }
    assert_eq!(q.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_delay_too_long_for_the_clock_waits_forever_instead_of_panicking() {
    let q = DelayingQueue::new();
    q.add_after("never", Duration::MAX);
    tokio::time::sleep(Duration::from_secs(365 * 24 * 3600)).await;
    assert_eq!(q.len(), 0);
    assert_eq!(q.waiting(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_change_is_served_before_keys_whose_time_came() {
    let q = DelayingQueue::new();
    q.add_after("recheck-1", ms(5));
    q.add_after("recheck-2", ms(5));
    q.add_after("retry", Duration::ZERO);
    tokio::time::sleep(ms(10)).await;
    assert_eq!(q.len(), 3);
    q.add("change");
    q.add("recheck-2"); // a watch event for a key waiting as a recheck moves it up
    let order: Vec<_> = std::iter::from_fn(|| q.get().now_or_never().flatten()).collect();
    // `retry` (no delay) was queued at once, before the rechecks' time came.
    assert_eq!(order, ["change", "recheck-2", "retry", "recheck-1"]);
}
