//! Compatibility with the real kubectl binary: apply (create then update), get, get -w,
//! patch (merge and the status subresource), delete, api-resources, a CRD and its resource.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{WAIT, server};
use anyhow::{Context, bail};
use embedded_apiserver::ApiServer;

/// The kubectl to test with: on PATH, else the Google Cloud SDK's.
pub(crate) fn kubectl_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("kubectl"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl")).filter(|p| p.is_file()))
        .expect("kubectl not found on PATH nor in /usr/lib/google-cloud-sdk/bin: run scripts/install-test-deps.sh")
}

/// A kubectl pointed at one server through a kubeconfig in a private directory.
pub(crate) struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    pub(crate) fn new(server: &ApiServer, test: &str) -> Self {
        Self::with_binary(server, test, kubectl_binary())
    }

    /// A kubectl of the binary `bin`.
    pub(crate) fn with_binary(server: &ApiServer, test: &str, bin: PathBuf) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "embedded-apiserver-kubectl-{}-{test}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        server
            .write_kubeconfig(&dir.join("kubeconfig"))
            .expect("kubeconfig");
        Kubectl { bin, dir }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("KUBECONFIG", self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .current_dir(&self.dir);
        cmd
    }

    /// Runs kubectl to completion off the async runtime; stdout on success.
    pub(crate) async fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = self.command(args);
        let what = format!("kubectl {}", args.join(" "));
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await?
            .with_context(|| format!("failed to run {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} failed: {}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs kubectl to completion off the async runtime: its exit code and what it printed
    /// (stdout, then stderr).
    pub(crate) async fn status(&self, args: &[&str]) -> (Option<i32>, String) {
        let mut cmd = self.command(args);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("the blocking pool runs kubectl")
            .expect("kubectl starts");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), printed)
    }

    /// Where `write` puts the file `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(crate) fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, content).expect("manifest");
        path
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

pub(crate) fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

const CM_V1: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels: {app: web}\ndata:\n  a: \"1\"\n";
const CM_V2: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels: {app: web}\ndata:\n  a: \"2\"\n";

#[tokio::test]
async fn kubectl_apply_creates_then_updates_and_get_shows_the_result() {
    let s = server().await;
    let k = Kubectl::new(&s, "apply");
    let out = k
        .run(&["apply", "-f", p(&k.write("cm.yaml", CM_V1))])
        .await
        .unwrap();
    assert!(out.contains("configmap/demo created"), "{out}");
    let out = k
        .run(&["apply", "-f", p(&k.write("cm.yaml", CM_V2))])
        .await
        .unwrap();
    assert!(out.contains("configmap/demo configured"), "{out}");
    let value = k
        .run(&["get", "configmap", "demo", "-o", "jsonpath={.data.a}"])
        .await
        .unwrap();
    assert_eq!(value, "2");
    let table = k.run(&["get", "cm"]).await.unwrap();
    assert!(
        table.starts_with("NAME") && table.contains("demo"),
        "{table}"
    );
    let by_label = k
        .run(&["get", "cm", "-l", "app=web", "-o", "name"])
        .await
        .unwrap();
    assert_eq!(by_label.trim(), "configmap/demo");
}

#[tokio::test]
async fn kubectl_get_watch_prints_later_changes() {
    let s = server().await;
    let k = Kubectl::new(&s, "watch");
    k.run(&["apply", "-f", p(&k.write("cm.yaml", CM_V1))])
        .await
        .unwrap();
    let mut child = k
        .command(&[
            "get",
            "configmaps",
            "-w",
            "-o",
            "jsonpath={.data.a}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = |rx: std::sync::mpsc::Receiver<String>| async move {
        tokio::task::spawn_blocking(move || {
            let line = rx.recv_timeout(WAIT);
            (line, rx)
        })
        .await
        .unwrap()
    };
    let (first, rx) = next_line(rx).await;
    assert_eq!(first.expect("initial state printed"), "1");
    k.run(&["apply", "-f", p(&k.write("cm.yaml", CM_V2))])
        .await
        .unwrap();
    let (second, _rx) = next_line(rx).await;
    assert_eq!(second.expect("the change is printed"), "2");
    child.kill().ok();
    child.wait().ok();
}

const DEPLOY: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: 'nginx:1'}
      - {name: side, image: 'busybox:1'}
";

#[tokio::test]
async fn kubectl_patch_merges_and_patches_the_status_subresource() {
    let s = server().await;
    let k = Kubectl::new(&s, "patch");
    k.run(&["apply", "-f", p(&k.write("d.yaml", DEPLOY))])
        .await
        .unwrap();
    k.run(&[
        "patch",
        "deployment",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ])
    .await
    .unwrap();
    k.run(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}"#,
    ])
    .await
    .unwrap();
    k.run(&[
        "patch",
        "deployment",
        "web",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"readyReplicas":2}}"#,
    ])
    .await
    .unwrap();
    let out = k
        .run(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].image} {.status.readyReplicas} {.metadata.generation}"])
        .await
        .unwrap();
    assert_eq!(out, "3 nginx:2 busybox:1 2 3");
}

#[tokio::test]
async fn kubectl_delete_removes_the_object() {
    let s = server().await;
    let k = Kubectl::new(&s, "delete");
    k.run(&["apply", "-f", p(&k.write("cm.yaml", CM_V1))])
        .await
        .unwrap();
    let out = k.run(&["delete", "configmap", "demo"]).await.unwrap();
    assert!(out.contains("deleted"), "{out}");
    let err = k.run(&["get", "configmap", "demo"]).await.unwrap_err();
    assert!(err.to_string().contains("NotFound"), "{err}");
}

