//! A shared informer: one kube-rs watch and one cache per (kind, namespace, label selector),
//! with handlers run for each change after the cache is updated.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::RwLock;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::object::{CachedObject, WireObject};
use super::store::Store;

/// What changed in an informer's cache; handlers map it to keys.
#[derive(Debug)]
pub enum Change<'a> {
    /// A new object.
    Added(&'a Arc<CachedObject>),
    /// An object that changed (or was relisted).
    Updated {
        /// The object as cached before.
        old: &'a Arc<CachedObject>,
        /// The object as cached now.
        new: &'a Arc<CachedObject>,
    },
    /// An object that is gone; the last state the cache knew.
    Deleted(&'a Arc<CachedObject>),
    /// A periodic re-delivery of a cached object (SEMANTICS rule 16); no API call behind it.
    Resync(&'a Arc<CachedObject>),
}

/// Receives every change of an informer's cache. Runs on the informer's task: keep it cheap
/// (map to keys and add them to a queue).
pub type Handler = Arc<dyn Fn(&Change<'_>) + Send + Sync>;

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

type Handlers = RwLock<Vec<(u64, Handler)>>;

/// One watch and one cache, shared by every subscriber (SEMANTICS rule 17).
pub struct Informer {
    scope: Scope,
    store: Arc<Store>,
    handlers: Arc<Handlers>,
    next_id: AtomicU64,
    lists: Arc<AtomicU64>,
    synced: watch::Receiver<bool>,
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
    /// Starts watching `resource` (resolved by discovery) in `scope` through `client`.
    #[must_use]
    pub fn start(client: kube::Client, resource: &ApiResource, scope: Scope) -> Self {
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
        let (synced_tx, synced) = watch::channel(false);
        let lists = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(watch_loop(
            api,
            config,
            Arc::clone(&store),
            Arc::clone(&handlers),
            Arc::clone(&lists),
            synced_tx,
            format!("{}/{}", scope.api_version, scope.kind),
        ));
        Self {
            scope,
            store,
            handlers,
            next_id: AtomicU64::new(0),
            lists,
            synced,
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

/// Runs the watcher: list, then watch; kube-rs resumes a closed watch from the last version
/// and relists after 410 Gone (SEMANTICS rule 13), with backoff on errors.
async fn watch_loop(
    api: Api<WireObject>,
    config: watcher::Config,
    store: Arc<Store>,
    handlers: Arc<Handlers>,
    lists: Arc<AtomicU64>,
    synced: watch::Sender<bool>,
    kind: String,
) {
    let events = watcher::watcher(api, config).default_backoff();
    let mut events = std::pin::pin!(events);
    let mut relist: Option<Vec<Arc<CachedObject>>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => relist = Some(Vec::new()),
            Ok(Event::InitApply(wire)) => {
                relist
                    .get_or_insert_with(Vec::new)
                    .push(Arc::new(CachedObject::from(wire)));
            }
            Ok(Event::InitDone) => {
                let listed = relist.take().unwrap_or_default();
                let handlers = handlers.read();
                store.replace(listed, |change| deliver(&handlers, &change));
                lists.fetch_add(1, Ordering::Relaxed);
                synced.send_replace(true);
            }
            Ok(Event::Apply(wire)) => {
                let object = Arc::new(CachedObject::from(wire));
                let handlers = handlers.read();
                store.apply(object, |change| deliver(&handlers, &change));
            }
            Ok(Event::Delete(wire)) => {
                let object = Arc::new(CachedObject::from(wire));
                let handlers = handlers.read();
                store.delete(&object, |change| deliver(&handlers, &change));
            }
            Err(error) => tracing::warn!(kind = %kind, error = &error as &dyn std::error::Error,
                "watch failed; retrying with backoff"),
        }
    }
}

fn deliver(handlers: &[(u64, Handler)], change: &Change<'_>) {
    for (_, handler) in handlers {
        handler(change);
    }
}
