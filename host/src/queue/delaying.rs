//! The delaying layer: keys that become adds once their delay has elapsed (SEMANTICS rules 7–8).
//!
//! `add_after` only appends the key and its ready time to an intake buffer under a short lock;
//! the timer task folds the buffer into its timers (deduplicating, bucketing) when it wakes, and
//! a caller folds it itself every [`FOLD_AT`] entries, handing over the keys already due while it
//! holds the timers. So a producer adding delayed keys as fast as it can takes the timers' lock
//! once per batch instead of once per key, never holds up the timer task that is handing due keys
//! to the workers (client-go's delaying queue decouples the two the same way, with a channel), and
//! does part of that handing over on its own thread, not on the one the timer task shares with
//! workers. While a fold holds the timers, the timer task yields
//! rather than block the worker thread it shares with workers, and the waiting keys live in a
//! [`LayeredMap`], whose growth moves a bounded number of entries, so no fold holds the timers
//! for long.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::basic::Queue;
use super::key::Key;
use super::layered_map::LayeredMap;
use super::metrics::QueueMetrics;
use super::precise::Precise;

/// A delay so long it stands for "never" where `now + delay` would overflow the clock.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Intake entries after which the caller of `add_after` folds the buffer into the timers itself,
/// which bounds the buffer when the timer task cannot run (a current-thread runtime whose only
/// task keeps adding).
const FOLD_AT: usize = 1024;

/// `armed` when the timer task sleeps without a deadline.
const DISARMED: u64 = u64::MAX;

/// A waiting key and when it becomes ready.
struct Waiting<K> {
    ready: Instant,
    /// Insertion order: breaks ties between equal ready times (FIFO) and tells a live entry
    /// from one superseded by an earlier ready time for the same key.
    seq: u64,
    key: K,
}

/// The keys whose ready time falls within one millisecond.
struct Bucket<K> {
    entries: Vec<Waiting<K>>,
    /// Sorted latest-first, so the earliest entry pops off the end.
    sorted: bool,
}

struct Timers<K> {
    /// Waiting keys by the millisecond of their ready time since the queue's origin. A bucket
    /// is sorted only when it comes due, so each add is a push and each firing a pop: far
    /// cheaper than a binary heap over every waiting key.
    buckets: BTreeMap<u64, Bucket<K>>,
    /// The live `(ready, seq)` of each waiting key; entries that disagree are stale. Layered,
    /// so that its growth never holds the timer task up for long.
    live: LayeredMap<K, (Instant, u64)>,
    next_seq: u64,
}

impl<K: Key> Timers<K> {
    /// Rule 7's bookkeeping for one `add_after`: a key already waiting keeps the earlier ready
    /// time; otherwise the key waits until `ready`.
    fn insert(&mut self, origin: Instant, key: K, ready: Instant) {
        let seq = self.next_seq;
        let key = match self.live.get_mut(&key) {
            Some((_, live)) if live.0 <= ready => return,
            Some((key, live)) => {
                *live = (ready, seq);
                key.clone()
            }
            None => {
                self.live.insert_new(key.clone(), (ready, seq));
                key
            }
        };
        self.next_seq += 1;
        let bucket = self
            .buckets
            .entry(millis_since(origin, ready))
            .or_insert_with(|| Bucket {
                entries: Vec::new(),
                sorted: true,
            });
        bucket.sorted = bucket.sorted && bucket.entries.is_empty();
        bucket.entries.push(Waiting { ready, seq, key });
    }
}

fn millis_since(origin: Instant, at: Instant) -> u64 {
    u64::try_from((at - origin).as_millis()).unwrap_or(u64::MAX)
}

fn nanos_since(origin: Instant, at: Instant) -> u64 {
    u64::try_from((at - origin).as_nanos()).unwrap_or(DISARMED - 1)
}

struct Shared<K: Key> {
    timers: Mutex<Timers<K>>,
    /// Keys added since the last fold, with their ready times, in call order.
    intake: Mutex<Vec<(K, Instant)>>,
    /// Where ready times are counted from (`armed`, bucket numbers).
    origin: Instant,
    /// Nanoseconds since `origin` of the earliest ready time the timer task will wake for
    /// ([`DISARMED`]: none). An `add_after` earlier than this lowers it and wakes the task.
    armed: AtomicU64,
    /// Wakes the timer task when a key is due earlier than what it sleeps until.
    wake: Arc<Notify>,
    task: AbortHandle,
}

