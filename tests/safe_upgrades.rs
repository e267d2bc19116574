//! Upgrading a plugin safely, in the real host binary: a shadow module whose writes are compared
//! and never applied, and a canary module for the keys a label selector picks, then promoted by
//! an edit of the manifest. The plugin is the ledger test guest (it records `data.v` and its
//! env `REPLICA` in annotations). Runs on the embedded API server and on the real one.

use crate::common;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use sha2::Digest as _;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::Config;

const RUNS: &str = "reconcile_host_plugin_shadow_runs_total{plugin=\"ledger\",outcome=";

fn runs(outcome: &str) -> String {
    format!("{RUNS}\"{outcome}\"}}")
}

/// The shadow runs by outcome (`same`, `different`, `failed`, `skipped`) once every reconcile
/// the controller made is accounted for: each is shadowed (compared or failed) or skipped.
async fn shadow_runs(host: &Host) -> [f64; 4] {
    eventually_async("every reconcile's shadow run accounted for", || async {
        let mut reconciles = 0.0;
        for result in ["success", "error", "requeue", "requeue_after"] {
            reconciles += host
                .metric(&format!(
                    "controller_runtime_reconcile_total{{controller=\"ledger\",result=\"{result}\"}}"
                ))
                .await;
        }
        let mut runs = [0.0; 4];
        for (i, outcome) in ["same", "different", "failed", "skipped"].iter().enumerate() {
            runs[i] = host.metric(&self::runs(outcome)).await;
        }
        (reconciles > 0.0 && runs.iter().sum::<f64>() == reconciles).then_some(runs)
    })
    .await
}

/// The ledger plugin in `dir` with env `REPLICA=primary` and the `extra` top-level lines.
fn ledger(dir: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let mut overrides = vec![("env", "{REPLICA: primary}")];
    overrides.extend_from_slice(extra);
    manifest(
        dir,
        "host/tests/guests/ledger/plugin.yaml",
        &component("ledger"),
        &overrides,
    )
}

fn object(name: &str, version: u32, labels: &[(&str, &str)]) -> ConfigMap {
    let mut all = vec![("ledger".to_owned(), "true".to_owned())];
    all.extend(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(all.into_iter().collect()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), version.to_string())].into()),
        ..ConfigMap::default()
    }
}

