//! The cluster deployment in `deploy/`: the kustomizations render with `kubectl kustomize`,
//! `kubectl apply --server-side` accepts them, and the API server then holds what the host needs
//! (two replicas, probes, leader election, a locked-down pod, the Lease RBAC, a scraped metrics
//! Service, each plugin's ConfigMap mounted where the configuration looks). The real binary,
//! started as the pod starts it (the Deployment's arguments and environment, its volumes laid
//! out as the kubelet lays them out, the service account's credentials), takes the Lease, runs
//! the plugin from its ConfigMap and reloads it when the ConfigMap changes.

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::backend::{Backend, Cluster as _};
use crate::common::eventually_async;
use crate::common::host::{component, free_port, scratch, workspace};
use crate::common::secure_telemetry::https_get;
use anyhow::{Context, bail};
use clap::{CommandFactory, FromArgMatches};
use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ObjectMeta, PostParams};
use reconcile_host::cli::{Cli, RunArgs};
use reconcile_host::manifest::Manifest;
use serde::Deserialize;
use serde_json::Value;

/// The namespace the kustomizations put everything in.
const NAMESPACE: &str = "reconcile-system";
/// The example plugin shipped as a component.
const PLUGIN: &str = "configmap-replicator";
/// The example plugin shipped from a registry, as a ReconcilerPlugin object.
const REGISTRY_PLUGIN: &str = "website";
/// What one ConfigMap may hold, data and binaryData together.
const CONFIG_MAP_LIMIT: usize = 1024 * 1024;

/// The kubectl to test with: on PATH, else the Google Cloud SDK's.
fn kubectl_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("kubectl"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| {
            Some(PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl")).filter(|p| p.is_file())
        })
        .expect(
            "kubectl not found on PATH nor in /usr/lib/google-cloud-sdk/bin: run \
             scripts/install-test-deps.sh",
        )
}

/// Runs kubectl off the async runtime with `kubeconfig` (if any); stdout on success.
async fn kubectl(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let mut command = Command::new(kubectl_binary());
    command
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kubectl-cache"))
        .args(args);
    let what = format!("kubectl {}", args.join(" "));
    let out = tokio::task::spawn_blocking(move || command.output())
        .await?
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{what} printed non-UTF-8"))
}

/// The objects `kubectl kustomize <kustomization>` renders.
async fn render(dir: &Path, kustomization: &Path) -> Vec<Value> {
    let path = kustomization.to_str().expect("UTF-8 path");
    let yaml = kubectl(dir, &["kustomize", path])
        .await
        .unwrap_or_else(|e| panic!("{path} does not render: {e:#}"));
    documents(&yaml)
}

/// Applies `kustomization` server-side (a client-side apply would copy a plugin's component
/// into an annotation limited to 256 KiB), then reads back what the server holds of it.
async fn apply(dir: &Path, kustomization: &Path) -> Vec<Value> {
    let path = kustomization.to_str().expect("UTF-8 path");
    kubectl(
        dir,
        &[
            "apply",
            "--server-side",
            "--field-manager=deploy-test",
            "-k",
            path,
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("the API server refuses {path}: {e:#}"));
    let list = kubectl(dir, &["get", "-k", path, "-o", "json"])
        .await
        .unwrap_or_else(|e| panic!("cannot read back {path}: {e:#}"));
    let list: Value = serde_json::from_str(&list).expect("kubectl prints JSON");
    list["items"].as_array().expect("a List").clone()
}

/// The object of `kind` named `name` among `objects`.
fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among the objects"))
}

/// `kind/namespace/name` of each object, sorted: what must match between render and server.
fn identities(objects: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    ids.sort();
    ids
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The host's container in the Deployment.
fn container(objects: &[Value]) -> &Value {
    let deployment = find(objects, "Deployment", "reconcile-host");
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "reconcile-host"))
        .expect("a container named reconcile-host")
}

