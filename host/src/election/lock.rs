//! Where the leader election record lives: a `coordination.k8s.io/v1` Lease, behind a small trait.

use std::future::Future;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ObjectMeta, PostParams};

/// The election record as last read, with the resourceVersion that guards the next write.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The Lease's spec: holder, duration, acquire/renew times, transitions.
    pub spec: LeaseSpec,
    /// Precondition for the next update (optimistic concurrency).
    pub resource_version: String,
}

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else wrote the Lease first (409 on create or on a stale resourceVersion).
    #[error("{lock}: someone else wrote it first")]
    Conflict {
        /// The lock, e.g. `lease kube-system/reconcile-host`.
        lock: String,
    },
    /// The API server refused or failed the call.
    #[error("{lock}: API call failed")]
    Api {
        /// The lock, e.g. `lease kube-system/reconcile-host`.
        lock: String,
        /// What kube-rs reported.
        #[source]
        source: kube::Error,
    },
    /// The call did not answer before the renew deadline.
    #[error("{lock}: no answer before the renew deadline")]
    Timeout {
        /// The lock, e.g. `lease kube-system/reconcile-host`.
        lock: String,
    },
}

/// Reads and writes the election record (client-go's `resourcelock.Interface`).
pub trait LeaseLock: Send + Sync + 'static {
    /// The current record, or `None` when the Lease does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Observed>, LockError>> + Send;
    /// Creates the Lease; [`LockError::Conflict`] when it already exists.
    fn create(&self, spec: LeaseSpec) -> impl Future<Output = Result<Observed, LockError>> + Send;
    /// Replaces the record if its resourceVersion is still `resource_version`;
    /// [`LockError::Conflict`] otherwise.
    fn update(
        &self,
        spec: LeaseSpec,
        resource_version: String,
    ) -> impl Future<Output = Result<Observed, LockError>> + Send;
    /// Names the lock in logs and errors, e.g. `lease kube-system/reconcile-host`.
    fn describe(&self) -> String;
}

/// A Lease in the cluster, read and written through kube-rs.
#[derive(Clone)]
pub struct KubeLease {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl std::fmt::Debug for KubeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl KubeLease {
    /// The Lease `namespace/name`, through `client`.
    #[must_use]
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn observed(&self, lease: Lease) -> Observed {
        Observed {
            spec: lease.spec.unwrap_or_default(),
            resource_version: lease.metadata.resource_version.unwrap_or_default(),
        }
    }

    fn error(&self, source: kube::Error) -> LockError {
        match &source {
            kube::Error::Api(status) if status.is_conflict() || status.is_already_exists() => {
                LockError::Conflict {
                    lock: self.describe(),
                }
            }
            _ => LockError::Api {
                lock: self.describe(),
                source,
            },
        }
    }

    fn lease(&self, spec: LeaseSpec, resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }
}

impl LeaseLock for KubeLease {
    async fn get(&self) -> Result<Option<Observed>, LockError> {
        match self.api.get_opt(&self.name).await {
            Ok(lease) => Ok(lease.map(|lease| self.observed(lease))),
            Err(source) => Err(self.error(source)),
        }
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Observed, LockError> {
        let lease = self.lease(spec, None);
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(lease) => Ok(self.observed(lease)),
            Err(source) => Err(self.error(source)),
        }
    }

    async fn update(
        &self,
        spec: LeaseSpec,
        resource_version: String,
    ) -> Result<Observed, LockError> {
        let lease = self.lease(spec, Some(resource_version));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(lease) => Ok(self.observed(lease)),
            Err(source) => Err(self.error(source)),
        }
    }

    fn describe(&self) -> String {
        format!("lease {}/{}", self.namespace, self.name)
    }
}
