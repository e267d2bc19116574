//! Event handlers: turn cache changes into queue keys (SEMANTICS rules 14–16).

use std::sync::Arc;

use super::change::{Change, Handler};
use super::object::CachedObject;
use crate::controller::{Cause, Causes, ObjectKey, Origin, Unhandled, Why};
use crate::queue::RateLimitingQueue;

/// Filters on update events (SEMANTICS rule 14). Updates whose resourceVersion did not change
/// are always dropped; resyncs always pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Predicates {
    /// Drop updates that leave `metadata.generation` unchanged (status-only writes), which stops
    /// a controller from triggering itself by writing status.
    pub generation_changed: bool,
}

/// Which keys a handler may enqueue (sharded mode: this replica's).
pub type KeyFilter = Arc<dyn Fn(&ObjectKey) -> bool + Send + Sync>;

/// Where a handler puts keys: a queue, and optionally a filter in front of it.
#[derive(Clone)]
pub struct Enqueue {
    queue: RateLimitingQueue<ObjectKey>,
    admit: Option<KeyFilter>,
    /// Where every key's change is noted, before the filter.
    unhandled: Option<Arc<Unhandled>>,
    /// Where the cause of every key queued is noted, with the kind of the informer it watches.
    causes: Option<(Arc<Causes>, Arc<str>)>,
}

impl std::fmt::Debug for Enqueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueue")
            .field("filtered", &self.admit.is_some())
            .finish_non_exhaustive()
    }
}

impl Enqueue {
    /// Into `queue`, only the keys `admit` accepts.
    #[must_use]
    pub fn filtered(queue: RateLimitingQueue<ObjectKey>, admit: KeyFilter) -> Self {
        Self {
            queue,
            admit: Some(admit),
            unhandled: None,
            causes: None,
        }
    }

    /// Also notes every key's change in `unhandled` (filtered out or not).
    #[must_use]
    pub fn noting(mut self, unhandled: Arc<Unhandled>) -> Self {
        self.unhandled = Some(unhandled);
        self
    }

    /// Also notes the cause of every key it queues in `causes`: the watch events of `kind`.
    #[must_use]
    pub fn noting_causes(mut self, causes: Arc<Causes>, kind: &str) -> Self {
        self.causes = Some((causes, kind.into()));
        self
    }

    /// Queues `key`: a change as a plain add, a resync (nothing changed) as a later add, which
    /// waits behind every change (docs/workqueue.md).
    fn add(&self, key: ObjectKey, change: &Change<'_>) {
        if let Some(unhandled) = &self.unhandled {
            unhandled.changed(&key);
        }
        if self.admit.as_ref().is_none_or(|admit| admit(&key)) {
            if let Some((causes, kind)) = &self.causes {
                causes.note(&key, cause_of(change, kind));
            }
            if matches!(change, Change::Resync(_)) {
                self.queue.add_after(key, std::time::Duration::ZERO);
            } else {
                self.queue.add(key);
            }
        }
    }
}

impl From<RateLimitingQueue<ObjectKey>> for Enqueue {
    fn from(queue: RateLimitingQueue<ObjectKey>) -> Self {
        Self {
            queue,
            admit: None,
            unhandled: None,
            causes: None,
        }
    }
}

/// The cause a change gives the key it queues.
fn cause_of(change: &Change<'_>, kind: &Arc<str>) -> Cause {
    let (why, object) = match change {
        Change::Added(object) => (Why::Added, *object),
        Change::Updated { new, .. } => (Why::Modified, *new),
        Change::Deleted(object) => (Why::Deleted, *object),
        Change::Resync(object) => (Why::Resync, *object),
    };
    let key = object.key();
    let link = crate::telemetry::traces::mark(
        || format!("watch {kind} {}", why.name()),
        || {
            vec![
                opentelemetry::KeyValue::new("k8s.kind", kind.to_string()),
                opentelemetry::KeyValue::new("k8s.object.key", key.to_string()),
                opentelemetry::KeyValue::new(
                    "k8s.resource_version",
                    object.resource_version().to_owned(),
                ),
                opentelemetry::KeyValue::new("watch.event", why.name()),
            ]
        },
    );
    let mut cause = Cause::now(why).about(Origin {
        kind: Arc::clone(kind),
        key,
        resource_version: object.resource_version().to_owned(),
    });
    cause.link = link;
    cause
}

/// Enqueues the object's own key: the handler for a controller's `for` kind.
#[must_use]
pub fn enqueue_self(queue: impl Into<Enqueue>, predicates: Predicates) -> Handler {
    let queue = queue.into();
    Arc::new(move |change: &Change<'_>| {
        let object = match change {
            Change::Added(object) | Change::Deleted(object) | Change::Resync(object) => object,
            Change::Updated { old, new } => {
                if !passes(predicates, old, new) {
                    return;
                }
                new
            }
        };
        queue.add(object.key(), change);
    })
}

/// Enqueues the key of the object's controlling owner of kind `owner_kind`: the handler for a
/// controller's `owns` kinds (SEMANTICS rule 15). An update that moves the object to another
/// owner enqueues both.
#[must_use]
pub fn enqueue_controller(
    queue: impl Into<Enqueue>,
    owner_api_version: &str,
    owner_kind: &str,
    predicates: Predicates,
) -> Handler {
    let queue = queue.into();
    let (api_version, kind) = (owner_api_version.to_owned(), owner_kind.to_owned());
    Arc::new(move |change: &Change<'_>| {
        let owner = |object: &CachedObject| object.controller_key(&api_version, &kind);
        match change {
            Change::Added(object) | Change::Deleted(object) | Change::Resync(object) => {
                if let Some(key) = owner(object) {
                    queue.add(key, change);
                }
            }
            Change::Updated { old, new } => {
                if !passes(predicates, old, new) {
                    return;
                }
                let (before, after) = (owner(old), owner(new));
                if before != after
                    && let Some(key) = before
                {
                    queue.add(key, change);
                }
                if let Some(key) = after {
                    queue.add(key, change);
                }
            }
        }
    })
}

