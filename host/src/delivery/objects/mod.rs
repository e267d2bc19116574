//! Plugins declared as `ReconcilerPlugin` objects (`kubectl apply`): each object's spec and
//! module are written as `<name>/plugin.yaml` and `<name>/module.wasm` into a directory the
//! supervisor watches like any plugin directory, so an object gets the lifecycle of a file
//! (validated and compiled off the hot path, a changed module swapped in with no lost key, a bad
//! version leaving the good one serving, removal draining its work). The replica that leads
//! writes each object's status: `observedGeneration`, the resolved digests, the conditions
//! `Fetched`, `Compiled`, `GrantsValid`, `Ready` and `Degraded`, and the replicas serving it.
//!
//! Module sources: `configMap` (the component in a ConfigMap's `binaryData`, at most 1 MiB, read
//! again every [`REFETCH_PERIOD`]) and `oci` (a registry reference pulled by
//! [`crate::delivery::oci`], kept on disk by digest; a tag is resolved once and the digest
//! pinned in `status.resolvedDigest` until the spec changes, a shadow's and a canary's in
//! `status.shadowDigest` and `status.canaryDigest`).
//!
//! # Flow
//! The watch loop ([`PluginObjects::run`]) follows the objects and starts each object's fetch
//! as a task of its own ([`fetch`]: at most four at a time per registry, or per API server for
//! ConfigMaps); it takes their answers and writes the files they prepared ([`files`]), and
//! writes status. A fetch overtaken by a new generation or by the object's deletion is
//! abandoned ([`known`]); a first fetch still running shows in status as `Fetched` `Unknown`
//! (`Fetching`, then `RegistrySlow` after 10 s), so a registry that never answers holds up
//! neither other objects, nor the watch, nor status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::delivery::oci::Registry;
use crate::delivery::supervisor::Plugins;
use crate::manifest::ReconcilerPlugin;
use crate::manifest::namespaced::{self, NamespacedReconcilerPlugin};

mod events;
mod fetch;
#[cfg(test)]
mod fetch_tests;
mod fetched;
mod files;
mod known;
mod status;
#[cfg(test)]
mod tests;

use fetch::Fetcher;
use known::Known;
use status::{status, status_patch};

/// The largest module a ConfigMap may carry (the API server's limit on a ConfigMap's data).
pub const CONFIG_MAP_MODULE_MAX: usize = 1024 * 1024;

/// How often the state is compared with the objects' status (and written when it differs).
const STATUS_PERIOD: Duration = Duration::from_millis(250);

/// How often ConfigMap sources are read again (their changes are not watched).
const REFETCH_PERIOD: Duration = Duration::from_secs(10);

/// The objects' plugin directory, the API it reads them from and the registries modules come
/// from.
pub struct PluginObjects {
    client: kube::Client,
    fetcher: Arc<Fetcher>,
    dir: PathBuf,
    identity: String,
    /// The last error writing each object's status, so that it is logged once.
    status_failures: parking_lot::Mutex<BTreeMap<String, String>>,
    /// Whether each object's reconciles keep failing, as last reported by an Event.
    reported: events::Reported,
}

impl PluginObjects {
    /// Objects read through `client`, written under `dir` (emptied first: what it holds is
    /// rebuilt from the objects), status naming this replica `identity`.
    ///
    /// # Errors
    /// When `dir` cannot be emptied or created.
    pub fn new(
        client: kube::Client,
        registry: Option<Arc<Registry>>,
        dir: PathBuf,
        identity: String,
    ) -> std::io::Result<Self> {
        match std::fs::remove_dir_all(&dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        // Created afresh, private to this user: a directory someone else made in its place
        // (a shared temporary directory) is an error, never used.
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)?;
        Ok(Self {
            fetcher: Arc::new(Fetcher::new(client.clone(), registry)),
            client,
            dir,
            identity,
            status_failures: parking_lot::Mutex::default(),
            reported: events::Reported::default(),
        })
    }

