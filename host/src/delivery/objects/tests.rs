//! Tests of the objects' status and their plugin directory.

use std::time::Duration;

use serde_json::json;

use super::fetch::{Source, Step};
use super::fetched::{Fetched, Module};
use super::status::Fetch;
use super::*;
use crate::delivery::supervisor::{FailureStage, SourceFailure, SourceState};
use crate::manifest::ReconcilerPluginStatus;

fn fetched(generation: i64, content: &str, manifest: &str) -> Fetched {
    Fetched {
        uid: None,
        generation: Some(generation),
        result: Ok(Module {
            resolved: format!("sha256:{content}"),
            content: content.to_owned(),
            manifest: manifest.to_owned(),
            shadow: None,
            canary: None,
            layers: BTreeMap::new(),
            pinned: false,
        }),
    }
}

fn serving(content: &str, manifest: &str, failure: Option<FailureStage>) -> SourceState {
    SourceState {
        serving: Some(content.to_owned()),
        serving_manifest: Some(manifest.to_owned()),
        failure: failure.map(|stage| SourceFailure {
            stage,
            message: "grants[0]: no such verb".to_owned(),
        }),
        reconciles: None,
    }
}

fn condition<'a>(status: &'a ReconcilerPluginStatus, type_: &str) -> (&'a str, &'a str) {
    let c = (status.conditions.iter())
        .find(|c| c.type_ == type_)
        .expect("the condition");
    (c.status.as_str(), c.reason.as_str())
}

#[test]
fn ready_only_once_the_specs_module_and_manifest_both_serve() {
    let old = ReconcilerPluginStatus::default();
    let done = status(
        &Fetch::Answered(&fetched(1, "aa", "m1")),
        &serving("aa", "m1", None),
        &old,
        "h",
    );
    assert_eq!(condition(&done, "Ready"), ("True", "Serving"));
    assert_eq!(condition(&done, "Degraded"), ("False", "AsDeclared"));
    assert_eq!(done.replicas, ["h"]);

    // The spec changed (same module): not Ready until the new manifest serves.
    let pending = status(
        &Fetch::Answered(&fetched(2, "aa", "m2")),
        &serving("aa", "m1", None),
        &old,
        "h",
    );
    assert_eq!(condition(&pending, "Ready"), ("False", "Loading"));
    assert_eq!(condition(&pending, "Compiled"), ("Unknown", "Pending"));

    // The new spec refused while the old one serves: degraded, the reason named.
    let refused = status(
        &Fetch::Answered(&fetched(2, "aa", "m2")),
        &serving("aa", "m1", Some(FailureStage::Manifest)),
        &old,
        "h",
    );
    assert_eq!(condition(&refused, "Ready"), ("False", "LoadFailed"));
    assert_eq!(
        condition(&refused, "GrantsValid"),
        ("False", "InvalidManifest")
    );
    assert_eq!(
        condition(&refused, "Degraded"),
        ("True", "PreviousVersionServes")
    );
}

#[tokio::test]
async fn the_objects_directory_is_made_afresh_and_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("objects-dir-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("left-over")).expect("an old directory");
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:1".parse().expect("a URL"),
    ))
    .expect("a client");
    let objects = PluginObjects::new(client, None, dir.clone(), "h".to_owned())
        .expect("the directory is prepared");
    assert!(!dir.join("left-over").exists(), "what it held is gone");
    let mode = std::fs::metadata(objects.dir())
        .expect("made")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_status_patch_clears_what_the_status_leaves_empty() {
    let patch = status_patch(&ReconcilerPluginStatus {
        observed_generation: Some(2),
        ..ReconcilerPluginStatus::default()
    });
    assert_eq!(
        patch,
        json!({"status": {"observedGeneration": 2, "resolvedDigest": null,
                          "shadowDigest": null, "canaryDigest": null,
                          "conditions": [], "replicas": []}})
    );
    let serving = status_patch(&ReconcilerPluginStatus {
        observed_generation: Some(2),
        resolved_digest: Some("sha256:1".to_owned()),
        shadow_digest: Some("sha256:2".to_owned()),
        canary_digest: None,
        conditions: Vec::new(),
        replicas: vec!["host-a".to_owned()],
    });
    assert_eq!(serving["status"]["resolvedDigest"], "sha256:1");
    assert_eq!(serving["status"]["shadowDigest"], "sha256:2");
    assert_eq!(serving["status"]["canaryDigest"], json!(null));
    assert_eq!(serving["status"]["replicas"], json!(["host-a"]));
}