fn passes(predicates: Predicates, old: &CachedObject, new: &CachedObject) -> bool {
    old.resource_version() != new.resource_version()
        && (!predicates.generation_changed || old.generation() != new.generation())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::CachedObject;

    fn object(name: &str, rv: u32, generation: i64, owner: Option<&str>) -> Arc<CachedObject> {
        let owners = owner.map_or(String::new(), |owner| {
            format!(
                r#","ownerReferences":[{{"apiVersion":"example.com/v1","kind":"App","name":"{owner}","uid":"u","controller":true}}]"#
            )
        });
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","generation":{generation}{owners}}}}}"#
        );
        Arc::new(CachedObject::from_json(&json).unwrap())
    }

    fn drain(queue: &RateLimitingQueue<ObjectKey>) -> Vec<String> {
        let mut keys = Vec::new();
        while let Some(Some(key)) = queue.try_get() {
            keys.push(key.to_string());
            queue.done(&key);
        }
        keys
    }

    #[tokio::test]
    async fn own_kind_changes_enqueue_the_object_itself() {
        let queue = RateLimitingQueue::default();
        let handler = enqueue_self(queue.clone(), Predicates::default());
        let (v1, v2) = (object("a", 1, 1, None), object("a", 2, 1, None));
        handler(&Change::Added(&v1));
        assert_eq!(drain(&queue), ["ns/a"]);
        handler(&Change::Updated { old: &v1, new: &v2 });
        assert_eq!(
            drain(&queue),
            ["ns/a"],
            "status-only update passes without the filter"
        );
        handler(&Change::Updated { old: &v2, new: &v2 });
        assert_eq!(
            drain(&queue),
            Vec::<String>::new(),
            "same resourceVersion is dropped"
        );
        handler(&Change::Deleted(&v2));
        assert_eq!(drain(&queue), ["ns/a"]);
        handler(&Change::Resync(&v2));
        assert_eq!(drain(&queue), ["ns/a"]);
    }

    #[tokio::test]
    async fn a_filtered_handler_enqueues_only_the_keys_its_filter_admits() {
        let queue = RateLimitingQueue::default();
        let admit: KeyFilter = Arc::new(|key: &ObjectKey| key.name() != "theirs");
        let handler = enqueue_self(
            Enqueue::filtered(queue.clone(), admit),
            Predicates::default(),
        );
        let (mine, theirs) = (object("mine", 1, 1, None), object("theirs", 1, 1, None));
        for change in [
            Change::Added(&mine),
            Change::Added(&theirs),
            Change::Resync(&theirs),
        ] {
            handler(&change);
        }
        assert_eq!(drain(&queue), ["ns/mine"]);
    }

    #[tokio::test]
    async fn the_generation_filter_drops_status_only_updates_but_not_resyncs() {
        let queue = RateLimitingQueue::default();
        let handler = enqueue_self(
            queue.clone(),
            Predicates {
                generation_changed: true,
            },
        );
        let (v1, status, spec) = (
            object("a", 1, 1, None),
            object("a", 2, 1, None),
            object("a", 3, 2, None),
        );
        handler(&Change::Updated {
            old: &v1,
            new: &status,
        });
        assert!(drain(&queue).is_empty());
        handler(&Change::Updated {
            old: &status,
            new: &spec,
        });
        assert_eq!(drain(&queue), ["ns/a"]);
        handler(&Change::Resync(&spec));
        assert_eq!(drain(&queue), ["ns/a"]);
    }

    #[tokio::test]
    async fn owned_objects_enqueue_their_controlling_owner() {
        let queue = RateLimitingQueue::default();
        let handler = enqueue_controller(
            queue.clone(),
            "example.com/v1",
            "App",
            Predicates::default(),
        );
        let child = object("child", 1, 1, Some("parent"));
        handler(&Change::Added(&child));
        assert_eq!(drain(&queue), ["ns/parent"]);
        handler(&Change::Added(&object("orphan", 1, 1, None)));
        assert!(drain(&queue).is_empty());
        let moved = object("child", 2, 1, Some("other"));
        handler(&Change::Updated {
            old: &child,
            new: &moved,
        });
        assert_eq!(drain(&queue), ["ns/parent", "ns/other"]);
        handler(&Change::Deleted(&moved));
        assert_eq!(drain(&queue), ["ns/other"]);
    }

    #[tokio::test]
    async fn a_resync_waits_behind_changes_and_a_change_moves_it_up() {
        let queue = RateLimitingQueue::default();
        let handler = enqueue_self(queue.clone(), Predicates::default());
        let (a, b, c) = (
            object("a", 1, 1, None),
            object("b", 1, 1, None),
            object("c", 1, 1, None),
        );
        handler(&Change::Resync(&a));
        handler(&Change::Resync(&b));
        handler(&Change::Added(&c));
        handler(&Change::Deleted(&b));
        assert_eq!(drain(&queue), ["ns/c", "ns/b", "ns/a"]);
    }
}
