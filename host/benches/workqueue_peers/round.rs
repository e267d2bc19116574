//! One round of the side-by-side workloads A–F of `benches/peers/` (its README defines them),
//! with the key a controller queues ([`ObjectKey`]), printing one `PEERS` line per workload.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reconcile_host::controller::{Action, Controller, ObjectKey, Reconciler, Request};
use reconcile_host::informer::CachedObject;
use reconcile_host::queue::{RateLimitingQueue, default_controller_limiter};
use tokio_util::sync::CancellationToken;

use super::{DELAYED, HOT_KEYS, KEYSPACE, OPS, WORKERS};

/// The producer of B, C and F yields after every 256 adds (Go: `runtime.Gosched()`).
const YIELD_EVERY: usize = 256;
/// F: rounds of adding every one of the 10,000 keys.
const CONTROLLER_ROUNDS: usize = 20;

fn keys(n: usize) -> Vec<ObjectKey> {
    (0..n)
        .map(|i| ObjectKey::namespaced("default", &format!("object-{i:05}")))
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the workloads named by `only` (a letter), or all of them.
pub fn round(only: Option<String>) {
    let workloads: [(&str, fn()); 6] = [
        ("A", a),
        ("B", || producer_and_workers("B", KEYSPACE)),
        ("C", || producer_and_workers("C", HOT_KEYS)),
        ("D", d),
        ("E", e),
        ("F", f),
    ];
    for (name, run) in workloads {
        if only.as_deref().is_none_or(|o| o == name) {
            run();
        }
    }
}

/// A: one task, 1,000,000 × (add key i % 10,000, get, done).
fn a() {
    let rt = super::current_thread();
    let keys = keys(KEYSPACE);
    let elapsed = rt.block_on(async {
        let queue = RateLimitingQueue::new(default_controller_limiter());
        let start = Instant::now();
        for i in 0..OPS {
            queue.add(keys[i % KEYSPACE].clone());
            let key = queue.get().await.expect("running queue");
            queue.done(&key);
        }
        start.elapsed()
    });
    println!("PEERS A wall_ms={:.3} ops={OPS}", ms(elapsed));
}

/// B and C: one producer adds 1,000,000 keys (i % n), yielding every 256 adds; 4 workers
/// get/done until the queue, shut down with drain after the last add, is empty.
fn producer_and_workers(label: &str, n: usize) {
    let rt = super::multi_thread();
    let keys = keys(n);
    let (gets, elapsed) = rt.block_on(async {
        let queue = RateLimitingQueue::<ObjectKey>::new(default_controller_limiter());
        let start = Instant::now();
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    let mut gets = 0_u64;
                    while let Some(key) = queue.get().await {
                        queue.done(&key);
                        gets += 1;
                    }
                    gets
                })
            })
            .collect();
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move {
                for i in 0..OPS {
                    queue.add(keys[i % n].clone());
                    if i % YIELD_EVERY == YIELD_EVERY - 1 {
                        tokio::task::yield_now().await;
                    }
                }
            }
        });
        producer.await.expect("producer");
        queue.shut_down_with_drain().await;
        let mut gets = 0;
        for worker in workers {
            gets += worker.await.expect("worker");
        }
        (gets, start.elapsed())
    });
    println!("PEERS {label} wall_ms={:.3} gets={gets}", ms(elapsed));
}

/// D: 1,000,000 × (`add_rate_limited` + `forget`), keys i % 10,000, default controller limiter.
fn d() {
    let rt = super::current_thread();
    let keys = keys(KEYSPACE);
    let elapsed = rt.block_on(async {
        let queue = RateLimitingQueue::new(default_controller_limiter());
        let start = Instant::now();
        for i in 0..OPS {
            let key = &keys[i % KEYSPACE];
            queue.add_rate_limited(key.clone());
            queue.forget(key);
        }
        start.elapsed()
    });
    println!("PEERS D wall_ms={:.3} ops={OPS}", ms(elapsed));
}

