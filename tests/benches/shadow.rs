//! What a shadow costs, with the real parts: the real `reconcile-host` binary and the embedded API
//! server in this process, the `testbed` guest server-side applying one ConfigMap per reconcile
//! (`behave: ok`), 2,000 objects resynced every second so the queue is always full, 2 workers.
//!
//! The same host runs three times: without a shadow, with an identical shadow on every reconcile
//! (`sample: 1`), and with one on a tenth (`sample: 0.1`). For each: primary reconciles per second,
//! shadow runs per second by outcome, API requests per second, and the host's CPU time per primary
//! reconcile, over a 10 s window after a 5 s warm-up. The cost of one shadow run is the extra
//! CPU per reconcile divided by the shadow runs per reconcile.
//!
//! Client budgets are raised so that the CPU bounds the work; the shadow's dry runs share the
//! plugin's own API budget, so under a tight budget a shadow slows the primary by its requests.
//!
//! `cargo bench -p end-to-end --bench shadow` (OBJECTS=<n> to change the 2,000).

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::host::{Host, component, manifest, scratch};
use embedded_apiserver::{ApiServer, Config};
use serde_json::json;

const RECONCILED: &str =
    "controller_runtime_reconcile_total{controller=\"testbed\",result=\"success\"}";

fn runs(outcome: &str) -> String {
    format!("reconcile_host_plugin_shadow_runs_total{{plugin=\"testbed\",outcome=\"{outcome}\"}}")
}

fn objects() -> usize {
    std::env::var("OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000)
}

struct Window {
    reconciles: f64,
    shadow: [f64; 4],
    requests: f64,
    cpu: Duration,
    seconds: f64,
}

async fn window(server: &ApiServer, host: &Host) -> Window {
    let outcomes = ["same", "different", "failed", "skipped"];
    let mut shadow_before = [0.0; 4];
    for (i, outcome) in outcomes.iter().enumerate() {
        shadow_before[i] = host.metric(&runs(outcome)).await;
    }
    let reconciles_before = host.metric(RECONCILED).await;
    let requests_before = server.requests().len();
    let cpu_before = host.cpu_time();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = host.cpu_time() - cpu_before;
    let requests = (server.requests().len() - requests_before) as f64 / seconds;
    let reconciles = (host.metric(RECONCILED).await - reconciles_before) / seconds;
    let mut shadow = [0.0; 4];
    for (i, outcome) in outcomes.iter().enumerate() {
        shadow[i] = (host.metric(&runs(outcome)).await - shadow_before[i]) / seconds;
    }
    Window {
        reconciles,
        shadow,
        requests,
        cpu,
        seconds,
    }
}

#[tokio::main]
async fn main() {
    let count = objects();
    let server = ApiServer::start(Config::default().record_requests(true))
        .await
        .expect("API server");
    server
        .bulk_load(std::iter::once(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
        ))
        .expect("namespace");
    server
        .bulk_load((0..count).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("object-{i:05}"), "namespace": "bench",
                                "labels": {"testbed": "true"}},
                   "data": {"behave": "ok", "value": "v"}})
        }))
        .expect("bulk load");
    println!(
        "shadow: {count} ConfigMaps, each reconcile one server-side apply, resync 1 s, 2 workers, {} CPUs",
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    let testbed = component("testbed");
    let shadow_every = format!("{{module: {}, sample: 1}}", testbed.display());
    let shadow_tenth = format!("{{module: {}, sample: 0.1}}", testbed.display());
    let mut baseline: Option<f64> = None;
    for (label, shadow) in [
        ("no shadow", None),
        ("identical shadow, sample 1", Some(shadow_every.as_str())),
        ("identical shadow, sample 0.1", Some(shadow_tenth.as_str())),
    ] {
        let dir = scratch(&format!("bench-shadow-{}", label.replace([' ', ','], "-")));
        let mut overrides = vec![
            ("resync", "1s"),
            ("concurrency", "2"),
            ("apiRateLimit", "{qps: 100000, burst: 100000}"),
        ];
        if let Some(shadow) = shadow {
            overrides.push(("shadow", shadow));
        }
        let plugin = manifest(
            &dir,
            "host/tests/guests/testbed/plugin.yaml",
            &testbed,
            &overrides,
        );
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let host = Host::spawn(Host::bench_command(&kubeconfig, &plugin));
        host.wait_metric(RECONCILED, count as f64).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let w = window(&server, &host).await;
        let cpu_per = w.cpu.as_secs_f64() / (w.reconciles * w.seconds);
        let shadowed = w.shadow[0] + w.shadow[1] + w.shadow[2];
        println!(
            "  {label:<30} {:>6.0} reconciles/s; shadow runs/s: {:.0} same, {:.0} different, {:.0} \
             failed, {:.0} skipped; {:.0} API requests/s; host CPU {:.1} µs per reconcile",
            w.reconciles,
            w.shadow[0],
            w.shadow[1],
            w.shadow[2],
            w.shadow[3],
            w.requests,
            cpu_per * 1e6
        );
        match baseline {
            None => baseline = Some(cpu_per),
            Some(base) if shadowed > 0.0 => {
                let per_run = (cpu_per - base) * w.reconciles / shadowed;
                println!(
                    "  {:<30} one shadow run costs {:.1} µs of host CPU ({:.2}× a reconcile without \
                     shadow)",
                    "",
                    per_run * 1e6,
                    per_run / base
                );
            }
            Some(_) => {}
        }
        drop(host);
    }
}
