//! Applies a schedule's faults to the replicas, the proxy and the API server, and undoes each
//! when its time is up.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::time::Instant;

use crate::common::backend::Backend;
use crate::common::watchdog;

use super::proxy::Proxy;
use super::replicas::Replicas;
use super::schedule::Fault;

/// Something to undo at a given time.
#[derive(Debug)]
enum Undo {
    /// SIGCONT the incarnation `name` in `slot`, if it is still there.
    Thaw { slot: usize, name: String },
    /// Start a new incarnation in `slot`, if it is free.
    Restart { slot: usize },
    /// Let the API server answer again.
    ApiResume,
    /// Forward without delay again.
    JitterOff,
    /// Forward again; after a stall longer than half the fence margin, cut every connection instead
    /// of delivering what was held (see [`World`]).
    StallOff { cut: bool },
    /// Stop the busy processes.
    ContentionOff,
    /// SIGSTOP the incarnation `name` in `slot` whose proxy holds its new connections, let them
    /// through, and SIGCONT it after `length` (see [`Fault::FreezeReconnecting`]).
    FreezeHeld {
        slot: usize,
        name: String,
        length: Duration,
    },
}

/// What the faults act on, and what is pending.
///
/// The network and the API server never hold a replica's bytes longer than the fence margin
/// (`leaseDuration - renewDeadline`): a write that left a replica before its fence closed and
/// landed after another took over is the one case the host documents as not guaranteed (bytes
/// on the wire). So jitter delays each chunk by at most an eighth of the margin, the API server
/// is frozen for at most half of it, and a stall longer than half of it (and every outage)
/// ends as a partition does: every connection cut, nothing held delivered (together at most
/// three quarters of the margin, the rest left to the server's own time). A held handshake
/// carries no request.
///
/// Each replica slot has a proxy of its own; faults of the network act on all of them, except
/// [`Fault::FreezeReconnecting`], which acts on its replica's.
pub struct World<'a> {
    /// The replicas.
    pub replicas: Replicas,
    proxies: &'a [Proxy],
    server: &'a Backend,
    max_replicas: usize,
    min_replicas: usize,
    margin: Duration,
    pending: Vec<(Instant, Undo)>,
    busy: Vec<Child>,
    /// Busy processes running for the whole run.
    steady: Vec<Child>,
    api_frozen: bool,
    /// The proxies hold what they are sent (a stall or an outage): another waits for its end,
    /// so a short stall never lets through what a long one held.
    stalled: bool,
    /// The leader Lease, in leader mode.
    leader_lease: Option<Api<Lease>>,
    /// Faults applied, by kind.
    pub injected: BTreeMap<&'static str, usize>,
    /// Each fault applied and undone, by wall-clock time (µs since the epoch, as the witness
    /// guest and the host's logs count), for reading beside the replicas' logs.
    pub timeline: Vec<String>,
}

impl<'a> World<'a> {
    /// Faults on `replicas` (between `min` and `max` of them running, slot `i` behind
    /// `proxies[i]`) and `server`, holding no byte of a request longer than `margin`.
    pub fn new(
        replicas: Replicas,
        proxies: &'a [Proxy],
        server: &'a Backend,
        (min, max): (usize, usize),
        margin: Duration,
    ) -> Self {
        Self {
            replicas,
            proxies,
            server,
            max_replicas: max,
            min_replicas: min,
            margin,
            pending: Vec::new(),
            busy: Vec::new(),
            steady: Vec::new(),
            api_frozen: false,
            stalled: false,
            leader_lease: None,
            injected: BTreeMap::new(),
            timeline: Vec::new(),
        }
    }

    /// Keeps `count` busy processes on the replicas' cores from now until the run ends: a
    /// loaded machine, beside the contention the schedule adds.
    pub fn with_steady_load(mut self, count: usize) -> Self {
        let cores = self.replicas.cores().map(str::to_owned);
        self.steady = (0..count).map(|_| busy(cores.as_deref())).collect();
        self
    }