async fn set_version(api: &Api<ConfigMap>, name: &str, version: u32) {
    let patch = serde_json::json!({"data": {"v": version.to_string()}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
}

/// The annotation `ledger.test/<which>` of `name`.
async fn annotation(api: &Api<ConfigMap>, name: &str, which: &str) -> Option<String> {
    let object = api.get(name).await.expect("read");
    object
        .metadata
        .annotations
        .and_then(|a| a.get(&format!("ledger.test/{which}")).cloned())
}

/// Waits until every one of `names` has `ledger.test/seen` equal to `version`.
async fn seen_everywhere(api: &Api<ConfigMap>, names: &[String], version: u32) {
    let want = version.to_string();
    eventually_async(&format!("every object seen at v={version}"), || async {
        for name in names {
            if annotation(api, name, "seen").await.as_deref() != Some(want.as_str()) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

async fn setup(test: &str) -> (ApiServer, common::host::Scratch, Api<ConfigMap>) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, "ledger", &[]).await;
    let api = config_maps(&server, "ledger");
    (server, scratch(test), api)
}

#[tokio::test]
async fn an_identical_shadow_reports_no_difference_under_churn() {
    let (server, dir, api) = setup("shadow-identical").await;
    let ledger_wasm = component("ledger");
    let shadow = format!("{{module: {}}}", ledger_wasm.display());
    let host = Host::start(&server, &dir, &[ledger(&dir, &[("shadow", &shadow)])]);
    let names: Vec<String> = (0..10).map(|i| format!("object-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &object(name, 1, &[]))
            .await
            .expect("created");
    }
    // Churn: every object changes while it is being reconciled and shadowed.
    for version in 2..=4 {
        for name in &names {
            set_version(&api, name, version).await;
        }
    }
    seen_everywhere(&api, &names, 4).await;
    // A reconcile finding every shadow slot busy is skipped; every other one was compared.
    let [same, different, failed, _skipped] = shadow_runs(&host).await;
    assert!(same >= 1.0, "no shadow run compared anything");
    assert_eq!((different, failed), (0.0, 0.0), "{}", host.log());
    assert!(!host.log().contains("the shadow differs"), "{}", host.log());
    // The shadow wrote nothing: the replica recorded is the primary's.
    for name in &names {
        assert_eq!(
            annotation(&api, name, "by").await.as_deref(),
            Some("primary")
        );
    }
}

#[tokio::test]
async fn a_shadow_that_changes_one_field_reports_exactly_that_field() {
    let (server, dir, api) = setup("shadow-one-field").await;
    let shadow = format!(
        "{{module: {}, env: {{REPLICA: shadow}}}}",
        component("ledger").display()
    );
    let host = Host::start(&server, &dir, &[ledger(&dir, &[("shadow", &shadow)])]);
    api.create(&PostParams::default(), &object("one", 1, &[]))
        .await
        .expect("created");
    let diffs = "reconcile_host_plugin_shadow_diffs_total{plugin=\"ledger\",kind=\"ConfigMap\",verb=\"patch\"}";
    host.wait_metric(diffs, 1.0).await;
    let line = host
        .wait_log(&["the shadow differs from the primary", "ledger/one"])
        .await;
    assert!(line.contains("differences=1"), "{line}");
    assert!(
        line.contains(
            r#"patch v1/ConfigMap ledger/one: /metadata/annotations/ledger.test~1by: primary \"primary\", shadow \"shadow\""#
        ) || line.contains(
            r#"patch v1/ConfigMap ledger/one: /metadata/annotations/ledger.test~1by: primary "primary", shadow "shadow""#
        ),
        "{line}"
    );
    assert_eq!(
        host.metric("reconcile_host_plugin_shadow_diffs_total{plugin=\"ledger\",kind=\"ConfigMap\",verb=\"action\"}")
            .await,
        0.0
    );
    // Only the primary's write reached the object.
    assert_eq!(
        annotation(&api, "one", "by").await.as_deref(),
        Some("primary")
    );
    // The difference is an Event on the object.
    let events: Api<Event> = Api::namespaced(server.kube_client().expect("client"), "ledger");
    let event = eventually_async("a ShadowDiffers Event about ledger/one", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("ShadowDiffers")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("one")
        })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.contains("ledger.test~1by")),
        "{:?}",
        event.note
    );
}

#[tokio::test]
async fn a_trapping_shadow_leaves_the_primary_results_and_metrics_untouched() {
    let (server, dir, api) = setup("shadow-trap").await;
    let shadow = format!("{{module: {}}}", component("always-trap").display());
    let host = Host::start(&server, &dir, &[ledger(&dir, &[("shadow", &shadow)])]);
    let names: Vec<String> = (0..5).map(|i| format!("object-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &object(name, 1, &[]))
            .await
            .expect("created");
    }
    seen_everywhere(&api, &names, 1).await;
    let [same, different, failed, _skipped] = shadow_runs(&host).await;
    assert!(failed >= 1.0, "no shadow ran");
    assert_eq!((same, different), (0.0, 0.0));
    for reason in ["trap", "error", "deadline", "memory", "instantiate"] {
        let series = format!(
            "reconcile_host_plugin_failures_total{{plugin=\"ledger\",reason=\"{reason}\"}}"
        );
        assert_eq!(host.metric(&series).await, 0.0, "{series}");
    }
    assert_eq!(
        host.metric("controller_runtime_reconcile_errors_total{controller=\"ledger\"}")
            .await,
        0.0
    );
    assert!(
        host.metric("controller_runtime_reconcile_total{controller=\"ledger\",result=\"success\"}")
            .await
            >= names.len() as f64
    );
    assert!(!host.log().contains("rolled back"), "{}", host.log());
}

fn short_digest(path: &Path) -> String {
    let bytes = std::fs::read(path).expect("component readable");
    let hex: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    hex[..12].to_owned()
}

#[tokio::test]
async fn a_canary_takes_the_keys_its_selector_picks_until_promoted() {
    let (server, dir, api) = setup("canary").await;
    // The stable module only logs (stamp); the canary is the ledger, which writes.
    let stamp = component("stamp");
    let ledger_wasm = component("ledger");
    let canary = format!(
        "{{selector: track=canary, module: {}}}",
        ledger_wasm.display()
    );
    let plugin = manifest(
        &dir,
        "host/tests/guests/ledger/plugin.yaml",
        &stamp,
        &[("env", "{REPLICA: primary}"), ("canary", &canary)],
    );
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugin));
    let canaries: Vec<String> = (0..3).map(|i| format!("canary-{i}")).collect();
    let stables: Vec<String> = (0..3).map(|i| format!("stable-{i}")).collect();
    for name in &canaries {
        api.create(
            &PostParams::default(),
            &object(name, 1, &[("track", "canary")]),
        )
        .await
        .expect("created");
    }
    for name in &stables {
        api.create(&PostParams::default(), &object(name, 1, &[]))
            .await
            .expect("created");
    }
    seen_everywhere(&api, &canaries, 1).await;
    for name in &stables {
        host.wait_log(&["stamp ledger/", name.as_str()]).await;
    }
    for name in &canaries {
        assert!(
            !host.log().contains(&format!("stamp ledger/{name} ")),
            "the stable module reconciled canary {name}"
        );
    }
    for name in &stables {
        assert_eq!(annotation(&api, name, "seen").await, None, "{name}");
    }
    // Each module's reconciles are counted under its digest.
    let series = |digest: &str| {
        format!(
            "reconcile_host_plugin_module_reconciles_total{{plugin=\"ledger\",module=\"{digest}\",result=\"success\"}}"
        )
    };
    host.wait_metric(&series(&short_digest(&ledger_wasm)), canaries.len() as f64)
        .await;
    host.wait_metric(&series(&short_digest(&stamp)), stables.len() as f64)
        .await;

    // Promotion: the canary's module becomes the plugin's, the canary goes.
    let promoted = manifest(
        &dir,
        "host/tests/guests/ledger/plugin.yaml",
        &ledger_wasm,
        &[("env", "{REPLICA: primary}")],
    );
    assert_eq!(promoted, plugin, "the same file, edited");
    host.wait_log(&["plugin rebuilt for its new manifest", "ledger"])
        .await;
    seen_everywhere(&api, &stables, 1).await;
}