/// The volume mounted at `mount_path` in the host's container, and the mount.
fn volume_at<'a>(objects: &'a [Value], mount_path: &str) -> (&'a Value, &'a Value) {
    let deployment = find(objects, "Deployment", "reconcile-host");
    let mount = container(objects)["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["mountPath"] == mount_path))
        .unwrap_or_else(|| panic!("nothing is mounted at {mount_path}"));
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
        .unwrap_or_else(|| panic!("no volume {} for {mount_path}", mount["name"]));
    (volume, mount)
}

/// What every variant of the deployment must hold, rendered or on the server.
fn assert_base(objects: &[Value]) {
    assert_eq!(find(objects, "Namespace", NAMESPACE)["kind"], "Namespace");
    let account = find(objects, "ServiceAccount", "reconcile-host");
    assert_eq!(account["metadata"]["namespace"], NAMESPACE);

    let deployment = find(objects, "Deployment", "reconcile-host");
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "reconcile-host");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(
        pod["securityContext"]["runAsUser"].as_u64() > Some(0),
        "{pod}"
    );
    let host = container(objects);
    let security = &host["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true, "{security}");
    assert_eq!(security["allowPrivilegeEscalation"], false, "{security}");
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
    assert!(host["resources"]["requests"]["cpu"].is_string(), "{host}");
    assert!(
        host["resources"]["requests"]["memory"].is_string(),
        "{host}"
    );

    let port = host["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "metrics"))
        .expect("a port named metrics");
    assert_eq!(port["containerPort"], 8080);
    assert_eq!(host["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(host["livenessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(host["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(host["readinessProbe"]["httpGet"]["port"], "metrics");
    // In a cluster the port serves HTTPS (telemetry.authorization: auto).
    assert_eq!(host["livenessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(host["readinessProbe"]["httpGet"]["scheme"], "HTTPS");

    // The Lease's namespace is the pod's own, where the Role below allows Leases.
    let lease_namespace = host["env"]
        .as_array()
        .and_then(|e| {
            e.iter()
                .find(|e| e["name"] == "RECONCILE_HOST_LEASE_NAMESPACE")
        })
        .expect("RECONCILE_HOST_LEASE_NAMESPACE is set");
    assert_eq!(
        lease_namespace["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );

    // Writable directories on emptyDirs: the root filesystem is read-only.
    for path in ["/etc/reconcile-host/plugins", "/var/cache/reconcile-host"] {
        let (volume, _) = volume_at(objects, path);
        assert!(volume["emptyDir"].is_object(), "{path} on {volume}");
    }
    let (config, _) = volume_at(objects, "/etc/reconcile-host/config");
    let config_map = config["configMap"]["name"].as_str().expect("a ConfigMap");
    assert!(config_map.starts_with("reconcile-host-config-"), "{config}");
    assert!(
        find(objects, "ConfigMap", config_map)["data"]["config.yaml"].is_string(),
        "the config ConfigMap holds config.yaml"
    );

    let service = find(objects, "Service", "reconcile-host-metrics");
    let annotations = &service["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8080");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/name"],
        "reconcile-host"
    );
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"],
        "reconcile-host",
        "the Service selects the pods"
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");

    // Leases in the host's namespace, bound to its service account.
    let role = find(objects, "Role", "reconcile-host-leader-election");
    assert_eq!(role["metadata"]["namespace"], NAMESPACE);
    let rules = role["rules"].as_array().expect("rules");
    for verb in ["get", "create", "update"] {
        assert!(
            rules.iter().any(
                |rule| strings(&rule["apiGroups"]) == ["coordination.k8s.io"]
                    && strings(&rule["resources"]) == ["leases"]
                    && strings(&rule["verbs"]).contains(&verb)
                    && rule["resourceNames"]
                        .as_array()
                        .is_none_or(|names| names.iter().any(|n| n == "reconcile-host"))
            ),
            "{verb} on the Lease reconcile-host in {role}"
        );
    }
    let binding = find(objects, "RoleBinding", "reconcile-host-leader-election");
    assert_eq!(binding["metadata"]["namespace"], NAMESPACE);
    assert_eq!(binding["roleRef"]["name"], "reconcile-host-leader-election");
    assert_host_subject(binding);
    let events = find(objects, "ClusterRole", "reconcile-host-events");
    assert_eq!(strings(&events["rules"][0]["apiGroups"]), ["events.k8s.io"]);
    assert_eq!(strings(&events["rules"][0]["verbs"]), ["create"]);
    assert_host_subject(find(objects, "ClusterRoleBinding", "reconcile-host-events"));
    // The secured telemetry port's reviews, bound to the host, and the scraper's role (left
    // for the operator to bind): what `reconcile-host rbac --include-host` prints.
    let printed = Command::new(common::host::HOST_BINARY)
        .args(["rbac", "--include-host", "--name", "reconcile-host"])
        .arg(
            workspace()
                .join("deploy/plugins")
                .join(PLUGIN)
                .join("plugin.yaml"),
        )
        .output()
        .expect("reconcile-host runs");
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let printed = documents(&String::from_utf8(printed.stdout).expect("UTF-8"));
    for name in [
        "reconcile-host-telemetry-reviews",
        "reconcile-host-metrics-reader",
        "reconcile-host-debug-reader",
        "reconcile-host-recording-reader",
    ] {
        assert_eq!(
            find(objects, "ClusterRole", name)["rules"],
            find(&printed, "ClusterRole", name)["rules"],
            "{name}"
        );
    }
    assert_eq!(
        find(objects, "Role", "reconcile-host-debug-proxy")["rules"],
        find(&printed, "Role", "reconcile-host-debug-proxy")["rules"],
        "the pod proxy's Role of a `kubectl reconcile` user"
    );
    assert_host_subject(find(
        objects,
        "ClusterRoleBinding",
        "reconcile-host-telemetry-reviews",
    ));
    assert!(
        !objects.iter().any(|o| o["kind"] == "ClusterRoleBinding"
            && o["roleRef"]["name"] == "reconcile-host-metrics-reader"),
        "the scraper's role is bound by the operator, to the scraper"
    );

    let budget = find(objects, "PodDisruptionBudget", "reconcile-host");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
}

/// The binding's only subject is the host's service account.
fn assert_host_subject(binding: &Value) {
    let subjects = binding["subjects"].as_array().expect("subjects");
    assert_eq!(subjects.len(), 1, "{binding}");
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], "reconcile-host");
    assert_eq!(subjects[0]["namespace"], NAMESPACE);
}

/// A copy of `deploy/` in `dir` with the example component built and put next to its manifest,
/// as docs/deploy.md tells an operator to do.
fn deploy_tree(dir: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("directory created");
        for entry in std::fs::read_dir(from).expect("deploy/ readable") {
            let entry = entry.expect("entry");
            let target = to.join(entry.file_name());
            if entry.file_type().expect("file type").is_dir() {
                copy(&entry.path(), &target);
            } else if entry.path().extension().is_none_or(|e| e != "wasm") {
                std::fs::copy(entry.path(), target).expect("file copied");
            }
        }
    }
    let tree = dir.join("deploy");
    copy(&workspace().join("deploy"), &tree);
    let wasm = format!("{}.wasm", PLUGIN.replace('-', "_"));
    std::fs::copy(
        component(PLUGIN),
        tree.join("plugins").join(PLUGIN).join(wasm),
    )
    .expect("component copied next to the manifest");
    tree
}

/// The service account token the API server requires (kubectl's kubeconfig carries it; the
/// host reads it from the service account directory, as in a pod).
const TOKEN: &str = "reconcile-host-token";

async fn server(dir: &Path) -> ApiServer {
    let server = ApiServer::start(Config::default().require_token(TOKEN))
        .await
        .expect("API server starts");
    server
        .write_kubeconfig(&dir.join("kubeconfig"))
        .expect("kubeconfig written");
    server
}

/// The API server `E2E_BACKEND` selects for a deployed host, its admin kubeconfig in `dir`.
async fn backend(dir: &Path) -> Backend {
    let backend = Backend::start(Config::default().require_token(TOKEN))
        .await
        .expect("API server starts");
    backend
        .write_kubeconfig(&dir.join("kubeconfig"))
        .expect("kubeconfig written");
    backend
}

#[tokio::test]
async fn base_renders_and_the_api_server_accepts_it_with_replicas_probes_election_and_rbac() {
    let dir = scratch("deploy-base");
    let base = deploy_tree(&dir).join("base");
    let rendered = render(&dir, &base).await;
    assert_base(&rendered);
    let (plugins, _) = volume_at(&rendered, "/etc/reconcile-host/plugins");
    assert!(plugins["emptyDir"].is_object(), "no plugin in the base");

    let server = server(&dir).await;
    let stored = apply(&dir, &base).await;
    assert_eq!(identities(&stored), identities(&rendered));
    assert_base(&stored);
    // Applying again changes nothing and is accepted (an upgrade re-applies).
    let again = apply(&dir, &base).await;
    assert_eq!(identities(&again), identities(&rendered));
    server.shutdown().await;
}

/// Standard base64 (what `binaryData` holds), decoded.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut bits, mut count) = (0u32, 0);
    for byte in text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
    {
        let value = ALPHABET
            .iter()
            .position(|&a| a == byte)
            .unwrap_or_else(|| panic!("{:?} is not base64", byte as char));
        bits = (bits << 6) | u32::try_from(value).expect("< 64");
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from((bits >> count) & 0xff).expect("a byte"));
        }
    }
    out
}

/// The bytes of every key of a ConfigMap: `data` as UTF-8, `binaryData` decoded.
fn config_map_files(config_map: &Value) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for (key, value) in config_map["data"].as_object().into_iter().flatten() {
        files.insert(
            key.clone(),
            value.as_str().expect("text").as_bytes().to_vec(),
        );
    }
    for (key, value) in config_map["binaryData"].as_object().into_iter().flatten() {
        files.insert(key.clone(), base64_decode(value.as_str().expect("base64")));
    }
    files
}

/// What the example overlay adds to the base: the plugin's ConfigMap (manifest and component)
/// mounted as `<plugins>/<name>`, and the plugin's own RBAC.
fn assert_plugin(objects: &[Value], tree: &Path) {
    let config_map = find(objects, "ConfigMap", &format!("plugin-{PLUGIN}"));
    assert_eq!(config_map["metadata"]["namespace"], NAMESPACE);
    let files = config_map_files(config_map);
    let size: usize = files.values().map(Vec::len).sum();
    assert!(
        size <= CONFIG_MAP_LIMIT,
        "plugin-{PLUGIN} holds {size} bytes, over a ConfigMap's 1 MiB: ship the component in an \
         image (docs/deploy.md)"
    );
    let manifest_dir = tree.join("plugins").join(PLUGIN);
    let manifest_text = std::fs::read_to_string(manifest_dir.join("plugin.yaml")).expect("read");
    assert_eq!(files["plugin.yaml"], manifest_text.as_bytes());
    let manifest =
        Manifest::parse(&manifest_text, Path::new("/plugin")).expect("the manifest is valid");
    let module = manifest
        .module
        .strip_prefix("/plugin")
        .expect("the component is next to the manifest")
        .to_str()
        .expect("UTF-8");
    let built = std::fs::read(component(PLUGIN)).expect("component built");
    assert!(
        files.get(module) == Some(&built),
        "binaryData.{module} is not the built component"
    );

    let (volume, mount) = volume_at(objects, &format!("/etc/reconcile-host/plugins/{PLUGIN}"));
    assert_eq!(volume["configMap"]["name"], format!("plugin-{PLUGIN}"));
    assert!(
        mount.get("subPath").is_none(),
        "a subPath mount never updates"
    );
    assert_eq!(mount["readOnly"], true);

    // The plugin's RBAC covers its caches (list, watch) and its grants' verbs, cluster-wide as
    // the manifest has no namespace.
    assert!(manifest.namespace.is_none());
    let role = find(
        objects,
        "ClusterRole",
        &format!("reconcile-host-plugin-{PLUGIN}"),
    );
    let allows = |kind: &str, verb: &str| {
        // The plugin's kinds are core kinds whose plural is the kind in lowercase plus `s`.
        let plural = format!("{}s", kind.to_lowercase());
        role["rules"].as_array().into_iter().flatten().any(|rule| {
            strings(&rule["apiGroups"]) == [""]
                && strings(&rule["resources"]).contains(&plural.as_str())
                && strings(&rule["verbs"]).contains(&verb)
        })
    };
    for kind in std::iter::once(&manifest.for_kind).chain(&manifest.cache) {
        assert_eq!(kind.api_version, "v1");
        for verb in ["list", "watch"] {
            assert!(allows(&kind.kind, verb), "{verb} {} in {role}", kind.kind);
        }
    }
    for grant in &manifest.grants {
        for verb in &grant.verbs {
            assert!(
                allows(&grant.kind.kind, verb.as_str()),
                "{} {} in {role}",
                verb.as_str(),
                grant.kind.kind
            );
        }
    }
    let binding = find(
        objects,
        "ClusterRoleBinding",
        &format!("reconcile-host-plugin-{PLUGIN}"),
    );
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_host_subject(binding);
}

#[tokio::test]
async fn example_overlay_ships_the_plugin_in_a_mounted_config_map_with_its_rbac() {
    let dir = scratch("deploy-overlay");
    let tree = deploy_tree(&dir);
    let overlay = tree.join("overlays").join("example");
    let rendered = render(&dir, &overlay).await;
    assert_base(&rendered);
    assert_plugin(&rendered, &tree);

    let server = server(&dir).await;
    let stored = apply(&dir, &overlay).await;
    assert_eq!(identities(&stored), identities(&rendered));
    assert_base(&stored);
    assert_plugin(&stored, &tree);
    server.shutdown().await;
}

#[test]
fn the_shipped_manifest_is_the_example_with_the_component_next_to_it() {
    let body = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|line| line.starts_with('#'))
            .filter(|line| !line.starts_with("module:"))
            .map(str::to_owned)
            .collect()
    };
    let example = std::fs::read_to_string(
        workspace()
            .join("examples")
            .join(PLUGIN)
            .join("plugin.yaml"),
    )
    .expect("example manifest");
    let shipped = std::fs::read_to_string(
        workspace()
            .join("deploy/plugins")
            .join(PLUGIN)
            .join("plugin.yaml"),
    )
    .expect("shipped manifest");
    assert_eq!(
        body(&shipped),
        body(&example),
        "deploy/plugins/{PLUGIN}/plugin.yaml differs from the example's manifest beyond \
         `module:`; copy the change over"
    );
}

