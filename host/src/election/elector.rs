//! The elector: campaigns for the Lease, renews it, and tells the host whether it leads.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{ConfigError, ElectionConfig, JITTER_FACTOR};
use super::fence::Fence;
use super::lock::{LeaseLock, LockError, Observed};

/// What this replica currently is, published on a watch channel.
#[derive(Clone, Debug)]
pub enum Leadership {
    /// Not leading. `leader` is the holder last observed, `None` when there is none.
    Following {
        /// The identity holding the Lease, as last observed.
        leader: Option<String>,
    },
    /// Leading. `term` is cancelled the moment leadership ends (lost, released or shut down):
    /// work started under this term must stop when it is.
    Leading {
        /// Cancelled when this term of leadership ends.
        term: CancellationToken,
    },
}

impl Leadership {
    /// True while leading.
    #[must_use]
    pub fn is_leading(&self) -> bool {
        matches!(self, Self::Leading { .. })
    }
}

/// Why [`LeaderElector::run`] ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// Leadership was lost and the elector was configured not to campaign again.
    #[error("leader election: {identity} lost {lock} and does not campaign again")]
    Lost {
        /// This replica's identity.
        identity: String,
        /// The lock, e.g. `lease kube-system/reconcile-host`.
        lock: String,
    },
}

/// How a term of leadership ended.
enum TermEnd {
    Shutdown,
    Lost,
}

/// Campaigns for a Lease and holds it (SEMANTICS §6).
///
/// # Flow
/// 1. Acquire: try every retry period (jittered by up to 1.2×) until the Lease is won or the
///    shutdown token is cancelled.
/// 2. Lead: publish [`Leadership::Leading`]; renew every retry period.
/// 3. If no renewal succeeds within the renew deadline after the last successful one — or the
///    Lease shows another holder — cancel the term and publish [`Leadership::Following`]; then
///    campaign again, or end with [`ElectionError::Lost`] when `campaign_after_loss` is off.
/// 4. On shutdown while leading, cancel the term, then release the Lease (when
///    `release_on_cancel`): clear the holder and set a 1 s duration so a peer takes over at once.
///
/// # Guarantees
/// - Expiry is judged by the local clock from the moment a change of the record was observed,
///   never by the remote `renewTime`, so clock skew between replicas does not matter.
/// - Every write carries the resourceVersion it read; a conflict means someone else won.
/// - The term ends no later than the renew deadline after the start of the last successful
///   renewal, even if an API call hangs; followers wait the whole lease duration (longer, by
///   validation) from their observation of that renewal, so two terms never overlap.
/// - [`Leadership::Following`] is published on every exit of [`run`](LeaderElector::run).
pub struct LeaderElector<L: LeaseLock> {
    lock: L,
    config: ElectionConfig,
    /// Whether to campaign again after losing the Lease (otherwise `run` ends with an error).
    campaign_after_loss: bool,
    observed: Option<Observed>,
    observed_at: Instant,
    state: watch::Sender<Leadership>,
    fence: Fence,
}

impl<L: LeaseLock> std::fmt::Debug for LeaderElector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lock", &self.lock.describe())
            .field("identity", &self.config.identity)
            .finish_non_exhaustive()
    }
}

