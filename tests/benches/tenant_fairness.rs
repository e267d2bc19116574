//! Fair shares between tenants, measured: how long a quiet tenant's reconcile takes (its
//! object written → the plugin's write visible) while another tenant takes all it can, with the
//! host's tenant ceilings and without them, against the same with the other tenant idle.
//!
//! - *Quiet tenant* `fair-quiet`: the `ledger` guest (concurrency 2) on one ConfigMap; each
//!   sample writes its `data.v` and waits, on a watch, for the plugin's annotation of that
//!   version. Samples are taken one after another.
//! - *Noisy tenant* `fair-noisy`: the `hostile` guest's `flood` (concurrency 16) on 32
//!   ConfigMaps: each reconcile computes for 20 ms, gets its own ConfigMap 10 times and asks to
//!   run again at once (the host raises that to `limits.minRequeueAfter`, 100 ms).
//! - Phases, each with a host of its own: `idle` (the noisy tenant has no objects yet),
//!   `ceilings` (the noisy tenant held to `instances: 1, apiQps: 20, apiBurst: 20`), `instances`
//!   (held to `instances: 1` only), and `none` (every ceiling far above what the tenant asks
//!   for).
//!
//! Both plugins act as ServiceAccounts of their namespaces (bound to what they do on the real
//! server). Client budgets are raised so that only the tenant ceilings limit the noisy tenant.
//!
//! `cargo bench -p end-to-end --bench tenant_fairness`; `SAMPLES=<n>` changes the 200 samples
//! of each phase; `E2E_BACKEND=real` runs against kube-apiserver and etcd.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::backend::{Backend, Cluster};
use common::host::{Host, component, manifest, scratch};
use common::labelled_config_map;
use embedded_apiserver::Config;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

const QUIET: &str = "fair-quiet";
const NOISY: &str = "fair-noisy";
const PROBE: &str = "probe";
const NOISY_OBJECTS: usize = 32;
/// The noisy tenant's reconciles counted before a loaded phase is measured: its load is on.
const WARM_RECONCILES: f64 = 20.0;
/// Between two samples.
const GAP: Duration = Duration::from_millis(20);
/// The longest one sample may take.
const SAMPLE_WAIT: Duration = Duration::from_secs(60);

fn samples_wanted() -> usize {
    std::env::var("SAMPLES")
        .ok()
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("SAMPLES={n} is not a count; give a whole number"))
        })
        .unwrap_or(200)
}

/// The two plugins' manifests, each acting as the `plugins` account of its tenant.
fn plugins(dir: &Path) -> (PathBuf, PathBuf) {
    let account = |tenant: &'static str| {
        [
            ("serviceAccountName", "plugins"),
            ("serviceAccountNamespace", tenant),
        ]
    };
    let quiet_grants = format!(
        "[{{apiVersion: v1, kind: ConfigMap, verbs: [get, patch], namespaces: [{QUIET}]}}]"
    );
    let mut quiet = vec![("concurrency", "2"), ("grants", quiet_grants.as_str())];
    quiet.extend(account(QUIET));
    let quiet = manifest(
        dir,
        "host/tests/guests/ledger/plugin.yaml",
        &component("ledger"),
        &quiet,
    );
    let noisy_grants =
        format!("[{{apiVersion: v1, kind: ConfigMap, verbs: [get], namespaces: [{NOISY}]}}]");
    let mut noisy = vec![("concurrency", "16"), ("grants", noisy_grants.as_str())];
    noisy.extend(account(NOISY));
    let noisy = manifest(
        dir,
        "host/tests/guests/hostile/plugin.yaml",
        &component("hostile"),
        &noisy,
    );
    (quiet, noisy)
}