/// The status of a generation whose first fetch has run for `waited` on a registry.
fn running(waited: Duration, state: &SourceState) -> ReconcilerPluginStatus {
    let fetch = Fetch::Running {
        generation: Some(2),
        waited,
        step: Step {
            source: Some(Source::Registry("registry.example.com:5000".to_owned())),
            what: "registry.example.com:5000/plugins/web:v2".to_owned(),
        },
    };
    status(&fetch, state, &ReconcilerPluginStatus::default(), "h")
}

#[test]
fn a_first_fetch_shows_fetching_then_registry_slow_and_degrades_only_once_slow() {
    let previous = serving("aa", "m1", None);
    let quick = running(Duration::from_secs(3), &previous);
    assert_eq!(quick.observed_generation, Some(2));
    assert_eq!(condition(&quick, "Fetched"), ("Unknown", "Fetching"));
    assert_eq!(condition(&quick, "Ready"), ("False", "Fetching"));
    // A fetch of a few seconds is no degradation, though an earlier module serves.
    assert_eq!(condition(&quick, "Degraded"), ("False", "AsDeclared"));
    assert_eq!(quick.resolved_digest, None);

    let slow = running(Duration::from_secs(11), &previous);
    assert_eq!(condition(&slow, "Fetched"), ("Unknown", "RegistrySlow"));
    let message = &(slow.conditions.iter())
        .find(|c| c.type_ == "Fetched")
        .expect("Fetched")
        .message;
    for part in [
        "registry registry.example.com:5000",
        "registry.example.com:5000/plugins/web:v2",
        "other sources are not held up",
        "what serves keeps serving",
        "gives up after 120 s",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert_eq!(
        condition(&slow, "Degraded"),
        ("True", "PreviousVersionServes")
    );
    // Nothing served before: slow, but nothing degraded.
    let fresh = running(Duration::from_secs(11), &SourceState::default());
    assert_eq!(condition(&fresh, "Fetched"), ("Unknown", "RegistrySlow"));
    assert_eq!(condition(&fresh, "Degraded"), ("False", "AsDeclared"));
}

#[test]
fn reconciles_that_keep_failing_degrade_a_serving_plugin_and_their_recovery_clears_it() {
    let old = ReconcilerPluginStatus::default();
    let mut state = serving("aa", "m1", None);
    state.reconciles = Some(crate::delivery::health::Failing {
        objects: 1,
        reason: Some("trap"),
        message: "the last 3 or more reconciles of 1 object failed".to_owned(),
    });
    let fetch = fetched(1, "aa", "m1");
    let failing = status(&Fetch::Answered(&fetch), &state, &old, "h");
    assert_eq!(condition(&failing, "Ready"), ("True", "Serving"));
    assert_eq!(
        condition(&failing, "Degraded"),
        ("True", "ReconcilesFailing")
    );
    let degraded = (failing.conditions.iter())
        .find(|c| c.type_ == "Degraded")
        .expect("Degraded");
    assert_eq!(
        degraded.message,
        "the last 3 or more reconciles of 1 object failed"
    );
    state.reconciles = None;
    let recovered = status(&Fetch::Answered(&fetch), &state, &failing, "h");
    assert_eq!(condition(&recovered, "Degraded"), ("False", "AsDeclared"));
}
