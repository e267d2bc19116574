//! One fault run: setup, the writer, the schedule, convergence, and the checker's verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use tokio::time::Instant;

use crate::common::backend::Backend;

use super::checker::{Mode, Rules, Verdict, check};
use super::observer::Observer;
use super::proxy::Proxy;
use super::replicas::{Durations, Replicas};
use super::schedule::{Rng, schedule};
use super::storm::{Storm, storm};
use super::world::World;

/// The plugin the witness guest runs as (the ring hashes its name with each key).
const PLUGIN: &str = "ledger";

/// What one run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Leader or sharded.
    pub mode: Mode,
    /// The replicas' Lease durations.
    pub durations: Durations,
    /// How long faults are injected.
    pub faults_for: Duration,
    /// Replicas at the start (and at least this many once the faults stop).
    pub replicas: usize,
    /// The most replicas running at once.
    pub max_replicas: usize,
    /// Witness objects.
    pub objects: usize,
    /// Changes the writer makes per second while faults run.
    pub writes_per_second: u32,
    /// What each reconcile computes before it writes.
    pub work: Duration,
    /// What each reconcile waits, after its work and before its write (a sleep: no CPU).
    pub wait: Duration,
    /// How long after the faults stop every object must be reconciled at its last change.
    pub settle: Duration,
    /// The CPUs the replicas and the busy processes run on (`taskset -c` syntax); all when
    /// `None`.
    pub cores: Option<String>,
    /// Busy processes on those CPUs for the whole run (the schedule's contention comes on top).
    pub steady_load: usize,
    /// Sharded mode: the bound on the lapse storm after the faults (see [`super::storm`]), or
    /// `None` for no storm.
    pub storm: Option<Duration>,
}

/// What one run found.
#[derive(Debug)]
pub struct Outcome {
    /// The schedule's seed.
    pub seed: u64,
    /// Faults applied, by kind.
    pub injected: BTreeMap<&'static str, usize>,
    /// The checker's verdict on the history.
    pub verdict: Verdict,
    /// Objects not reconciled at their last change `settle` after the faults stopped.
    pub unconverged: Vec<String>,
    /// Holes in the observed history.
    pub gaps: Vec<String>,
    /// How long the objects took to converge after the faults stopped.
    pub converged_after: Option<Duration>,
    /// The lapse storm, if one ran.
    pub storm: Option<Storm>,
    /// The run's wall time.
    pub took: Duration,
}

impl Outcome {
    /// True when nothing is wrong.
    pub fn clean(&self) -> bool {
        self.verdict.late.is_empty()
            && self.verdict.overlaps.is_empty()
            && self.unconverged.is_empty()
            && self.gaps.is_empty()
            && self
                .storm
                .as_ref()
                .is_none_or(|storm| storm.behind.is_empty())
    }

    /// Faults applied in all.
    pub fn faults(&self) -> usize {
        self.injected.values().sum()
    }

    /// One line of totals, then each finding.
    pub fn report(&self) -> String {
        let mut text = format!(
            "seed {}: {} faults {:?}, {} witness writes, {} Lease changes; {} late writes, {} \
             overlaps, {} unconverged; converged {} after the faults; {:.1} s",
            self.seed,
            self.faults(),
            self.injected,
            self.verdict.writes,
            self.verdict.lease_changes,
            self.verdict.late.len(),
            self.verdict.overlaps.len(),
            self.unconverged.len(),
            self.converged_after.map_or_else(
                || "never".to_owned(),
                |d| format!("{:.1} s", d.as_secs_f64())
            ),
            self.took.as_secs_f64(),
        );
        if let Some(storm) = &self.storm {
            let _ = match storm.converged_after {
                Some(after) => write!(
                    text,
                    "; lapse storm: {} lapses, converged {:.1} s after it began",
                    storm.lapses,
                    after.as_secs_f64()
                ),
                None => write!(
                    text,
                    "; lapse storm: {} lapses, {} objects never reconciled at their last change \
                     during it",
                    storm.lapses,
                    storm.behind.len()
                ),
            };
        }
        let storm_behind = self
            .storm
            .as_ref()
            .map(|storm| storm.behind.clone())
            .unwrap_or_default();
        let lists = [
            ("late", &self.verdict.late),
            ("overlap", &self.verdict.overlaps),
            ("unconverged", &self.unconverged),
            ("gap", &self.gaps),
            ("behind in the lapse storm", &storm_behind),
        ];
        for (what, items) in lists {
            for item in items.iter().take(20) {
                let _ = write!(text, "\n  {what}: {item}");
            }
            if items.len() > 20 {
                let _ = write!(text, "\n  … {} more {what}", items.len() - 20);
            }
        }
        text
    }
}

