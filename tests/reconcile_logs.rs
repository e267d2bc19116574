//! End to end: `kubectl reconcile logs <plugin>` shows what a plugin's guest wrote (its `log`
//! calls, stdout and stderr) and the host's line about its failed reconcile, each with the key
//! it was reconciling, merged from the replicas; `kubectl reconcile replay` fetches the failed
//! reconcile's recording from the host and re-runs it here with the component, the same as
//! recorded. On the real API server both go through its pod proxy and the hosts' check of the
//! reader's token.

use crate::common::backend::Backend as ApiServer;
use crate::common::backend::Cluster;
use crate::common::eventually_async;
use crate::common::host::{component, free_port, scratch};
use crate::reconcile_why::{NS, cluster, host, object, reach};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

#[tokio::test]
async fn logs_show_a_plugins_lines_by_key_and_replay_reruns_its_recorded_failure() {
    let dir = scratch("reconcile-logs");
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let token = cluster(&server).await;
    let port = free_port();
    let host = host(
        &server,
        &dir,
        "host-logs",
        ("none", &["--serve-recordings", "true"]),
        port,
    )
    .await;
    host.wait_log(&["plugin loaded", "testbed"]).await;
    let reach = reach(&server, &dir, token.as_deref(), &[port]);
    let api: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    for (name, behave) in [("talker", "log"), ("broken", "error")] {
        api.create(&PostParams::default(), &object(name, behave))
            .await
            .expect("created");
    }
    let talker = format!("{NS}/talker");
    let broken = format!("{NS}/broken");
    let lines = eventually_async(
        "the guest's lines and the failure in `logs -o json`",
        || async {
            let (ok, out, err) = reach.run(&["logs", "testbed", "-o", "json"]).await;
            assert!(ok, "kubectl reconcile logs failed: {err}\n{out}");
            let lines: Vec<Value> = out
                .lines()
                .map(|line| serde_json::from_str(line).expect(line))
                .collect();
            let has = |key: &str, text: &str| {
                lines.iter().any(|line| {
                    line["key"].as_str() == Some(key) && line.to_string().contains(text)
                })
            };
            (has(&talker, "testbed: hello from talker")
                && has(&talker, "testbed stdout talker")
                && has(&talker, "testbed stderr talker")
                && has(&broken, "testbed: asked to fail"))
            .then_some(lines)
        },
    )
    .await;
    for line in &lines {
        assert!(line["replica"].is_string(), "{line}");
        assert!(line["at"].is_string(), "{line}");
    }
    let failure = lines
        .iter()
        .find(|line| line["key"].as_str() == Some(&broken) && line["level"] == "WARN")
        .unwrap_or_else(|| panic!("the host's warning of the failure: {lines:#?}"));
    assert!(
        failure["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("reconcile failed")),
        "{failure}"
    );
    let (ok, text, err) = reach.run(&["logs", "testbed", "--tail", "1000"]).await;
    assert!(ok, "{err}");
    let talking = text
        .lines()
        .find(|line| line.contains("testbed: hello from talker"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        talking.contains(&format!("INFO   {talker}  guest log")),
        "{talking}"
    );
    // No lines of a plugin the host does not run: said, and not an error of the replicas.
    let (ok, out, err) = reach.run(&["logs", "no-such-plugin"]).await;
    assert!(ok && out.is_empty(), "{out}");
    assert!(
        err.contains("no replica holds log lines of plugin"),
        "{err}"
    );
    let (ok, _, err) = reach.run(&["logs", "Not/A/Name"]).await;
    assert!(!ok && err.contains("not a plugin name"), "{err}");

    let saved = dir.join("broken.json");
    let saved_arg = saved.display().to_string();
    let module = component("testbed").display().to_string();
    let (ok, report, err) = reach
        .run(&[
            "replay",
            "testbed",
            "configmap/broken",
            "-n",
            NS,
            "--module",
            &module,
            "--save",
            &saved_arg,
        ])
        .await;
    assert!(ok, "replay differs or failed: {err}\n{report}");
    assert!(
        err.contains(&format!("replaying the recording of {broken}")),
        "{err}"
    );
    let bundle: Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).expect("saved")).expect("JSON");
    assert_eq!(bundle["request"]["target"]["name"], "broken");
    assert_eq!(bundle["plugin"], "testbed");
    let (ok, _, err) = reach
        .run(&[
            "replay",
            "testbed",
            "configmap/talker",
            "-n",
            NS,
            "--module",
            &module,
        ])
        .await;
    assert!(!ok, "a reconcile that succeeded is not recorded");
    assert!(err.contains("no replica holds a recording"), "{err}");
}
