//! Sharded mode's scaling, with the real parts: the real `reconcile-host` binary, one process per
//! replica pinned to a CPU with `taskset` (replica `i` on CPU `i mod CPUs`), the ledger guest
//! spending 200 µs of CPU per reconcile, 10,000 ConfigMaps in the embedded API server, resynced
//! every second so every replica's queue is always full.
//!
//! 1. Reconciles per second, summed over the replicas, for 1, 2 and 3 replicas (a 10 s window
//!    after a 5 s warm-up).
//! 2. With client-go's durations (lease 15 s, renew 10 s, retry 2 s): lease requests per second
//!    at 3 replicas, settled (a 20 s window); the time from a fourth replica's start until it
//!    owns its share; the time from SIGKILL of one of the four until the others own all its
//!    keys.
//!
//! 4. In-process, the cost of the check every replica makes for every event and resync of every
//!    key (is it mine?): the key formatted and looked up on a ring of 3, 10 and 100 members.
//!
//! `cargo bench -p end-to-end --bench scale_out` (OBJECTS=<n> to change the 10,000).

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::host::{HOST_BINARY, Host, component, free_port, manifest, module_cache, scratch};
use embedded_apiserver::{ApiServer, Config};
use serde_json::json;

const RECONCILED: &str =
    "controller_runtime_reconcile_total{controller=\"ledger\",result=\"success\"}";
const OWNED: &str = "reconcile_host_shard_keys_owned{plugin=\"ledger\"}";

