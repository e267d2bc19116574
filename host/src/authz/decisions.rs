//! The answers a [`ReadAuthorizer`](super::ReadAuthorizer) keeps: bounded in number, each
//! forgotten after its time to live.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Read;
use crate::manifest::ServiceAccountRef;

/// One question asked of the API server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Question {
    account: ServiceAccountRef,
    verb: &'static str,
    group: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
}

impl Question {
    pub(super) fn new(account: &ServiceAccountRef, read: Read<'_>) -> Self {
        Self {
            account: account.clone(),
            verb: read.verb,
            group: read.group.to_owned(),
            resource: read.resource.to_owned(),
            namespace: read.namespace.map(ToOwned::to_owned),
            name: read.name.map(ToOwned::to_owned),
        }
    }
}

/// Answers by question, each with the moment it expires.
pub(super) struct Decisions {
    ttl: Duration,
    capacity: usize,
    answers: Mutex<HashMap<Question, (bool, Instant)>>,
}

impl Decisions {
    pub(super) fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            answers: Mutex::default(),
        }
    }

    /// The answer to `question`, unless it has expired.
    pub(super) fn get(&self, question: &Question) -> Option<bool> {
        self.get_at(question, Instant::now())
    }

    /// The answer to `question` at `now`, unless it has expired by then.
    fn get_at(&self, question: &Question, now: Instant) -> Option<bool> {
        let answers = self.answers.lock();
        let (allowed, expires) = answers.get(question)?;
        (now < *expires).then_some(*allowed)
    }

    /// Keeps `allowed` for `question`; when full, drops the expired answers first, then the
    /// ones closest to expiring.
    pub(super) fn put(&self, question: Question, allowed: bool) {
        let now = Instant::now();
        let mut answers = self.answers.lock();
        if answers.len() >= self.capacity && !answers.contains_key(&question) {
            answers.retain(|_, (_, expires)| *expires > now);
            while answers.len() >= self.capacity {
                let oldest = answers
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(question, _)| question.clone());
                match oldest {
                    Some(oldest) => answers.remove(&oldest),
                    None => break,
                };
            }
        }
        answers.insert(question, (allowed, now + self.ttl));
    }

    pub(super) fn len(&self) -> usize {
        self.answers.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(namespace: &str) -> Question {
        let account = ServiceAccountRef::parse("team-a/site").unwrap();
        Question::new(
            &account,
            Read {
                verb: "get",
                group: "",
                resource: "configmaps",
                namespace: Some(namespace),
                name: None,
            },
        )
    }

    #[test]
    fn an_answer_is_kept_for_its_time_to_live_and_no_longer() {
        let decisions = Decisions::new(Duration::from_secs(5), 8);
        let asked = Instant::now();
        decisions.put(question("a"), true);
        decisions.put(question("b"), false);
        assert_eq!(decisions.get(&question("a")), Some(true));
        assert_eq!(decisions.get(&question("b")), Some(false));
        assert_eq!(decisions.get(&question("c")), None);
        let later = asked + Duration::from_millis(4900);
        assert_eq!(decisions.get_at(&question("a"), later), Some(true));
        let expired = Instant::now() + Duration::from_secs(5);
        assert_eq!(decisions.get_at(&question("a"), expired), None);
    }

    #[test]
    fn a_full_store_drops_the_answers_closest_to_expiring() {
        let decisions = Decisions::new(Duration::from_secs(60), 3);
        for namespace in ["a", "b", "c", "d", "e"] {
            decisions.put(question(namespace), true);
        }
        assert_eq!(decisions.len(), 3);
        assert_eq!(decisions.get(&question("a")), None);
        assert_eq!(decisions.get(&question("e")), Some(true));
    }
}
