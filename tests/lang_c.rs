//! Reconcilers written in C: the ttl-reaper-c example and the noop-c test guest, built by their
//! `build.sh` (clang 19, wasi-libc, tools/wit-c), loaded into the real host against the embedded
//! API server, and run through `reconcile-host reconcile`.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, manifest, scratch, scripted_component, workspace};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

const MANIFEST: &str = "examples/ttl-reaper-c/plugin.yaml";

fn reaper() -> PathBuf {
    scripted_component("examples/ttl-reaper-c/build.sh", "ttl-reaper-c")
}

fn reaper_plugin(dir: &Path, overrides: &[(&str, &str)]) -> PathBuf {
    manifest(dir, MANIFEST, &reaper(), overrides)
}

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

/// Creates `namespace/name` labelled for the reaper with `ttl.example.com/after: after`.
async fn expiring(server: &ApiServer, namespace: &str, name: &str, after: &str) {
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("ttl.example.com/enabled".to_owned(), "true".to_owned())].into()),
            annotations: Some([("ttl.example.com/after".to_owned(), after.to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps(server, namespace)
        .create(&PostParams::default(), &object)
        .await
        .expect("ConfigMap created");
}

async fn exists(server: &ApiServer, namespace: &str, name: &str) -> bool {
    config_maps(server, namespace)
        .get_opt(name)
        .await
        .expect("API server answers")
        .is_some()
}

async fn gone(server: &ApiServer, namespace: &str, name: &str) {
    eventually_async(&format!("ConfigMap {namespace}/{name} deleted"), || async {
        (!exists(server, namespace, name).await).then_some(())
    })
    .await;
}

fn reconciles(result: &str) -> String {
    format!("controller_runtime_reconcile_total{{controller=\"ttl-reaper-c\",result=\"{result}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_reaper_c_deletes_expired_config_maps_skips_paused_namespaces_and_warns_on_bad_ttls() {
    let server = server().await;
    let dir = scratch("lang-c-reaper");
    namespace(&server, "ttl-demo", &[]).await;
    namespace(&server, "ttl-paused", &[("ttl.example.com/paused", "true")]).await;
    let host = Host::start(&server, &dir, &[reaper_plugin(&dir, &[])]);

    expiring(&server, "ttl-paused", "kept", "0").await;
    expiring(&server, "ttl-demo", "long-lived", "86400").await;
    expiring(&server, "ttl-demo", "bad", "soon").await;
    let created = Instant::now();
    expiring(&server, "ttl-demo", "short-lived", "3").await;

    // The paused namespace is read from the cache; its expired ConfigMap is skipped and kept.
    host.wait_log(&[
        "key=ttl-paused/kept",
        "skipping ConfigMap ttl-paused/kept: its namespace is labelled ttl.example.com/paused=true",
    ])
    .await;

    // A bad annotation gets a Warning event and no retries.
    let events: Api<Event> = Api::namespaced(server.kube_client().expect("client"), "ttl-demo");
    let event = eventually_async("an InvalidTTL event about ttl-demo/bad", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidTTL"))
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let regarding = event.regarding.clone().unwrap_or_default();
    assert_eq!(regarding.name.as_deref(), Some("bad"));
    // It names the ConfigMap's uid, so `kubectl describe` lists it.
    let bad = config_maps(&server, "ttl-demo")
        .get("bad")
        .await
        .expect("ConfigMap bad");
    assert_eq!(regarding.uid, bad.metadata.uid);
    let described = server.kubectl_ok(&dir, &["describe", "configmap", "bad", "-n", "ttl-demo"]);
    assert!(
        described.contains("InvalidTTL") && described.contains("reconcile-host/ttl-reaper-c"),
        "kubectl describe lists no InvalidTTL Event:\n{described}"
    );
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("ttl.example.com/after is \"soon\"; it must be a whole number of seconds"),
        "{note}"
    );

    // Until it expires, the short-lived one is requeued for the time left (creationTimestamp has
    // whole seconds, so at least 2 s from here); then deleted.
    host.wait_metric(&reconciles("requeue_after"), 2.0).await;
    gone(&server, "ttl-demo", "short-lived").await;
    let lived = created.elapsed();
    assert!(
        lived >= Duration::from_secs(2),
        "short-lived (ttl 3 s) was deleted after only {lived:?}"
    );
    host.wait_log(&[
        "key=ttl-demo/short-lived",
        "deleted ConfigMap ttl-demo/short-lived: its time to live of 3 s has passed",
    ])
    .await;

    assert!(exists(&server, "ttl-demo", "long-lived").await);
    assert!(exists(&server, "ttl-demo", "bad").await);
    assert!(exists(&server, "ttl-paused", "kept").await);
    assert_eq!(
        host.metric(
            "reconcile_host_plugin_failures_total{plugin=\"ttl-reaper-c\",reason=\"error\"}"
        )
        .await,
        0.0,
        "log:\n{}",
        host.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_reaper_c_returns_a_denied_delete_as_an_error_with_the_call_error_text() {
    let server = server().await;
    let dir = scratch("lang-c-denied");
    namespace(&server, "ttl-demo", &[]).await;
    let host = Host::start(&server, &dir, &[reaper_plugin(&dir, &[("grants", "[]")])]);
    expiring(&server, "ttl-demo", "doomed", "0").await;

    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"ttl-reaper-c\",reason=\"error\"}",
        2.0,
    )
    .await;
    host.wait_log(&[
        "key=ttl-demo/doomed",
        "deleting expired ConfigMap ttl-demo/doomed failed: denied: plugin `ttl-reaper-c` has no \
         grant to `delete` v1 ConfigMap",
    ])
    .await;
    assert!(exists(&server, "ttl-demo", "doomed").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_reaper_c_core_module_before_componentizing_is_refused_at_load() {
    let server = server().await;
    let dir = scratch("lang-c-core-module");
    let core = reaper()
        .parent()
        .expect("guests directory")
        .join("c/ttl-reaper-c/ttl-reaper-c.core.wasm");
    assert!(
        core.is_file(),
        "build.sh leaves the core module at {}",
        core.display()
    );
    let plugin = manifest(&dir, MANIFEST, &core, &[]);
    let mut host = Host::start(&server, &dir, &[plugin]);
    assert_eq!(host.exit_code().await, Some(2), "log:\n{}", host.log());
    let log = host.log();
    let expected = format!("{} is not a valid WebAssembly component", core.display());
    assert!(log.contains(&expected), "expected `{expected}` in:\n{log}");
    assert!(log.contains("plugin `ttl-reaper-c`"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_c_reconciles_in_the_host() {
    let server = server().await;
    let dir = scratch("lang-c-noop");
    let module = scripted_component("host/tests/guests/noop-c/build.sh", "noop-c");
    let plugin = manifest(&dir, "host/tests/guests/noop-c/plugin.yaml", &module, &[]);
    let host = Host::start(&server, &dir, &[plugin]);
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("idle".to_owned()),
            labels: Some([("noop-c".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    config_maps(&server, "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("ConfigMap created");
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"noop-c\",result=\"success\"}",
        1.0,
    )
    .await;
}

/// `reconcile-host reconcile` of the example with `object` (YAML) and the sample namespaces;
/// the JSON report.
fn reconcile_once(dir: &Path, object: &str) -> serde_json::Value {
    let object_file = dir.join("object.yaml");
    std::fs::write(&object_file, object).expect("object written");
    let plugin = reaper_plugin(dir, &[]);
    let output = Command::new(common::host::HOST_BINARY)
        .arg("reconcile")
        .arg(&plugin)
        .arg("--object")
        .arg(&object_file)
        .arg("--cache")
        .arg(workspace().join("examples/ttl-reaper-c/samples/ttl.yaml"))
        .args(["--output", "json"])
        .arg("--module-cache")
        .arg(dir.join("module-cache"))
        .output()
        .expect("reconcile-host runs");
    assert!(
        output.status.success(),
        "reconcile failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON report")
}

/// A ConfigMap fixture created just now with the given namespace and TTL.
fn fixture(namespace: &str, after: &str) -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    let created = k8s_openapi::jiff::Timestamp::from_second(now.as_second()).expect("timestamp");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixture\n  namespace: {namespace}\n  \
         creationTimestamp: \"{created}\"\n  labels: {{ttl.example.com/enabled: \"true\"}}\n  \
         annotations: {{ttl.example.com/after: \"{after}\"}}\n"
    )
}

#[test]
fn ttl_reaper_c_answers_requeue_after_the_time_left_deletes_when_expired_and_skips_paused() {
    let dir = scratch("lang-c-cli");
    let report = reconcile_once(&dir, &fixture("ttl-demo", "3600"));
    assert_eq!(report["action"]["type"], "requeue-after", "{report}");
    let after_ms = report["action"]["afterMs"].as_u64().expect("afterMs");
    assert!(
        (3_590_000..=3_600_000).contains(&after_ms),
        "an hour's TTL from now should requeue after about 3,600,000 ms, not {after_ms}"
    );
    assert_eq!(report["calls"], serde_json::json!([]), "{report}");

    // The longest TTL overflows the u32 milliseconds of requeue-after: capped.
    let report = reconcile_once(&dir, &fixture("ttl-demo", "3155760000"));
    assert_eq!(report["action"]["afterMs"], u64::from(u32::MAX), "{report}");

    let report = reconcile_once(&dir, &fixture("ttl-demo", "0"));
    assert_eq!(report["action"]["type"], "done", "{report}");
    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 1, "{report}");
    assert_eq!(calls[0]["verb"], "delete");
    assert_eq!(calls[0]["namespace"], "ttl-demo");
    assert_eq!(calls[0]["name"], "fixture");

    let report = reconcile_once(&dir, &fixture("ttl-paused", "0"));
    assert_eq!(report["action"]["type"], "done", "{report}");
    assert_eq!(report["calls"], serde_json::json!([]), "{report}");

    for bad in ["-5", "1.5", " 60", "", "3155760001", "99999999999999999999"] {
        let report = reconcile_once(&dir, &fixture("ttl-demo", bad));
        assert_eq!(report["action"]["type"], "done", "{bad}: {report}");
        let calls = report["calls"].as_array().expect("calls");
        let event = &calls
            .first()
            .unwrap_or_else(|| panic!("{bad}: no event: {report}"))["body"];
        assert_eq!(event["reason"], "InvalidTTL", "{bad}: {report}");
        assert_eq!(event["type"], "Warning", "{bad}: {report}");
    }
}

/// The native tests of examples/ttl-reaper-c/test.sh: the parsers on malformed and truncated
/// input, and the whole reconciler behind a mock host at the canonical-ABI boundary, under
/// AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer.
#[test]
fn ttl_reaper_c_native_tests_pass_under_sanitizers_without_leaks() {
    reaper(); // built (and the toolchain installed) once, before test.sh finds it up to date
    let output = Command::new("bash")
        .arg(workspace().join("examples/ttl-reaper-c/test.sh"))
        .output()
        .expect("bash runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "examples/ttl-reaper-c/test.sh failed:\n{report}"
    );
    assert!(report.contains("parsers: all checks passed"), "{report}");
    assert!(report.contains("reaper: all checks passed"), "{report}");
}
