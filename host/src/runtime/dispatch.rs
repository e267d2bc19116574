//! Dispatching: once every cache holds its initial list, the runtime dispatches while this
//! replica leads (or through the shard gate in sharded mode), and drains on shutdown.

use futures::future::join_all;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use super::controllers::Term;
use super::lease_thread;
use super::settings::ElectionSettings;
use crate::client::ClientError;
use crate::election::{ConfigError, ElectionError, KubeLease, LeaderElector, Leadership};
use crate::shard::{Assignment, Sharding};

/// Why the runtime stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The leader election settings are invalid.
    #[error("invalid leader election settings")]
    Election(#[from] ConfigError),
    /// Leadership was lost and the runtime was told to exit then.
    #[error("stopping after losing leadership")]
    Lost(#[from] ElectionError),
    /// The Lease client could not be built (see `Runtime::use_election_config`).
    #[error("cannot build the API client for the Lease")]
    LeaseClient(#[from] ClientError),
    /// The thread Lease work runs on could not be started.
    #[error("cannot start the thread that renews the Lease; check the process's thread limit")]
    LeaseThread(#[source] std::io::Error),
    /// The Lease work ended without an answer (it panicked).
    #[error("the Lease thread stopped unexpectedly; see the panic message above")]
    LeaseThreadPanicked,
}

impl Runtime {
    /// Runs until `shutdown` is cancelled (see the type's Flow).
    ///
    /// # Errors
    /// Invalid election settings, or leadership lost with `exit_on_loss`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), RuntimeError> {
        for informer in self.inner.registry.informers() {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = informer.wait_synced() => {}
            }
        }
        tracing::info!(controllers = self.inner.controllers.len(), "caches synced");
        let Some(election) = self.inner.settings.election.clone() else {
            self.serve_term(&CancellationToken::new(), &shutdown).await;
            return Ok(());
        };
        let sharding = self.inner.sharding.lock().take();
        if let Some(sharding) = sharding {
            return self.serve_sharded(sharding, &election, &shutdown).await;
        }
        election.config.validate()?;
        let elector_stop = CancellationToken::new();
        let (subscribed, leadership) = tokio::sync::oneshot::channel();
        let mut campaign = {
            let client = self.election_client();
            let (fence, stop) = (self.inner.fence.clone(), elector_stop.clone());
            let election = election.clone();
            // Renewals run on a thread of their own, with their client built there.
            lease_thread::spawn("lease-election", move || async move {
                let lock = KubeLease::new(
                    client.build()?,
                    &election.lease_namespace,
                    &election.lease_name,
                );
                let elector = LeaderElector::new(lock, election.config)?
                    .campaign_after_loss(!election.exit_on_loss)
                    .with_fence(fence);
                let _ = subscribed.send((elector.subscribe(), elector.subscribe()));
                elector.run(stop).await.map_err(RuntimeError::from)
            })
            .map_err(RuntimeError::LeaseThread)?
        };
        let Ok((mut leadership, gauge)) = leadership.await else {
            return campaign
                .await
                .unwrap_or(Err(RuntimeError::LeaseThreadPanicked));
        };
        let _leader_gauge = self
            .inner
            .telemetry
            .metrics()
            .report_leadership_on_scrape(&election.lease_name, gauge);
        let _fenced = self
            .inner
            .telemetry
            .metrics()
            .report_fenced_writes_on_scrape(&election.lease_name, self.fence());
        // If this future is dropped (the replica is killed), `campaign` drops the elector.
        let result = loop {
            let term = tokio::select! {
                () = shutdown.cancelled() => break Ok(()),
                ended = &mut campaign => break ended.unwrap_or(Err(RuntimeError::LeaseThreadPanicked)),
                term = next_term(&mut leadership) => match term {
                    Some(term) => term,
                    None => break Ok(()),
                },
            };
            self.serve_term(&term, &shutdown).await;
            if shutdown.is_cancelled() {
                break Ok(());
            }
        };
        // Drained: now give the Lease up (the elector releases it when stopped).
        elector_stop.cancel();
        if !campaign.is_finished() {
            let _ = campaign.await;
        }
        result
    }

    /// Sharded mode: dispatches through the gate while the membership runs; on shutdown drains,
    /// then leaves the ring.
    async fn serve_sharded(
        &self,
        sharding: Sharding,
        election: &ElectionSettings,
        shutdown: &CancellationToken,
    ) -> Result<(), RuntimeError> {
        let client = self.election_client();
        let metrics = self
            .inner
            .telemetry
            .metrics()
            .sharding(&election.lease_name);
        let _fenced = self
            .inner
            .telemetry
            .metrics()
            .report_fenced_writes_on_scrape(&election.lease_name, self.fence());
        let gate = sharding.gate();
        let runtime = self.clone();
        let _owned = self.inner.telemetry.metrics().on_scrape(move || {
            let now = gate.assignment();
            runtime.inner.controllers.rescan(&now, &now, &metrics);
        });
        let runtime = self.clone();
        let changed = Box::new(move |before: &Assignment, now: &Assignment| {
            // One replica writes what belongs to no key (ReconcilerPlugin statuses).
            runtime
                .inner
                .leadership
                .send_replace(now.admits(RING_WIDE, ""));
            runtime.inner.controllers.requeue_gained(before, now);
        });
        let stop = CancellationToken::new();
        // The membership renews on a thread of their own, with its client built there; if this
        // future is dropped (the replica is killed), `member` drops it.
        let member = {
            let stop = stop.clone();
            lease_thread::spawn("lease-shard", move || async move {
                let client = client.build()?;
                sharding.run(client, changed, stop).await;
                Ok::<(), RuntimeError>(())
            })
            .map_err(RuntimeError::LeaseThread)?
        };
        self.serve_term(&CancellationToken::new(), shutdown).await;
        stop.cancel();
        member
            .await
            .unwrap_or(Err(RuntimeError::LeaseThreadPanicked))
    }

    /// Dispatches until `term` ends (abort at once) or `shutdown` (drain, then abort).
    async fn serve_term(&self, term: &CancellationToken, shutdown: &CancellationToken) {
        let inner = &self.inner;
        // Children of the term: its end stops intake and aborts reconciles at once, whichever
        // task notices first.
        let tokens = Term {
            intake: term.child_token(),
            abort: term.child_token(),
        };
        inner.leadership.send_replace(true);
        inner.controllers.begin_term(tokens.clone());
        tokio::select! {
            () = term.cancelled() => {
                tokens.intake.cancel();
                tokens.abort.cancel();
                join_all(inner.controllers.end_term()).await;
            }
            () = shutdown.cancelled() => {
                tokens.intake.cancel();
                let mut work = std::pin::pin!(join_all(inner.controllers.end_term()));
                tokio::select! {
                    _ = &mut work => {}
                    () = term.cancelled() => {
                        tokens.abort.cancel();
                        work.await;
                    }
                    () = tokio::time::sleep(inner.settings.drain_timeout) => {
                        tracing::warn!(timeout = ?inner.settings.drain_timeout,
                            "drain timeout passed; cancelling reconciles in progress");
                        tokens.abort.cancel();
                        work.await;
                    }
                }
            }
        }
        inner.leadership.send_replace(false);
    }
}

/// The plugin name under which sharded mode places work that belongs to no key: no plugin
/// has it (plugin names are DNS labels).
const RING_WIDE: &str = "/ring-wide";

/// The next live term of leadership, or `None` when the elector is gone. A term that already
/// ended (the elector publishes `Following` just after cancelling it) is skipped.
async fn next_term(leadership: &mut watch::Receiver<Leadership>) -> Option<CancellationToken> {
    let live =
        |state: &Leadership| matches!(state, Leadership::Leading { term } if !term.is_cancelled());
    let state = leadership.wait_for(live).await.ok()?;
    match &*state {
        Leadership::Leading { term } => Some(term.clone()),
        Leadership::Following { .. } => None,
    }
}
