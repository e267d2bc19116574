//! Workqueue benchmarks A–E (see the README's benchmark table), plus kube-runtime's `scheduler`
//! as the peer for the delaying workload E.
//!
//! Run: `cargo bench -p reconcile-host --bench workqueue`. Besides criterion's own lines, each
//! workload prints one `RESULT` line with the numbers the README quotes.
//!
//! With `PEERS_ROUND=1` the binary skips criterion and runs one round of the side-by-side
//! workloads of `benches/peers/` (A–F, see its README), printing one `PEERS` line each, the
//! format `benches/peers/run.sh` reads: `make bench-peers`.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use futures::StreamExt;
use kube_runtime::scheduler::{ScheduleRequest, scheduler};
use reconcile_host::queue::{Queue, RateLimitingQueue, default_controller_limiter};
use tokio::runtime::Runtime;
use tokio::time::Instant;

const OPS: usize = 1_000_000;
const KEYSPACE: usize = 10_000;
const HOT_KEYS: usize = 100;
const WORKERS: usize = 4;
const DELAYED: usize = 100_000;
const MAX_DELAY_MICROS: u64 = 50_000;

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A runtime with `workers` worker threads.
fn workers(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Two worker threads: one per core of the reference machine.
fn multi_thread() -> Runtime {
    workers(2)
}

fn keys<K: From<String>>(n: usize) -> Vec<K> {
    (0..n)
        .map(|i| K::from(format!("default/object-{i:05}")))
        .collect()
}

/// A: one task, 1,000,000 × (add key i % 10,000, get, done).
fn single_task_cycle<K: reconcile_host::queue::Key + From<String>>(c: &mut Criterion, name: &str) {
    let rt = current_thread();
    let keys: Vec<K> = keys(KEYSPACE);
    let mut group = c.benchmark_group("A_add_get_done_one_task");
    group
        .sample_size(10)
        .throughput(Throughput::Elements(OPS as u64));
    let mut best = f64::MAX;
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let queue = Queue::new();
                let elapsed = rt.block_on(async {
                    let start = std::time::Instant::now();
                    for i in 0..OPS {
                        queue.add(keys[i % KEYSPACE].clone());
                        let key = queue.get().await.expect("running queue");
                        queue.done(&key);
                    }
                    start.elapsed()
                });
                best = best.min(elapsed.as_secs_f64());
                total += elapsed;
            }
            total
        });
    });
    group.finish();
    if best == f64::MAX {
        return; // filtered out
    }
    println!(
        "RESULT A keys={name}: best {:.2} M ops/s ({:.0} ns per add+get+done)",
        OPS as f64 / best / 1e6,
        best * 1e9 / OPS as f64
    );
}

fn bench_a(c: &mut Criterion) {
    single_task_cycle::<String>(c, "String");
    single_task_cycle::<Arc<str>>(c, "Arc<str>");
}

/// One producer adding 1,000,000 keys from `keys` (i % len) while 4 workers get/done; returns
/// (gets, elapsed until the queue is drained).
fn producer_and_workers(rt: &Runtime, keys: &[Arc<str>]) -> (u64, Duration) {
    rt.block_on(async {
        let queue: Queue<Arc<str>> = Queue::new();
        let start = std::time::Instant::now();
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
        let producer = {
            let (queue, keys) = (queue.clone(), keys.to_vec());
            tokio::spawn(async move {
                for i in 0..OPS {
                    queue.add(keys[i % keys.len()].clone());
                    if i % 256 == 255 {
                        tokio::task::yield_now().await; // let workers on this thread run
                    }
                }
            })
        };
        producer.await.expect("producer");
        queue.shut_down_with_drain().await;
        let mut gets = 0;
        for worker in workers {
            gets += worker.await.expect("worker");
        }
        (gets, start.elapsed())
    })
}

