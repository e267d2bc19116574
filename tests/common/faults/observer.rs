//! Records, in the API server's order, every write of the witness annotations on the objects and
//! every change of a Lease, straight from the server (not through the replicas' proxy): the
//! history the checker judges.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::checker::Change;

/// The annotation a membership Lease acknowledges its ring in.
pub const ACK: &str = "reconcile-host.dev/acknowledged-ring";

/// Watches of the objects and the Leases of one namespace, recording [`Change`]s.
pub struct Observer {
    changes: Arc<Mutex<Vec<Change>>>,
    gaps: Arc<Mutex<Vec<String>>>,
    /// The newest resourceVersion each watch has passed.
    passed: [Arc<AtomicU64>; 2],
    tasks: Vec<JoinHandle<()>>,
}

impl Observer {
    /// Starts watching `namespace`'s ConfigMaps and Leases from their current state.
    pub async fn start(client: kube::Client, namespace: &str) -> Self {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let gaps = Arc::new(Mutex::new(Vec::new()));
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let leases: Api<Lease> = Api::namespaced(client, namespace);
        let mut begins: HashMap<String, String> = HashMap::new();
        let witness = move |rv: u64, map: &ConfigMap| {
            let annotations = map.metadata.annotations.as_ref()?;
            let begin = annotations.get("ledger.test/begin")?;
            let key = format!(
                "{}/{}",
                map.metadata.namespace.as_deref().unwrap_or_default(),
                map.metadata.name.as_deref().unwrap_or_default()
            );
            if begins.get(&key) == Some(begin) {
                return None;
            }
            begins.insert(key.clone(), begin.clone());
            Some(Change::Witness {
                rv,
                key,
                by: annotations.get("ledger.test/by")?.clone(),
                begin_us: begin.parse().ok()?,
            })
        };
        let lease = |rv: u64, lease: &Lease, deleted: bool| {
            Some(Change::Lease {
                rv,
                name: lease.metadata.name.clone()?,
                holder: lease.spec.as_ref().and_then(|s| s.holder_identity.clone()),
                ack: lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ACK).cloned()),
                deleted,
            })
        };
        let passed = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let sink = |passed: &Arc<AtomicU64>| Sink {
            changes: Arc::clone(&changes),
            gaps: Arc::clone(&gaps),
            passed: Arc::clone(passed),
        };
        let tasks = vec![
            tokio::spawn(record(maps, witness_only(witness), sink(&passed[0]))),
            tokio::spawn(record(leases, lease, sink(&passed[1]))),
        ];
        Self {
            changes,
            gaps,
            passed,
            tasks,
        }
    }

    /// The changes so far, in the server's order.
    pub fn history(&self) -> Vec<Change> {
        let mut history = self.changes.lock().clone();
        history.sort_by_key(Change::rv);
        history
    }

    /// The newest resourceVersion each watch (objects, Leases) has passed.
    pub fn passed(&self) -> [u64; 2] {
        [0, 1].map(|i| self.passed[i].load(Ordering::Acquire))
    }

    /// Where the history may be incomplete (a watch that expired); empty when it is whole.
    pub fn gaps(&self) -> Vec<String> {
        self.gaps.lock().clone()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Deletions of objects say nothing of the witness: only their writes count.
fn witness_only(
    mut witness: impl FnMut(u64, &ConfigMap) -> Option<Change> + Send,
) -> impl FnMut(u64, &ConfigMap, bool) -> Option<Change> + Send {
    move |rv, map, deleted| if deleted { None } else { witness(rv, map) }
}

/// Lists `api`, then watches it from the list's resourceVersion for as long as the task lives,
/// passing every event to `convert` and keeping what it returns. A watch that ends is opened
/// again where it stopped; one that expires (410) is a gap.
async fn record<K>(
    api: Api<K>,
    mut convert: impl FnMut(u64, &K, bool) -> Option<Change> + Send,
    sink: Sink,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    let mut version = loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for item in &list.items {
                    if let Some(change) = convert(rv_of(item), item, false) {
                        sink.changes.lock().push(change);
                    }
                }
                let version = list.metadata.resource_version.unwrap_or_default();
                sink.pass(&version);
                break version;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    loop {
        let params = WatchParams::default().timeout(290);
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut stream = stream.boxed();
        loop {
            let event = match stream.try_next().await {
                Ok(Some(event)) => event,
                Ok(None) | Err(_) => break,
            };
            let (object, deleted) = match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => (object, false),
                WatchEvent::Deleted(object) => (object, true),
                WatchEvent::Bookmark(bookmark) => {
                    version = bookmark.metadata.resource_version;
                    sink.pass(&version);
                    continue;
                }
                WatchEvent::Error(error) => {
                    sink.gaps.lock().push(format!(
                        "the {kind} watch from resourceVersion {version} ended: {error:?}"
                    ));
                    return;
                }
            };
            let rv = rv_of(&object);
            version = rv.to_string();
            if let Some(change) = convert(rv, &object, deleted) {
                sink.changes.lock().push(change);
            }
            sink.pass(&version);
        }
    }
}

/// Where a watch puts what it saw.
struct Sink {
    changes: Arc<Mutex<Vec<Change>>>,
    gaps: Arc<Mutex<Vec<String>>>,
    passed: Arc<AtomicU64>,
}

impl Sink {
    /// The watch has seen everything up to `version`.
    fn pass(&self, version: &str) {
        if let Ok(version) = version.parse() {
            self.passed.fetch_max(version, Ordering::AcqRel);
        }
    }
}

fn rv_of<K: Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}
