//! How long changes wait for a reconcile: the age of the oldest change of a key this replica is
//! responsible for that no reconcile has started on since.
//!
//! # Why
//! A key can be lost between replicas: dropped by the one that no longer owns it and never
//! queued by the one that gained it. Nothing in a queue shows that, since the key is in no queue.
//! So every change of every key is noted here, also for keys that are another replica's at the
//! time, and the age is read over the keys this replica is responsible for *now*.
//!
//! # Rules
//! - A change is noted when an informer delivers it, before any filter, and only its first time
//!   counts: later changes of a key already waiting do not make it younger.
//! - A reconcile starting here clears the key.
//! - A key waits from its change, or from the moment this replica became responsible for it, if
//!   later: [`restart`](Unhandled::restart) is called at the start of every term and every change
//!   of the sharded assignment, and every wait starts again from then.
//! - Keys no longer cached and not this replica's are forgotten at each reading.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::key::ObjectKey;

/// Past this age the readiness check `unhandled/<controller>` fails.
pub const READY_BOUND: Duration = Duration::from_secs(300);

/// The changes of one controller's keys that wait for a reconcile (see the module docs).
#[derive(Debug)]
pub struct Unhandled {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Each key's first change not yet followed by a reconcile here.
    waiting: HashMap<ObjectKey, Instant>,
    /// Since when this replica is responsible for the keys it has now.
    since: Instant,
}

impl Default for Unhandled {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                waiting: HashMap::new(),
                since: Instant::now(),
            }),
        }
    }
}

/// Below this many entries' room a map keeps what it has.
const KEEP_ROOM: usize = 1024;

/// Gives back the room a wave of changes (every key at startup or on a relist) left in `waiting`
/// once it is three-quarters empty, keeping twice what it holds: otherwise the map would stay
/// the size of the cache for the life of the host.
fn release_spare(waiting: &mut HashMap<ObjectKey, Instant>) {
    if waiting.capacity() > KEEP_ROOM && waiting.len() < waiting.capacity() / 4 {
        waiting.shrink_to((waiting.len() * 2).max(KEEP_ROOM));
    }
}

impl Unhandled {
    /// An informer delivered a change of `key`.
    pub fn changed(&self, key: &ObjectKey) {
        let mut state = self.state.lock();
        if !state.waiting.contains_key(key) {
            state.waiting.insert(key.clone(), Instant::now());
        }
    }

    /// A reconcile of `key` starts on this replica.
    pub fn started(&self, key: &ObjectKey) {
        let mut state = self.state.lock();
        state.waiting.remove(key);
        release_spare(&mut state.waiting);
    }

    /// This replica's responsibility changed (a new term, a new assignment): every wait starts
    /// again from now.
    pub fn restart(&self) {
        self.state.lock().since = Instant::now();
    }

    /// The age of the oldest waiting change among the keys `mine` accepts; zero when none
    /// waits. Keys neither `mine` nor `cached` are forgotten.
    pub fn oldest(
        &self,
        mine: impl Fn(&ObjectKey) -> bool,
        cached: impl Fn(&ObjectKey) -> bool,
    ) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock();
        let since = state.since;
        let mut oldest = Duration::ZERO;
        state.waiting.retain(|key, changed| {
            if mine(key) {
                oldest = oldest.max(now.saturating_duration_since((*changed).max(since)));
                true
            } else {
                cached(key)
            }
        });
        release_spare(&mut state.waiting);
        oldest
    }

    /// Orders `keys` to be queued: those with a change no reconcile here has started on first,
    /// oldest change first, then the others in their order. A replica queues the keys it gains
    /// in this order, so after a handover or a lapse it reconciles what waits before what it had
    /// already reconciled.
    pub fn oldest_first(&self, keys: &mut [ObjectKey]) {
        let state = self.state.lock();
        keys.sort_by_key(|key| match state.waiting.get(key) {
            Some(changed) => (false, Some(*changed)),
            None => (true, None),
        });
    }

    /// How many keys have a change noted.
    #[must_use]
    pub fn len(&self) -> usize {
        self.state.lock().waiting.len()
    }

    /// True when no change waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced("default", name)
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_waiting_for_a_worker_counts_until_its_reconcile_starts() {
        let unhandled = Unhandled::default();
        let all = |_: &ObjectKey| true;
        unhandled.changed(&key("a"));
        tokio::time::advance(Duration::from_secs(10)).await;
        // A later change does not make the wait younger.
        unhandled.changed(&key("a"));
        unhandled.changed(&key("b"));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(unhandled.oldest(all, all), Duration::from_secs(15));
        unhandled.started(&key("a"));
        assert_eq!(unhandled.oldest(all, all), Duration::from_secs(5));
        unhandled.started(&key("b"));
        assert_eq!(unhandled.oldest(all, all), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn only_keys_this_replica_has_count_and_each_from_when_it_got_them() {
        let unhandled = Unhandled::default();
        let mine = |k: &ObjectKey| k.as_str().ends_with("/mine");
        let cached = |_: &ObjectKey| true;
        unhandled.changed(&key("theirs"));
        unhandled.changed(&key("mine"));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(unhandled.oldest(mine, cached), Duration::from_secs(30));
        // A new assignment: every wait starts again.
        unhandled.restart();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(unhandled.oldest(mine, cached), Duration::from_secs(2));
        // "theirs" is gained now: it waits from the restart, not from its change.
        let all = |_: &ObjectKey| true;
        assert_eq!(unhandled.oldest(all, cached), Duration::from_secs(2));
        // Keys neither mine nor cached are forgotten.
        let gone = |_: &ObjectKey| false;
        unhandled.oldest(mine, gone);
        assert_eq!(unhandled.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_gained_are_ordered_waiting_changes_first_and_oldest_first() {
        let unhandled = Unhandled::default();
        unhandled.changed(&key("late"));
        tokio::time::advance(Duration::from_secs(1)).await;
        unhandled.changed(&key("later"));
        unhandled.changed(&key("handled"));
        unhandled.started(&key("handled"));
        tokio::time::advance(Duration::from_secs(1)).await;
        // A later change of a waiting key keeps its place.
        unhandled.changed(&key("late"));
        let mut keys: Vec<ObjectKey> = ["quiet-b", "handled", "later", "quiet-a", "late"]
            .into_iter()
            .map(key)
            .collect();
        unhandled.oldest_first(&mut keys);
        let names: Vec<&str> = keys.iter().map(ObjectKey::as_str).collect();
        assert_eq!(
            names,
            [
                "default/late",
                "default/later",
                "default/quiet-b",
                "default/handled",
                "default/quiet-a"
            ]
        );
    }

    #[test]
    fn the_room_a_wave_of_changes_took_is_given_back_once_it_is_handled() {
        let unhandled = Unhandled::default();
        let keys: Vec<ObjectKey> = (0..100_000).map(|i| key(&format!("k{i}"))).collect();
        for key in &keys {
            unhandled.changed(key);
        }
        let grown = unhandled.state.lock().waiting.capacity();
        for key in &keys[..99_990] {
            unhandled.started(key);
        }
        let state = unhandled.state.lock();
        assert_eq!(state.waiting.len(), 10);
        assert!(
            state.waiting.capacity() <= 2 * KEEP_ROOM,
            "{} of {grown} kept",
            state.waiting.capacity()
        );
    }
}
