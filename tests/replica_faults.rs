//! End to end, with real processes and random faults: three replicas of the host reconcile
//! witness objects through a rough proxy while a writer changes the objects and a seeded
//! schedule freezes, kills, stops and adds replicas, freezes the API server or puts it out of
//! reach, delays, stalls and cuts connections and loads the CPU; then the checker
//! (`common::faults`) judges the server's history: no write after its writer's fence closed, no
//! key reconciled by two replicas at once, and every object reconciled at its last change soon
//! after the faults stop. Leader and sharded mode; in sharded mode a lapse storm follows (one
//! replica lapsing again and again), during which every object must be reconciled too.
//!
//! Without `FAULT_SEEDS` it runs seed 1 for each mode; `FAULT_SEEDS` picks others (`7,12` or
//! `random:50`), `FAULT_DURATIONS=default` uses client-go's Lease durations (`4000,3000,1000`
//! sets them in ms), `FAULT_SECONDS` sets how long faults run; `FAULT_OBJECTS`, `FAULT_WRITES`,
//! `FAULT_WORK_MS` and `FAULT_WAIT_MS` set the witness objects (100), the writer's changes a
//! second (20), each reconcile's work (100 ms of CPU) and its wait before writing (0 ms, a
//! sleep); `FAULT_CORES` pins the replicas and the busy processes to CPUs (`taskset -c`
//! syntax, e.g. `1`) and `FAULT_BUSY` keeps that many busy processes on them for the whole run;
//! `FAULT_SETTLE_SECONDS` sets the bound on convergence after the faults (five Leases plus 15 s);
//! `FAULT_STORM_SECONDS` bounds the lapse storm that follows in sharded mode (30 Leases; 0 runs
//! none); `FAULT_KEEP_LOGS` keeps every run's logs; `FAULT_HOST_BINARY` runs another build of the host. `make soak-replicas` runs random
//! seeds; a failing seed runs again with the command its failure prints.

use std::time::Duration;

use crate::common::backend::Backend as ApiServer;
use crate::common::faults::checker::Mode;
use crate::common::faults::replicas::Durations;
use crate::common::faults::run::{Settings, run};
use crate::common::host::scratch;
use embedded_apiserver::Config;