impl<K: Key> Drop for Shared<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<K: Key> Shared<K> {
    /// The timers with every pending intake folded in.
    fn timers(&self) -> MutexGuard<'_, Timers<K>> {
        let mut timers = self.timers.lock();
        self.fold(&mut timers);
        timers
    }

    /// Moves the intake into the timers.
    ///
    /// The timer task may have re-armed without seeing the entries a fold takes: a fold by
    /// `add_after` can take them between the task's look at the timers and its look at the
    /// intake. So a fold that inserts a key due before what the task is armed for lowers
    /// `armed` and wakes it, as `add_after` does.
    fn fold(&self, timers: &mut Timers<K>) {
        let intake = std::mem::take(&mut *self.intake.lock());
        let Some(earliest) = intake.iter().map(|&(_, ready)| ready).min() else {
            return;
        };
        for (key, ready) in intake {
            timers.insert(self.origin, key, ready);
        }
        self.wake_for(nanos_since(self.origin, earliest));
    }

    /// Lowers `armed` to `at` and wakes the timer task if it sleeps until later.
    fn wake_for(&self, at: u64) {
        // Most keys are due after what the task sleeps until: a load spares them the write that
        // would take the line from the timer task.
        if self.armed.load(Ordering::SeqCst) > at && self.armed.fetch_min(at, Ordering::SeqCst) > at
        {
            self.wake.notify_one();
        }
    }

    /// The timers with every pending intake folded in, for the timer task: while a producer
    /// holds them (folding its intake), the task yields instead of blocking its worker thread,
    /// so the workers sharing that thread go on with the keys already handed over.
    async fn timers_yielding(&self) -> MutexGuard<'_, Timers<K>> {
        let mut timers = loop {
            if let Some(timers) = self.timers.try_lock() {
                break timers;
            }
            tokio::task::yield_now().await;
        };
        self.fold(&mut timers);
        timers
    }

    /// Moves every due key into `queue` in ready-time order; returns the next deadline, and
    /// whether a key added meanwhile is due before it (fire again at once).
    fn fire_due(
        &self,
        mut guard: MutexGuard<'_, Timers<K>>,
        queue: &Queue<K>,
    ) -> (Option<Instant>, bool) {
        let mut due = Vec::new();
        let next = {
            let timers = &mut *guard;
            let now = Instant::now();
            let next = loop {
                let Some(mut first) = timers.buckets.first_entry() else {
                    break None;
                };
                let bucket = first.get_mut();
                if !bucket.sorted {
                    bucket
                        .entries
                        .sort_unstable_by_key(|e| std::cmp::Reverse((e.ready, e.seq)));
                    bucket.sorted = true;
                }
                while let Some(entry) = bucket.entries.last() {
                    if entry.ready > now {
                        break;
                    }
                    let Waiting { ready, seq, key } = bucket.entries.pop().expect("last");
                    if let Some(key) = timers.live.remove_if(&key, |&live| live == (ready, seq)) {
                        due.push(key);
                    }
                }
                match bucket.entries.last() {
                    Some(entry) => break Some(entry.ready),
                    None => {
                        first.remove();
                    }
                }
            };
            let armed = next.map_or(DISARMED, |at| nanos_since(self.origin, at));
            self.armed.store(armed, Ordering::SeqCst);
            drop(guard);
            next
        };
        queue.add_all(due);
        // An add that compared its ready time with the `armed` just replaced may have found
        // no reason to wake the task although it is due before `next`: look for one.
        let early = self
            .intake
            .lock()
            .iter()
            .any(|&(_, ready)| next.is_none_or(|next| ready < next));
        (next, early)
    }
}

