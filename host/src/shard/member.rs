//! The member task: holds this replica's membership Lease, lists the ring's Leases, and drives
//! the protocol of `view` — narrowing the [`Gate`] before acknowledging a ring, widening it once
//! the ring is stable, revoking everything when the Lease lapses, and releasing the Lease on
//! shutdown.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::ring::ViewId;
use super::view::{Assignment, Membership, Observed, Step};
use crate::election::{ElectionConfig, Fence};
use crate::telemetry::ShardMetrics;

/// The label naming the ring a membership Lease belongs to.
pub const RING_LABEL: &str = "reconcile-host.dev/ring";
/// The annotation holding the ring a member acknowledged.
pub const ACK_ANNOTATION: &str = "reconcile-host.dev/acknowledged-ring";

/// Leases unchanged this many lease durations (and at least [`STALE_MIN`]) belong to replicas
/// that died without releasing them; any member deletes them.
const STALE_LEASES: u32 = 10;
const STALE_MIN: Duration = Duration::from_secs(300);

/// The label selector of `ring`'s membership Leases.
#[must_use]
pub fn ring_selector(ring: &str) -> String {
    format!("{RING_LABEL}={ring}")
}

/// Where and how this replica holds its membership.
#[derive(Clone, Debug)]
pub struct MemberSettings {
    /// The Leases' namespace.
    pub namespace: String,
    /// The ring's name: the Leases' label value and name prefix.
    pub ring: String,
    /// Identity and durations, as for leader election.
    pub config: ElectionConfig,
}

impl MemberSettings {
    /// This replica's Lease name: `<ring>-<identity>`, lowercased, other characters as `-`,
    /// at most 253 characters.
    #[must_use]
    pub fn lease_name(&self) -> String {
        let mut name: String = format!("{}-{}", self.ring, self.config.identity)
            .chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        name.truncate(253);
        name.trim_end_matches(['-', '.']).to_owned()
    }
}

/// What the member task reports when the assignment changes: the previous one and the new one.
pub type OnChange = Box<dyn Fn(&Assignment, &Assignment) + Send + Sync>;

/// Sharded mode's moving part: run it beside the controllers.
pub struct Sharding {
    settings: MemberSettings,
    gate: Arc<Gate>,
    fence: Fence,
    metrics: ShardMetrics,
}

