//! Plugins declared as `ReconcilerPlugin` objects: the CRD `reconcile-host crd` prints applied
//! with kubectl, a plugin whose component is in a ConfigMap loaded by a host run with
//! `--plugin-objects true`, its status (conditions, digest, `kubectl wait`), a bad module that
//! leaves the good one serving, the good one put back, and the object deleted; a plugin pushed to
//! a real registry (`docker-registry`) by tag, pinned to its digest, serving while the registry
//! is down, and a new tag pulled when the spec changes. On both API server backends.

use crate::common;
use std::path::Path;
use std::process::Command;

use crate::common::backend::{Backend, Cluster};
use crate::common::host::{HOST_BINARY, Host, component, scratch, workspace};
use crate::common::registry::Registry;
use crate::common::{churn, config_maps, crd_established, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const CRD: &str = "reconcilerplugins.reconcile-host.dev";
const MODULES: &str = "plugin-modules";

/// Applies the CRD `reconcile-host crd` prints, with kubectl, and waits until it is served.
async fn apply_crd(backend: &Backend, dir: &Path) {
    let output = Command::new(HOST_BINARY)
        .arg("crd")
        .output()
        .expect("reconcile-host runs");
    assert!(output.status.success(), "reconcile-host crd failed");
    let path = dir.join("crd.yaml");
    std::fs::write(&path, &output.stdout).expect("crd written");
    backend.kubectl_ok(dir, &["apply", "-f", path.to_str().expect("UTF-8")]);
    crd_established(&backend.client(), CRD).await;
}

/// The ReconcilerPlugins.
fn plugins(backend: &Backend) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("reconcile-host.dev", "v1alpha1", "ReconcilerPlugin");
    Api::all_with(backend.client(), &ApiResource::from_gvk(&gvk))
}

/// The testbed's manifest as a ReconcilerPlugin whose module is `key` of the ConfigMap.
fn testbed_object(key: &str) -> Value {
    testbed_with(
        "configMap",
        json!({"namespace": MODULES, "name": "testbed-module", "key": key}),
    )
}

/// The testbed's manifest as a ReconcilerPlugin whose module comes from `source: value`.
fn testbed_with(source: &str, value: Value) -> Value {
    example_object(
        "host/tests/guests/testbed/plugin.yaml",
        "testbed",
        source,
        value,
    )
}