fn objects() -> usize {
    std::env::var("OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Replica `name`, pinned to `cpu`, sharded, with `durations` (lease, renew, retry).
fn replica(dir: &Path, kubeconfig: &Path, name: &str, cpu: usize, durations: [&str; 3]) -> Host {
    let plugin_dir = dir.join(name);
    std::fs::create_dir_all(&plugin_dir).expect("replica dir");
    let env = format!("{{REPLICA: {name}}}");
    let plugin: PathBuf = manifest(
        &plugin_dir,
        "host/tests/guests/ledger/plugin.yaml",
        &component("ledger"),
        &[("env", &env), ("resync", "1s"), ("concurrency", "1")],
    );
    let mut command = Command::new("taskset");
    command
        .args(["-c", &cpu.to_string(), HOST_BINARY, "run"])
        .args(["--metrics-address", &format!("127.0.0.1:{}", free_port())])
        .args(["--qps", "500", "--burst", "1000"])
        .arg("--module-cache")
        .arg(module_cache())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--election-mode", "sharded"])
        .args(["--lease-duration", durations[0]])
        .args(["--renew-deadline", durations[1]])
        .args(["--retry-period", durations[2]])
        .arg("--plugin")
        .arg(plugin)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Host::spawn(command)
}

async fn wait_log(host: &Host, parts: &[&str], limit: Duration) {
    let deadline = Instant::now() + limit;
    while !host
        .log()
        .lines()
        .any(|l| parts.iter().all(|p| l.contains(p)))
    {
        assert!(
            Instant::now() < deadline,
            "no log line with {parts:?}:\n{}",
            host.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn total(hosts: &[Host], series: &str) -> f64 {
    let mut sum = 0.0;
    for host in hosts {
        sum += host.metric(series).await;
    }
    sum
}

async fn stop(hosts: Vec<Host>) {
    for mut host in hosts {
        host.signal("TERM");
        let _ = host.exit_code().await;
    }
}

/// Nanoseconds per ownership check of a key on a settled ring of `members`.
fn ownership_check(members: usize) -> f64 {
    use reconcile_host::controller::ObjectKey;
    use reconcile_host::shard::{Membership, Observed, Placement, Step};
    let names: Vec<String> = (0..members).map(|i| format!("replica-{i}")).collect();
    let mut membership = Membership::new(&names[0], Duration::from_secs(15));
    let now = std::time::Instant::now();
    let leases = |ack: Option<&reconcile_host::shard::ViewId>| -> Vec<Observed> {
        names
            .iter()
            .map(|name| Observed {
                member: name.as_str().into(),
                resource_version: "1".to_owned(),
                ack: ack.cloned(),
            })
            .collect()
    };
    let _ = membership.observe(&leases(None), Some("1"), now);
    let ack = membership.ack().cloned();
    let Step::Widen(assignment) = membership.observe(&leases(ack.as_ref()), Some("1"), now) else {
        panic!("the ring settles");
    };
    let keys: Vec<ObjectKey> = (0..10_000)
        .map(|i| ObjectKey::namespaced("ledger", &format!("object-{i:05}")))
        .collect();
    let rounds = 100;
    let started = Instant::now();
    let mut mine = 0_usize;
    for _ in 0..rounds {
        for key in &keys {
            let text = key.to_string();
            mine += usize::from(assignment.admits("ledger", Placement::Keys.ring_key(&text)));
        }
    }
    let elapsed = started.elapsed();
    std::hint::black_box(mine);
    elapsed.as_nanos() as f64 / (rounds * keys.len()) as f64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    for members in [3, 10, 100] {
        println!(
            "  ownership check, ring of {members}: {:.0} ns per key",
            ownership_check(members)
        );
    }
    let count = objects();
    let server = ApiServer::start(Config::default().record_requests(true))
        .await
        .expect("API server");
    server
        .bulk_load(std::iter::once(
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ledger"}}),
        ))
        .expect("namespace");
    server
        .bulk_load((0..count).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("object-{i:05}"), "namespace": "ledger",
                                "labels": {"ledger": "true"},
                                "annotations": {"ledger.test/seen": "1"}},
                   "data": {"v": "1", "us": "200", "quiet": "true"}})
        }))
        .expect("bulk load");
    let dir = scratch("bench-scale-out");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let short = ["4s", "3s", "500ms"];
    println!(
        "scale_out: {count} ConfigMaps, 200 µs of guest CPU per reconcile, resync 1 s, {} CPUs",
        cpus()
    );

    let mut rates = Vec::new();
    for replicas in 1..=3 {
        let hosts: Vec<Host> = (0..replicas)
            .map(|i| {
                replica(
                    &dir,
                    &kubeconfig,
                    &format!("r{replicas}-{i}"),
                    i % cpus(),
                    short,
                )
            })
            .collect();
        let members = format!("members={replicas}");
        for host in &hosts {
            wait_log(host, &["ring settled", &members], Duration::from_secs(120)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = total(&hosts, RECONCILED).await;
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let after = total(&hosts, RECONCILED).await;
        let rate = (after - before) / started.elapsed().as_secs_f64();
        let owned = total(&hosts, OWNED).await;
        rates.push(rate);
        println!(
            "  {replicas} replica(s): {rate:>8.0} reconciles/s ({:.2}× one replica); keys owned \
             in all: {owned}",
            rate / rates[0]
        );
        stop(hosts).await;
    }

    // Failover and join with client-go's durations.
    let defaults = ["15s", "10s", "2s"];
    let mut hosts: Vec<Host> = (0..3)
        .map(|i| replica(&dir, &kubeconfig, &format!("f-{i}"), i % cpus(), defaults))
        .collect();
    for host in &hosts {
        wait_log(
            host,
            &["ring settled", "members=3"],
            Duration::from_secs(120),
        )
        .await;
    }
    // Lease traffic, settled.
    let leases = |server: &ApiServer| {
        let requests = server.requests();
        let on_leases: Vec<_> = requests
            .iter()
            .filter(|r| r.path.contains("/leases"))
            .collect();
        let writes = on_leases.iter().filter(|r| r.method != "GET").count();
        (writes, on_leases.len() - writes)
    };
    let (writes_before, reads_before) = leases(&server);
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (writes_after, reads_after) = leases(&server);
    let seconds = window.elapsed().as_secs_f64();
    println!(
        "  lease traffic, 3 replicas settled, retry 2 s: {:.2} writes/s, {:.2} lists/s",
        (writes_after - writes_before) as f64 / seconds,
        (reads_after - reads_before) as f64 / seconds
    );
    // A fourth replica joins the three (before any dies, so no expired Lease is in the list).
    let started = Instant::now();
    let joining = replica(&dir, &kubeconfig, "f-3", 3 % cpus(), defaults);
    loop {
        if joining.metric(OWNED).await > 0.0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never took a share"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "  a replica joining 3 → owns its share: {:.2} s from its start ({} keys)",
        started.elapsed().as_secs_f64(),
        joining.metric(OWNED).await
    );
    hosts.push(joining);
    for host in &hosts {
        wait_log(
            host,
            &["ring settled", "members=4"],
            Duration::from_secs(120),
        )
        .await;
    }
    let mut victim = hosts.remove(2);
    victim.signal("KILL");
    let killed = Instant::now();
    let _ = victim.exit_code().await;
    loop {
        if total(&hosts, OWNED).await >= count as f64 {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "keys never taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "  SIGKILL of 1 of 4 → the others own all its keys: {:.2} s (lease 15 s, retry 2 s)",
        killed.elapsed().as_secs_f64()
    );
    stop(hosts).await;
}