impl std::fmt::Debug for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharding")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Sharding {
    /// Membership by `settings`, dispatching through a gate that checks `fence` (opened and
    /// closed here).
    #[must_use]
    pub fn new(settings: MemberSettings, fence: Fence, metrics: ShardMetrics) -> Self {
        let me: Arc<str> = settings.lease_name().into();
        Self {
            gate: Gate::new(Assignment::none(&me), fence.clone()),
            settings,
            fence,
            metrics,
        }
    }

    /// The gate controllers dispatch through.
    #[must_use]
    pub fn gate(&self) -> Arc<Gate> {
        Arc::clone(&self.gate)
    }

    /// Holds the membership until `stop`, then stops dispatching and deletes the Lease (call it
    /// once reconciles have drained). `changed` runs after every change of the assignment.
    pub async fn run(self, client: kube::Client, changed: OnChange, stop: CancellationToken) {
        let api: Api<Lease> = Api::namespaced(client, &self.settings.namespace);
        let name = self.settings.lease_name();
        let config = &self.settings.config;
        let mut membership = Membership::new(&name, config.lease_duration);
        let mut written: Option<String> = None;
        let mut published: Option<ViewId> = None;
        // Until when the fence is open; a lapse since the last look resets everything.
        let mut open_until: Option<Instant> = None;
        // A narrower ring waits for reconciles admitted before this epoch.
        let mut draining: Option<u64> = None;
        let mut failures = 0_u32;
        let mut renewed_at: Option<Instant> = None;
        tracing::info!(lease = %format!("{}/{name}", self.settings.namespace),
            ring = %self.settings.ring, "joining the ring");
        while !stop.is_cancelled() {
            if open_until.is_some_and(|until| Instant::now() >= until) {
                self.lapse(&name, &mut membership, &changed).await;
                open_until = None;
                draining = None;
            }
            if let Some(epoch) = draining
                && self.gate.is_drained(epoch)
            {
                draining = None;
            }
            let ack = if draining.is_none() {
                membership.ack().cloned()
            } else {
                published.clone()
            };
            // Renewed once a retry period, or at once when there is a new ring to acknowledge;
            // listed twice as often, so a member that stops renewing is noticed sooner.
            let started = Instant::now();
            let due = renewed_at.is_none_or(|at| {
                started.saturating_duration_since(at) >= config.retry_period.mul_f64(0.75)
            }) || ack != published
                || failures > 0;
            let renewed = if due {
                tokio::time::timeout(
                    config.renew_deadline,
                    renew(
                        &api,
                        &name,
                        &self.settings.ring,
                        config,
                        ack.as_ref(),
                        written.clone(),
                    ),
                )
                .await
            } else {
                Ok(Ok(String::new()))
            };
            match renewed {
                Ok(Ok(_)) if !due => {}
                Ok(Ok(version)) => {
                    // Answered after the fence closed: the others may have given up on this
                    // replica meanwhile, so it starts over before the fence opens again.
                    if open_until.is_some_and(|until| Instant::now() >= until) {
                        self.lapse(&name, &mut membership, &changed).await;
                        draining = None;
                    }
                    let until = started + config.renew_deadline;
                    self.fence.open_until(until);
                    open_until = Some(until);
                    renewed_at = Some(started);
                    written = Some(version);
                    published = ack;
                    failures = 0;
                }
                Ok(Err(error)) => {
                    failures += 1;
                    // Read it afresh next time: deleted, or written by a request whose answer
                    // was lost.
                    written = None;
                    tracing::warn!(lease = %name, attempt = failures,
                        error = %crate::error_chain(&error), "cannot renew the membership lease");
                }
                Err(_) => {
                    failures += 1;
                    written = None;
                    tracing::warn!(lease = %name, attempt = failures,
                        "cannot renew the membership lease: no answer before the renew deadline");
                }
            }
            let mut next = config.retry_period / 2;
            if failures == 0 {
                let listed =
                    tokio::time::timeout(config.renew_deadline, list(&api, &self.settings.ring))
                        .await
                        .unwrap_or_else(|_| Err(ListError::Timeout));
                match listed {
                    Ok(leases) => {
                        let now = Instant::now();
                        self.collect_stale(&api, &membership, &leases, now);
                        match membership.observe(&leases, written.as_deref(), now.into_std()) {
                            Step::Wait => {}
                            Step::Narrow(assignment) => {
                                let (previous, epoch) = self.gate.set(assignment);
                                changed(&previous, &self.gate.assignment());
                                draining = Some(epoch);
                                next = Duration::ZERO;
                            }
                            Step::Widen(assignment) => {
                                let (previous, _) = self.gate.set(assignment);
                                let current = self.gate.assignment();
                                if let Some(stable) = current.stable() {
                                    self.metrics.settled(stable.members().len());
                                    tracing::info!(members = stable.members().len(),
                                        ring = %stable.id(), "ring settled");
                                }
                                changed(&previous, &current);
                            }
                        }
                        if let Some(expiry) = membership.next_expiry(now.into_std()) {
                            next =
                                next.min(Instant::from_std(expiry).saturating_duration_since(now));
                        }
                    }
                    Err(error) => {
                        tracing::warn!(ring = %self.settings.ring,
                            error = %crate::error_chain(&error), "cannot list the ring's leases");
                    }
                }
            }
            if !self.gate.assignment().settled() {
                next = next.min(config.retry_period / 8);
            }
            let jitter = next.mul_f64(rand::random_range(0.0..0.1));
            let drained = async {
                match draining {
                    Some(epoch) => self.gate.drained(epoch).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(next + jitter) => {}
                () = drained => {}
            }
        }
        // Reconciles have drained: stop dispatching, close the fence, then leave the ring.
        let previous = self.gate.assignment();
        self.gate.revoke(Assignment::none(membership.me()));
        changed(&previous, &self.gate.assignment());
        self.fence.close();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(lease = %name, "left the ring"),
            Err(error) => tracing::warn!(lease = %name, error = %crate::error_chain(&error),
                "cannot delete the membership lease; the others drop this replica when it expires"),
        }
    }

    /// The Lease lapsed by this replica's clock: dispatch nothing, abort reconciles in progress,
    /// forget every ring, and wait until the aborted reconciles have ended.
    async fn lapse(&self, name: &str, membership: &mut Membership, changed: &OnChange) {
        tracing::warn!(lease = %name,
            "membership lease lapsed by this replica's clock: dispatching nothing, aborting \
             reconciles in progress, rejoining");
        let previous = self.gate.assignment();
        let epoch = self.gate.revoke(membership.reset());
        changed(&previous, &self.gate.assignment());
        self.gate.drained(epoch).await;
    }

    /// Deletes Leases no replica has renewed for long (their replicas died without leaving).
    fn collect_stale(
        &self,
        api: &Api<Lease>,
        membership: &Membership,
        leases: &[Observed],
        now: Instant,
    ) {
        let stale_after = (self.settings.config.lease_duration * STALE_LEASES).max(STALE_MIN);
        for lease in leases {
            if &lease.member == membership.me()
                || !membership.unchanged_for(&lease.member, now.into_std(), stale_after)
            {
                continue;
            }
            let api = api.clone();
            let member = Arc::clone(&lease.member);
            let version = lease.resource_version.clone();
            tokio::spawn(async move {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version: Some(version),
                        uid: None,
                    }),
                    ..DeleteParams::default()
                };
                if api.delete(&member, &params).await.is_ok() {
                    tracing::info!(lease = %member, "deleted a membership lease nobody renews");
                }
            });
        }
    }
}