/// E: 100,000 `add_after(i, random 0–50 ms)`, one worker, lateness percentiles: of every key,
/// and of the keys due after the producer's last add (`after_*`; `after_share` is their share).
fn e() {
    // The producer on this thread, the timer task and the worker on the runtime's one worker
    // thread: two threads running code, as Go's `GOMAXPROCS=2` allows.
    let rt = super::workers(1);
    let delays = super::random_delays(7);
    let start = Instant::now();
    let late = super::delayed_ours(&rt, &delays);
    let elapsed = start.elapsed();
    assert_eq!(late.all.len(), DELAYED);
    let after_share = late.after_producer.len() as f64 / DELAYED as f64;
    let (p50, p99, max) = super::percentiles(late.all);
    // Empty only if the producer outlasted every delay (50 ms).
    let after_p99 = if late.after_producer.is_empty() {
        f64::NAN
    } else {
        super::percentiles(late.after_producer).1
    };
    println!(
        "PEERS E wall_ms={:.3} p50_ms={p50:.3} p99_ms={p99:.3} max_ms={max:.3} \
         after_p99_ms={after_p99:.3} after_share={after_share:.3}",
        ms(elapsed)
    );
}

/// F's no-op reconciler: counts, and stamps the end of the latest reconcile.
struct Noop {
    count: Arc<AtomicU64>,
    last_nanos: Arc<AtomicU64>,
    start: Instant,
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

impl Reconciler for Noop {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        assert!(request.object.is_some(), "every key has an object");
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_nanos.fetch_max(nanos, Ordering::Relaxed);
        Ok(Action::Done)
    }
}

/// F: our controller, 4 workers, no-op reconciler, objects looked up in a map; 20 rounds of the
/// 10,000 keys sent through a channel (capacity 1,024) to one task that adds them to the queue,
/// as controller-runtime's `source.Channel` does. Wall time runs from the first send to the end
/// of the last reconcile, found by waiting until the count has been unchanged for 200 ms.
fn f() {
    let rt = super::multi_thread();
    let objects: std::collections::HashMap<ObjectKey, Arc<CachedObject>> = (0..KEYSPACE)
        .map(|i| {
            let json = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"namespace":"default","name":"object-{i:05}"}}}}"#
            );
            let object = CachedObject::from_json(&json).expect("ConfigMap JSON");
            (object.key(), Arc::new(object))
        })
        .collect();
    let keys = keys(KEYSPACE);
    let (elapsed, reconciles) = rt.block_on(async move {
        let (count, last_nanos) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let start = Instant::now();
        let queue = RateLimitingQueue::new(default_controller_limiter());
        let reconciler = Noop {
            count: Arc::clone(&count),
            last_nanos: Arc::clone(&last_nanos),
            start,
        };
        let controller = Arc::new(Controller::new(
            "peers",
            queue.clone(),
            reconciler,
            move |key: &ObjectKey| objects.get(key).cloned(),
            WORKERS,
        ));
        let intake = CancellationToken::new();
        let running = tokio::spawn({
            let (controller, intake) = (Arc::clone(&controller), intake.clone());
            async move { controller.run(intake, CancellationToken::new()).await }
        });
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ObjectKey>(1024);
        let source = tokio::spawn(async move {
            while let Some(key) = rx.recv().await {
                queue.add(key);
            }
        });
        for _ in 0..CONTROLLER_ROUNDS {
            for (i, key) in keys.iter().enumerate() {
                tx.send(key.clone()).await.expect("source task runs");
                if i % YIELD_EVERY == YIELD_EVERY - 1 {
                    tokio::task::yield_now().await;
                }
            }
        }
        drop(tx);
        source.await.expect("source");
        let mut seen = u64::MAX;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = count.load(Ordering::Relaxed);
            if now == seen && now > 0 {
                break;
            }
            seen = now;
        }
        intake.cancel();
        running.await.expect("controller");
        (
            Duration::from_nanos(last_nanos.load(Ordering::Relaxed)),
            count.load(Ordering::Relaxed),
        )
    });
    println!("PEERS F wall_ms={:.3} reconciles={reconciles}", ms(elapsed));
}
