//! Notices an API server that came back without its state, so the informers list again.
//!
//! # Why
//! A kube-apiserver whose etcd was wiped or replaced, restarted on the same address, serves a
//! store whose resourceVersions start again near zero. A watch that resumes from a version of
//! the old store is not always refused: the server may answer `200` and keep the stream open,
//! and send nothing until the objects' new versions pass the old one, so an informer sits on a
//! cache of the old store, misses every object made since, and reports itself synced.
//!
//! # Signal
//! The uid of namespace `kube-system`, read every [`PERIOD`]. The API server makes that
//! namespace when it is missing (a new uid with every new store) and refuses to delete it, so
//! its uid names the store. When it changes, or the namespace is gone, the *store epoch* goes
//! up by one; every informer's watch task and the ReconcilerPlugin watch follow the epoch: the
//! cache is marked stale, the watch dropped, and a fresh list replaces the cache (its
//! differences delivered as changes, like any relist).
//!
//! A store restored from a backup keeps the uid: restore it with `etcdutl snapshot restore
//! --bump-revision … --mark-compacted`, so every watch gets `410 Gone` and lists again (see
//! docs/deploy.md).
//!
//! # Rights
//! The host needs `get` on `namespaces/kube-system` (in `deploy/base/rbac.yaml` and in
//! `reconcile-host rbac --include-host`). Without it the host says once what to grant and runs
//! without the signal.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// How often the uid of `kube-system` is read.
pub const PERIOD: Duration = Duration::from_secs(5);

/// The namespace whose uid names the API server's store.
pub const WITNESS: &str = "kube-system";

/// What one reading of the witness found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    /// The namespace, with its uid.
    Present(String),
    /// The server answered that the namespace does not exist.
    Missing,
}

/// The store epoch: starts at 0 and goes up each time the API server's store is found replaced.
/// Dropping it stops the reading.
#[derive(Debug)]
pub struct StoreEpoch {
    epoch: watch::Receiver<u64>,
    task: AbortHandle,
}

impl Drop for StoreEpoch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StoreEpoch {
    /// Starts reading `kube-system`'s uid through `client` every `period`. Call from within a
    /// Tokio runtime.
    #[must_use]
    pub fn spawn(client: kube::Client, period: Duration) -> Self {
        let (sender, epoch) = watch::channel(0);
        let api: Api<Namespace> = Api::all(client);
        let task = tokio::spawn(async move {
            let mut last: Option<Reading> = None;
            let mut refused = false;
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let reading = match api.get_opt(WITNESS).await {
                    Ok(Some(namespace)) => {
                        Reading::Present(namespace.metadata.uid.unwrap_or_default())
                    }
                    Ok(None) => Reading::Missing,
                    Err(kube::Error::Api(status)) if status.code == 403 => {
                        if !refused {
                            tracing::warn!(
                                "cannot read namespace {WITNESS}, so an API server that comes \
                                 back without its state (etcd wiped or replaced) will not make \
                                 the caches list again; grant the host `get` on \
                                 namespaces/{WITNESS} (deploy/base/rbac.yaml, or `reconcile-host \
                                 rbac --include-host`)"
                            );
                            refused = true;
                        }
                        continue;
                    }
                    // The server is down or slow: nothing learnt; the watches retry on their own.
                    Err(_) => continue,
                };
                refused = false;
                if next_epoch(&mut last, reading) {
                    sender.send_modify(|epoch| *epoch += 1);
                    tracing::warn!(
                        epoch = *sender.borrow(),
                        "the API server's store was replaced (namespace {WITNESS} has another \
                         uid or is gone); every cache lists again"
                    );
                }
            }
        });
        Self {
            epoch,
            task: task.abort_handle(),
        }
    }

    /// A receiver of the epoch, for one watch to follow.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.epoch.clone()
    }
}

/// Records `reading`; true when it shows another store than the reading before (a first reading
/// shows none).
fn next_epoch(last: &mut Option<Reading>, reading: Reading) -> bool {
    let changed = last.as_ref().is_some_and(|before| *before != reading);
    *last = Some(reading);
    changed
}

/// Waits until `epoch` changes; never returns when there is no epoch to follow or its sender
/// is gone.
pub(crate) async fn changed(epoch: &mut Option<watch::Receiver<u64>>) {
    if let Some(receiver) = epoch
        && receiver.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_uid_or_a_missing_namespace_is_a_new_store_and_the_first_reading_is_not() {
        let mut last = None;
        let present = |uid: &str| Reading::Present(uid.to_owned());
        assert!(!next_epoch(&mut last, present("a")), "first reading");
        assert!(!next_epoch(&mut last, present("a")));
        assert!(next_epoch(&mut last, Reading::Missing), "namespace gone");
        assert!(!next_epoch(&mut last, Reading::Missing));
        assert!(next_epoch(&mut last, present("b")), "made again");
        assert!(next_epoch(&mut last, present("c")), "replaced");
        let mut never_seen = None;
        assert!(!next_epoch(&mut never_seen, Reading::Missing));
        assert!(next_epoch(&mut never_seen, present("a")));
    }
}
