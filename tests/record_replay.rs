//! Recorded reconciles: the real host records a failing reconcile (into `--record-dir` and on
//! its telemetry port) and any key asked for; `reconcile-host replay` re-runs a bundle to the
//! same failure with the same calls, reports what a fixed module does differently, and prints the
//! same report every time for guests in every language.

use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use serde_json::Value;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, manifest, scratch, tool, workspace};
use crate::common::{config_maps, eventually, eventually_async, namespace};
use embedded_apiserver::Config;

fn testbed(name: &str, behave: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("testbed".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("behave".to_owned(), behave.to_owned())].into()),
        ..ConfigMap::default()
    }
}

fn replay(bundle: &Path, module: Option<&Path>) -> Output {
    let mut command = tool("replay");
    command.arg(bundle);
    if let Some(module) = module {
        command.arg("--module").arg(module);
    }
    command.output().expect("replay runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The bundle files in `dir` (complete ones: written, then renamed).
fn bundles_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[tokio::test]
async fn a_failing_reconcile_is_recorded_and_replays_to_the_same_failure() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server");
    namespace(&server, "rec", &[]).await;
    let dir = scratch("record-failure");
    let recordings = dir.join("recordings");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let record_dir = recordings.display().to_string();
    let host = Host::start_with(
        &server,
        &dir,
        &[plugin],
        &["--record-dir", &record_dir, "--serve-recordings", "true"],
    );
    config_maps(&server, "rec")
        .create(&PostParams::default(), &testbed("broken", "error"))
        .await
        .expect("created");
    eventually("a bundle written for the failing reconcile", || {
        !bundles_in(&recordings).is_empty()
    })
    .await;
    let file = bundles_in(&recordings).remove(0);
    let bundle: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("readable")).expect("JSON");
    assert_eq!(bundle["format"], "reconcile-host.dev/recording/v1");
    assert_eq!(bundle["plugin"], "testbed");
    assert_eq!(bundle["request"]["target"]["name"], "broken");
    assert_eq!(bundle["outcome"]["type"], "error");
    let imports: Vec<&str> = bundle["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["import"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(imports, ["client.get", "client.apply"]);
    assert!(
        !bundle["wallClock"].as_array().expect("clock").is_empty(),
        "the guest read the time for its attempt annotation"
    );

    // The same bundle on the telemetry port.
    let served = host.get("/debug/recordings/testbed").await;
    let served: Value = serde_json::from_str(&served).expect("a JSON array");
    assert!(
        served.as_array().is_some_and(|list| list
            .iter()
            .any(|b| b["request"]["target"]["name"] == "broken")),
        "{served}"
    );

    // The recorded module replays to the same failure, with the same calls.
    let same = replay(&file, None);
    let report = stdout(&same);
    assert_eq!(same.status.code(), Some(0), "{report}");
    assert!(
        report.contains("module ") && report.contains("(the recorded one)"),
        "{report}"
    );
    assert!(
        report.contains("host calls: 2 recorded, 2 replayed"),
        "{report}"
    );
    assert!(
        report.contains(
            "outcome: recorded error \"testbed: asked to fail (attempt 0)\", replayed error \
             \"testbed: asked to fail (attempt 0)\""
        ),
        "{report}"
    );
    assert!(report.ends_with("no difference\n"), "{report}");

    // A fixed module (here: one that does nothing and succeeds) shows what it does differently.
    let fixed = replay(&file, Some(&component("noop")));
    let report = stdout(&fixed);
    assert_eq!(fixed.status.code(), Some(1), "{report}");
    assert!(report.contains("differences: 2"), "{report}");
    assert!(
        report.contains("host calls not made: 2 of the recorded ones, the first: client.get"),
        "{report}"
    );
    assert!(
        report.contains(
            "outcome: recorded error \"testbed: asked to fail (attempt 0)\"; replayed done"
        ),
        "{report}"
    );
}

#[tokio::test]
async fn any_key_is_recorded_on_request() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server");
    namespace(&server, "rec", &[]).await;
    let dir = scratch("record-request");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let host = Host::start_with(&server, &dir, &[plugin], &["--serve-recordings", "true"]);
    config_maps(&server, "rec")
        .create(&PostParams::default(), &testbed("fine", "ok"))
        .await
        .expect("created");
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"testbed\",result=\"success\"}",
        1.0,
    )
    .await;
    assert_eq!(
        host.get("/debug/recordings/testbed").await,
        "[]",
        "successes are not kept"
    );
    let (code, body) = host
        .post("/debug/recordings/testbed/rec/fine")
        .await
        .expect("answered");
    assert_eq!(code, 202, "{body}");
    let bundle = eventually_async("the requested reconcile recorded", || async {
        let served: Value =
            serde_json::from_str(&host.get("/debug/recordings/testbed").await).ok()?;
        served.as_array()?.first().cloned()
    })
    .await;
    assert_eq!(bundle["request"]["target"]["name"], "fine");
    assert_eq!(bundle["outcome"]["type"], "done");
    // Unknown plugins and malformed keys are refused, naming the fix.
    let (code, body) = host
        .post("/debug/recordings/nope/rec/fine")
        .await
        .expect("answered");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("GET /debug/recordings"), "{body}");
    let (code, _) = host
        .post("/debug/recordings/testbed/rec/Not_A_Name")
        .await
        .expect("answered");
    assert_eq!(code, 400);
}