/// What the tenants may do on the real server: ConfigMaps in their own namespace.
fn bind_accounts(backend: &Backend, dir: &Path) {
    let mut items = Vec::new();
    for tenant in [QUIET, NOISY] {
        items.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "plugins", "namespace": tenant},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list", "watch", "patch"]}]}),
        );
        items.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "plugins", "namespace": tenant},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plugins"},
            "subjects": [{"kind": "ServiceAccount", "name": "plugins", "namespace": tenant}]}),
        );
    }
    let path = dir.join("rbac.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&path, list.to_string()).expect("written");
    backend.kubectl_ok(
        dir,
        &[
            "apply",
            "--validate=false",
            "-f",
            path.to_str().expect("UTF-8"),
        ],
    );
}

/// A host with both plugins and the tenant ceilings of `tenants` (YAML under `tenants:`).
fn start_host(dir: &Path, kubeconfig: &Path, plugins: &(PathBuf, PathBuf), tenants: &str) -> Host {
    let config = dir.join("host.yaml");
    std::fs::write(&config, format!("tenants:\n{tenants}")).expect("config written");
    let mut command = Host::bench_command(kubeconfig, &plugins.0);
    command
        .arg("--plugin")
        .arg(&plugins.1)
        .arg("--config")
        .arg(&config);
    Host::spawn(command)
}

/// The probe's versions as the quiet plugin records them, as they arrive.
fn watch_seen(api: Api<ConfigMap>) -> tokio::sync::watch::Receiver<u64> {
    let (tx, rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let config = watcher::Config::default().fields(&format!("metadata.name={PROBE}"));
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let objects = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    vec![object]
                }
                _ => continue,
            };
            for object in objects {
                let seen = object
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("ledger.test/seen"))
                    .and_then(|v| v.parse::<u64>().ok());
                if let Some(seen) = seen {
                    tx.send_if_modified(|latest| {
                        let newer = seen > *latest;
                        if newer {
                            *latest = seen;
                        }
                        newer
                    });
                }
            }
        }
    });
    rx
}

/// `samples` latencies of the quiet tenant: each writes the probe's next version and waits for
/// the plugin's record of it. `version` is the last version written.
async fn measure(
    api: &Api<ConfigMap>,
    seen: &mut tokio::sync::watch::Receiver<u64>,
    version: &mut u64,
    samples: usize,
    host: &mut Host,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        *version += 1;
        let wanted = *version;
        let patch = json!({"data": {"v": wanted.to_string()}});
        let written = Instant::now();
        api.patch(PROBE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the probe written");
        let waited = tokio::time::timeout(SAMPLE_WAIT, seen.wait_for(|v| *v >= wanted)).await;
        assert!(
            matches!(waited, Ok(Ok(_))),
            "version {wanted} of the probe was not reconciled within {SAMPLE_WAIT:?}; the \
             host's log ends:\n{}",
            tail(host)
        );
        latencies.push(written.elapsed());
        tokio::time::sleep(GAP).await;
    }
    latencies
}