    /// The directory to hand the supervisor as a plugin source.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Follows the objects until `stop`: starts their fetches (each a task of its own), writes
    /// the files the fetches prepared, removes those of deleted objects, and (while `leading`)
    /// writes their status. When `epoch` (the store epoch, see
    /// [`crate::informer::cluster_state`]) goes up, the objects are listed again.
    pub async fn run(
        self,
        plugins: Arc<Plugins>,
        leading: watch::Receiver<bool>,
        epoch: Option<watch::Receiver<u64>>,
        stop: CancellationToken,
    ) {
        let api: Api<ReconcilerPlugin> = Api::all(self.client.clone());
        let follow = || watcher(api.clone(), watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(follow());
        let tenants: Api<NamespacedReconcilerPlugin> = Api::all(self.client.clone());
        let follow_tenants =
            || watcher(tenants.clone(), watcher::Config::default()).default_backoff();
        let mut tenant_events = std::pin::pin!(follow_tenants());
        let mut epoch = epoch;
        let mut listing: Option<BTreeMap<String, ReconcilerPlugin>> = None;
        let mut tenant_listing: Option<BTreeMap<String, ReconcilerPlugin>> = None;
        let mut tenants_warned = false;
        let mut known = Known::new(&self.dir);
        let mut status_tick = tokio::time::interval(STATUS_PERIOD);
        let mut refetch_tick = tokio::time::interval(REFETCH_PERIOD);
        let mut warned = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => match event {
                    None => return,
                    Some(Err(error)) => {
                        if !warned {
                            tracing::warn!(error = %crate::error_chain(&error),
                                "cannot watch ReconcilerPlugin objects; install the CRD \
                                 (reconcile-host crd | kubectl apply -f -) and grant the host \
                                 list and watch on reconcilerplugins.reconcile-host.dev");
                            warned = true;
                        }
                    }
                    Some(Ok(event)) => {
                        warned = false;
                        if apply(event, &mut known.objects, &mut listing, false) {
                            known.follow(&self.fetcher);
                        }
                    }
                },
                event = tenant_events.next() => match event {
                    None => return,
                    Some(Err(error)) => {
                        if !tenants_warned {
                            tracing::warn!(error = %crate::error_chain(&error),
                                "cannot watch NamespacedReconcilerPlugin objects; install the \
                                 CRD (reconcile-host crd | kubectl apply -f -) and grant the host \
                                 list and watch on \
                                 namespacedreconcilerplugins.reconcile-host.dev");
                            tenants_warned = true;
                        }
                    }
                    Some(Ok(event)) => {
                        tenants_warned = false;
                        let event = cluster_form(event);
                        if apply(event, &mut known.objects, &mut tenant_listing, true) {
                            known.follow(&self.fetcher);
                        }
                    }
                },
                Some(joined) = known.tasks.join_next_with_id() => {
                    known.answer(joined, plugins.metrics()).await;
                }
                () = crate::informer::cluster_state::changed(&mut epoch) => {
                    tracing::warn!("the API server's store was replaced; listing the \
                        ReconcilerPlugin objects again");
                    listing = None;
                    tenant_listing = None;
                    events.set(follow());
                    tenant_events.set(follow_tenants());
                }
                _ = refetch_tick.tick() => known.refetch(&self.fetcher),
                _ = status_tick.tick() => {
                    if *leading.borrow() {
                        self.write_status(&api, &plugins, &known).await;
                    }
                }
            }
        }
    }

    /// Writes the status of each object whose state differs from what it says.
    async fn write_status(&self, api: &Api<ReconcilerPlugin>, plugins: &Plugins, known: &Known) {
        self.reported.retain(&known.objects);
        for (name, object) in &known.objects {
            let Some(fetch) = known.fetch(name, object) else {
                continue;
            };
            let state = plugins
                .source_state(&self.dir.join(name).join("plugin.yaml"))
                .await;
            let old = object.status.clone().unwrap_or_default();
            let status = status(&fetch, &state, &old, &self.identity);
            if status == old {
                continue;
            }
            let patch = Patch::Merge(status_patch(&status));
            let params = PatchParams::default();
            let result = match namespaced::object_of(name) {
                Some((namespace, own)) => {
                    let tenants: Api<NamespacedReconcilerPlugin> =
                        Api::namespaced(self.client.clone(), namespace);
                    tenants.patch_status(own, &params, &patch).await.map(drop)
                }
                None => api.patch_status(name, &params, &patch).await.map(drop),
            };
            if result.is_ok()
                && let Some(event) =
                    (self.reported).change(name, object, &old, &status, &self.identity)
            {
                events::record(&self.client, &event).await;
            }
            let mut failures = self.status_failures.lock();
            match result {
                Ok(()) => {
                    failures.remove(name);
                }
                Err(error) => {
                    // Said once per distinct error, not at every tick.
                    let message = crate::error_chain(&error);
                    if failures.get(name) != Some(&message) {
                        tracing::warn!(plugin = %name, error = %message,
                            "cannot write the ReconcilerPlugin's status; grant the host patch \
                             on reconcilerplugins/status");
                        failures.insert(name.clone(), message);
                    }
                }
            }
        }
    }
}

/// A namespaced object's watch event as its cluster form's (see [`namespaced`]).
fn cluster_form(
    event: watcher::Event<NamespacedReconcilerPlugin>,
) -> watcher::Event<ReconcilerPlugin> {
    use watcher::Event;
    match event {
        Event::Apply(object) => Event::Apply(namespaced::as_cluster_object(object)),
        Event::Delete(object) => Event::Delete(namespaced::as_cluster_object(object)),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(namespaced::as_cluster_object(object)),
        Event::InitDone => Event::InitDone,
    }
}

/// Applies a watch event of one kind (`namespaced` or not) to the known objects; whether they
/// changed. A relist replaces that kind's objects only.
fn apply(
    event: watcher::Event<ReconcilerPlugin>,
    objects: &mut BTreeMap<String, ReconcilerPlugin>,
    listing: &mut Option<BTreeMap<String, ReconcilerPlugin>>,
    namespaced: bool,
) -> bool {
    let name = |object: &ReconcilerPlugin| object.metadata.name.clone().unwrap_or_default();
    // A dot marks a namespaced object's plugin; a ReconcilerPlugin's name never holds one (a
    // plugin's name is a DNS-1123 label), so it cannot stand in for a namespaced object.
    let dotted = |object: &ReconcilerPlugin| {
        let dotted = !namespaced && name(object).contains('.');
        if dotted {
            tracing::warn!(object = %name(object),
                "a ReconcilerPlugin's name must be a DNS-1123 label (no `.`); this object is \
                 ignored: delete it and create it under another name");
        }
        dotted
    };
    match event {
        watcher::Event::Apply(object) | watcher::Event::InitApply(object) if dotted(&object) => {
            false
        }
        watcher::Event::Apply(object) => {
            objects.insert(name(&object), object);
            true
        }
        watcher::Event::Delete(object) => objects.remove(&name(&object)).is_some(),
        watcher::Event::Init => {
            *listing = Some(BTreeMap::new());
            false
        }
        watcher::Event::InitApply(object) => {
            listing
                .get_or_insert_with(BTreeMap::new)
                .insert(name(&object), object);
            false
        }
        watcher::Event::InitDone => {
            objects.retain(|name, _| namespaced::object_of(name).is_some() != namespaced);
            objects.extend(listing.take().unwrap_or_default());
            true
        }
    }
}
