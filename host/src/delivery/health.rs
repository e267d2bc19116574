//! Whether a plugin's reconciles keep failing: the objects whose last [`FAILING_AFTER`]
//! reconciles or more all failed, and the latest of those failures. The status of the plugin's
//! `ReconcilerPlugin` object reads it (the `Degraded` condition, reason `ReconcilesFailing`).
//!
//! # Rules
//! - An object keeps failing once its last [`FAILING_AFTER`] reconciles failed in a row: a
//!   conflict that its first retry resolves is no degradation.
//! - A successful reconcile of an object clears it; a new module clears all ([`Health::reset`]):
//!   the condition speaks of the module serving.
//! - At most [`MAX_TRACKED`] objects are followed; failures of others are not counted.
//! - What [`Health::failing`] reports is taken afresh when it becomes failing or stops, and
//!   otherwise at most every [`REFRESH`]: a plugin failing on every reconcile does not rewrite its
//!   object's status on every reconcile.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::controller::ObjectKey;
use crate::wasm::guest_log::guest_text;

/// Failed reconciles in a row after which an object keeps failing.
pub const FAILING_AFTER: u32 = 3;

/// The most objects followed at once.
pub const MAX_TRACKED: usize = 10_000;

/// How often, at most, the failure reported is taken afresh while failing continues.
pub const REFRESH: Duration = Duration::from_secs(30);

/// The longest failure text kept (escaped).
const TEXT_MAX: usize = 1024;

/// A plugin whose reconciles keep failing: how many objects, and the latest failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// Objects whose last [`FAILING_AFTER`] reconciles or more failed.
    pub objects: usize,
    /// The latest failure's reason (`error`, `trap`, `deadline`, `memory`, `instantiate`),
    /// unless that object has recovered since.
    pub reason: Option<&'static str>,
    /// A sentence for the condition: the objects, and the latest failure's object and text.
    pub message: String,
}

/// One plugin's failing objects (see the module docs).
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Failed reconciles in a row, by object (objects whose last reconcile succeeded are absent).
    in_a_row: HashMap<ObjectKey, u32>,
    /// How many of those reached [`FAILING_AFTER`].
    failing: usize,
    /// The latest failure of an object that keeps failing: its key, reason and text.
    latest: Option<(ObjectKey, &'static str, String)>,
    /// What was last reported, and when it was taken.
    shown: Option<(Instant, Failing)>,
}

impl Health {
    /// A reconcile of `key` succeeded.
    pub fn succeeded(&self, key: &ObjectKey) {
        let mut state = self.state.lock();
        if let Some(count) = state.in_a_row.remove(key) {
            if count >= FAILING_AFTER {
                state.failing -= 1;
            }
            if state
                .latest
                .as_ref()
                .is_some_and(|(latest, ..)| latest == key)
            {
                state.latest = None;
            }
        }
    }

    /// A reconcile of `key` failed with `reason`; `text` says how (called only when the
    /// object keeps failing).
    pub fn failed(&self, key: &ObjectKey, reason: &'static str, text: impl FnOnce() -> String) {
        let mut state = self.state.lock();
        let tracked = state.in_a_row.len();
        let count = match state.in_a_row.get_mut(key) {
            Some(count) => {
                *count = count.saturating_add(1);
                *count
            }
            None if tracked < MAX_TRACKED => {
                state.in_a_row.insert(key.clone(), 1);
                1
            }
            None => return,
        };
        if count == FAILING_AFTER {
            state.failing += 1;
        }
        if count >= FAILING_AFTER {
            state.latest = Some((key.clone(), reason, guest_text(&text(), TEXT_MAX)));
        }
    }

    /// Forgets every failure: a new module serves.
    pub fn reset(&self) {
        *self.state.lock() = State::default();
    }

    /// Whether objects keep failing, as last reported (see the module docs).
    pub fn failing(&self) -> Option<Failing> {
        self.failing_at(Instant::now())
    }