/// The host's pod as the kubelet builds it, under a scratch `root`: each ConfigMap volume in
/// the kubelet's layout (the files in `..<generation>/`, `..data` pointing at it, a symlink per
/// key through `..data`), each emptyDir an empty directory. Absolute paths under a mount, in
/// ConfigMap text and in the container's arguments, are moved under `root`.
struct Pod {
    root: PathBuf,
    /// Mount paths not inside another mount.
    top_mounts: Vec<String>,
    /// Environment variables, `fieldRef`s resolved.
    env: Vec<(String, String)>,
    /// The container's arguments, paths moved under `root`.
    args: Vec<String>,
}

impl Pod {
    fn lay_out(root: &Path, objects: &[Value]) -> Self {
        let deployment = find(objects, "Deployment", "reconcile-host");
        let namespace = deployment["metadata"]["namespace"]
            .as_str()
            .expect("namespaced");
        let host = container(objects);
        let mounts: Vec<String> = host["volumeMounts"]
            .as_array()
            .expect("volume mounts")
            .iter()
            .map(|m| m["mountPath"].as_str().expect("mountPath").to_owned())
            .collect();
        let top_mounts = mounts
            .iter()
            .filter(|m| {
                !mounts
                    .iter()
                    .any(|other| other != *m && m.starts_with(&format!("{other}/")))
            })
            .cloned()
            .collect();
        let mut pod = Pod {
            root: root.to_owned(),
            top_mounts,
            env: Vec::new(),
            args: Vec::new(),
        };
        for mount in &mounts {
            let (volume, _) = volume_at(objects, mount);
            let dir = pod.path(mount);
            if volume["emptyDir"].is_object() {
                std::fs::create_dir_all(&dir).expect("emptyDir");
            } else if let Some(name) = volume["configMap"]["name"].as_str() {
                let files = pod.files(find(objects, "ConfigMap", name));
                write_config_map(&dir, &files, 1);
            } else {
                panic!("the test does not lay out volume {volume}");
            }
        }
        for var in host["env"].as_array().into_iter().flatten() {
            let name = var["name"].as_str().expect("name").to_owned();
            let value = match &var["valueFrom"]["fieldRef"]["fieldPath"] {
                Value::Null => var["value"].as_str().unwrap_or_default().to_owned(),
                field if field == "metadata.namespace" => namespace.to_owned(),
                field => panic!("the test does not resolve fieldRef {field}"),
            };
            pod.env.push((name, value));
        }
        pod.args = strings(&host["args"])
            .into_iter()
            .map(|arg| pod.rewrite(arg))
            .collect();
        assert!(
            host["command"].is_null(),
            "the image's entrypoint is the binary"
        );
        pod
    }

