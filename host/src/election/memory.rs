//! An in-memory [`LeaseLock`] shared by several electors, with faults, for unit tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::lock::{LeaseLock, LockError, Observed};

#[derive(Debug, Default)]
struct Stored {
    record: Option<Observed>,
    version: u64,
}

impl Stored {
    /// Stores `spec` under a new resourceVersion.
    fn write(&mut self, spec: LeaseSpec) -> Observed {
        self.version += 1;
        let observed = Observed {
            spec,
            resource_version: self.version.to_string(),
        };
        self.record = Some(observed.clone());
        observed
    }
}

/// One Lease shared by every [`MemoryLease`] handle of one test.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedLease(Arc<Mutex<Stored>>);

impl SharedLease {
    pub(crate) fn record(&self) -> Option<LeaseSpec> {
        self.0.lock().record.as_ref().map(|o| o.spec.clone())
    }

    /// How many writes (creates and updates) the Lease has seen.
    pub(crate) fn writes(&self) -> u64 {
        self.0.lock().version
    }

    /// Overwrites the record as another client would.
    pub(crate) fn overwrite(&self, spec: LeaseSpec) {
        self.0.lock().write(spec);
    }

    /// A handle for one replica.
    pub(crate) fn handle(&self) -> MemoryLease {
        MemoryLease {
            shared: self.clone(),
            frozen: watch::channel(false).0.into(),
            fail_next: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// One replica's view of a [`SharedLease`]; its calls can be made to fail or to hang.
#[derive(Clone, Debug)]
pub(crate) struct MemoryLease {
    shared: SharedLease,
    frozen: Arc<watch::Sender<bool>>,
    fail_next: Arc<AtomicUsize>,
}

impl MemoryLease {
    /// While frozen, every call hangs (a partitioned or stopped replica).
    pub(crate) fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    /// The next `n` calls fail with an API error.
    pub(crate) fn fail_next(&self, n: usize) {
        self.fail_next.store(n, Ordering::SeqCst);
    }

    async fn gate(&self) -> Result<(), LockError> {
        let mut frozen = self.frozen.subscribe();
        frozen
            .wait_for(|frozen| !frozen)
            .await
            .expect("sender lives in self");
        let failed = self
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failed {
            return Err(LockError::Api {
                lock: self.describe(),
                source: kube::Error::Api(Box::new(kube::core::Status::failure(
                    "injected failure",
                    "InternalError",
                ))),
            });
        }
        Ok(())
    }

    fn conflict(&self) -> LockError {
        LockError::Conflict {
            lock: self.describe(),
        }
    }
}

impl LeaseLock for MemoryLease {
    async fn get(&self) -> Result<Option<Observed>, LockError> {
        self.gate().await?;
        Ok(self.shared.0.lock().record.clone())
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Observed, LockError> {
        self.gate().await?;
        let mut stored = self.shared.0.lock();
        if stored.record.is_some() {
            return Err(self.conflict());
        }
        Ok(stored.write(spec))
    }

    async fn update(
        &self,
        spec: LeaseSpec,
        resource_version: String,
    ) -> Result<Observed, LockError> {
        self.gate().await?;
        let mut stored = self.shared.0.lock();
        let current = stored.record.as_ref().map(|o| o.resource_version.as_str());
        if current != Some(resource_version.as_str()) {
            return Err(self.conflict());
        }
        Ok(stored.write(spec))
    }

    fn describe(&self) -> String {
        "lease test/memory".to_owned()
    }
}
