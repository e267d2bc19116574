//! What the objects' loop knows: the objects, each one's running fetch and last answer for its
//! generation, and the files written. The loop starts fetches and takes their answers; a fetch
//! overtaken by a new generation, or by the object's deletion, is abandoned and its answer
//! dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tokio::task::{AbortHandle, JoinError, JoinSet};
use tokio::time::Instant;

use super::fetch::{Fetcher, Job, Pins, Step};
use super::fetched::{FetchError, Fetched, Module, Prepared};
use super::files::Files;
use super::status::Fetch;
use crate::manifest::ReconcilerPlugin;
use crate::telemetry::Metrics;

/// A fetch's answer: the object's name and what the fetch prepared.
type Answer = (String, Result<Prepared, FetchError>);

/// A fetch running for one object.
struct Running {
    uid: Option<String>,
    generation: Option<i64>,
    started: Instant,
    step: Arc<parking_lot::Mutex<Step>>,
    task: AbortHandle,
}

/// The objects, their fetches and files.
pub(super) struct Known {
    /// The objects, by name, as the watch last showed them.
    pub(super) objects: BTreeMap<String, ReconcilerPlugin>,
    /// The fetches running, whose answers [`Known::answer`] takes.
    pub(super) tasks: JoinSet<Answer>,
    running: BTreeMap<String, Running>,
    answers: BTreeMap<String, Fetched>,
    files: Files,
}

/// Whether `object` is the one (`uid`) at `generation`.
fn same(object: &ReconcilerPlugin, uid: Option<&String>, generation: Option<i64>) -> bool {
    object.metadata.uid.as_ref() == uid && object.metadata.generation == generation
}