/// B and C: the same shape over 10,000 and over 100 keys.
fn bench_producer_workers(c: &mut Criterion, label: &str, keyspace: usize) {
    let rt = multi_thread();
    let keys: Vec<Arc<str>> = keys(keyspace);
    let runs = RefCell::new(Vec::new());
    let mut group = c.benchmark_group(format!("{label}_1_producer_{WORKERS}_workers"));
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(OPS as u64));
    group.bench_function(format!("{keyspace}_keys"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (gets, elapsed) = producer_and_workers(&rt, &keys);
                runs.borrow_mut().push((gets, elapsed));
                total += elapsed;
            }
            total
        });
    });
    group.finish();
    let mut runs = runs.into_inner();
    if runs.is_empty() {
        return; // filtered out
    }
    runs.sort_by_key(|&(_, elapsed)| elapsed);
    let (gets, elapsed) = runs[runs.len() / 2];
    println!(
        "RESULT {label} keys={keyspace}: median run {:.1} ms, {gets} gets of {OPS} adds, \
         {:.2} M gets/s, {:.2} M adds/s",
        elapsed.as_secs_f64() * 1e3,
        gets as f64 / elapsed.as_secs_f64() / 1e6,
        OPS as f64 / elapsed.as_secs_f64() / 1e6,
    );
}

fn bench_b(c: &mut Criterion) {
    bench_producer_workers(c, "B", KEYSPACE);
}

fn bench_c(c: &mut Criterion) {
    bench_producer_workers(c, "C", HOT_KEYS);
}

/// D: `add_rate_limited` + `forget` with the default controller limiter, keys i % 10,000.
fn bench_d(c: &mut Criterion) {
    let rt = current_thread();
    let _guard = rt.enter();
    let keys: Vec<Arc<str>> = keys(KEYSPACE);
    let queue = RateLimitingQueue::new(default_controller_limiter());
    let mut group = c.benchmark_group("D_add_rate_limited_forget");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("default_controller_limiter", |b| {
        b.iter(|| {
            let key = &keys[i % KEYSPACE];
            i += 1;
            queue.add_rate_limited(key.clone());
            queue.forget(key);
        });
    });
    group.finish();
}

/// Lateness percentiles in milliseconds.
fn percentiles(mut late: Vec<Duration>) -> (f64, f64, f64) {
    late.sort_unstable();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.50), at(0.99), at(1.0))
}

/// E's delays: splitmix64 from `seed`, each `next % 50,000` µs; `benches/peers/main.go` draws
/// the same sequence.
fn random_delays(seed: u64) -> Vec<Duration> {
    let mut state = seed;
    (0..DELAYED)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Duration::from_micros((z ^ (z >> 31)) % MAX_DELAY_MICROS)
        })
        .collect()
}

/// Each key's ready time, written by the producer and read by the worker without a lock, so
/// the measurement does not contend with the code it measures; and each key's lateness.
struct ReadyTimes {
    base: Instant,
    nanos: Vec<AtomicU64>,
    late: Vec<AtomicU64>,
    /// When the producer's last add returned (nanoseconds since `base`).
    produced: AtomicU64,
}

/// E's lateness: of every key, and of the keys due after the producer's last add (which no
/// longer compete with the producer for a CPU).
struct Lateness {
    all: Vec<Duration>,
    after_producer: Vec<Duration>,
}

impl ReadyTimes {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            nanos: (0..DELAYED).map(|_| AtomicU64::new(0)).collect(),
            late: (0..DELAYED).map(|_| AtomicU64::new(0)).collect(),
            produced: AtomicU64::new(0),
        }
    }

    fn since_base(&self, at: Instant) -> u64 {
        u64::try_from((at - self.base).as_nanos()).expect("bench fits in u64 ns")
    }

    /// Marks the end of the producer's adds.
    fn produced(&self) {
        self.produced
            .store(self.since_base(Instant::now()), Ordering::Release);
    }

    /// The lateness of every key in arrival order, and of those due after the producer's end.
    fn split(&self, all: Vec<Duration>) -> Lateness {
        let produced = self.produced.load(Ordering::Acquire);
        let after_producer = (0..DELAYED)
            .filter(|&key| self.nanos[key].load(Ordering::Acquire) >= produced)
            .map(|key| Duration::from_nanos(self.late[key].load(Ordering::Acquire)))
            .collect();
        Lateness {
            all,
            after_producer,
        }
    }

    /// Records `now + delay` as `key`'s ready time, taken just before the key is handed over,
    /// so it is never later than the ready time the code under test computes.
    fn record(&self, key: usize, delay: Duration) -> Instant {
        let due = Instant::now() + delay;
        self.nanos[key].store(self.since_base(due), Ordering::Release);
        due
    }

    fn lateness(&self, key: usize) -> Duration {
        let due = self.base + Duration::from_nanos(self.nanos[key].load(Ordering::Acquire));
        let late = Instant::now().saturating_duration_since(due);
        let nanos = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
        self.late[key].store(nanos, Ordering::Relaxed);
        late
    }
}