    /// Aims the faults that prefer a leader at the holder of the Lease `faults` in `leases`.
    pub fn with_leader_lease(mut self, leases: Api<Lease>) -> Self {
        self.leader_lease = Some(leases);
        self
    }

    /// The slot of the running, unfrozen replica holding the leader Lease, if it can be told
    /// quickly.
    async fn leader(&self) -> Option<usize> {
        let leases = self.leader_lease.as_ref()?;
        let read = tokio::time::timeout(Duration::from_millis(300), leases.get("faults"));
        let lease = read.await.ok()?.ok()?;
        let holder = lease.spec?.holder_identity?;
        let (name, _) = holder.split_once('_')?;
        self.replicas
            .live
            .iter()
            .find(|(_, r)| r.name == name && !r.frozen)
            .map(|(slot, _)| *slot)
    }

    /// Applies `fault` now.
    pub async fn apply(&mut self, fault: &Fault) {
        self.undo_due().await;
        let now = Instant::now();
        let applied = match fault {
            Fault::Freeze { pick, length } => self.replicas.choose(*pick).map(|slot| {
                self.replicas.freeze(slot, true);
                let name = self.replicas.live[&slot].name.clone();
                self.pending
                    .push((now + *length, Undo::Thaw { slot, name }));
                "freeze"
            }),
            Fault::FreezeReconnecting { pick, hold, length } => {
                let target = match self.leader().await {
                    Some(slot) => Some(slot),
                    None => self.replicas.choose(*pick),
                };
                target.map(|slot| {
                    let proxy = &self.proxies[slot];
                    proxy.hold(true);
                    proxy.cut();
                    let name = self.replicas.live[&slot].name.clone();
                    let length = *length;
                    self.pending
                        .push((now + *hold, Undo::FreezeHeld { slot, name, length }));
                    "reconnect-freeze"
                })
            }
            Fault::Kill { pick, down } => match self.replicas.choose(*pick) {
                Some(slot) => {
                    self.replicas.end(slot, false).await;
                    self.pending.push((now + *down, Undo::Restart { slot }));
                    Some("kill")
                }
                None => None,
            },
            Fault::Leave {
                pick,
                down,
                returns,
            } => match self.replicas.choose(*pick) {
                Some(slot) => {
                    self.replicas.end(slot, true).await;
                    if *returns || self.replicas.live.len() < self.min_replicas {
                        self.pending.push((now + *down, Undo::Restart { slot }));
                    }
                    Some("leave")
                }
                None => None,
            },
            Fault::Join => (self.replicas.live.len() < self.max_replicas).then(|| {
                let slot = self.replicas.free_slot();
                self.replicas.start(slot);
                "join"
            }),
            Fault::ApiFreeze { length } => (!self.api_frozen).then(|| {
                self.server.pause();
                self.api_frozen = true;
                let length = (*length).min(self.margin / 2);
                self.pending.push((now + length, Undo::ApiResume));
                "api-freeze"
            }),
            Fault::Jitter { max, length } => {
                let max = (*max).min(self.margin / 8);
                self.proxies.iter().for_each(|proxy| proxy.delay(max));
                self.pending.push((now + *length, Undo::JitterOff));
                Some("jitter")
            }
            Fault::Stall { length } => (!self.stalled).then(|| {
                self.stall(now + *length, *length > self.margin / 2);
                "stall"
            }),
            Fault::Outage { length } => (!self.stalled).then(|| {
                self.stall(now + *length, true);
                "outage"
            }),
            Fault::Cut => {
                self.proxies.iter().for_each(Proxy::cut);
                Some("cut")
            }
            Fault::Contention { length } => self.busy.is_empty().then(|| {
                let cores = self.replicas.cores().map(str::to_owned);
                self.busy = (0..2).map(|_| busy(cores.as_deref())).collect();
                self.pending.push((now + *length, Undo::ContentionOff));
                "contention"
            }),
        };
        if let Some(kind) = applied {
            *self.injected.entry(kind).or_default() += 1;
            self.note(format!("{fault}"));
        }
    }