impl Known {
    /// Nothing known yet; files written under `dir`.
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            objects: BTreeMap::new(),
            tasks: JoinSet::new(),
            running: BTreeMap::new(),
            answers: BTreeMap::new(),
            files: Files::new(dir.to_owned()),
        }
    }

    /// After the objects changed: abandons the fetches and forgets the answers of objects
    /// deleted or at a new generation, removes deleted objects' files, and starts a fetch for
    /// each object that has neither an answer nor a fetch running for its generation.
    pub(super) fn follow(&mut self, fetcher: &Arc<Fetcher>) {
        let objects = &self.objects;
        self.running.retain(|name, running| {
            let current = (objects.get(name))
                .is_some_and(|o| same(o, running.uid.as_ref(), running.generation));
            if !current {
                running.task.abort();
            }
            current
        });
        self.answers.retain(|name, answer| {
            (objects.get(name)).is_some_and(|o| same(o, answer.uid.as_ref(), answer.generation))
        });
        self.files.keep_only(|name| objects.contains_key(name));
        let new: Vec<String> = (self.objects.keys())
            .filter(|name| !self.running.contains_key(*name) && !self.answers.contains_key(*name))
            .cloned()
            .collect();
        for name in new {
            self.start(&name, fetcher);
        }
    }

    /// At a refetch tick: fetches again each object with no fetch running, except those whose
    /// module and side modules came from registries (pinned by digest, they cannot change):
    /// a ConfigMap is read again, a failed fetch tried again.
    pub(super) fn refetch(&mut self, fetcher: &Arc<Fetcher>) {
        let again: Vec<String> = (self.objects.iter())
            .filter(|(name, object)| {
                let pinned = (self.answers.get(*name))
                    .filter(|a| same(object, a.uid.as_ref(), a.generation))
                    .is_some_and(|a| a.result.as_ref().is_ok_and(|m| m.pinned));
                !self.running.contains_key(*name) && !pinned
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in again {
            self.start(&name, fetcher);
        }
    }

    /// Starts the fetch of the object `name`.
    fn start(&mut self, name: &str, fetcher: &Arc<Fetcher>) {
        let Some(object) = self.objects.get(name) else {
            return;
        };
        let step = Arc::default();
        let (spec, refused) = match crate::manifest::namespaced::confined_spec(object) {
            Ok(spec) => (spec, None),
            Err(refused) => (object.spec.clone(), Some(refused)),
        };
        let job = Job {
            spec: serde_json::to_value(&spec).unwrap_or_default(),
            refused,
            name: name.to_owned(),
            pins: self.pins(name, object),
            step: Arc::clone(&step),
        };
        let running = Running {
            uid: object.metadata.uid.clone(),
            generation: object.metadata.generation,
            started: Instant::now(),
            step,
            task: {
                let (fetcher, name) = (Arc::clone(fetcher), name.to_owned());
                self.tasks
                    .spawn(async move { (name, fetcher.run(job).await) })
            },
        };
        self.running.insert(name.to_owned(), running);
    }

    /// The digests recorded for the object's generation: this host's last answer's, else what
    /// status says (written by whichever replica led).
    pub(super) fn pins(&self, name: &str, object: &ReconcilerPlugin) -> Pins {
        let answered = (self.answers.get(name))
            .filter(|a| same(object, a.uid.as_ref(), a.generation))
            .and_then(|a| a.result.as_ref().ok());
        if let Some(module) = answered {
            return Pins {
                module: Some(module.resolved.clone()),
                shadow: module.shadow.clone(),
                canary: module.canary.clone(),
                layers: module.layers.clone(),
            };
        }
        let status = (object.status.as_ref())
            .filter(|s| s.observed_generation == object.metadata.generation);
        Pins {
            module: status.and_then(|s| s.resolved_digest.clone()),
            shadow: status.and_then(|s| s.shadow_digest.clone()),
            canary: status.and_then(|s| s.canary_digest.clone()),
            layers: BTreeMap::new(),
        }
    }

    /// Takes a fetch's answer: dropped when the fetch was abandoned, else its files written and
    /// the answer kept for status.
    pub(super) async fn answer(
        &mut self,
        joined: Result<(tokio::task::Id, Answer), JoinError>,
        metrics: &Metrics,
    ) {
        let (id, (name, result)) = match joined {
            Ok(answer) => answer,
            Err(error) => {
                // Abandoned (aborted, already forgotten), or a panic: forget it, so that the
                // next refetch starts again.
                if error.is_panic() {
                    let id = error.id();
                    self.running.retain(|name, running| {
                        let this = running.task.id() == id;
                        if this {
                            tracing::error!(plugin = %name, "a ReconcilerPlugin's fetch panicked");
                        }
                        !this
                    });
                }
                return;
            }
        };
        if self.running.get(&name).is_none_or(|r| r.task.id() != id) {
            return;
        }
        let Some(running) = self.running.remove(&name) else {
            return;
        };
        let result: Result<Module, FetchError> = match result {
            Ok(prepared) => (self.files.write(&name, &prepared).await).map(|()| prepared.module),
            Err(error) => Err(error),
        };
        if let Err(error) = &result {
            let already = (self.answers.get(&name))
                .and_then(|f| f.result.as_ref().err())
                .is_some_and(|e| e.to_string() == error.to_string());
            if !already {
                tracing::error!(plugin = %name, error = %crate::error_chain(error),
                    "cannot fetch the ReconcilerPlugin's module; what serves keeps serving");
            }
            metrics.plugin_fetch_failed(&name, error.reason());
        }
        let fetched = Fetched {
            uid: running.uid,
            generation: running.generation,
            result,
        };
        self.answers.insert(name, fetched);
    }

    /// What status says of the module of `object` (`name`): the last answer for its
    /// generation, or the first fetch still running.
    pub(super) fn fetch(&self, name: &str, object: &ReconcilerPlugin) -> Option<Fetch<'_>> {
        if let Some(answer) =
            (self.answers.get(name)).filter(|a| same(object, a.uid.as_ref(), a.generation))
        {
            return Some(Fetch::Answered(answer));
        }
        let running =
            (self.running.get(name)).filter(|r| same(object, r.uid.as_ref(), r.generation))?;
        Some(Fetch::Running {
            generation: running.generation,
            waited: running.started.elapsed(),
            step: running.step.lock().clone(),
        })
    }
}
