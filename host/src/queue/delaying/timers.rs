//! The delaying queue's waiting keys by ready time: bucketed by the millisecond, a key waiting
//! once with its earliest ready time, the due ones taken in ready-time order.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::queue::key::Key;
use crate::queue::layered_map::LayeredMap;

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

pub(super) struct Timers<K> {
    /// Waiting keys by the millisecond of their ready time since the queue's origin. A bucket
    /// is sorted only when it comes due, so each add is a push and each firing a pop: far
    /// cheaper than a binary heap over every waiting key.
    buckets: BTreeMap<u64, Bucket<K>>,
    /// The live `(ready, seq)` of each waiting key; entries that disagree are stale. Layered,
    /// so that its growth never holds the timer task up for long.
    pub(super) live: LayeredMap<K, (Instant, u64)>,
    next_seq: u64,
}

impl<K: Key> Timers<K> {
    /// No key waiting.
    pub(super) fn new() -> Self {
        Self {
            buckets: BTreeMap::new(),
            live: LayeredMap::default(),
            next_seq: 0,
        }
    }

    /// Rule 7's bookkeeping for one `add_after`: a key already waiting keeps the earlier ready
    /// time; otherwise the key waits until `ready`.
    pub(super) fn insert(&mut self, origin: Instant, key: K, ready: Instant) {
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

    /// Moves every key due at `now` into `due` in ready-time order; returns the ready time of
    /// the earliest key still waiting.
    pub(super) fn take_due(&mut self, now: Instant, due: &mut Vec<K>) -> Option<Instant> {
        loop {
            let Some(mut first) = self.buckets.first_entry() else {
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
                if let Some(key) = self.live.remove_if(&key, |&live| live == (ready, seq)) {
                    due.push(key);
                }
            }
            match bucket.entries.last() {
                Some(entry) => break Some(entry.ready),
                None => {
                    first.remove();
                }
            }
        }
    }
}

fn millis_since(origin: Instant, at: Instant) -> u64 {
    u64::try_from((at - origin).as_millis()).unwrap_or(u64::MAX)
}