    /// Where `pod_path` is on this machine.
    fn path(&self, pod_path: &str) -> PathBuf {
        self.root.join(pod_path.trim_start_matches('/'))
    }

    /// `text` with every path under a mount moved under the root.
    fn rewrite(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for mount in &self.top_mounts {
            text = text.replace(mount.as_str(), &self.path(mount).to_string_lossy());
        }
        text
    }

    /// The files of `config_map`, text rewritten.
    fn files(&self, config_map: &Value) -> BTreeMap<String, Vec<u8>> {
        let mut files = config_map_files(config_map);
        for (key, text) in config_map["data"].as_object().into_iter().flatten() {
            let text = self.rewrite(text.as_str().expect("text"));
            files.insert(key.clone(), text.into_bytes());
        }
        files
    }

    /// The `run` command line the Deployment gives the host, with the environment variables it
    /// sets (all of which `run` must read) as the flags that read them.
    fn run_args(&self) -> Vec<String> {
        let command = Cli::command();
        let run = command.find_subcommand("run").expect("a run subcommand");
        let mut argv = vec!["reconcile-host".to_owned()];
        argv.extend(self.args.iter().cloned());
        for (name, value) in &self.env {
            if !name.starts_with("RECONCILE_HOST_") {
                continue;
            }
            let arg = run
                .get_arguments()
                .find(|arg| arg.get_env().is_some_and(|env| env == name.as_str()))
                .unwrap_or_else(|| {
                    panic!("the Deployment sets {name}, which `reconcile-host run` does not read")
                });
            argv.push(format!(
                "--{}={value}",
                arg.get_long().expect("a long flag")
            ));
        }
        argv
    }
}