    fn failing_at(&self, now: Instant) -> Option<Failing> {
        let mut state = self.state.lock();
        if state.failing == 0 {
            state.shown = None;
            return None;
        }
        let fresh = state
            .shown
            .as_ref()
            .is_some_and(|(taken, _)| now.duration_since(*taken) < REFRESH);
        if !fresh {
            let failing = state.report();
            state.shown = Some((now, failing));
        }
        state.shown.as_ref().map(|(_, failing)| failing.clone())
    }
}

impl State {
    fn report(&self) -> Failing {
        let objects = if self.failing == 1 {
            "1 object".to_owned()
        } else {
            format!("{} objects", self.failing)
        };
        let mut message =
            format!("the last {FAILING_AFTER} or more reconciles of {objects} failed");
        let reason = self.latest.as_ref().map(|(key, reason, text)| {
            message.push_str(&format!("; the latest, of {key} ({reason}): {text}"));
            *reason
        });
        Failing {
            objects: self.failing,
            reason,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::in_namespace(Some("demo"), name)
    }

    fn fail(health: &Health, name: &str, text: &str) {
        health.failed(&key(name), "error", || text.to_owned());
    }

    #[test]
    fn an_object_keeps_failing_after_three_failures_in_a_row_and_a_success_clears_it() {
        let health = Health::default();
        fail(&health, "a", "boom 1");
        fail(&health, "a", "boom 2");
        assert_eq!(
            health.failing(),
            None,
            "two failures are a retry, not a degradation"
        );
        health.succeeded(&key("a"));
        fail(&health, "a", "boom 3");
        fail(&health, "a", "boom 4");
        assert_eq!(
            health.failing(),
            None,
            "a success in between starts the count again"
        );
        fail(&health, "a", "boom\n5");
        let failing = health.failing().expect("failing");
        assert_eq!(failing.objects, 1);
        assert_eq!(failing.reason, Some("error"));
        assert_eq!(
            failing.message,
            "the last 3 or more reconciles of 1 object failed; the latest, of demo/a (error): \
             boom\\n5"
        );
        health.succeeded(&key("a"));
        assert_eq!(health.failing(), None);
    }

    #[test]
    fn what_is_reported_is_refreshed_at_most_every_thirty_seconds_while_failing_continues() {
        let health = Health::default();
        for i in 0..3 {
            fail(&health, "a", &format!("a{i}"));
        }
        let start = Instant::now();
        let first = health.failing_at(start).expect("failing");
        for i in 0..3 {
            health.failed(&key("b"), "trap", || format!("b{i}"));
        }
        assert_eq!(health.failing_at(start + REFRESH / 2), Some(first.clone()));
        let later = health.failing_at(start + REFRESH).expect("failing");
        assert_eq!(later.objects, 2);
        assert_eq!(later.reason, Some("trap"));
        assert!(
            later.message.ends_with("of demo/b (trap): b2"),
            "{}",
            later.message
        );
        // The latest object recovering leaves the other, without a latest failure.
        health.succeeded(&key("b"));
        let left = health.failing_at(start + REFRESH * 2).expect("failing");
        assert_eq!((left.objects, left.reason), (1, None));
        assert_eq!(
            left.message,
            "the last 3 or more reconciles of 1 object failed"
        );
    }

    #[test]
    fn a_new_module_forgets_every_failure_and_the_objects_followed_are_bounded() {
        let health = Health::default();
        for i in 0..MAX_TRACKED + 10 {
            health.failed(&key(&format!("o{i}")), "error", String::new);
        }
        assert_eq!(health.state.lock().in_a_row.len(), MAX_TRACKED);
        for _ in 0..2 {
            fail(&health, "o0", "again");
        }
        assert_eq!(health.failing().expect("failing").objects, 1);
        health.reset();
        assert_eq!(health.failing(), None);
        assert!(health.state.lock().in_a_row.is_empty());
    }
}