/// The seeds run without `FAULT_SEEDS`: one schedule per mode, faults for 40 s.
const SUITE_SEEDS: &[u64] = &[1];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_mode_keeps_its_fence_and_converges_under_seeded_faults() {
    faults(Mode::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_mode_keeps_its_fences_and_loses_no_key_under_seeded_faults() {
    faults(Mode::Sharded).await;
}

async fn faults(mode: Mode) {
    let seeds = seeds();
    let durations = durations();
    let seconds = knob("FAULT_SECONDS", durations.lease.as_secs() * 20);
    let settings = Settings {
        mode,
        durations,
        faults_for: Duration::from_secs(seconds),
        replicas: 3,
        max_replicas: 4,
        objects: knob("FAULT_OBJECTS", 100),
        writes_per_second: knob("FAULT_WRITES", 20),
        work: Duration::from_millis(knob("FAULT_WORK_MS", 100)),
        wait: Duration::from_millis(knob("FAULT_WAIT_MS", 0)),
        // a lapsed Lease noticed, a ring settled, and the queue's backoff after the faults
        settle: Duration::from_secs_f64(knob(
            "FAULT_SETTLE_SECONDS",
            (durations.lease * 5 + Duration::from_secs(15)).as_secs_f64(),
        )),
        cores: std::env::var("FAULT_CORES").ok().filter(|c| !c.is_empty()),
        steady_load: knob("FAULT_BUSY", 0),
        storm: storm(mode, durations),
    };
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch(&format!("faults-{mode:?}"));
    let mut failed = Vec::new();
    let (mut faults, mut writes) = (0, 0);
    for seed in seeds {
        let outcome = run(&server, &dir, seed, &settings).await;
        println!("{mode:?} {durations:?}: {}", outcome.report());
        faults += outcome.faults();
        writes += outcome.verdict.writes;
        if !outcome.clean() {
            failed.push(outcome.seed);
        }
    }
    println!("{mode:?}: {faults} faults, {writes} witness writes checked");
    let backend = if server.is_real() { "real" } else { "embedded" };
    let test = match mode {
        Mode::Leader => "leader",
        Mode::Sharded => "sharded",
    };
    let (objects, writes_per_second) = (settings.objects, settings.writes_per_second);
    let (work, wait) = (settings.work.as_millis(), settings.wait.as_millis());
    let settle = settings.settle.as_secs_f64();
    let (lease, renew, retry) = (
        durations.lease.as_millis(),
        durations.renew.as_millis(),
        durations.retry.as_millis(),
    );
    let mut load = String::new();
    if let Some(cores) = &settings.cores {
        load.push_str(&format!(" FAULT_CORES={cores}"));
    }
    if settings.steady_load > 0 {
        load.push_str(&format!(" FAULT_BUSY={}", settings.steady_load));
    }
    if let Some(storm) = settings.storm {
        load.push_str(&format!(" FAULT_STORM_SECONDS={}", storm.as_secs_f64()));
    }
    assert!(
        failed.is_empty(),
        "{mode:?} mode failed the fault checker for seeds {failed:?} (reports above; replica \
         logs in target/fault-runs/); run one again with FAULT_SEEDS=<seed> \
         FAULT_DURATIONS={lease},{renew},{retry} FAULT_SECONDS={seconds} FAULT_OBJECTS={objects} \
         FAULT_WRITES={writes_per_second} FAULT_WORK_MS={work} \
         FAULT_WAIT_MS={wait} FAULT_SETTLE_SECONDS={settle}{load} E2E_BACKEND={backend} cargo test -p end-to-end --test e2e replica_faults::{test}"
    );
    assert!(writes > 0, "no witness write was observed");
}

/// Sharded mode: the lapse storm's bound, `FAULT_STORM_SECONDS` (0: no storm) or 30 Leases.
fn storm(mode: Mode, durations: Durations) -> Option<Duration> {
    let seconds = knob("FAULT_STORM_SECONDS", (durations.lease * 30).as_secs_f64());
    (mode == Mode::Sharded && seconds > 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// The number in the environment variable `name`, or `default` when it is unset.
fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}")),
        Err(_) => default,
    }
}

/// `FAULT_DURATIONS`: `short` (the suite's), `default` (client-go's), or `<lease>,<renew>,<retry>`
/// in milliseconds.
fn durations() -> Durations {
    match std::env::var("FAULT_DURATIONS").as_deref() {
        Err(_) | Ok("short") => Durations::SHORT,
        Ok("default") => Durations::DEFAULT,
        Ok(text) => {
            let ms: Vec<u64> = text
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("FAULT_DURATIONS=<lease>,<renew>,<retry> in ms")
                })
                .collect();
            let [lease, renew, retry] = ms[..] else {
                panic!("FAULT_DURATIONS=<lease>,<renew>,<retry> in ms, e.g. 4000,3000,1000");
            };
            Durations {
                lease: Duration::from_millis(lease),
                renew: Duration::from_millis(renew),
                retry: Duration::from_millis(retry),
            }
        }
    }
}

/// `FAULT_SEEDS`: `a,b,c`, or `random:<count>` (seeds from the clock, printed); the suite's
/// otherwise.
fn seeds() -> Vec<u64> {
    match std::env::var("FAULT_SEEDS") {
        Ok(text) => match text.strip_prefix("random:") {
            Some(count) => {
                let count: u64 = count.parse().expect("FAULT_SEEDS=random:<count>");
                let base = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                let mut rng = crate::common::faults::schedule::Rng::new(base);
                (0..count).map(|_| rng.next() % 1_000_000).collect()
            }
            None => text
                .split(',')
                .map(|seed| seed.trim().parse().expect("FAULT_SEEDS holds numbers"))
                .collect(),
        },
        Err(_) => SUITE_SEEDS.to_vec(),
    }
}
