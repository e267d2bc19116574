//! The replicator examples are not a confused deputy: a user who may write ConfigMaps only in
//! `team-a` writes sources naming other namespaces, and neither port (Rust, Python) writes,
//! overwrites or deletes anything outside what accepts its copies. On a real API server the
//! user is a ServiceAccount whose RBAC the server enforces; the embedded one does not
//! authorize, so there the same user is the admin and only the plugins' side is shown.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::common::backend::{Backend, Cluster};
use crate::common::control_plane::ControlPlane;
use crate::common::host::{Host, component, manifest, scratch, scripted_component};
use crate::common::{ACCEPT_COPIES, config_maps, eventually_async, namespace};
use embedded_apiserver::Config;

/// The user's own namespace, the only one they may write ConfigMaps in.
const OWN: &str = "team-a";
/// Namespaces the user names in their sources: one that never said yes to copies, one that did
/// but holds its own ConfigMaps of the sources' names, and `kube-system`.
const VICTIM: &str = "victim";
const SHARED: &str = "shared";
const SYSTEM: &str = "kube-system";

/// The user, as the API server knows them: a token, on a real server.
struct User {
    dir: std::path::PathBuf,
    token: Option<String>,
    plane: Option<&'static ControlPlane>,
}

impl User {
    /// A ServiceAccount in `team-a` allowed every verb on ConfigMaps there, nothing else; on the
    /// embedded server (which does not authorize), the admin.
    fn in_team_a(backend: &Backend, dir: &Path) -> Self {
        let Some(plane) = backend.control_plane() else {
            return Self {
                dir: dir.to_owned(),
                token: None,
                plane: None,
            };
        };
        let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "configmaps", "namespace": OWN},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "alice-configmaps", "namespace": OWN},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "configmaps"},
             "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": OWN}]}]});
        let path = dir.join("alice-rbac.json");
        std::fs::write(&path, rbac.to_string()).expect("written");
        run(plane.kubectl().arg("apply").arg("-f").arg(&path));
        Self {
            dir: dir.to_owned(),
            token: Some(plane.service_account_token(OWN, "alice")),
            plane: Some(plane),
        }
    }

    /// `kubectl` as this user.
    fn kubectl(&self, backend: &Backend) -> Command {
        match (self.plane, &self.token) {
            (Some(plane), Some(token)) => {
                let mut command = Command::new("kubectl");
                command
                    .args(["--server", plane.url(), "--token", token])
                    .arg("--certificate-authority")
                    .arg(plane.ca_path());
                command
            }
            _ => {
                let kubeconfig = self.dir.join("admin-kubeconfig");
                backend.kubeconfig_to(&kubeconfig);
                let mut command = Command::new("kubectl");
                command.arg("--kubeconfig").arg(kubeconfig);
                command
            }
        }
    }

    /// Whether the server lets this user `verb` ConfigMaps in `namespace`.
    fn can_i(&self, backend: &Backend, verb: &str, namespace: &str) -> String {
        let output = self
            .kubectl(backend)
            .args(["auth", "can-i", verb, "configmaps", "-n", namespace])
            .output()
            .expect("kubectl runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("kubectl runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A source of the replicator whose replicate label is `replicate`, naming every other
/// namespace of the test.
fn source(name: &str, replicate: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": OWN,
                        "labels": {"replicator.example.com/replicate": replicate},
                        "annotations": {"replicator.example.com/namespaces":
                                        format!("{VICTIM}, {SHARED}, {SYSTEM}")}},
           "data": {"payload": "from team-a"}})
}

/// The Warning reasons of the Events about `team-a/<name>`.
async fn warnings(backend: &Backend, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(backend.client(), OWN);
    let list = events.list(&ListParams::default()).await.expect("events");
    let mut reasons: Vec<String> = (list.items.into_iter())
        .filter(|event| event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|event| event.type_.as_deref() == Some("Warning"))
        .filter_map(|event| event.reason)
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_in_one_namespace_makes_neither_replicator_write_or_delete_in_another() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&backend, OWN, &[ACCEPT_COPIES]).await;
    namespace(&backend, VICTIM, &[]).await;
    namespace(&backend, SHARED, &[ACCEPT_COPIES]).await;
    // What the others own, named as the user's sources will be: `v` for the Rust port, `w` for
    // the Python one.
    let theirs = |namespace: &str, name: &str| ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        data: Some([("owner".to_owned(), namespace.to_owned())].into()),
        ..ConfigMap::default()
    };
    for ns in [VICTIM, SHARED] {
        for name in ["v", "w"] {
            config_maps(&backend, ns)
                .create(&Default::default(), &theirs(ns, name))
                .await
                .expect("created");
        }
    }

    let dir = scratch("replicator-safety");
    let plugins = [
        manifest(
            &dir,
            "examples/configmap-replicator/plugin.yaml",
            &component("configmap-replicator"),
            &[],
        ),
        manifest(
            &dir,
            "examples/configmap-replicator-python/plugin.yaml",
            &scripted_component(
                "examples/configmap-replicator-python/build.sh",
                "configmap-replicator-python",
            ),
            &[],
        ),
    ];
    let host = Host::start(&backend, &dir, &plugins);

    let alice = User::in_team_a(&backend, &dir);
    if backend.control_plane().is_some() {
        assert_eq!(alice.can_i(&backend, "create", OWN), "yes");
        for ns in [VICTIM, SHARED, SYSTEM] {
            for verb in ["create", "patch", "delete"] {
                assert_eq!(alice.can_i(&backend, verb, ns), "no", "{verb} in {ns}");
            }
        }
    }
    for (name, replicate) in [("v", "true"), ("w", "python")] {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, source(name, replicate).to_string()).expect("written");
        run(alice.kubectl(&backend).arg("apply").arg("-f").arg(&path));
    }

    // Each port says why it copied nowhere: two namespaces never said yes, and the one that did
    // holds ConfigMaps that are not copies.
    for name in ["v", "w"] {
        let reasons = eventually_async(&format!("both warnings about {OWN}/{name}"), || async {
            let reasons = warnings(&backend, name).await;
            (reasons.len() == 2).then_some(reasons)
        })
        .await;
        assert_eq!(
            reasons,
            ["NamespaceNotAccepting", "NotACopy"],
            "{}",
            host.log()
        );
    }

    // The user deletes the sources: each finalizer runs, and deletes nothing of the others'.
    for name in ["v", "w"] {
        run(alice
            .kubectl(&backend)
            .args(["delete", "configmap", name, "-n", OWN]));
    }
    let own = config_maps(&backend, OWN);
    eventually_async("both sources gone, their finalizers done", || async {
        let left = own.list(&ListParams::default()).await.ok()?;
        (!left
            .items
            .iter()
            .any(|cm| matches!(cm.metadata.name.as_deref(), Some("v" | "w"))))
        .then_some(())
    })
    .await;
    for ns in [VICTIM, SHARED] {
        for name in ["v", "w"] {
            let kept = config_maps(&backend, ns)
                .get(name)
                .await
                .unwrap_or_else(|error| panic!("{ns}/{name} deleted: {error}\n{}", host.log()));
            assert_eq!(kept.data, theirs(ns, name).data, "{ns}/{name} overwritten");
            assert_eq!(kept.metadata.labels, None, "{ns}/{name} relabelled");
        }
    }
    for name in ["v", "w"] {
        let written = config_maps(&backend, SYSTEM)
            .get_opt(name)
            .await
            .expect("get");
        assert!(written.is_none(), "{SYSTEM}/{name} written: {written:?}");
    }
}