/// Writes `files` into `dir` as the kubelet does for a ConfigMap volume: a new
/// `..<generation>` directory, `..data` swapped to it atomically (a rename), a symlink per key.
fn write_config_map(dir: &Path, files: &BTreeMap<String, Vec<u8>>, generation: u32) {
    let stamp = format!("..2026_01_01_00_00_00.{generation}");
    std::fs::create_dir_all(dir.join(&stamp)).expect("data directory");
    for (key, bytes) in files {
        std::fs::write(dir.join(&stamp).join(key), bytes).expect("file written");
    }
    std::os::unix::fs::symlink(&stamp, dir.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("..data swapped");
    for key in files.keys() {
        let link = dir.join(key);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(key), link).expect("key link");
        }
    }
    for entry in std::fs::read_dir(dir).expect("dir") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        if name.starts_with("..2") && name != stamp {
            std::fs::remove_dir_all(dir.join(&*name)).expect("old generation removed");
        }
    }
}

#[tokio::test]
async fn the_deployments_configuration_resolves_to_its_mounts_and_finds_the_plugin() {
    let dir = scratch("deploy-config");
    let tree = deploy_tree(&dir);
    let rendered = render(&dir, &tree.join("overlays").join("example")).await;
    let pod = Pod::lay_out(&dir.join("pod"), &rendered);

    let matches = Cli::command()
        .try_get_matches_from(pod.run_args())
        .unwrap_or_else(|e| panic!("the Deployment's arguments do not parse: {e}"));
    let Some(("run", run)) = matches.subcommand() else {
        panic!("the Deployment does not run `reconcile-host run`")
    };
    let config = RunArgs::from_arg_matches(run)
        .expect("run's flags")
        .resolve()
        .unwrap_or_else(|e| panic!("the host refuses the Deployment's configuration: {e}"));
    assert!(config.leader_election.enabled);
    assert_eq!(config.leader_election.lease_name, "reconcile-host");
    assert_eq!(
        config.leader_election.lease_namespace.as_deref(),
        Some(NAMESPACE)
    );
    assert_eq!(
        config.telemetry.address.port(),
        8080,
        "the probes and the Service use port 8080"
    );
    assert_eq!(config.plugins, [pod.path("/etc/reconcile-host/plugins")]);
    let cache = config.module_cache_dir().expect("a module cache");
    assert!(
        cache.starts_with(pod.path("/var/cache/reconcile-host")),
        "the module cache {} is not on the emptyDir",
        cache.display()
    );
    assert!(config.kubeconfig.is_none(), "in a pod: in-cluster");

    let manifests = reconcile_host::delivery::loader::manifest_paths(&config.plugins)
        .expect("the plugins directory reads");
    let expected = pod
        .path("/etc/reconcile-host/plugins")
        .join(PLUGIN)
        .join("plugin.yaml");
    assert_eq!(manifests, std::slice::from_ref(&expected));
    let text = std::fs::read_to_string(&expected).expect("manifest");
    let manifest = Manifest::parse(&text, expected.parent().expect("dir")).expect("valid");
    assert!(manifest.module.is_file(), "{}", manifest.module.display());
}

/// A running host process with its log in a file; killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
    /// Where it serves /metrics, /healthz and /readyz (HTTPS: in a pod the port is secured).
    metrics: String,
    /// A token of a ServiceAccount bound to reconcile-host-metrics-reader.
    scraper: String,
}

impl Process {
    /// The real binary as the pod runs it: the Deployment's arguments and environment, no
    /// kubeconfig, the service account mounted as the kubelet mounts it (`token`, `ca.crt`,
    /// `namespace`) and the service variables pointing at `server`'s HTTPS listener. Only the
    /// service account directory's path and the metrics address differ (a free loopback port).
    /// On a real server the token is the deployed service account's, from the TokenRequest API,
    /// so the host has exactly the permissions the kustomization's RBAC gives it.
    fn start(dir: &Path, pod: &Pod, server: &Backend, scraper: String) -> Self {
        let namespace = pod
            .env
            .iter()
            .find(|(name, _)| name == "RECONCILE_HOST_LEASE_NAMESPACE")
            .map_or(NAMESPACE, |(_, value)| value.as_str());
        let account = pod.path("/var/run/secrets/kubernetes.io/serviceaccount");
        std::fs::create_dir_all(&account).expect("service account directory");
        match (server.server(), server.control_plane()) {
            (Some(embedded), _) => {
                std::fs::write(account.join("token"), TOKEN).expect("token");
                embedded.write_ca(&account.join("ca.crt")).expect("ca.crt");
            }
            (None, Some(plane)) => {
                let token = plane.service_account_token(NAMESPACE, "reconcile-host");
                std::fs::write(account.join("token"), token).expect("token");
                std::fs::copy(plane.ca_path(), account.join("ca.crt")).expect("ca.crt");
            }
            (None, None) => unreachable!("a backend is embedded or real"),
        }
        std::fs::write(account.join("namespace"), namespace).expect("namespace");
        let https = server.url();
        let port = https
            .rsplit(':')
            .next()
            .expect("a port")
            .trim_end_matches('/');
        let home = dir.join("home");
        std::fs::create_dir_all(&home).expect("home");

        let metrics = format!("127.0.0.1:{}", free_port());
        let log = dir.join("host.log");
        let child = Command::new(common::host::HOST_BINARY)
            .args(&pod.args)
            .arg(format!("--metrics-address={metrics}"))
            .env_clear()
            .envs(pod.env.iter().map(|(k, v)| (k, v)))
            .env("HOME", &home)
            .env("RECONCILE_HOST_SERVICE_ACCOUNT_DIR", &account)
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", port)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("the host starts");
        Self {
            child,
            log,
            metrics,
            scraper,
        }
    }

