//! End to end, with real processes: a leader frozen past its lease (SIGSTOP) while a reconcile
//! runs makes no write after it wakes (SIGCONT); the replica that took over does the work.

use std::path::{Path, PathBuf};

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::core::ObjectMeta;

const LEADER: &str = "leader_election_master_status{name=\"reconcile-host\"}";

/// The hostile plugin as replica `replica` loads it, with `overrides`: its writes say which
/// replica made them.
fn plugin(dir: &Path, replica: &str, overrides: &[(&str, &str)]) -> PathBuf {
    let dir = dir.join(replica);
    std::fs::create_dir_all(&dir).expect("replica dir");
    let env = format!("{{REPLICA: {replica}}}");
    let mut overrides = overrides.to_vec();
    overrides.push(("env", &env));
    manifest(
        &dir,
        "host/tests/guests/hostile/plugin.yaml",
        &component("hostile"),
        &overrides,
    )
}

/// A replica with a short lease (2 s, renewed within 1.5 s, tried every 250 ms) running the
/// hostile plugin with `overrides`.
fn replica(server: &ApiServer, dir: &Path, name: &str, overrides: &[(&str, &str)]) -> Host {
    // One file per replica: a replica starting reads it while the next one is written.
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut command = Host::command();
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--leader-elect", "true"])
        .args(["--lease-duration", "2s", "--renew-deadline", "1500ms"])
        .args(["--retry-period", "250ms"])
        .arg("--plugin")
        .arg(plugin(dir, name, overrides));
    Host::spawn(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_frozen_past_its_lease_writes_nothing_when_it_wakes() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, "hostile", &[]).await;
    let dir = scratch("fencing-frozen");
    let first = replica(&server, &dir, "a", &[]);
    first.wait_metric(LEADER, 1.0).await;
    let second = replica(&server, &dir, "b", &[]);
    second.wait_log(&["plugin loaded", "plugin=hostile"]).await;

    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("frozen".to_owned()),
            labels: Some([("hostile".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("attack".to_owned(), "slow-write".to_owned()),
                ("ms".to_owned(), "3000".to_owned()),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    };
    let api = config_maps(&server, "hostile");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    // Frozen mid-reconcile, long past its lease.
    first.wait_log(&["hostile: slow-write started on a"]).await;
    first.signal("STOP");
    second.wait_metric(LEADER, 1.0).await;
    let written = eventually_async("the new leader's write", || async {
        let data = api.get_opt("frozen").await.ok()??.data?;
        data.contains_key("written-by-b").then_some(data)
    })
    .await;
    assert!(!written.contains_key("written-by-a"), "{written:?}");

    // Woken: its term ends (the fence closed by the clock before its elector ran), its
    // reconcile is aborted or its write refused.
    first.signal("CONT");
    first.wait_log(&["lost leadership"]).await;
    let data = api
        .get("frozen")
        .await
        .expect("object")
        .data
        .unwrap_or_default();
    assert!(
        !data.contains_key("written-by-a"),
        "the frozen leader wrote after waking: {data:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_keeps_its_lease_while_a_plugin_saturates_its_client_limit() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, "hostile", &[]).await;
    let dir = scratch("fencing-saturated");
    let host = replica(
        &server,
        &dir,
        "a",
        &[("concurrency", "8"), ("apiRateLimit", "{qps: 2, burst: 2}")],
    );
    host.wait_metric(LEADER, 1.0).await;
    for i in 0..8 {
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("hammer-{i}")),
                labels: Some([("hostile".to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            data: Some(
                [
                    ("attack".to_owned(), "hammer".to_owned()),
                    ("calls".to_owned(), "100000".to_owned()),
                ]
                .into(),
            ),
            ..ConfigMap::default()
        };
        config_maps(&server, "hostile")
            .create(&PostParams::default(), &object)
            .await
            .expect("created");
    }
    // Eight workers wait on a bucket of 2 requests a second, each until its 10 s deadline:
    // five lease durations of saturation.
    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"hostile\",reason=\"deadline\"}",
        8.0,
    )
    .await;
    assert_eq!(host.metric(LEADER).await, 1.0);
    let log = host.log();
    assert!(!log.contains("lost leadership"), "{log}");
}
