//! One informer per watched scope, shared by every controller that asks for it (SEMANTICS 17).

use std::collections::HashMap;
use std::sync::Arc;

use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope as KindScope};
use parking_lot::Mutex;

use crate::informer::{Informer, Scope, StoreEpoch, cluster_state};

/// Why an informer could not be started.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The `apiVersion` is not `group/version` or `version`.
    #[error("kind {kind}: apiVersion `{api_version}` is not `group/version` or `version`")]
    BadApiVersion {
        /// The `apiVersion` given.
        api_version: String,
        /// The kind given.
        kind: String,
    },
    /// Discovery does not know the kind (a CRD not installed, a typo).
    #[error(
        "kind {api_version}/{kind} is not served by the API server; check the spelling, or \
         install its CustomResourceDefinition"
    )]
    UnknownKind {
        /// The `apiVersion` given.
        api_version: String,
        /// The kind given.
        kind: String,
        /// What discovery answered.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer the lookup of the kind.
    #[error(
        "cannot look up kind {api_version}/{kind}: the API server did not answer; check that it \
         is up and reachable at the kubeconfig's server address"
    )]
    Unreachable {
        /// The `apiVersion` given.
        api_version: String,
        /// The kind given.
        kind: String,
        /// What the client answered.
        #[source]
        source: kube::Error,
    },
    /// A namespace was given for a cluster-scoped kind.
    #[error(
        "kind {api_version}/{kind} is cluster-scoped, so it cannot be watched in namespace \
         `{namespace}`; remove the namespace"
    )]
    ClusterScoped {
        /// The `apiVersion` given.
        api_version: String,
        /// The kind given.
        kind: String,
        /// The namespace given.
        namespace: String,
    },
    /// A controller of that name is already running.
    #[error("a controller named `{name}` is already running; remove it first or pick another name")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The controller's rate limiter settings are invalid.
    #[error("controller `{controller}`: invalid rate limiter settings")]
    Limiter {
        /// The controller.
        controller: String,
        /// Why.
        #[source]
        source: crate::queue::LimiterError,
    },
}

/// Starts informers on demand and hands out the running one for a scope already watched.
pub struct InformerRegistry {
    client: kube::Client,
    /// Each informer with the number of users holding it.
    informers: Mutex<HashMap<Scope, (Arc<Informer>, usize)>>,
    /// Whether the API server's store was replaced, read from the first use on.
    epoch: std::sync::OnceLock<StoreEpoch>,
}

impl std::fmt::Debug for InformerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerRegistry")
            .field("informers", &self.informers.lock().len())
            .finish_non_exhaustive()
    }
}

impl InformerRegistry {
    /// An empty registry watching through `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            informers: Mutex::default(),
            epoch: std::sync::OnceLock::new(),
        }
    }

    /// A subscription to the store epoch (see [`crate::informer::cluster_state`]), which every
    /// informer of this registry follows; the reading starts with the first call. Call it from
    /// within a Tokio runtime.
    #[must_use]
    pub fn store_epoch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.epoch
            .get_or_init(|| StoreEpoch::spawn(self.client.clone(), cluster_state::PERIOD))
            .subscribe()
    }

    /// The informer for `scope`, started (after resolving its kind by discovery) if no
    /// controller watches that scope yet; the flag tells whether this call started it. Each
    /// call counts one more user; [`release`](Self::release) gives it back.
    ///
    /// # Errors
    /// When the kind is unknown to the API server or the scope does not fit it.
    pub async fn informer(&self, scope: &Scope) -> Result<(Arc<Informer>, bool), InformerError> {
        if let Some((informer, users)) = self.informers.lock().get_mut(scope) {
            *users += 1;
            return Ok((Arc::clone(informer), false));
        }
        let (group, version) = match scope.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", scope.api_version.as_str()),
        };
        if version.is_empty() || version.contains('/') {
            return Err(InformerError::BadApiVersion {
                api_version: scope.api_version.clone(),
                kind: scope.kind.clone(),
            });
        }
        let gvk = GroupVersionKind::gvk(group, version, &scope.kind);
        let (resource, capabilities) =
            discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|source| match source {
                    kube::Error::Api(_) | kube::Error::Discovery(_) => InformerError::UnknownKind {
                        api_version: scope.api_version.clone(),
                        kind: scope.kind.clone(),
                        source,
                    },
                    source => InformerError::Unreachable {
                        api_version: scope.api_version.clone(),
                        kind: scope.kind.clone(),
                        source,
                    },
                })?;
        if let (KindScope::Cluster, Some(namespace)) = (&capabilities.scope, &scope.namespace) {
            return Err(InformerError::ClusterScoped {
                api_version: scope.api_version.clone(),
                kind: scope.kind.clone(),
                namespace: namespace.clone(),
            });
        }
        let mut informers = self.informers.lock();
        // Another caller may have started it while discovery ran.
        if let Some((informer, users)) = informers.get_mut(scope) {
            *users += 1;
            return Ok((Arc::clone(informer), false));
        }
        let informer = Arc::new(Informer::start(
            self.client.clone(),
            &resource,
            scope.clone(),
            Some(self.store_epoch()),
        ));
        informers.insert(scope.clone(), (Arc::clone(&informer), 1));
        Ok((informer, true))
    }

    /// Gives back one use of `scope`'s informer; the last one stops it (once no one else
    /// holds it). True when it was stopped.
    pub fn release(&self, scope: &Scope) -> bool {
        let mut informers = self.informers.lock();
        let Some((_, users)) = informers.get_mut(scope) else {
            return false;
        };
        *users -= 1;
        if *users == 0 {
            informers.remove(scope);
            return true;
        }
        false
    }

    /// Every running informer.
    #[must_use]
    pub fn informers(&self) -> Vec<Arc<Informer>> {
        self.informers
            .lock()
            .values()
            .map(|(informer, _)| Arc::clone(informer))
            .collect()
    }
}
