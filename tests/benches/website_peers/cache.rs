//! Memory per cached object: `CACHE_OBJECTS` ConfigMaps of about 1 KB in one namespace, held by
//! `reconcile-host` (a plugin reconciling ConfigMaps there, the `noop` guest) and by a
//! controller-runtime cache of the same namespace (`benches/peers/cmd/cache-controller`), typed
//! and metadata-only. Each runs twice: over an empty namespace and over the full one, once every
//! object is cached (and, for the host, every key reconciled once); per object = the difference
//! of the resident sets / the objects.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

use crate::common::backend::Backend;
use crate::common::host::{Host, component, go_peer, scratch};
use crate::common::process::status_bytes;

const EMPTY: &str = "cache-empty";
const FULL: &str = "cache-full";
/// How long a side rests after it has cached everything before its memory is read.
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Clone, Copy)]
enum Cacher {
    Host,
    Typed,
    MetadataOnly,
}

impl Cacher {
    fn label(self) -> &'static str {
        match self {
            Cacher::Host => "reconcile-host",
            Cacher::Typed => "controller-runtime typed",
            Cacher::MetadataOnly => "controller-runtime metadata-only",
        }
    }
}

pub fn prepare() {
    go_peer("cache-controller");
    component("noop");
}

async fn create(backend: &Backend, count: usize) {
    let client = backend.kube_client().expect("client");
    let api = Api::<ConfigMap>::namespaced(client, FULL);
    let started = Instant::now();
    let mut creators = tokio::task::JoinSet::new();
    for lane in 0..32 {
        let api = api.clone();
        creators.spawn(async move {
            for i in (lane..count).step_by(32) {
                let payload: String = format!("{i:08}").repeat(125);
                let object: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("object-{i:06}"), "labels": {"bench": "cache"}},
                    "data": {"payload": payload},
                }))
                .expect("a ConfigMap");
                api.create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|error| panic!("ConfigMap object-{i:06} not created: {error}"));
            }
        });
    }
    while let Some(result) = creators.join_next().await {
        result.expect("a creating task panicked");
    }
    println!(
        "website_peers: {count} ConfigMaps of 1 KB of data created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The host's resident set once it holds `expect` ConfigMaps of `namespace` and has reconciled
/// each.
async fn host_rss(kubeconfig: &Path, namespace: &str, expect: usize) -> (u64, String) {
    let dir = scratch(&format!("website-peers-cache-{namespace}"));
    let plugin = dir.join("cache-cost.yaml");
    std::fs::write(
        &plugin,
        format!(
            "name: cache-cost\nmodule: {}\nfor:\n  apiVersion: v1\n  kind: ConfigMap\nnamespace: {namespace}\n",
            component("noop").display()
        ),
    )
    .expect("manifest written");
    let host = Host::spawn(Host::bench_command(kubeconfig, &plugin));
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let ready = host
            .get_status("/readyz")
            .await
            .is_some_and(|(code, _)| code == 200);
        let reconciles = host
            .metric(
                "controller_runtime_reconcile_total{controller=\"cache-cost\",result=\"success\"}",
            )
            .await;
        if ready && reconciles >= expect as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "website_peers: the host cached {reconciles} of {expect} ConfigMaps in 600 s; its log:\n{}",
            host.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(SETTLE).await;
    (status_bytes(host.pid(), "VmRSS"), String::new())
}

/// A controller-runtime cache's resident set once it holds `expect` ConfigMaps, and the Go heap
/// in use after a collection.
async fn go_rss(
    kubeconfig: &Path,
    namespace: &str,
    expect: usize,
    metadata: bool,
) -> (u64, String) {
    let mut command = Command::new(go_peer("cache-controller"));
    command
        .args(["--namespace", namespace, "--expect", &expect.to_string()])
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if metadata {
        command.arg("--metadata-only");
    }
    let mut child = command.spawn().expect("cache-controller starts");
    let stdout = child.stdout.take().expect("stdout piped");
    let line = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|line| line.starts_with("synced"))
    });
    let line = tokio::time::timeout(Duration::from_secs(600), line)
        .await
        .expect("website_peers: cache-controller did not sync within 600 s")
        .expect("reader")
        .expect("website_peers: cache-controller exited before it synced");
    tokio::time::sleep(SETTLE).await;
    let rss = status_bytes(child.id(), "VmRSS");
    let _ = child.kill();
    let _ = child.wait();
    let heap = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("heap_inuse="))
        .and_then(|bytes| bytes.parse::<f64>().ok())
        .map_or(String::new(), |bytes| format!("{:.1}", bytes / 1048576.0));
    (rss, heap)
}

async fn rss(cacher: Cacher, kubeconfig: &Path, namespace: &str, expect: usize) -> (u64, String) {
    match cacher {
        Cacher::Host => host_rss(kubeconfig, namespace, expect).await,
        Cacher::Typed => go_rss(kubeconfig, namespace, expect, false).await,
        Cacher::MetadataOnly => go_rss(kubeconfig, namespace, expect, true).await,
    }
}

pub async fn run(backend: &Backend, kubeconfig: &Path, count: usize) {
    crate::common::namespace(backend, EMPTY, &[]).await;
    crate::common::namespace(backend, FULL, &[]).await;
    create(backend, count).await;
    println!(
        "\n| {count} ConfigMaps (1 KB of data) | RSS, empty namespace | RSS, full | per object | Go heap in use, empty / full |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for cacher in [Cacher::Host, Cacher::Typed, Cacher::MetadataOnly] {
        let (empty, empty_heap) = rss(cacher, kubeconfig, EMPTY, 0).await;
        let (full, full_heap) = rss(cacher, kubeconfig, FULL, count).await;
        let per = full.saturating_sub(empty) as f64 / count as f64;
        println!(
            "RESULT website_peers cache={} objects={count} rss_empty_mib={:.1} rss_full_mib={:.1} \
             bytes_per_object={per:.0} heap_mib={empty_heap}/{full_heap}",
            cacher.label().replace(' ', "-"),
            empty as f64 / 1048576.0,
            full as f64 / 1048576.0,
        );
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {per:.0} B | {} |",
            cacher.label(),
            empty as f64 / 1048576.0,
            full as f64 / 1048576.0,
            if empty_heap.is_empty() {
                "—".to_owned()
            } else {
                format!("{empty_heap} / {full_heap} MiB")
            }
        );
    }
}