/// Runs the schedule of `seed` with `settings` against `server`, in a namespace of its own
/// (emptied afterwards); `dir` holds the replicas' files.
pub async fn run(server: &Backend, dir: &Path, seed: u64, settings: &Settings) -> Outcome {
    let started = Instant::now();
    let mode = match settings.mode {
        Mode::Leader => "leader",
        Mode::Sharded => "sharded",
    };
    let namespace = format!("faults-{mode}-{seed:x}");
    crate::common::namespace(server, &namespace, &[]).await;
    let client = server.kube_client().expect("admin client");
    let observer = Observer::start(client.clone(), &namespace).await;
    let objects: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let names: Vec<String> = (0..settings.objects)
        .map(|i| format!("object-{i}"))
        .collect();
    for name in &names {
        objects
            .create(
                &PostParams::default(),
                &witness(name, settings.work, settings.wait),
            )
            .await
            .expect("witness object created");
    }
    let mut proxies = Vec::new();
    for slot in 0..settings.max_replicas as u64 {
        proxies.push(Proxy::start(upstream(&server.url()), seed ^ (slot << 48)).await);
    }
    let proxy_urls: Vec<String> = proxies
        .iter()
        .map(|proxy| format!("https://{}", proxy.address()))
        .collect();
    let mut replicas = Replicas::new(
        server,
        dir,
        &proxy_urls,
        &namespace,
        settings.mode,
        settings.durations,
        settings.cores.clone(),
    );
    for slot in 0..settings.replicas {
        replicas.start(slot);
    }
    let margin = settings.durations.lease - settings.durations.renew;
    let mut world = World::new(
        replicas,
        &proxies,
        server,
        (settings.replicas.min(2), settings.max_replicas),
        margin,
    );
    world = world.with_steady_load(settings.steady_load);
    if settings.mode == Mode::Leader {
        world = world.with_leader_lease(Api::namespaced(client.clone(), &namespace));
    }
    let mut unconverged = converge(&objects, settings.settle * 2).await.err();
    if unconverged.is_none() {
        let writing = Arc::new(AtomicBool::new(true));
        let writer = tokio::spawn(write(
            objects.clone(),
            names.clone(),
            settings.writes_per_second,
            seed,
            Arc::clone(&writing),
        ));
        let steps = schedule(seed, settings.faults_for, settings.durations.lease);
        for step in &steps {
            let at = Instant::now() + step.gap;
            while let Some(due) = world.next_due().filter(|due| *due < at) {
                tokio::time::sleep_until(due).await;
                world.undo_due().await;
            }
            tokio::time::sleep_until(at).await;
            world.apply(&step.fault).await;
        }
        world.calm().await;
        writing.store(false, Ordering::Relaxed);
        writer.await.expect("the writer ends");
    }
    let storm = match (settings.storm, &unconverged) {
        (Some(bound), None) => Some(storm(&mut world, &objects, settings.durations, bound).await),
        _ => None,
    };
    world.calm().await;
    let calm = Instant::now();
    let converged = match unconverged {
        Some(_) => None,
        None => match converge(&objects, settings.settle).await {
            Ok(()) => Some(calm.elapsed()),
            Err(behind) => {
                unconverged = Some(behind);
                None
            }
        },
    };
    let mut logs = world.replicas.logs();
    logs.push(("faults".to_owned(), world.timeline.join("\n")));
    let injected = world.injected.clone();
    drop(world);
    caught_up(&client, &namespace, &observer).await;
    let rules = Rules {
        mode: settings.mode,
        lease_name: "faults",
        plugin: PLUGIN,
        // The storm's reconciles only wait, and may spend less than the run's.
        work_us: if storm.is_some() {
            (settings.work + settings.wait).min(super::storm::WAIT)
        } else {
            settings.work + settings.wait
        }
        .as_micros(),
    };
    let verdict = check(&observer.history(), &rules);
    let outcome = Outcome {
        seed,
        injected,
        verdict,
        unconverged: unconverged.unwrap_or_default(),
        gaps: observer.gaps(),
        converged_after: converged,
        storm,
        took: started.elapsed(),
    };
    if !outcome.clean() || std::env::var_os("FAULT_KEEP_LOGS").is_some() {
        keep_logs(&format!("{mode}-{seed}"), &logs);
    }
    empty(&client, &namespace).await;
    outcome
}

