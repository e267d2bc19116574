//! `NamespacedReconcilerPlugin`: a team's plugin, declared in its own namespace, runs as the
//! plugin `<namespace>.<name>` acting as the namespace's `default` ServiceAccount, reconciles
//! only that namespace, and reports its state in its own status; one whose grants reach another
//! namespace is refused with a condition naming the field. On both servers (on the real one the
//! account is bound to a Role in the namespace, as a team would bind it).

use std::process::Command;

use crate::common::backend::{Backend, Cluster};
use crate::common::host::{HOST_BINARY, Host, component, scratch};
use crate::common::{config_maps, crd_established, eventually_async};
use embedded_apiserver::Config;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const TEAM: &str = "team-ns-a";
const OTHER: &str = "team-ns-b";

async fn ensure_namespace(backend: &Backend, name: &str) {
    let namespaces: Api<Namespace> = Api::all(backend.client());
    if namespaces.get_opt(name).await.expect("get").is_none() {
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("namespace created");
    }
}

fn namespaced_plugins(backend: &Backend) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(
        "reconcile-host.dev",
        "v1alpha1",
        "NamespacedReconcilerPlugin",
    );
    Api::namespaced_with(backend.client(), TEAM, &ApiResource::from_gvk(&gvk))
}

/// The testbed's spec with its module from the team's ConfigMap, and `grants`.
fn testbed(name: &str, grants: Value) -> Value {
    json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "NamespacedReconcilerPlugin",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": {
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "labelSelector": "testbed=true",
            "limits": {"deadline": "2s", "memory": "32Mi"},
            "grants": grants,
            "configMap": {"namespace": TEAM, "name": "testbed-module", "key": "component"},
        }
    })
}

fn labelled(namespace: &str, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([("testbed".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("value".to_owned(), "v".to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Waits until the object `name`'s condition `type_` is `status`; the object's status.
async fn condition(backend: &Backend, name: &str, type_: &str, status: &str) -> Value {
    let plugins = namespaced_plugins(backend);
    eventually_async(&format!("{name}: {type_}={status}"), || async {
        let object = plugins.get_opt(name).await.ok()??;
        let current = object.data.get("status")?.clone();
        let found = (current["conditions"].as_array()?)
            .iter()
            .any(|c| c["type"] == type_ && c["status"] == status);
        found.then_some(current)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_plugin_runs_in_its_namespace_as_its_account_and_cannot_reach_another() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("namespaced-plugins");
    let crd = Command::new(HOST_BINARY).arg("crd").output().expect("runs");
    assert!(crd.status.success());
    let crd_path = dir.join("crd.yaml");
    std::fs::write(&crd_path, &crd.stdout).expect("written");
    backend.kubectl_ok(&dir, &["apply", "-f", crd_path.to_str().expect("UTF-8")]);
    crd_established(
        &backend.client(),
        "namespacedreconcilerplugins.reconcile-host.dev",
    )
    .await;
    for name in [TEAM, OTHER] {
        ensure_namespace(&backend, name).await;
    }
    if backend.is_real() {
        // What the team binds its plugin's account to: ConfigMaps and Events in its namespace.
        let role = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "plugin", "namespace": TEAM},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                       {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "plugin", "namespace": TEAM},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plugin"},
             "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": TEAM}]}]});
        let path = dir.join("role.json");
        std::fs::write(&path, role.to_string()).expect("written");
        backend.kubectl_ok(&dir, &["apply", "-f", path.to_str().expect("UTF-8")]);
    }
    let post = PostParams::default();
    let team = config_maps(&backend, TEAM);
    let other = config_maps(&backend, OTHER);
    for (api, name) in [
        (&team, "testbed-module"),
        (&team, "ours"),
        (&team, "ours-seen"),
    ]
    .into_iter()
    .chain([(&other, "theirs"), (&other, "theirs-seen")])
    {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    let module = std::fs::read(component("testbed")).expect("testbed component");
    let holder = ConfigMap {
        metadata: ObjectMeta {
            name: Some("testbed-module".to_owned()),
            namespace: Some(TEAM.to_owned()),
            ..ObjectMeta::default()
        },
        binary_data: Some([("component".to_owned(), ByteString(module))].into()),
        ..ConfigMap::default()
    };
    team.create(&post, &holder).await.expect("module ConfigMap");
    let plugins = namespaced_plugins(&backend);
    for name in ["site", "reach"] {
        let _ = plugins.delete(name, &DeleteParams::default()).await;
    }
    let grants = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                          "verbs": ["get", "create", "update", "patch", "delete"]}]);
    let site: DynamicObject = serde_json::from_value(testbed("site", grants)).expect("object");
    plugins.create(&post, &site).await.expect("site created");
    let host = Host::start_with(&backend, &dir, &[], &["--plugin-objects", "true"]);

    other
        .create(&post, &labelled(OTHER, "theirs"))
        .await
        .expect("created");
    team.create(&post, &labelled(TEAM, "ours"))
        .await
        .expect("created");
    eventually_async("ours-seen written in the team's namespace", || async {
        team.get_opt("ours-seen").await.ok()?
    })
    .await;
    let status = condition(&backend, "site", "Ready", "True").await;
    assert!(
        host.log().contains(&format!("plugin={TEAM}.site")),
        "the plugin runs as `{TEAM}.site`: {status}"
    );
    assert!(
        other.get_opt("theirs-seen").await.expect("get").is_none(),
        "the team's plugin reconciled a ConfigMap of another namespace"
    );

    // Grants reaching another namespace: refused, the condition naming the field.
    let reach = testbed(
        "reach",
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "verbs": ["get"], "namespaces": [OTHER]}]),
    );
    let reach: DynamicObject = serde_json::from_value(reach).expect("object");
    plugins.create(&post, &reach).await.expect("reach created");
    let status = condition(&backend, "reach", "Fetched", "False").await;
    let fetched = (status["conditions"].as_array().expect("conditions"))
        .iter()
        .find(|c| c["type"] == "Fetched")
        .expect("Fetched")
        .clone();
    assert_eq!(fetched["reason"], "OutOfNamespace", "{fetched}");
    let message = fetched["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.grants[0].namespaces") && message.contains(OTHER),
        "{message}"
    );
    drop(host);
    for name in ["site", "reach"] {
        let _ = plugins.delete(name, &DeleteParams::default()).await;
    }
    for (api, name) in [
        (&team, "testbed-module"),
        (&team, "ours"),
        (&team, "ours-seen"),
    ]
    .into_iter()
    .chain([(&other, "theirs")])
    {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
}