    /// The body of `path` on the telemetry port, read with no token (the probes' paths).
    async fn probe(&self, path: &str) -> Option<String> {
        https_get(&self.metrics, path, None)
            .await
            .map(|(_, body)| body)
    }

    /// The first value of metric `series`, scraped with the scraper's token; 0 if absent.
    async fn metric(&self, series: &str) -> f64 {
        let scraped = https_get(&self.metrics, "/metrics", Some(&self.scraper)).await;
        scraped
            .filter(|(status, _)| *status == 200)
            .map(|(_, body)| body)
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until this replica holds the Lease `reconcile-host` in the deployment's namespace
    /// and says so in its metrics.
    async fn wait_leading(&self, dir: &Path) {
        eventually_async("a holder of the Lease", || async {
            let lease = kubectl(
                dir,
                &[
                    "get",
                    "lease",
                    "reconcile-host",
                    "-n",
                    NAMESPACE,
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                ],
            )
            .await
            .ok()?;
            (!lease.is_empty()).then_some(())
        })
        .await;
        eventually_async("leader_election_master_status 1", || async {
            let series = "leader_election_master_status{name=\"reconcile-host\"}";
            (self.metric(series).await == 1.0).then_some(())
        })
        .await;
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A token of ServiceAccount `scraper` in the deployment's namespace, bound to the shipped
/// ClusterRole reconcile-host-metrics-reader (what docs/deploy.md tells a Prometheus to have).
async fn scraper_token(server: &Backend) -> String {
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "reconcile-host-scraper"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "reconcile-host-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": NAMESPACE}],
    }))
    .expect("a ClusterRoleBinding");
    let bindings: Api<ClusterRoleBinding> = Api::all(server.client());
    match bindings.create(&PostParams::default(), &binding).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("cannot bind the scraper: {error}"),
    }
    account_token(server, "scraper").await
}

/// A token (TokenRequest, an hour) of ServiceAccount `name` in the deployment's namespace,
/// made if missing.
async fn account_token(server: &Backend, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), NAMESPACE);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("cannot create ServiceAccount {name}: {error}"),
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token of ServiceAccount {name}: {e}"));
    issued
        .status
        .and_then(|status| status.token)
        .expect("a TokenRequest's token")
}

#[tokio::test]
async fn the_base_runs_the_host_with_no_plugins_ready_and_leading() {
    let dir = scratch("deploy-run-base");
    let base = deploy_tree(&dir).join("base");
    let server = backend(&dir).await;
    let stored = apply(&dir, &base).await;
    let pod = Pod::lay_out(&dir.join("pod"), &stored);
    let host = Process::start(&dir, &pod, &server, scraper_token(&server).await);
    let ready = eventually_async("the host ready", || async {
        let body = host.probe("/readyz?verbose").await?;
        body.contains("readyz check passed").then_some(body)
    })
    .await;
    assert!(!ready.contains("plugin/"), "{ready}");
    let log = host.log();
    assert!(
        log.lines()
            .any(|line| line.contains("API server") && line.contains("in-cluster service account")),
        "the host runs on its service account's credentials, as in a pod:\n{log}"
    );
    assert_eq!(host.probe("/healthz").await.as_deref(), Some("ok"));
    host.wait_leading(&dir).await;

    // The telemetry port as a pod serves it: HTTPS; /metrics and /debug/* only for tokens the
    // API server authenticates (TokenReview) and authorizes for the path (SubjectAccessReview).
    let get = |path: &'static str, token: Option<String>| {
        let metrics = host.metrics.clone();
        async move {
            https_get(&metrics, path, token.as_deref())
                .await
                .expect("an answer")
        }
    };
    for path in ["/metrics", "/debug/recordings"] {
        let (status, body) = get(path, None).await;
        assert_eq!(status, 401, "{path} without a token: {body}");
        let (status, body) = get(path, Some("not-a-token".to_owned())).await;
        assert_eq!(status, 401, "{path} with a token nobody issued: {body}");
    }
    let (status, body) = get("/metrics", Some(host.scraper.clone())).await;
    assert_eq!(status, 200, "the scraper's /metrics: {body}");
    assert!(body.contains("leader_election_master_status"), "{body}");
    if server.is_real() {
        // RBAC is the real server's to decide: the scraper's role names /metrics only, and an
        // account without a binding may read nothing.
        let (status, body) = get("/debug/recordings", Some(host.scraper.clone())).await;
        assert_eq!(
            status, 403,
            "/debug/recordings is not the scraper's: {body}"
        );
        let outsider = account_token(&server, "outsider").await;
        let (status, body) = get("/metrics", Some(outsider)).await;
        assert_eq!(status, 403, "an account without the role: {body}");
        assert!(
            body.contains("nonResourceURLs"),
            "the refusal names the fix: {body}"
        );
    }
    drop(host);
    remove(&dir, &base, &server).await;
}