    /// Undoes what is due.
    pub async fn undo_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, undo) in due {
            self.undo(undo);
        }
    }

    /// Undoes everything pending, at once (and what that undoing leaves pending), and makes sure
    /// `min` replicas run.
    pub async fn calm(&mut self) {
        while !self.pending.is_empty() {
            for (_, undo) in std::mem::take(&mut self.pending) {
                self.undo(undo);
            }
        }
        while self.replicas.live.len() < self.min_replicas {
            let slot = self.replicas.free_slot();
            self.replicas.start(slot);
        }
    }

    /// SIGSTOP (`true`) or SIGCONT the replica in `slot` for the lapse storm, noted in the
    /// timeline.
    pub fn flap(&mut self, slot: usize, frozen: bool) {
        let what = if frozen { "freeze" } else { "thaw" };
        self.note(format!("lapse storm: {what} slot {slot}"));
        if frozen {
            *self.injected.entry("lapse-storm").or_default() += 1;
        }
        self.replicas.freeze(slot, frozen);
    }

    /// The earliest pending undo, if any.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|(at, _)| *at).min()
    }

    fn note(&mut self, what: String) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        self.timeline.push(format!("at={at} {what}"));
    }

    fn undo(&mut self, undo: Undo) {
        self.note(format!("undo {undo:?}"));
        match undo {
            Undo::Thaw { slot, name } => {
                if self
                    .replicas
                    .live
                    .get(&slot)
                    .is_some_and(|r| r.name == name)
                {
                    self.replicas.freeze(slot, false);
                }
            }
            Undo::Restart { slot } => {
                if !self.replicas.live.contains_key(&slot)
                    && self.replicas.live.len() < self.max_replicas
                {
                    self.replicas.start(slot);
                }
            }
            Undo::ApiResume => {
                self.server.resume();
                self.api_frozen = false;
            }
            Undo::JitterOff => self.proxies.iter().for_each(|p| p.delay(Duration::ZERO)),
            Undo::StallOff { cut } => {
                self.stalled = false;
                for proxy in self.proxies {
                    if cut {
                        proxy.cut();
                    }
                    proxy.stall(false);
                }
            }
            Undo::ContentionOff => self.stop_busy(),
            Undo::FreezeHeld { slot, name, length } => {
                let same = |r: &super::replicas::Replica| r.name == name && !r.frozen;
                if self.replicas.live.get(&slot).is_some_and(same) {
                    self.replicas.freeze(slot, true);
                    let thaw = Undo::Thaw { slot, name };
                    self.pending.push((Instant::now() + length, thaw));
                }
                self.proxies[slot].hold(false);
            }
        }
    }

    /// Every proxy holds what it is sent until `until`, then lets it through, or with `cut`
    /// drops it and cuts every connection.
    fn stall(&mut self, until: Instant, cut: bool) {
        self.proxies.iter().for_each(|proxy| proxy.stall(true));
        self.stalled = true;
        self.pending.push((until, Undo::StallOff { cut }));
    }

    fn stop_busy(&mut self) {
        Self::stop(&mut self.busy);
    }

    fn stop(children: &mut Vec<Child>) {
        for mut child in children.drain(..) {
            watchdog::kill(&mut child);
        }
    }
}

impl Drop for World<'_> {
    fn drop(&mut self) {
        self.stop_busy();
        Self::stop(&mut self.steady);
        if self.api_frozen {
            self.server.resume();
        }
    }
}

/// A process that spins on a core (one of `cores`, when given) until killed, on the shared
/// watchdog's list: it dies with the test binary even when no `Drop` runs.
fn busy(cores: Option<&str>) -> Child {
    let mut command = Command::new("sh");
    command.args(["-c", "while :; do :; done"]);
    if let Some(cores) = cores {
        command = super::replicas::pinned(&command, cores);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    watchdog::spawn(&mut command).expect("a busy process starts")
}