/// The telemetry port has no authentication: unless the configuration says so, it says how many
/// bundles a plugin holds but serves none and takes no request to record, naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recordings_are_served_only_when_the_configuration_says_so() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server");
    namespace(&server, "rec", &[]).await;
    let dir = scratch("record-unserved");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    config_maps(&server, "rec")
        .create(&PostParams::default(), &testbed("broken", "error"))
        .await
        .expect("created");
    eventually_async("the failing reconcile kept", || async {
        let held: Value = serde_json::from_str(&host.get("/debug/recordings").await).ok()?;
        (held["testbed"].as_u64()? >= 1).then_some(())
    })
    .await;
    for (code, body) in [
        host.get_status("/debug/recordings/testbed").await,
        host.post("/debug/recordings/testbed/rec/broken").await,
    ]
    .into_iter()
    .map(|answer| answer.expect("answered"))
    {
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("recording.serve: true"), "{body}");
        assert!(!body.contains("broken"), "{body}");
    }
}

/// `reconcile --record` of the example `example` on `object`, then two replays: both exit 0,
/// report no difference, and print the same bytes.
fn records_and_replays_deterministically(example: &str, object: &Path) {
    let dir = scratch(&format!("replay-{example}"));
    let bundle = dir.join("bundle.json");
    let recorded = tool("reconcile")
        .arg(
            workspace()
                .join("examples")
                .join(example)
                .join("plugin.yaml"),
        )
        .arg("--object")
        .arg(object)
        .arg("--record")
        .arg(&bundle)
        .output()
        .expect("reconcile runs");
    assert!(
        bundle.exists(),
        "{example}: no bundle; {}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let first = replay(&bundle, None);
    let second = replay(&bundle, None);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{example}: {}",
        stdout(&first)
    );
    assert!(
        stdout(&first).ends_with("no difference\n"),
        "{example}: {}",
        stdout(&first)
    );
    assert_eq!(first.stdout, second.stdout, "{example}: two replays differ");
}

#[test]
fn replay_is_deterministic_for_guests_in_every_language() {
    let examples = workspace().join("examples");
    for (example, sample) in [
        ("website", "samples/website.yaml"),
        ("website-go", "samples/website.yaml"),
        ("website-js", "samples/website.yaml"),
        ("configmap-replicator-python", "samples/configmap.yaml"),
        ("configmap-replicator", "samples/configmap.yaml"),
    ] {
        records_and_replays_deterministically(example, &examples.join(example).join(sample));
    }
    // The C example's sample file holds several objects: its expired ConfigMap alone.
    let dir = scratch("replay-c-object");
    let text = std::fs::read_to_string(examples.join("ttl-reaper-c/samples/ttl.yaml"))
        .expect("the sample");
    let object = text
        .split("\n---")
        .find(|doc| doc.contains("kind: ConfigMap") && doc.contains("ttl"))
        .expect("a ConfigMap with a TTL in the sample");
    let file = dir.join("object.yaml");
    std::fs::write(&file, object).expect("written");
    records_and_replays_deterministically("ttl-reaper-c", &file);
}