#[tokio::test]
async fn kubectl_api_resources_lists_the_built_in_kinds() {
    let s = server().await;
    let k = Kubectl::new(&s, "api-resources");
    let out = k.run(&["api-resources", "--no-headers"]).await.unwrap();
    for line in [
        "configmaps",
        "namespaces",
        "pods",
        "secrets",
        "services",
        "serviceaccounts",
        "events",
        "deployments",
        "leases",
        "customresourcedefinitions",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(line)),
            "{line} missing from:\n{out}"
        );
    }
    let ns = k
        .run(&["api-resources", "--namespaced=false", "-o", "name"])
        .await
        .unwrap();
    assert!(ns.lines().any(|l| l == "namespaces"), "{ns}");
    assert!(!ns.lines().any(|l| l == "configmaps"), "{ns}");
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[tokio::test]
async fn kubectl_creates_a_crd_then_its_custom_resource() {
    let s = server().await;
    let k = Kubectl::new(&s, "crd");
    k.run(&["apply", "-f", p(&k.write("crd.yaml", CRD))])
        .await
        .unwrap();
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n";
    let out = k
        .run(&["apply", "-f", p(&k.write("w.yaml", widget))])
        .await
        .unwrap();
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    let out = k
        .run(&["get", "wd", "w1", "-o", "jsonpath={.spec.size}"])
        .await
        .unwrap();
    assert_eq!(out, "3");
    // Changing a field client-side apply set conflicts with its manager, as on a real server.
    let changed = k.write("w.yaml", &widget.replace("3", "4"));
    let err = k
        .run(&["apply", "--server-side", "-f", p(&changed)])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("kubectl-client-side-apply"),
        "{err}"
    );
    let out = k
        .run(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            p(&changed),
        ])
        .await
        .unwrap();
    assert!(out.contains("serverside-applied"), "{out}");
    let out = k
        .run(&[
            "get",
            "widgets.example.com",
            "w1",
            "-o",
            "jsonpath={.spec.size}",
        ])
        .await
        .unwrap();
    assert_eq!(out, "4");
    let resources = k
        .run(&["api-resources", "--api-group=example.com", "-o", "name"])
        .await
        .unwrap();
    assert_eq!(resources.trim(), "widgets.example.com");
    tokio::time::timeout(
        Duration::from_secs(30),
        k.run(&["delete", "crd", "widgets.example.com"]),
    )
    .await
    .expect("delete finishes")
    .unwrap();
}

#[tokio::test]
async fn kubectl_imperative_create_of_namespace_configmap_and_secret_works() {
    let s = server().await;
    let k = Kubectl::new(&s, "imperative");
    // These commands send protobuf bodies.
    k.run(&["create", "namespace", "team"]).await.unwrap();
    k.run(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team",
        "--from-literal=mode=fast",
    ])
    .await
    .unwrap();
    k.run(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team",
        "--from-literal=pw=hunter2",
    ])
    .await
    .unwrap();
    let out = k
        .run(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.mode}",
        ])
        .await
        .unwrap();
    assert_eq!(out, "fast");
    let out = k
        .run(&[
            "get",
            "secret",
            "creds",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.pw} {.type}",
        ])
        .await
        .unwrap();
    assert_eq!(out, "aHVudGVyMg== Opaque");
    let err = k
        .run(&["create", "deployment", "d", "--image=nginx"])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("kubectl apply -f"), "{err}");
}

const EVENT_V1: &str = "apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: demo.1
regarding:
  apiVersion: v1
  kind: ConfigMap
  name: demo
  namespace: default
  uid: UID
note: reconciled by the plugin
reason: Reconciled
type: Normal
action: Reconcile
reportingController: example.com/plugin
reportingInstance: host-0
eventTime: \"2026-01-01T00:00:00.000000Z\"
";

#[tokio::test]
async fn kubectl_get_events_and_describe_show_events_written_through_events_k8s_io() {
    let s = server().await;
    let k = Kubectl::new(&s, "events");
    k.run(&["apply", "-f", p(&k.write("cm.yaml", CM_V1))])
        .await
        .unwrap();
    // kubectl describe selects the Events by the object's uid too.
    let uid = k
        .run(&["get", "cm", "demo", "-o", "jsonpath={.metadata.uid}"])
        .await
        .unwrap();
    let event = EVENT_V1.replace("UID", &uid);
    k.run(&["create", "-f", p(&k.write("event.yaml", &event))])
        .await
        .unwrap();
    let messages = k
        .run(&["get", "events", "-o", "jsonpath={.items[*].message}"])
        .await
        .unwrap();
    assert_eq!(messages, "reconciled by the plugin");
    let listed = k.run(&["get", "events"]).await.unwrap();
    assert!(listed.contains("demo.1"), "{listed}");
    let described = k.run(&["describe", "configmap", "demo"]).await.unwrap();
    assert!(
        described.contains("reconciled by the plugin") && described.contains("Reconciled"),
        "kubectl describe shows the event:\n{described}"
    );
    let notes = k
        .run(&[
            "get",
            "events.v1.events.k8s.io",
            "-o",
            "jsonpath={.items[*].note}",
        ])
        .await
        .unwrap();
    assert_eq!(notes, "reconciled by the plugin");
}