/// E (ours): 100,000 `add_after` with random 0–50 ms delays; one worker records how late each
/// key arrives after the ready time the producer computed just before the call.
fn delayed_ours(rt: &Runtime, delays: &[Duration]) -> Lateness {
    rt.block_on(async {
        let queue = RateLimitingQueue::new(default_controller_limiter());
        let ready = Arc::new(ReadyTimes::new());
        let worker = {
            let (queue, ready) = (queue.clone(), Arc::clone(&ready));
            tokio::spawn(async move {
                let mut late = Vec::with_capacity(DELAYED);
                while late.len() < DELAYED {
                    let key: usize = queue.get().await.expect("running queue");
                    late.push(ready.lateness(key));
                    queue.done(&key);
                }
                late
            })
        };
        for (key, &delay) in delays.iter().enumerate() {
            ready.record(key, delay);
            queue.add_after(key, delay);
        }
        ready.produced();
        let all = worker.await.expect("worker");
        ready.split(all)
    })
}

/// E (peer): the same workload through kube-runtime's `scheduler` stream.
fn delayed_kube_scheduler(rt: &Runtime, delays: &[Duration]) -> Lateness {
    rt.block_on(async {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let ready = Arc::new(ReadyTimes::new());
        let worker = {
            let ready = Arc::clone(&ready);
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(scheduler(rx));
                let mut late = Vec::with_capacity(DELAYED);
                while late.len() < DELAYED {
                    let key: usize = stream.next().await.expect("open stream");
                    late.push(ready.lateness(key));
                }
                late
            })
        };
        for (key, &delay) in delays.iter().enumerate() {
            let due = ready.record(key, delay);
            tx.unbounded_send(ScheduleRequest {
                message: key,
                run_at: due,
            })
            .expect("scheduler receives");
        }
        ready.produced();
        let all = worker.await.expect("worker");
        ready.split(all)
    })
}

type DelayedWorkload = fn(&Runtime, &[Duration]) -> Lateness;

fn bench_e(c: &mut Criterion) {
    // The producer on this thread, the timer task and the worker on one worker thread: two
    // threads running code on the two cores, as in `make bench-peers`.
    let rt = workers(1);
    let delays = random_delays(7);
    let mut group = c.benchmark_group("E_add_after_100k_random_0_50ms");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(DELAYED as u64));
    let mut results = Vec::new();
    let workloads: [(&str, DelayedWorkload); 2] = [
        ("reconcile_host_delaying_queue", delayed_ours),
        ("kube_runtime_scheduler", delayed_kube_scheduler),
    ];
    for (name, workload) in workloads {
        let late = RefCell::new(Vec::new());
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = std::time::Instant::now();
                    late.borrow_mut().extend(workload(&rt, &delays).all);
                    total += start.elapsed();
                }
                total
            });
        });
        let late = late.into_inner();
        if late.is_empty() {
            continue; // filtered out
        }
        let (p50, p99, max) = percentiles(late);
        println!("RESULT E {name}: lateness p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms");
        results.push((name, p99));
    }
    group.finish();
    if let [(_, ours), (_, peer)] = results[..] {
        println!(
            "RESULT E ratio: kube_runtime_scheduler p99 / ours p99 = {:.2}",
            peer / ours
        );
    }
}

criterion_group!(benches, bench_a, bench_b, bench_c, bench_d, bench_e);

fn main() {
    if std::env::var_os("PEERS_ROUND").is_some() {
        peers::round(std::env::args().skip(1).find(|a| !a.starts_with('-')));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

#[path = "workqueue_peers/round.rs"]
mod peers;