/// Writes this replica's Lease over `version` (its resourceVersion after the last write; read
/// first when unknown), or creates it when missing; returns the new resourceVersion. Leases
/// take no update without a resourceVersion.
async fn renew(
    api: &Api<Lease>,
    name: &str,
    ring: &str,
    config: &ElectionConfig,
    ack: Option<&ViewId>,
    version: Option<String>,
) -> Result<String, kube::Error> {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let version = match version {
        Some(version) => Some(version),
        None => api
            .get_opt(name)
            .await?
            .and_then(|lease| lease.metadata.resource_version),
    };
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(RING_LABEL.to_owned(), ring.to_owned())].into()),
            annotations: ack.map(|ack| [(ACK_ANNOTATION.to_owned(), ack.to_string())].into()),
            resource_version: version.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    let written = match version {
        Some(_) => api.replace(name, &PostParams::default(), &lease).await?,
        None => api.create(&PostParams::default(), &lease).await?,
    };
    Ok(written.metadata.resource_version.unwrap_or_default())
}

/// Why the ring's Leases could not be listed.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("the API server refused or failed the list")]
    Api(#[from] kube::Error),
    #[error("no answer before the renew deadline")]
    Timeout,
}

/// The ring's Leases, as one consistent list.
async fn list(api: &Api<Lease>, ring: &str) -> Result<Vec<Observed>, ListError> {
    let leases = api
        .list(&ListParams::default().labels(&ring_selector(ring)))
        .await?;
    Ok(leases
        .items
        .into_iter()
        .filter(|lease| {
            lease
                .spec
                .as_ref()
                .and_then(|spec| spec.holder_identity.as_deref())
                .is_some_and(|holder| !holder.is_empty())
        })
        .filter_map(|lease| {
            let ack = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ACK_ANNOTATION))
                .and_then(|text| ViewId::parse(text));
            Some(Observed {
                member: lease.metadata.name?.into(),
                resource_version: lease.metadata.resource_version?,
                ack,
            })
        })
        .collect())
}