/// A witness object at version 1 whose reconcile computes for `work`, then sleeps for `wait`.
fn witness(name: &str, work: Duration, wait: Duration) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("ledger".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("v".to_owned(), "1".to_owned()),
                ("ms".to_owned(), work.as_millis().to_string()),
                ("waitMs".to_owned(), wait.as_millis().to_string()),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    }
}

/// The address of `url` (`https://127.0.0.1:<port>`).
fn upstream(url: &str) -> SocketAddr {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("the server URL has an authority");
    authority
        .parse()
        .expect("the server listens on an IP address")
}

/// Changes random objects' `data.v`, `per_second` a second, while `writing` holds.
async fn write(
    objects: Api<ConfigMap>,
    names: Vec<String>,
    per_second: u32,
    seed: u64,
    writing: Arc<AtomicBool>,
) {
    let mut rng = Rng::new(seed ^ 0x5752_4954_4552);
    let mut versions: Vec<u64> = vec![1; names.len()];
    let period = Duration::from_secs(1) / per_second.max(1);
    let mut next = Instant::now();
    while writing.load(Ordering::Relaxed) {
        next += period;
        tokio::time::sleep_until(next).await;
        let index = rng.below(names.len() as u64) as usize;
        let version = versions[index] + 1;
        let patch = serde_json::json!({"data": {"v": version.to_string()}});
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let call = objects.patch(&names[index], &params, &patch);
        // A frozen API server holds the call; the writer moves on and tries another object.
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), call).await {
            versions[index] = version;
        }
    }
}

/// Waits up to `bound` until every object's `ledger.test/seen` is its `data.v`; those that are
/// not, if any remain.
async fn converge(objects: &Api<ConfigMap>, bound: Duration) -> Result<(), Vec<String>> {
    let deadline = Instant::now() + bound;
    loop {
        let behind = behind(objects).await;
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(behind);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The objects whose `ledger.test/seen` is not their `data.v`, each described.
pub(super) async fn behind(objects: &Api<ConfigMap>) -> Vec<String> {
    match objects.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|object| {
                let annotations = object.metadata.annotations.clone().unwrap_or_default();
                let seen = annotations.get("ledger.test/seen");
                let version = object.data.as_ref().and_then(|d| d.get("v"));
                (seen != version).then(|| {
                    format!(
                        "{} v={} seen={} by={}",
                        object.metadata.name.as_deref().unwrap_or_default(),
                        version.map_or("-", String::as_str),
                        seen.map_or("-", String::as_str),
                        annotations
                            .get("ledger.test/by")
                            .map_or("-", String::as_str),
                    )
                })
            })
            .collect(),
        Err(error) => vec![format!("the list failed: {error}")],
    }
}

/// Waits until the observer has seen everything the server holds now: marks one object and
/// one Lease, and waits for both watches to pass the marks.
async fn caught_up(client: &kube::Client, namespace: &str, observer: &Observer) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mark = serde_json::json!({"metadata": {"annotations": {"faults.test/mark": "end"}}});
    let version = |meta: &ObjectMeta| {
        meta.resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    let map = maps
        .patch("object-0", &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .expect("the object marked");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("observer-mark".to_owned()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    let lease = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("the mark Lease created");
    let target = [version(&map.metadata), version(&lease.metadata)];
    let deadline = Instant::now() + crate::common::WAIT;
    let behind = || {
        let passed = observer.passed();
        passed[0] < target[0] || passed[1] < target[1]
    };
    while behind() && observer.gaps().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the observer did not catch up with the server: its watches passed {:?}, the marks \
             are at {target:?}",
            observer.passed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Deletes the run's objects and Leases.
async fn empty(client: &kube::Client, namespace: &str) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let params = DeleteParams::default();
    let list = ListParams::default();
    maps.delete_collection(&params, &list)
        .await
        .expect("objects deleted");
    leases
        .delete_collection(&params, &list)
        .await
        .expect("Leases deleted");
}

/// Writes every incarnation's log into `target/fault-runs/<run>/` (for a failed run, or every
/// run with `FAULT_KEEP_LOGS` set).
fn keep_logs(run: &str, logs: &[(String, String)]) {
    let dir = crate::common::host::target_dir()
        .join("fault-runs")
        .join(run);
    let _ = std::fs::create_dir_all(&dir);
    for (name, log) in logs {
        let _ = std::fs::write(dir.join(format!("{name}.log")), log);
    }
}
