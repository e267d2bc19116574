//! A shared informer: one kube-rs watch and one cache per (kind, namespace, label selector),
//! with handlers run for each change after the cache is updated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::watcher;
use tokio::task::AbortHandle;

use super::change::{Change, Handler, Handlers};
use super::object::WireObject;
use super::store::Store;
use super::watch_task;

/// What an informer watches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    /// `apiVersion` of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Only this namespace; `None` for all namespaces (or a cluster-scoped kind).
    pub namespace: Option<String>,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
}

/// One watch and one cache, shared by every subscriber (SEMANTICS rule 17).
pub struct Informer {
    scope: Scope,
    store: Arc<Store>,
    handlers: Arc<Handlers>,
    next_id: AtomicU64,
    lists: Arc<AtomicU64>,
    synced: tokio::sync::watch::Receiver<bool>,
    stale: Arc<AtomicBool>,
    task: AbortHandle,
}

impl std::fmt::Debug for Informer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("scope", &self.scope)
            .field("objects", &self.store.len())
            .field("synced", &*self.synced.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Informer {
    /// Starts watching `resource` (resolved by discovery) in `scope` through `client`; when
    /// `epoch` (a [`StoreEpoch`](super::StoreEpoch) subscription) goes up, the cache is marked
    /// stale and listed again.
    #[must_use]
    pub fn start(
        client: kube::Client,
        resource: &ApiResource,
        scope: Scope,
        epoch: Option<tokio::sync::watch::Receiver<u64>>,
    ) -> Self {
        let api: Api<WireObject> = match &scope.namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, resource),
            None => Api::all_with(client, resource),
        };
        let mut config = watcher::Config::default();
        if let Some(selector) = &scope.label_selector {
            config = config.labels(selector);
        }
        let store = Arc::new(Store::default());
        let handlers: Arc<Handlers> = Arc::default();
        let (synced_tx, synced) = tokio::sync::watch::channel(false);
        let lists = Arc::new(AtomicU64::new(0));
        let stale = Arc::new(AtomicBool::new(false));
        let sink = watch_task::Sink {
            store: Arc::clone(&store),
            handlers: Arc::clone(&handlers),
            lists: Arc::clone(&lists),
            synced: synced_tx,
            stale: Arc::clone(&stale),
        };
        let kind = format!("{}/{}", scope.api_version, scope.kind);
        let task = tokio::spawn(watch_task::run(
            api,
            resource.clone(),
            config,
            sink,
            kind,
            epoch,
        ));
        Self {
            scope,
            store,
            handlers,
            next_id: AtomicU64::new(0),
            lists,
            synced,
            stale,
            task: task.abort_handle(),
        }
    }

    /// What this informer watches.
    #[must_use]
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The cache.
    #[must_use]
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Waits until the initial list is in the cache.
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        // The sender lives in the watch task, which only ends when the informer is dropped.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// True once the initial list is in the cache.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Registers `handler` for every later change, after delivering the objects already cached
    /// as additions; every `resync` (if any) it gets each cached object again as
    /// [`Change::Resync`]. Dropping the returned subscription unregisters it.
    #[must_use]
    pub fn subscribe(&self, handler: Handler, resync: Option<Duration>) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            // Under the write lock no change is being delivered, so none is missed or doubled.
            let mut handlers = self.handlers.write();
            for object in self.store.list() {
                handler(&Change::Added(&object));
            }
            handlers.push((id, Arc::clone(&handler)));
        }
        let resync = resync.map(|period| {
            let (store, handler) = (Arc::clone(&self.store), handler);
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(period);
                ticks.tick().await;
                loop {
                    ticks.tick().await;
                    for object in store.list() {
                        handler(&Change::Resync(&object));
                    }
                }
            })
            .abort_handle()
        });
        Subscription {
            id,
            handlers: Arc::clone(&self.handlers),
            resync,
        }
    }

    /// True while the cache is known to hold the objects of a store the API server no longer
    /// has (it came back without its state) and a new list is not in yet.
    #[must_use]
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// How many full lists the cache was built from: 1 after the initial list, one more for
    /// every relist (after 410 Gone or a failed watch that could not resume).
    #[must_use]
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }

    /// How many subscribers are registered.
    #[must_use]
    pub fn subscribers(&self) -> usize {
        self.handlers.read().len()
    }
}

/// A registered handler; dropping it unregisters the handler and stops its resync.
pub struct Subscription {
    id: u64,
    handlers: Arc<Handlers>,
    resync: Option<AbortHandle>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.handlers.write().retain(|(id, _)| *id != self.id);
        if let Some(resync) = &self.resync {
            resync.abort();
        }
    }
}
