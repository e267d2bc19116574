//! Whole-queue properties: a concurrency stress test and a model-based comparison with a
//! literal transcription of client-go's queue.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use reconcile_host::queue::{DelayingQueue, Queue};

const KEYS: usize = 200;
const PRODUCERS: usize = 6;
const WORKERS: usize = 6;
const ADDS_PER_PRODUCER: usize = 20_000;

/// Per-key bookkeeping shared by producers and workers.
struct Ledger {
    /// Bumped by a producer just before each add of the key.
    wanted: Vec<AtomicU64>,
    /// The highest `wanted` value a worker saw after taking the key.
    seen: Vec<AtomicU64>,
    /// Set while a worker holds the key.
    held: Vec<AtomicBool>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_and_workers_never_share_or_lose_a_key() {
    let queue: DelayingQueue<usize> = DelayingQueue::new();
    let ledger = Arc::new(Ledger {
        wanted: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        held: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
    });

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, ledger) = (queue.clone(), Arc::clone(&ledger));
            tokio::spawn(async move {
                let mut processed = 0_u64;
                while let Some(key) = queue.get().await {
                    assert!(
                        !ledger.held[key].swap(true, Ordering::SeqCst),
                        "key {key} handed to two workers at once"
                    );
                    let wanted = ledger.wanted[key].load(Ordering::SeqCst);
                    ledger.seen[key].fetch_max(wanted, Ordering::SeqCst);
                    if processed.is_multiple_of(7) {
                        tokio::task::yield_now().await; // hold some keys across a yield
                    }
                    ledger.held[key].store(false, Ordering::SeqCst);
                    queue.done(&key);
                    processed += 1;
                }
                processed
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|seed| {
            let (queue, ledger) = (queue.clone(), Arc::clone(&ledger));
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64);
                for i in 0..ADDS_PER_PRODUCER {
                    let key = rng.random_range(0..KEYS);
                    ledger.wanted[key].fetch_add(1, Ordering::SeqCst);
                    if rng.random_ratio(1, 10) {
                        let delay = Duration::from_micros(rng.random_range(0..2_000));
                        queue.add_after(key, delay);
                    } else {
                        queue.add(key);
                    }
                    if i.is_multiple_of(64) {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }

    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        while !(queue.waiting() == 0 && queue.is_empty() && queue.processing() == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(settled.is_ok(), "queue never settled: {queue:?}");
    queue.shut_down();
    let mut processed = 0;
    for worker in workers {
        processed += worker.await.unwrap();
    }

    for key in 0..KEYS {
        let wanted = ledger.wanted[key].load(Ordering::SeqCst);
        let seen = ledger.seen[key].load(Ordering::SeqCst);
        assert_eq!(
            seen, wanted,
            "key {key}: an add after its last get was never processed"
        );
    }
    let adds = (PRODUCERS * ADDS_PER_PRODUCER) as u64;
    assert!(processed >= KEYS as u64 && processed <= adds, "{processed}");
}

/// client-go's `Typed[T]` queue, transcribed set by set.
#[derive(Debug, Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    shutting_down: bool,
}

impl Model {
    fn add(&mut self, k: u8) {
        if self.shutting_down || self.dirty.contains(&k) {
            return;
        }
        self.dirty.insert(k);
        if self.processing.contains(&k) {
            return;
        }
        self.queue.push_back(k);
    }

    /// `None`: would block; `Some(None)`: shut down.
    fn get(&mut self) -> Option<Option<u8>> {
        match self.queue.pop_front() {
            Some(k) => {
                self.processing.insert(k);
                self.dirty.remove(&k);
                Some(Some(k))
            }
            None if self.shutting_down => Some(None),
            None => None,
        }
    }

    fn done(&mut self, k: u8) {
        self.processing.remove(&k);
        if self.dirty.contains(&k) {
            self.queue.push_back(k);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    Get,
    /// Done for the n-th key currently processing (modulo their number).
    Done(usize),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0_u8..6).prop_map(Op::Add),
        4 => Just(Op::Get),
        3 => any::<usize>().prop_map(Op::Done),
        1 => Just(Op::ShutDown),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn queue_behaves_like_client_go_over_random_operation_sequences(
        ops in proptest::collection::vec(op(), 1..80)
    ) {
        let queue = Queue::new();
        let mut model = Model::default();
        let mut held: Vec<u8> = Vec::new();
        for op in ops {
            match op {
                Op::Add(k) => {
                    queue.add(k);
                    model.add(k);
                }
                Op::Get => {
                    let got = queue.try_get();
                    prop_assert_eq!(got, model.get());
                    if let Some(Some(k)) = got {
                        prop_assert!(!held.contains(&k), "{} handed out twice", k);
                        held.push(k);
                    }
                }
                Op::Done(n) => {
                    if !held.is_empty() {
                        let k = held.remove(n % held.len());
                        queue.done(&k);
                        model.done(k);
                    }
                }
                Op::ShutDown => {
                    queue.shut_down();
                    model.shutting_down = true;
                }
            }
            prop_assert_eq!(queue.len(), model.queue.len());
            prop_assert_eq!(queue.processing(), model.processing.len());
            prop_assert_eq!(queue.shutting_down(), model.shutting_down);
        }
    }
}