/// On a real server, which has no garbage collector, deletes what applying `kustomization`
/// made; the backend's reset finalises the namespace.
async fn remove(dir: &Path, kustomization: &Path, server: &Backend) {
    if server.is_real() {
        let path = kustomization.to_str().expect("UTF-8 path");
        kubectl(
            dir,
            &["delete", "-k", path, "--ignore-not-found", "--wait=false"],
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    }
}

#[tokio::test]
async fn the_host_runs_as_deployed_leads_and_reloads_the_plugin_when_its_config_map_changes() {
    let dir = scratch("deploy-run");
    let tree = deploy_tree(&dir);
    let overlay = tree.join("overlays").join("example");
    let server = backend(&dir).await;
    let stored = apply(&dir, &overlay).await;
    let pod = Pod::lay_out(&dir.join("pod"), &stored);

    let host = Process::start(&dir, &pod, &server, scraper_token(&server).await);

    // Ready: every cache filled and the plugin loaded.
    eventually_async("the host ready with its plugin", || async {
        let body = host.probe("/readyz?verbose").await?;
        (body.contains(&format!("[+]plugin/{PLUGIN} ok")) && body.contains("readyz check passed"))
            .then_some(())
    })
    .await;
    host.wait_leading(&dir).await;

    // The example's samples: a ConfigMap to copy into two namespaces.
    let samples = workspace().join("examples").join(PLUGIN).join("samples");
    for file in ["namespaces.yaml", "configmap.yaml"] {
        let path = samples.join(file);
        kubectl(&dir, &["apply", "-f", path.to_str().expect("UTF-8")])
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let copied = |level: &'static str| {
        let dir = dir.clone();
        async move {
            let copy = kubectl(
                &dir,
                &[
                    "get",
                    "configmap",
                    "shared-settings",
                    "-n",
                    "team-b",
                    "-o",
                    "jsonpath={.data.log-level}",
                ],
            )
            .await
            .ok()?;
            (copy == level).then_some(())
        }
    };
    eventually_async("the copy in team-b", || copied("info")).await;

    // Upgrade in place: a changed manifest, applied to the ConfigMap, reaches the pod as the
    // kubelet's ..data swap; the host rebuilds the plugin without a restart.
    let reloads = format!("plugin_reloads_total{{plugin=\"{PLUGIN}\",result=\"success\"}}");
    assert_eq!(host.metric(&reloads).await, 1.0, "{}", host.log());
    let manifest = tree.join("plugins").join(PLUGIN).join("plugin.yaml");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    assert!(text.contains("\nconcurrency: 2\n"));
    std::fs::write(
        &manifest,
        text.replace("\nconcurrency: 2\n", "\nconcurrency: 3\n"),
    )
    .expect("manifest changed");
    let stored = apply(&dir, &overlay).await;
    let config_map = find(&stored, "ConfigMap", &format!("plugin-{PLUGIN}"));
    assert!(
        config_map["data"]["plugin.yaml"]
            .as_str()
            .is_some_and(|m| m.contains("concurrency: 3")),
        "the ConfigMap was updated in place"
    );
    let mount = pod.path(&format!("/etc/reconcile-host/plugins/{PLUGIN}"));
    write_config_map(&mount, &pod.files(config_map), 2);
    eventually_async("the plugin reloaded", || async {
        (host.metric(&reloads).await >= 2.0).then_some(())
    })
    .await;
    eventually_async("the rebuilt plugin serving", || async {
        let body = host.probe("/readyz?verbose").await?;
        body.contains(&format!("[+]plugin/{PLUGIN} ok"))
            .then_some(())
    })
    .await;
    kubectl(
        &dir,
        &[
            "patch",
            "configmap",
            "shared-settings",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"data":{"log-level":"debug"}}"#,
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    eventually_async("the reloaded plugin copying the change", || copied("debug")).await;
    let workers =
        format!("controller_runtime_max_concurrent_reconciles{{controller=\"{PLUGIN}\"}}");
    eventually_async("the rebuilt controller with 3 workers", || async {
        (host.metric(&workers).await == 3.0).then_some(())
    })
    .await;
    // The source deleted while the host runs: its finalizer removes the copies.
    kubectl(
        &dir,
        &["delete", "configmap", "shared-settings", "-n", "default"],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    eventually_async("the copy in team-b removed", || async {
        let left = kubectl(&dir, &["get", "configmaps", "-n", "team-b", "-o", "name"])
            .await
            .ok()?;
        (!left.contains("shared-settings")).then_some(())
    })
    .await;
    drop(host);
    remove(&dir, &overlay, &server).await;
}

/// YAML documents as values, empty ones left out.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

#[test]
fn the_shipped_plugin_rbac_is_what_reconcile_host_rbac_prints_for_its_manifest() {
    for (plugin, manifest) in [
        (PLUGIN, "plugin.yaml"),
        (REGISTRY_PLUGIN, "reconcilerplugin.yaml"),
    ] {
        let dir = workspace().join("deploy/plugins").join(plugin);
        let out = Command::new(common::host::HOST_BINARY)
            .args(["rbac", "--name", &format!("reconcile-host-plugin-{plugin}")])
            .arg(dir.join(manifest))
            .output()
            .expect("reconcile-host runs");
        assert!(
            out.status.success(),
            "reconcile-host rbac failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = documents(&String::from_utf8(out.stdout).expect("UTF-8"));
        let shipped =
            documents(&std::fs::read_to_string(dir.join("rbac.yaml")).expect("rbac.yaml"));
        assert_eq!(
            shipped, printed,
            "deploy/plugins/{plugin}/rbac.yaml is not what `reconcile-host rbac` prints for \
             {manifest}; regenerate it with the command in its header"
        );
    }
}

/// The plugin shipped from a registry (`deploy/plugins/website`): the website example's
/// manifest as a ReconcilerPlugin whose component comes from a registry, the example's CRD, and
/// its RBAC; applied after the base, the API server accepts the object under the generated CRD.
#[tokio::test]
async fn the_registry_plugin_declares_the_website_example_with_its_crd_and_rbac() {
    let dir = scratch("deploy-registry-plugin");
    let tree = deploy_tree(&dir);
    let kustomization = tree.join("plugins").join(REGISTRY_PLUGIN);
    let rendered = render(&dir, &kustomization).await;

    let object = find(&rendered, "ReconcilerPlugin", REGISTRY_PLUGIN);
    let mut spec = object["spec"].clone();
    let reference = spec
        .as_object_mut()
        .and_then(|fields| fields.remove("oci"))
        .expect("the component comes from a registry (spec.oci)");
    let reference = reference.as_str().expect("a reference");
    assert!(
        reference.contains('/') && (reference.contains(':') || reference.contains('@')),
        "{reference} is not <registry>/<repository>:<tag> or @<digest>"
    );
    let example = workspace().join("examples").join(REGISTRY_PLUGIN);
    let mut manifest: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(example.join("plugin.yaml")).expect("the example's manifest"),
    )
    .expect("YAML");
    let fields = manifest.as_object_mut().expect("a mapping");
    fields.remove("name");
    fields.remove("module");
    assert_eq!(
        spec, manifest,
        "deploy/plugins/{REGISTRY_PLUGIN}/reconcilerplugin.yaml's spec differs from the \
         example's manifest beyond `name`, `module` and `oci`; copy the change over"
    );
    let crd = documents(
        &std::fs::read_to_string(example.join("samples/crd.yaml")).expect("the example's CRD"),
    );
    assert_eq!(
        find(
            &rendered,
            "CustomResourceDefinition",
            "websites.example.com"
        ),
        &crd[0],
        "deploy/plugins/{REGISTRY_PLUGIN}/crd.yaml differs from the example's"
    );
    find(
        &rendered,
        "ClusterRole",
        &format!("reconcile-host-plugin-{REGISTRY_PLUGIN}"),
    );

    let server = backend(&dir).await;
    let base = tree.join("base");
    apply(&dir, &base).await;
    let stored = apply(&dir, &kustomization).await;
    assert_eq!(identities(&stored), identities(&rendered));
    assert_eq!(
        find(&stored, "ReconcilerPlugin", REGISTRY_PLUGIN)["spec"],
        object["spec"],
        "the API server keeps the spec as written"
    );
    remove(&dir, &kustomization, &server).await;
    remove(&dir, &base, &server).await;
}

#[tokio::test]
async fn sharded_overlay_renders_three_replicas_in_sharded_mode_with_the_membership_lease_role() {
    let dir = scratch("deploy-sharded");
    let tree = deploy_tree(&dir);
    let overlay = tree.join("overlays").join("sharded");
    let rendered = render(&dir, &overlay).await;
    assert_plugin(&rendered, &tree);
    let deployment = find(&rendered, "Deployment", "reconcile-host");
    assert_eq!(deployment["spec"]["replicas"], 3);
    // The configuration the pods mount is sharded mode, and the host accepts it.
    let config_name = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["configMap"]["name"].as_str())
        .find(|name| name.starts_with("reconcile-host-config"))
        .expect("the configuration volume");
    let files = config_map_files(find(&rendered, "ConfigMap", config_name));
    let text = String::from_utf8(files["config.yaml"].clone()).expect("UTF-8");
    let config = reconcile_host::config::HostConfig::parse(&text).expect("config.yaml parses");
    config.validate().expect("config.yaml is valid");
    assert_eq!(
        config.leader_election.mode,
        reconcile_host::config::ElectionMode::Sharded
    );
    // Its Lease Role is what `rbac --include-host --election-mode sharded` prints.
    let out = Command::new(common::host::HOST_BINARY)
        .args(["rbac", "--include-host", "--election-mode", "sharded"])
        .arg(tree.join("plugins").join(PLUGIN).join("plugin.yaml"))
        .output()
        .expect("reconcile-host runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Vec<Value> = documents(&String::from_utf8(out.stdout).expect("UTF-8"));
    let role = |objects: &[Value]| {
        find(objects, "Role", "reconcile-host-leader-election")["rules"].clone()
    };
    let printed_role = printed
        .iter()
        .find(|o| o["kind"] == "Role" && o["rules"][0]["resources"][0] == "leases")
        .expect("the printed Lease Role")["rules"]
        .clone();
    assert_eq!(role(&rendered), printed_role);

    let server = server(&dir).await;
    let stored = apply(&dir, &overlay).await;
    assert_eq!(identities(&stored), identities(&rendered));
    assert_eq!(role(&stored), printed_role);
    server.shutdown().await;
}