/// A workqueue with [`add_after`](DelayingQueue::add_after); dereferences to the basic
/// [`Queue`] for everything else.
///
/// One tokio task per queue sleeps until the earliest ready time (no polling, no task per key);
/// it stops when the queue shuts down or the last handle is dropped. Keys still waiting at
/// shutdown are dropped, as in client-go. A key reaches the queue within about 0.1 ms of its
/// ready time on Linux (a timerfd on the runtime's I/O driver), within a millisecond or two
/// elsewhere (tokio's timer).
///
/// # Panics
/// Constructors panic outside a Tokio runtime (they spawn the timer task).
pub struct DelayingQueue<K: Key> {
    queue: Queue<K>,
    shared: Arc<Shared<K>>,
}

impl<K: Key> Clone for DelayingQueue<K> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Key> fmt::Debug for DelayingQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl<K: Key> Deref for DelayingQueue<K> {
    type Target = Queue<K>;
    fn deref(&self) -> &Queue<K> {
        &self.queue
    }
}

impl<K: Key> Default for DelayingQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> DelayingQueue<K> {
    /// An empty delaying queue without metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::on(Queue::new())
    }

    /// An empty delaying queue reporting to `metrics`.
    #[must_use]
    pub fn with_metrics(metrics: Arc<dyn QueueMetrics>) -> Self {
        Self::on(Queue::with_metrics(metrics))
    }

    fn on(queue: Queue<K>) -> Self {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<K>>| {
            let task = tokio::spawn(timer_task(
                weak.clone(),
                Arc::clone(&wake),
                queue.clone(),
                queue.shutdown_token().clone(),
            ));
            Shared {
                timers: Mutex::new(Timers {
                    buckets: BTreeMap::new(),
                    live: LayeredMap::default(),
                    next_seq: 0,
                }),
                intake: Mutex::new(Vec::new()),
                origin: Instant::now(),
                armed: AtomicU64::new(DISARMED),
                wake,
                task: task.abort_handle(),
            }
        });
        Self { queue, shared }
    }

    /// Adds `key` once `delay` has elapsed (rule 7). Ignored while shutting down; a zero delay
    /// is a plain [`add`](Queue::add). A key already waiting keeps the earlier ready time.
    pub fn add_after(&self, key: K, delay: Duration) {
        if self.queue.shutting_down() {
            return;
        }
        if delay.is_zero() {
            self.queue.add(key);
            return;
        }
        let shared = &*self.shared;
        let now = Instant::now();
        let ready = now.checked_add(delay).unwrap_or_else(|| now + FAR_FUTURE);
        let full = {
            let mut intake = shared.intake.lock();
            intake.push((key, ready));
            intake.len() >= FOLD_AT
        };
        if full {
            // Holding the timers anyway, hand over what is due: while a producer adds at full
            // speed, that work lands on its thread rather than on the one the timer task shares
            // with the workers.
            let (_, early) = shared.fire_due(shared.timers(), &self.queue);
            if early {
                shared.wake.notify_one();
            }
        }
        shared.wake_for(nanos_since(shared.origin, ready));
    }

    /// The keys waiting for their delay to elapse, in no particular order.
    #[must_use]
    pub fn waiting_keys(&self) -> Vec<K> {
        self.shared.timers().live.keys().cloned().collect()
    }

    /// Number of keys waiting for their delay to elapse.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.shared.timers().live.len()
    }
}

/// Sleeps until the earliest ready time or until woken for an earlier one, then fires what is
/// due. Holds the shared state only weakly, so dropping the last handle ends it.
///
/// Two clocks wake it: tokio's timer, which rounds up to its millisecond tick and is the one a
/// paused test clock drives, and a [`Precise`] timer on the real clock.
async fn timer_task<K: Key>(
    shared: Weak<Shared<K>>,
    wake: Arc<Notify>,
    queue: Queue<K>,
    shutdown: CancellationToken,
) {
    let precise = Precise::new();
    let mut next: Option<Instant> = None;
    loop {
        let deadline = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            () = wake.notified() => {}
            () = precise.fired() => {}
            () = deadline => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let early;
        let timers = shared.timers_yielding().await;
        (next, early) = shared.fire_due(timers, &queue);
        if early {
            shared.wake.notify_one();
        }
        precise.arm(next);
    }
}

#[cfg(test)]
mod tests {
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
}