impl<L: LeaseLock> LeaderElector<L> {
    /// An elector for `lock` with `config`, campaigning again after a loss.
    ///
    /// # Errors
    /// When `config` is invalid (see [`ElectionConfig::validate`]).
    pub fn new(lock: L, config: ElectionConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            lock,
            config,
            campaign_after_loss: true,
            observed: None,
            observed_at: Instant::now(),
            state: watch::Sender::new(Leadership::Following { leader: None }),
            fence: Fence::closed(),
        })
    }

    /// Moves `fence` with the lease: open until the renew deadline after each successful
    /// acquisition or renewal began, closed when a term ends (see [`Fence`]).
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        fence.close();
        self.fence = fence;
        self
    }

    /// Whether to campaign again after losing the Lease (default) or end `run` with
    /// [`ElectionError::Lost`].
    #[must_use]
    pub fn campaign_after_loss(mut self, campaign: bool) -> Self {
        self.campaign_after_loss = campaign;
        self
    }

    /// Follows this replica's leadership: started, stopped, and new leaders observed.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.state.subscribe()
    }

    /// This replica's identity.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Campaigns, leads and renews until `shutdown` is cancelled (see the type's docs).
    ///
    /// # Errors
    /// [`ElectionError::Lost`] when leadership is lost and `campaign_after_loss` is off.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), ElectionError> {
        let result = self.campaign(&shutdown).await;
        self.follow();
        result
    }

    async fn campaign(&mut self, shutdown: &CancellationToken) -> Result<(), ElectionError> {
        loop {
            let Some(acquired) = self.acquire(shutdown).await else {
                return Ok(());
            };
            self.fence.open_until(acquired + self.config.renew_deadline);
            let term = shutdown.child_token();
            tracing::info!(lock = %self.lock.describe(), identity = %self.config.identity,
                "became leader");
            self.state
                .send_replace(Leadership::Leading { term: term.clone() });
            let end = self.renew(acquired, shutdown).await;
            self.fence.close();
            term.cancel();
            self.follow();
            match end {
                TermEnd::Shutdown => {
                    if self.config.release_on_cancel {
                        self.release().await;
                    }
                    return Ok(());
                }
                TermEnd::Lost => {
                    tracing::warn!(lock = %self.lock.describe(),
                        identity = %self.config.identity, "lost leadership");
                    if !self.campaign_after_loss {
                        return Err(ElectionError::Lost {
                            identity: self.config.identity.clone(),
                            lock: self.lock.describe(),
                        });
                    }
                }
            }
        }
    }

    /// Tries every jittered retry period until the Lease is won (when the winning attempt
    /// started) or shutdown (`None`).
    async fn acquire(&mut self, shutdown: &CancellationToken) -> Option<Instant> {
        loop {
            let started = Instant::now();
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                attempt = self.try_acquire_or_renew() => attempt,
            };
            match attempt {
                Ok(true) => return Some(started),
                Ok(false) => {}
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "leader election: could not read or write the lease; retrying"
                ),
            }
            let jitter = 1.0 + rand::random::<f64>() * JITTER_FACTOR;
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(self.config.retry_period.mul_f64(jitter)) => {}
            }
        }
    }

    /// Renews every retry period until shutdown or until leadership is lost; `acquired` is when
    /// the winning attempt started.
    async fn renew(&mut self, acquired: Instant, shutdown: &CancellationToken) -> TermEnd {
        let mut deadline = acquired + self.config.renew_deadline;
        loop {
            let next = (Instant::now() + self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return TermEnd::Shutdown,
                () = tokio::time::sleep_until(next) => {}
            }
            let started = Instant::now();
            if started >= deadline {
                return TermEnd::Lost;
            }
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return TermEnd::Shutdown,
                attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => {
                    deadline = started + self.config.renew_deadline;
                    self.fence.open_until(deadline);
                }
                Ok(Ok(false)) if self.held_by_another() => return TermEnd::Lost,
                Ok(Ok(false)) => {}
                Ok(Err(error)) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "leader election: renewal failed; retrying until the renew deadline"
                ),
                Err(_elapsed) => return TermEnd::Lost,
            }
        }
    }

    /// One step of rule 19: read the record; create it, take it over or renew it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LockError> {
        let now = MicroTime(Timestamp::now());
        let mut desired = LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration_seconds(self.config.lease_duration)),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };
        let Some(current) = self.lock.get().await? else {
            return match self.lock.create(desired).await {
                Ok(created) => {
                    self.observe(created);
                    Ok(true)
                }
                Err(LockError::Conflict { .. }) => Ok(false),
                Err(error) => Err(error),
            };
        };
        let changed = self.observed.as_ref().map(|o| &o.spec) != Some(&current.spec);
        let resource_version = current.resource_version.clone();
        if changed {
            self.observe(current);
        }
        let record = &self.observed.as_ref().expect("observed above").spec;
        if self.held_by_another() && self.observed_at + record_duration(record) > Instant::now() {
            return Ok(false);
        }
        if self.holds() {
            desired.acquire_time.clone_from(&record.acquire_time);
            desired.lease_transitions = record.lease_transitions;
        } else {
            desired.lease_transitions = Some(record.lease_transitions.unwrap_or(0) + 1);
        }
        match self.lock.update(desired, resource_version).await {
            Ok(updated) => {
                self.observe(updated);
                Ok(true)
            }
            Err(LockError::Conflict { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Remembers `observed` and when it was seen; announces a new leader while following.
    fn observe(&mut self, observed: Observed) {
        let holder = holder(&observed.spec).map(str::to_owned);
        self.observed = Some(observed);
        self.observed_at = Instant::now();
        self.state.send_if_modified(|state| match state {
            Leadership::Following { leader } if *leader != holder => {
                if let Some(new) = &holder {
                    tracing::info!(leader = %new, "new leader observed");
                }
                *leader = holder;
                true
            }
            _ => false,
        });
    }

    fn holds(&self) -> bool {
        self.observed
            .as_ref()
            .and_then(|o| holder(&o.spec))
            .is_some_and(|h| h == self.config.identity)
    }

    fn held_by_another(&self) -> bool {
        self.observed
            .as_ref()
            .and_then(|o| holder(&o.spec))
            .is_some_and(|h| h != self.config.identity)
    }

    fn follow(&self) {
        let leader = self
            .observed
            .as_ref()
            .and_then(|o| holder(&o.spec))
            .filter(|h| *h != self.config.identity)
            .map(str::to_owned);
        self.state.send_replace(Leadership::Following { leader });
    }

    /// Rule 21: clear the holder and shorten the lease so a peer can take over at once.
    async fn release(&mut self) {
        if !self.holds() {
            return;
        }
        let observed = self.observed.as_ref().expect("holds implies observed");
        let now = MicroTime(Timestamp::now());
        let released = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: observed.spec.lease_transitions,
            ..LeaseSpec::default()
        };
        let update = self
            .lock
            .update(released, observed.resource_version.clone());
        match tokio::time::timeout(self.config.renew_deadline, update).await {
            Ok(Ok(observed)) => {
                tracing::info!(lock = %self.lock.describe(), "released the lease");
                self.observe(observed);
            }
            Ok(Err(error)) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "leader election: could not release the lease; peers take over when it expires"
            ),
            Err(_elapsed) => tracing::warn!(lock = %self.lock.describe(),
                "leader election: releasing the lease timed out; peers take over when it expires"),
        }
    }
}

fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// The record's lease duration; a record without one counts as expired at once.
fn record_duration(spec: &LeaseSpec) -> Duration {
    Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0))
}

/// Whole seconds for `leaseDurationSeconds`, rounded up so peers never wait less than configured.
fn duration_seconds(duration: Duration) -> i32 {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i32::try_from(secs).unwrap_or(i32::MAX)
}