/// `reconcile-host push <module> <reference> --insecure`: the digest reference it printed.
fn push(module: &Path, reference: &str) -> String {
    let output = Command::new(HOST_BINARY)
        .arg("push")
        .arg(module)
        .args([reference, "--insecure"])
        .output()
        .expect("reconcile-host runs");
    assert!(
        output.status.success(),
        "push {reference} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The ConfigMap holding modules under `entries`' keys.
fn module_config_map(entries: &[(&str, Vec<u8>)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("testbed-module".to_owned()),
            namespace: Some(MODULES.to_owned()),
            ..ObjectMeta::default()
        },
        binary_data: Some(
            entries
                .iter()
                .map(|(key, bytes)| ((*key).to_owned(), ByteString(bytes.clone())))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// Creates the module ConfigMap with `entries` and the testbed's ReconcilerPlugin reading its
/// `component` key; the module ConfigMaps.
async fn declare_testbed(backend: &Backend, entries: &[(&str, Vec<u8>)]) -> Api<ConfigMap> {
    let modules: Api<ConfigMap> = Api::namespaced(backend.client(), MODULES);
    let post = PostParams::default();
    modules
        .create(&post, &module_config_map(entries))
        .await
        .expect("module ConfigMap created");
    create(backend, testbed_object("component")).await;
    modules
}

/// Puts `bytes` as the testbed's module into its ConfigMap.
async fn replace_module(modules: &Api<ConfigMap>, bytes: Vec<u8>) {
    let patch = json!({"binaryData": {"component": ByteString(bytes)}});
    modules
        .patch(
            "testbed-module",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("module replaced");
}

/// Creates the ReconcilerPlugin `object`.
async fn create(backend: &Backend, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("a ReconcilerPlugin");
    plugins(backend)
        .create(&PostParams::default(), &object)
        .await
        .expect("ReconcilerPlugin created");
}

/// Waits until the plugin `name` is Ready for `generation`; its status.
async fn ready(backend: &Backend, name: &str, generation: i64) -> Value {
    let plugins = plugins(backend);
    eventually_async(
        &format!("{name} Ready at generation {generation}"),
        || async {
            let object = plugins.get_opt(name).await.ok()??;
            let status = object.data.get("status")?.clone();
            let ready = status["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (ready && status["observedGeneration"] == generation).then_some(status)
        },
    )
    .await
}

/// A ConfigMap the testbed reconciles (`testbed=true`), `value` in its data.
fn labelled(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some([("testbed".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("value".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Waits until the testbed wrote `<name>-seen` for `name`.
async fn seen(backend: &Backend, name: &str) {
    let config_maps = config_maps(backend, "default");
    eventually_async(&format!("{name}-seen written by the plugin"), || async {
        config_maps.get_opt(&format!("{name}-seen")).await.ok()?
    })
    .await;
}

/// Waits until the plugin's condition `type_` has `status`; returns the object's status.
async fn condition(backend: &Backend, type_: &str, status: &str) -> Value {
    let plugins = plugins(backend);
    eventually_async(&format!("condition {type_}={status}"), || async {
        let object = plugins.get_opt("testbed").await.ok()??;
        let current = object.data.get("status")?.clone();
        let found = current["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == type_ && c["status"] == status);
        found.then_some(current)
    })
    .await
}

/// The condition `type_` of `status`.
fn find<'a>(status: &'a Value, type_: &str) -> &'a Value {
    (status["conditions"].as_array().expect("conditions"))
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no condition {type_} in {status}"))
}

/// `sha256:<hex>` of `bytes`.
fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", reconcile_host::wasm::module::hex_sha256(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_object_from_a_config_map_loads_reports_its_state_survives_a_bad_module_and_goes()
{
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-objects");
    apply_crd(&backend, &dir).await;
    namespace(&backend, MODULES, &[]).await;
    let good = std::fs::read(component("testbed")).expect("testbed component");
    let modules = declare_testbed(&backend, &[("component", good.clone())]).await;
    let post = PostParams::default();

    let host = Host::start_with(&backend, &dir, &[], &["--plugin-objects", "true"]);
    let config_maps = config_maps(&backend, "default");
    config_maps
        .create(&post, &labelled("first", "1"))
        .await
        .expect("created");
    seen(&backend, "first").await;

    // Its state where kubectl shows it.
    let status = condition(&backend, "Ready", "True").await;
    assert_eq!(status["resolvedDigest"], digest(&good), "{status}");
    assert_eq!(status["observedGeneration"], 1);
    for type_ in ["Fetched", "Compiled", "GrantsValid"] {
        assert_eq!(find(&status, type_)["status"], "True", "{type_}: {status}");
    }
    assert_eq!(find(&status, "Degraded")["status"], "False", "{status}");
    assert_eq!(status["replicas"].as_array().map(Vec::len), Some(1));
    backend.kubectl_ok(
        &dir,
        &[
            "wait",
            "--for=condition=Ready",
            "reconcilerplugin/testbed",
            "--timeout=30s",
        ],
    );
    let table = backend.kubectl_ok(&dir, &["get", "reconcilerplugins"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("READY") && table.contains("DIGEST"),
        "{table}"
    );
    assert!(table.contains(&digest(&good)), "{table}");

    // A module that is not a component: refused, the good one keeps serving, status says so.
    replace_module(&modules, b"not a component".to_vec()).await;
    let status = condition(&backend, "Degraded", "True").await;
    assert_eq!(find(&status, "Ready")["status"], "False", "{status}");
    assert_eq!(find(&status, "Compiled")["status"], "False", "{status}");
    assert_eq!(
        find(&status, "Degraded")["reason"],
        "PreviousVersionServes",
        "{status}"
    );
    config_maps
        .create(&post, &labelled("second", "2"))
        .await
        .expect("created");
    seen(&backend, "second").await;

    // The good module put back: ready again, whatever happened in between.
    replace_module(&modules, good.clone()).await;
    let status = condition(&backend, "Ready", "True").await;
    assert_eq!(find(&status, "Degraded")["status"], "False", "{status}");
    assert_eq!(status["resolvedDigest"], digest(&good));

    // An object whose reconciles keep failing: Degraded, with the failure, shown by kubectl get
    // and describe; fixed, it clears.
    let mut failing = labelled("failing", "3");
    failing
        .data
        .get_or_insert_default()
        .insert("behave".to_owned(), "error".to_owned());
    let asked = std::time::Instant::now();
    config_maps.create(&post, &failing).await.expect("created");
    let status = condition(&backend, "Degraded", "True").await;
    let within = asked.elapsed();
    let degraded = find(&status, "Degraded");
    assert_eq!(degraded["reason"], "ReconcilesFailing", "{status}");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("reconciles of 1 object failed")
            && message.contains("default/failing (error)")
            && message.contains("testbed: asked to fail"),
        "{message}"
    );
    assert_eq!(find(&status, "Ready")["status"], "True", "{status}");
    let table = backend.kubectl_ok(&dir, &["get", "reconcilerplugins"]);
    let row: Vec<&str> = (table.lines())
        .find(|line| line.starts_with("testbed "))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(table.contains("DEGRADED"), "{table}");
    assert_eq!(row.get(1..3), Some(&["True", "True"][..]), "{table}");
    // An Event's row in describe's table: its type, reason, age, source and note.
    let described = |type_: &'static str, reason: &'static str| {
        let dir = dir.clone();
        let backend = &backend;
        async move {
            eventually_async(&format!("kubectl describe lists {reason}"), || async {
                let out = backend.kubectl_ok(&dir, &["describe", "reconcilerplugin", "testbed"]);
                let (_, events) = out.split_once("\nEvents:")?;
                (events.lines())
                    .find(|row| {
                        let words: Vec<&str> = row.split_whitespace().collect();
                        words.get(..2) == Some(&[type_, reason][..])
                    })
                    .map(str::to_owned)
            })
            .await
        }
    };
    let row = described("Warning", "ReconcilesFailing").await;
    assert!(row.contains("testbed: asked to fail"), "{row}");
    config_maps
        .patch(
            "failing",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"behave": "ok"}})),
        )
        .await
        .expect("patched");
    let status = condition(&backend, "Degraded", "False").await;
    assert_eq!(
        find(&status, "Degraded")["reason"],
        "AsDeclared",
        "{status}"
    );
    described("Normal", "ReconcilesRecovered").await;
    eprintln!("Degraded True {within:?} after the failing object was created");

    // Deleted: the plugin stops.
    plugins(&backend)
        .delete("testbed", &DeleteParams::default())
        .await
        .expect("deleted");
    host.wait_log(&["plugin removed", "plugin=testbed"]).await;
    drop(host);

    // No garbage collector on a real server: remove what the test made.
    for name in [
        "first",
        "first-seen",
        "second",
        "second-seen",
        "failing",
        "failing-seen",
        "failing-attempts",
    ] {
        let _ = config_maps.delete(name, &DeleteParams::default()).await;
    }
    let _ = modules
        .delete("testbed-module", &DeleteParams::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_module_is_a_fetch_condition_naming_the_config_map_and_the_key() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-objects-missing");
    apply_crd(&backend, &dir).await;
    namespace(&backend, MODULES, &[]).await;
    let modules = declare_testbed(&backend, &[("other", b"x".to_vec())]).await;

    let host = Host::start_with(&backend, &dir, &[], &["--plugin-objects", "true"]);
    let status = condition(&backend, "Fetched", "False").await;
    let fetched = find(&status, "Fetched");
    assert_eq!(fetched["reason"], "ConfigMapKeyMissing", "{status}");
    let message = fetched["message"].as_str().expect("a message");
    assert!(
        message.contains(&format!("ConfigMap {MODULES}/testbed-module"))
            && message.contains("`component`"),
        "{message}"
    );
    assert_eq!(find(&status, "Ready")["status"], "False", "{status}");
    // Counted, by reason.
    let series = "reconcile_host_plugin_fetch_failures_total{plugin=\"testbed\",\
                  reason=\"ConfigMapKeyMissing\"}";
    assert!(host.metric(series).await >= 1.0, "{series}");
    drop(host);
    let _ = plugins(&backend)
        .delete("testbed", &DeleteParams::default())
        .await;
    let _ = modules
        .delete("testbed-module", &DeleteParams::default())
        .await;
}

/// A ConfigMap the testbed reconciles, labelled `track=canary`.
fn canary_labelled(name: &str) -> ConfigMap {
    let mut object = labelled(name, "c");
    if let Some(labels) = object.metadata.labels.as_mut() {
        labels.insert("track".to_owned(), "canary".to_owned());
    }
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objects_shadow_and_canary_modules_are_pulled_from_the_registry() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-objects-side-modules");
    apply_crd(&backend, &dir).await;
    let registry = Registry::start(&dir);
    let testbed = push(
        &component("testbed"),
        &format!("{}/plugins/testbed:v1", registry.host()),
    );
    let noop_module = component("noop");
    let noop = push(
        &noop_module,
        &format!("{}/plugins/noop:v1", registry.host()),
    );
    let mut object = testbed_with("oci", json!(testbed));
    object["spec"]["shadow"] = json!({"oci": testbed});
    object["spec"]["canary"] = json!({"selector": "track=canary", "oci": noop});
    let config_arg = registry.host_config(&dir);
    create(&backend, object).await;
    let host = Host::start_with(&backend, &dir, &[], &["--config", &config_arg]);
    ready(&backend, "testbed", 1).await;
    let config_maps = config_maps(&backend, "default");
    let post = PostParams::default();
    config_maps
        .create(&post, &labelled("side-stable", "s"))
        .await
        .expect("created");
    // The stable key: the plugin's module writes, its identical shadow agrees.
    seen(&backend, "side-stable").await;
    let runs = |outcome: &str| {
        format!(
            "reconcile_host_plugin_shadow_runs_total{{plugin=\"testbed\",outcome=\"{outcome}\"}}"
        )
    };
    host.wait_metric(&runs("same"), 1.0).await;
    assert_eq!(host.metric(&runs("different")).await, 0.0);
    // (A shadow runs on canary keys too, and compares with the canary's module.)
    config_maps
        .create(&post, &canary_labelled("side-canary"))
        .await
        .expect("created");
    // The canary key: the canary's module (noop) reconciled it, and wrote nothing.
    let noop_digest = digest(&std::fs::read(&noop_module).expect("noop"));
    host.wait_metric(
        &format!(
            "reconcile_host_plugin_module_reconciles_total{{plugin=\"testbed\",module=\"{}\",result=\"success\"}}",
            &noop_digest["sha256:".len().."sha256:".len() + 12]
        ),
        1.0,
    )
    .await;
    assert!(
        config_maps
            .get_opt("side-canary-seen")
            .await
            .expect("read")
            .is_none(),
        "the canary key went to the plugin's module"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_object_from_a_registry_tag_is_pinned_to_its_digest_and_serves_while_the_registry_is_down()
 {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-objects-oci");
    apply_crd(&backend, &dir).await;
    let mut registry = Registry::start(&dir);
    let testbed = component("testbed");
    let tag = format!("{}/plugins/testbed:v1", registry.host());
    let pinned = push(&testbed, &tag);
    let digest = pinned
        .rsplit_once('@')
        .expect("a digest reference")
        .1
        .to_owned();

    let config_arg = registry.host_config(&dir);
    create(&backend, testbed_with("oci", json!(tag))).await;
    let host = Host::start_with(&backend, &dir, &[], &["--config", &config_arg]);
    let config_maps = config_maps(&backend, "default");
    let post = PostParams::default();
    config_maps
        .create(&post, &labelled("oci-first", "1"))
        .await
        .expect("created");
    seen(&backend, "oci-first").await;
    let status = condition(&backend, "Ready", "True").await;
    // The tag resolved once, to what push printed: the digest is pinned in status.
    assert_eq!(status["resolvedDigest"], json!(digest), "{status}");
    let fetched = find(&status, "Fetched");
    assert!(
        fetched["message"]
            .as_str()
            .is_some_and(|m| m.contains(&digest)),
        "{status}"
    );

    // The registry down: the module is on disk, the plugin keeps serving and stays Ready.
    registry.stop();
    config_maps
        .create(&post, &labelled("oci-second", "2"))
        .await
        .expect("created");
    seen(&backend, "oci-second").await;
    let status = condition(&backend, "Ready", "True").await;
    assert_eq!(status["resolvedDigest"], json!(digest), "{status}");

    // A spec pointing at a tag the registry (up again) has not got: Fetched False, the pinned
    // module keeps serving (Degraded), then the tag pushed and the plugin moves to it.
    registry.restart();
    let tag2 = format!("{}/plugins/testbed:v2", registry.host());
    let patch = json!({"spec": {"oci": tag2}});
    plugins(&backend)
        .patch("testbed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    let status = condition(&backend, "Fetched", "False").await;
    assert_eq!(find(&status, "Degraded")["status"], "True", "{status}");
    // The digest the first tag resolved to is not this spec's: it is not left in status, where
    // it would pin the new spec to the old module.
    assert!(status["resolvedDigest"].is_null(), "{status}");
    // The tag pushed: the plugin resolves it for generation 2 and is Ready again.
    let pinned2 = push(&testbed, &tag2);
    let digest2 = pinned2.rsplit_once('@').expect("a digest").1.to_owned();
    let status = ready(&backend, "testbed", 2).await;
    assert_eq!(status["resolvedDigest"], json!(digest2), "{status}");
    drop(host);
    let _ = plugins(&backend)
        .delete("testbed", &DeleteParams::default())
        .await;
    for name in [
        "oci-first",
        "oci-first-seen",
        "oci-second",
        "oci-second-seen",
    ] {
        let _ = config_maps.delete(name, &DeleteParams::default()).await;
    }
}

#[test]
fn rbac_of_an_object_file_gives_the_host_its_objects_status_and_module_config_map() {
    let dir = scratch("plugin-objects-rbac");
    let path = dir.join("testbed-object.yaml");
    let text = serde_yaml_ng::to_string(&testbed_object("component")).expect("YAML");
    std::fs::write(&path, text).expect("written");
    let output = Command::new(HOST_BINARY)
        .args(["rbac", "--include-host"])
        .arg(&path)
        .output()
        .expect("reconcile-host runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&printed)
        .map(|document| serde::Deserialize::deserialize(document).expect("a document"))
        .filter(|document: &Value| !document.is_null())
        .collect();
    let named = |kind: &str, name: &str| {
        documents
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in:\n{printed}"))
    };
    // The plugin's own rights, from the object's spec as from a manifest file.
    let plugin = named("ClusterRole", "reconcile-host-plugins");
    assert!(plugin.to_string().contains("configmaps"), "{plugin}");
    // The host's: read the objects, write their status, record Events on them.
    let objects = named("ClusterRole", "reconcile-host-plugins-objects");
    assert_eq!(
        objects["rules"],
        json!([
            {"apiGroups": ["reconcile-host.dev"], "resources": ["reconcilerplugins"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["reconcile-host.dev"], "resources": ["reconcilerplugins/status"],
             "verbs": ["get", "patch", "update"]},
            {"apiGroups": ["reconcile-host.dev"], "resources": ["namespacedreconcilerplugins"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["reconcile-host.dev"],
             "resources": ["namespacedreconcilerplugins/status"],
             "verbs": ["get", "patch", "update"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
        ])
    );
    named("ClusterRoleBinding", "reconcile-host-plugins-objects");
    // And get of the module's ConfigMap, by name, in its namespace only.
    let modules = named("Role", "reconcile-host-plugins-modules");
    assert_eq!(modules["metadata"]["namespace"], MODULES);
    assert_eq!(
        modules["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["testbed-module"], "verbs": ["get"]}])
    );
}

#[test]
fn the_deployed_crd_is_the_one_reconcile_host_crd_prints() {
    let output = Command::new(HOST_BINARY)
        .arg("crd")
        .output()
        .expect("reconcile-host runs");
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    let path = workspace().join("deploy/base/reconcilerplugins-crd.yaml");
    let deployed = std::fs::read_to_string(&path).expect("the deployed CRD");
    let body: String = deployed
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(
        body == printed,
        "{} differs from `reconcile-host crd`; regenerate it: \
         (echo '# …'; reconcile-host crd) > deploy/base/reconcilerplugins-crd.yaml",
        path.display()
    );
}

/// The example's manifest as a ReconcilerPlugin named `name`, its module `source: value`.
fn example_object(manifest: &str, name: &str, source: &str, value: Value) -> Value {
    let path = workspace().join(manifest);
    let mut spec: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("manifest")).expect("YAML");
    let fields = spec.as_object_mut().expect("a mapping");
    fields.remove("name");
    fields.remove("module");
    fields.insert(source.to_owned(), value);
    json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": name},
        "spec": spec,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_18_mb_python_replicator_is_delivered_from_a_registry_by_digest_and_copies() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-objects-python");
    apply_crd(&backend, &dir).await;
    let registry = Registry::start(&dir);
    let module = common::host::scripted_component(
        "examples/configmap-replicator-python/build.sh",
        "configmap-replicator-python",
    );
    // Compiled into the tests' module cache first, as the other Python tests do: an 18 MB
    // component takes longer to compile than a test waits for a reconcile.
    let checked = common::host::tool("check")
        .arg(workspace().join("examples/configmap-replicator-python/plugin.yaml"))
        .output()
        .expect("reconcile-host runs");
    assert!(
        checked.status.success(),
        "check of the Python replicator failed"
    );
    let size = std::fs::metadata(&module).expect("the component").len();
    assert!(size > 16 << 20, "the Python component is {size} bytes");
    let pinned = push(
        &module,
        &format!("{}/plugins/replicator-python:v1", registry.host()),
    );
    let config_arg = registry.host_config(&dir);
    create(
        &backend,
        example_object(
            "examples/configmap-replicator-python/plugin.yaml",
            "replicator-python",
            "oci",
            json!(pinned),
        ),
    )
    .await;
    namespace(&backend, "python-copies", &[common::ACCEPT_COPIES]).await;
    let host = Host::start_with(&backend, &dir, &[], &["--config", &config_arg]);

    let source: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "python-source",
            "namespace": "default",
            "labels": {"replicator.example.com/replicate": "python"},
            "annotations": {"replicator.example.com/namespaces": "python-copies"},
        },
        "data": {"log-level": "info"},
    }))
    .expect("a ConfigMap");
    config_maps(&backend, "default")
        .create(&PostParams::default(), &source)
        .await
        .expect("source created");
    let copies = config_maps(&backend, "python-copies");
    let copy = eventually_async("the Python replicator's copy", || async {
        copies.get_opt("python-source").await.ok()?
    })
    .await;
    assert_eq!(
        copy.data.and_then(|d| d.get("log-level").cloned()),
        Some("info".to_owned())
    );
    let status = ready(&backend, "replicator-python", 1).await;
    let digest = pinned.rsplit_once('@').expect("a digest").1;
    assert_eq!(status["resolvedDigest"], json!(digest), "{status}");
    drop(host);
    let _ = plugins(&backend)
        .delete("replicator-python", &DeleteParams::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_applied_changed_and_deleted_while_10_000_keys_churn_lose_no_key() {
    // Embedded only: bulk_load writes the objects without HTTP.
    let server = embedded_apiserver::ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    churn::load(&server);
    let dir = scratch("plugin-objects-churn");
    let kubeconfig = dir.join("kubectl.kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let output = Command::new(HOST_BINARY)
        .arg("crd")
        .output()
        .expect("reconcile-host runs");
    std::fs::write(dir.join("crd.yaml"), &output.stdout).expect("crd written");
    let applied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "-f"])
        .arg(dir.join("crd.yaml"))
        .output()
        .expect("kubectl runs");
    assert!(applied.status.success(), "the CRD applies");
    let client = server.kube_client().expect("client");
    namespace(&server, MODULES, &[]).await;
    let modules: Api<ConfigMap> = Api::namespaced(client.clone(), MODULES);
    let noop = std::fs::read(component("noop")).expect("noop component");
    modules
        .create(
            &PostParams::default(),
            &module_config_map(&[("component", noop)]),
        )
        .await
        .expect("module ConfigMap created");
    let load = json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": "load"},
        "spec": {
            "configMap": {"namespace": MODULES, "name": "testbed-module", "key": "component"},
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "labelSelector": "load=true",
            "concurrency": 2,
            "limits": {"deadline": "5s", "memory": "64Mi", "logLinesPerSecond": 100_000},
        },
    });
    let gvk = GroupVersionKind::gvk("reconcile-host.dev", "v1alpha1", "ReconcilerPlugin");
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    let object: DynamicObject = serde_json::from_value(load).expect("object");
    objects
        .create(&PostParams::default(), &object)
        .await
        .expect("applied");
    let host = Host::start_with(&server, &dir, &[], &["--plugin-objects", "true"]);
    host.wait_log(&["plugin added", "plugin=load"]).await;

    // A stream of updates while the module is swapped (the ConfigMap changed) and the spec
    // changed (the controller rebuilt, its queue handed over).
    let updater = churn::updates(Api::namespaced(client.clone(), "default"), 300);
    replace_module(&modules, std::fs::read(component("stamp")).expect("stamp")).await;
    host.wait_log(&["plugin module swapped", "plugin=load"])
        .await;
    let change = json!({"spec": {"concurrency": 3}});
    objects
        .patch("load", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("spec changed");
    host.wait_log(&["plugin rebuilt", "plugin=load"]).await;
    updater.await.expect("updater");

    churn::every_object_stamped(&host, &Api::namespaced(client.clone(), "default")).await;
    for reason in ["trap", "instantiate", "deadline", "memory", "error"] {
        let series =
            format!("reconcile_host_plugin_failures_total{{plugin=\"load\",reason=\"{reason}\"}}");
        assert_eq!(host.metric(&series).await, 0.0, "{series}");
    }

    // Deleted while the updates go on: the plugin drains and stops.
    objects
        .delete("load", &DeleteParams::default())
        .await
        .expect("deleted");
    host.wait_log(&["plugin removed", "plugin=load"]).await;
}