fn tail(host: &Host) -> String {
    let log = host.log();
    let lines: Vec<&str> = log.lines().rev().take(30).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// p-th percentile (0..=100) of sorted `values`, nearest rank.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Waits until the noisy plugin has run `WARM_RECONCILES` more reconciles than `from`.
async fn noisy_running(host: &Host) {
    let series =
        "controller_runtime_reconcile_total{controller=\"hostile\",result=\"requeue_after\"}";
    let from = host.metric(series).await;
    let started = Instant::now();
    loop {
        let now = host.metric(series).await;
        if now - from >= WARM_RECONCILES {
            return;
        }
        assert!(
            started.elapsed() < SAMPLE_WAIT,
            "the noisy tenant ran {} reconciles in {SAMPLE_WAIT:?}; the host's log ends:\n{}",
            now - from,
            tail(host)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() {
    let samples = samples_wanted();
    let backend = Backend::start(Config::default())
        .await
        .expect("the API server starts");
    let label = if backend.is_real() {
        "real"
    } else {
        "embedded"
    };
    let dir = scratch("bench-tenant-fairness");
    for tenant in [QUIET, NOISY] {
        common::namespace(&backend, tenant, &[]).await;
    }
    if backend.is_real() {
        bind_accounts(&backend, &dir);
    }
    let kubeconfig = dir.join("kubeconfig");
    backend
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let plugins = plugins(&dir);
    let quiet: Api<ConfigMap> = Api::namespaced(backend.client(), QUIET);
    quiet
        .create(
            &PostParams::default(),
            &labelled_config_map(
                QUIET,
                PROBE,
                &[("ledger", "true")],
                &[("v", "0"), ("ms", "0")],
            ),
        )
        .await
        .expect("the probe created");
    let mut seen = watch_seen(quiet.clone());
    let mut version = 0;
    println!(
        "tenant_fairness: {samples} samples a phase on the {label} API server, {} CPUs",
        std::thread::available_parallelism().map_or(1, usize::from)
    );

    let held = format!("  namespaces:\n    {NOISY}: {{instances: 1, apiQps: 20, apiBurst: 20}}\n");
    let unheld = "  default: {instances: 1000, apiQps: 100000, apiBurst: 100000, memory: 64Gi}\n";
    let calls_only = format!("{unheld}  namespaces:\n    {NOISY}: {{instances: 1}}\n");
    let mut results: Vec<(&str, Vec<Duration>)> = Vec::new();
    let phases = [
        ("idle", held.as_str()),
        ("ceilings", held.as_str()),
        ("instances", calls_only.as_str()),
        ("none", unheld),
    ];
    for (phase, tenants) in phases {
        if phase == "ceilings" {
            let noisy: Api<ConfigMap> = Api::namespaced(backend.client(), NOISY);
            for i in 0..NOISY_OBJECTS {
                let object = labelled_config_map(
                    NOISY,
                    &format!("flood-{i:02}"),
                    &[("hostile", "true")],
                    &[("attack", "flood"), ("ms", "20"), ("calls", "10")],
                );
                noisy
                    .create(&PostParams::default(), &object)
                    .await
                    .expect("a noisy object created");
            }
        }
        let mut host = start_host(&dir, &kubeconfig, &plugins, tenants);
        // The first sample waits for the host to start and sync; it is not counted.
        measure(&quiet, &mut seen, &mut version, 1, &mut host).await;
        if phase != "idle" {
            noisy_running(&host).await;
        }
        let noisy_before = host
            .metric("controller_runtime_reconcile_total{controller=\"hostile\",result=\"requeue_after\"}")
            .await;
        let started = Instant::now();
        let mut latencies = measure(&quiet, &mut seen, &mut version, samples, &mut host).await;
        let noisy_rate = (host
            .metric("controller_runtime_reconcile_total{controller=\"hostile\",result=\"requeue_after\"}")
            .await
            - noisy_before)
            / started.elapsed().as_secs_f64();
        latencies.sort_unstable();
        println!(
            "  {phase}: the noisy tenant ran {noisy_rate:.0} reconciles/s ({:.0} API requests/s)",
            noisy_rate * 10.0
        );
        results.push((phase, latencies));
        drop(host);
    }

    let idle = &results[0].1;
    let (idle_p50, idle_p99) = (percentile(idle, 50), percentile(idle, 99));
    println!(
        "RESULT tenant_fairness backend={label}: the quiet tenant's reconcile latency (write → plugin's write seen)"
    );
    println!("  phase      p50       p90       p99       max       p50/idle  p99/idle");
    for (phase, sorted) in &results {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "  {phase:<9}  {:>6.1} ms {:>6.1} ms {:>6.1} ms {:>6.1} ms {:>6.2}×   {:>6.2}×",
            ms(percentile(sorted, 50)),
            ms(percentile(sorted, 90)),
            ms(percentile(sorted, 99)),
            ms(*sorted.last().expect("samples")),
            ms(percentile(sorted, 50)) / ms(idle_p50),
            ms(percentile(sorted, 99)) / ms(idle_p99),
        );
    }
}
