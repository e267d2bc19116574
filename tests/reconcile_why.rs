//! End to end: `kubectl reconcile why` (kubectl running the host binary as its plugin) tells,
//! for an object updated twice and requeued, each reconcile with its causes (the watch event and
//! resourceVersion, the requeue-after that came due), outcome and API calls, on one host and
//! across sharded replicas (a key gained in a handover says so); `top` lists the plugins. On
//! the real API server the plugin reaches the hosts as pods through its proxy, and the hosts
//! check the reader's token with the API server: an unbound account is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::backend::Backend as ApiServer;
use crate::common::backend::Cluster;
use crate::common::host::{HOST_BINARY, Host, component, free_port, manifest, scratch};
use crate::common::{eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

pub(crate) const NS: &str = "why";
const HOSTS_NS: &str = "reconcile-system";

/// Where the hosts are, and how `kubectl reconcile` reaches them.
#[derive(Clone)]
pub(crate) struct Reach {
    /// `kubectl-reconcile` is here.
    bin: PathBuf,
    kubeconfig: PathBuf,
    /// The flags that find the hosts: pods through the proxy, or `--endpoint`s.
    flags: Vec<String>,
}

impl Reach {
    /// `kubectl reconcile <args>`: its exit status, stdout and stderr. kubectl runs on the
    /// blocking pool: the embedded API server shares this test's runtime, and a replica whose
    /// server stalls loses its lease.
    pub(crate) async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let reach = self.clone();
        let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
        tokio::task::spawn_blocking(move || reach.run_blocking(&args))
            .await
            .expect("kubectl ran")
    }

    fn run_blocking(&self, args: &[String]) -> (bool, String, String) {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = Command::new("kubectl")
            .env("PATH", path)
            .env("KUBECONFIG", &self.kubeconfig)
            .arg("reconcile")
            .args(args)
            .args(&self.flags)
            .output()
            .expect("kubectl runs");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// `why configmap/<name> -n why -o json`: every reconcile, oldest first, each with the
    /// replica that ran it.
    async fn reconciles(&self, name: &str) -> Vec<Value> {
        let (ok, out, err) = self
            .run(&["why", &format!("configmap/{name}"), "-n", NS, "-o", "json"])
            .await;
        assert!(ok, "kubectl reconcile why failed: {err}\n{out}");
        let answers: Value = serde_json::from_str(&out).expect(&out);
        let mut all: Vec<Value> = Vec::new();
        for replica in answers["replicas"].as_array().expect("replicas") {
            let answer = &replica["answer"];
            for entry in answer["reconciles"].as_array().into_iter().flatten() {
                let mut entry = entry.clone();
                entry["replica"] = answer["replica"].clone();
                all.push(entry);
            }
        }
        all.sort_by_key(|entry| {
            entry["started"]
                .as_str()
                .unwrap_or("")
                .parse::<k8s_openapi::jiff::Timestamp>()
                .ok()
        });
        all
    }
}

fn whys(entry: &Value) -> Vec<&str> {
    entry["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|cause| cause["why"].as_str().unwrap_or(""))
        .collect()
}

/// A testbed ConfigMap `<name>` behaving as `behave`.
pub(crate) fn object(name: &str, behave: &str) -> ConfigMap {
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

/// This machine's address other than loopback: where the real API server's pod proxy finds the
/// hosts (it refuses loopback addresses).
fn machine_address() -> String {
    let out = Command::new("hostname")
        .arg("-I")
        .output()
        .expect("hostname runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|address| {
            address
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .expect("an IPv4 address other than loopback")
        .to_owned()
}

/// Starts a host named `name` with the testbed plugin (`mode`: `none` for no election, or
/// `sharded`) and `extra` flags, its telemetry on `port`: on the real server secured and on
/// every address, with a pod object in `reconcile-system` that names it; on the embedded one
/// open on loopback.
pub(crate) async fn host(
    server: &ApiServer,
    dir: &Path,
    name: &str,
    (mode, extra): (&str, &[&str]),
    port: u16,
) -> Host {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("host dir");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let address = if server.is_real() {
        format!("0.0.0.0:{port}")
    } else {
        format!("127.0.0.1:{port}")
    };
    let mut command = Host::command_at(Path::new(HOST_BINARY), &address);
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--plugin")
        .arg(plugin);
    if mode == "sharded" {
        command
            .args(["--election-mode", "sharded", "--lease-namespace", HOSTS_NS])
            .args([
                "--lease-duration",
                "2s",
                "--renew-deadline",
                "1500ms",
                "--retry-period",
                "250ms",
            ]);
    } else {
        command.args(["--leader-elect", "false"]);
    }
    let authorization = if server.is_real() {
        "kubernetes"
    } else {
        "none"
    };
    command.args(["--telemetry-authorization", authorization]);
    command.args(extra);
    if server.is_real() {
        pod(server, name, port).await;
    }
    Host::spawn(command)
}

/// A pod object standing for the host `name` (no kubelet runs it): its IP this machine's, its
/// container port `metrics` the host's telemetry port.
async fn pod(server: &ApiServer, name: &str, port: u16) {
    let pods: Api<Pod> = Api::namespaced(server.client(), HOSTS_NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "reconcile-host"}},
        "spec": {"automountServiceAccountToken": false, "containers": [{
            "name": "host", "image": "reconcile-host",
            "ports": [{"name": "metrics", "containerPort": port}],
        }]},
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let ip = machine_address();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod status");
}

/// The namespaces, and on the real server the ServiceAccounts a pod needs and a reader: its
/// token, bound to a ClusterRole with `/debug/reconciles*`, `/debug/logs*` and
/// `/debug/recordings*` (what the hosts check; the proxy itself is the admin kubeconfig's).
pub(crate) async fn cluster(server: &ApiServer) -> Option<String> {
    namespace(server, NS, &[]).await;
    namespace(server, HOSTS_NS, &[]).await;
    if !server.is_real() {
        return None;
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), HOSTS_NS);
    for name in ["default", "reader", "stranger"] {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        created(accounts.create(&PostParams::default(), &account).await);
    }
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some("why-debug-reader".into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec![
                "/debug/reconciles".into(),
                "/debug/reconciles/*".into(),
                "/debug/logs".into(),
                "/debug/logs/*".into(),
                "/debug/recordings".into(),
                "/debug/recordings/*".into(),
            ]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    created(
        Api::<ClusterRole>::all(server.client())
            .create(&PostParams::default(), &role)
            .await,
    );
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some("why-debug-reader".into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "why-debug-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "reader".into(),
            namespace: Some(HOSTS_NS.into()),
            ..Subject::default()
        }]),
    };
    created(
        Api::<ClusterRoleBinding>::all(server.client())
            .create(&PostParams::default(), &binding)
            .await,
    );
    Some(account_token(server, "reader").await)
}

/// Asserts that a create succeeded, or found the object there: the real server's reset between
/// tests keeps every namespace's `default` ServiceAccount, which another test of these made.
fn created<T>(result: kube::Result<T>) {
    match result {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("cannot create: {error}"),
    }
}

async fn account_token(server: &ApiServer, account: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), HOSTS_NS);
    let request = k8s_openapi::api::authentication::v1::TokenRequest::default();
    accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .and_then(|status| status.token)
        .expect("a token")
}

/// Installs the plugin into `dir` with the host binary's own command, and the flags that reach
/// `ports` (pods on the real server, loopback endpoints on the embedded one).
pub(crate) fn reach(server: &ApiServer, dir: &Path, token: Option<&str>, ports: &[u16]) -> Reach {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let status = Command::new(HOST_BINARY)
        .args(["kubectl", "install"])
        .arg(&bin)
        .status()
        .expect("install runs");
    assert!(status.success(), "reconcile-host kubectl install failed");
    assert!(bin.join("kubectl-reconcile").exists());
    let kubeconfig = dir.join("reader.kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut flags = vec!["--host-namespace".to_owned(), HOSTS_NS.to_owned()];
    if let Some(token) = token {
        flags.extend(["--token".to_owned(), token.to_owned()]);
    }
    if !server.is_real() {
        for port in ports {
            flags.extend(["--endpoint".to_owned(), format!("http://127.0.0.1:{port}")]);
        }
    }
    Reach {
        bin,
        kubeconfig,
        flags,
    }
}

#[tokio::test]
async fn why_tells_each_reconcile_with_its_causes_outcome_and_calls() {
    let dir = scratch("why-one-host");
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let token = cluster(&server).await;
    let port = free_port();
    let host = host(&server, &dir, "host-a", ("none", &[]), port).await;
    host.wait_log(&["plugin loaded", "testbed"]).await;
    let reach = reach(&server, &dir, token.as_deref(), &[port]);
    let api: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    let set = |behave: &str| json!({"data": {"behave": behave}});
    api.create(&PostParams::default(), &object("subject", "ok"))
        .await
        .expect("created");
    eventually_async("the first reconcile", || async {
        (reach.reconciles("subject").await.len() == 1).then_some(())
    })
    .await;
    let updated = api
        .patch(
            "subject",
            &PatchParams::default(),
            &Patch::Merge(&set("requeue-after:3000")),
        )
        .await
        .expect("first update");
    let rv_first = updated.metadata.resource_version.expect("rv");
    // The requeue-after comes due: a third reconcile, which asks for another.
    eventually_async("the requeue-after's reconcile", || async {
        (reach.reconciles("subject").await.len() == 3).then_some(())
    })
    .await;
    let updated = api
        .patch(
            "subject",
            &PatchParams::default(),
            &Patch::Merge(&set("ok")),
        )
        .await
        .expect("second update");
    let rv_second = updated.metadata.resource_version.expect("rv");
    // The second update runs at once; the pending requeue-after still comes due after it.
    let all = eventually_async("five reconciles", || async {
        let all = reach.reconciles("subject").await;
        (all.len() == 5).then_some(all)
    })
    .await;
    let causes: Vec<Vec<&str>> = all.iter().map(whys).collect();
    assert_eq!(
        causes,
        [
            vec!["added"],
            vec!["modified"],
            vec!["requeue-after"],
            vec!["modified"],
            vec!["requeue-after"]
        ],
        "{all:#?}"
    );
    let outcomes: Vec<&str> = all
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        outcomes,
        [
            "success",
            "requeue_after",
            "requeue_after",
            "success",
            "success"
        ]
    );
    for (entry, rv) in [(&all[1], &rv_first), (&all[3], &rv_second)] {
        let object = &entry["causes"][0]["object"];
        assert_eq!(object["kind"], "ConfigMap");
        assert_eq!(object["namespace"], NS);
        assert_eq!(object["name"], "subject");
        assert_eq!(
            &object["resourceVersion"],
            &json!(rv),
            "the event's resourceVersion"
        );
    }
    assert_eq!(all[2]["causes"][0]["afterMs"], 3000);
    let calls = |entry: &Value| -> Vec<String> {
        entry["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{} {} {}",
                    c["verb"].as_str().unwrap_or(""),
                    c["name"].as_str().unwrap_or(""),
                    c["result"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(calls(&all[0]), ["patch subject-seen ok"], "{all:#?}");
    assert_eq!(
        calls(&all[1]),
        ["get subject-ticks not found", "patch subject-ticks ok"]
    );
    assert_eq!(
        calls(&all[2]),
        ["get subject-ticks ok", "patch subject-ticks ok"]
    );
    // The text a person reads.
    let (ok, text, err) = reach.run(&["why", "configmap/subject", "-n", NS]).await;
    assert!(ok, "{err}");
    assert!(
        text.starts_with("configmap why/subject: 5 reconciles on 1 replica asked"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "because: modified ConfigMap why/subject rv {rv_second}"
        )),
        "{text}"
    );
    assert!(text.contains("because: requeue-after 3000 ms"), "{text}");
    assert!(
        text.contains("call:    patch v1/ConfigMap why/subject-ticks → ok"),
        "{text}"
    );
    let (ok, top, err) = reach.run(&["top"]).await;
    assert!(ok, "{err}");
    let row = top
        .lines()
        .find(|line| line.starts_with("testbed "))
        .unwrap_or_else(|| panic!("{top}"));
    assert!(row.contains("v1/ConfigMap"), "{top}");
    if server.is_real() {
        // The hosts check the reader themselves: an account the API server does not authorize
        // for /debug/reconciles is refused, though the proxy let the request through.
        let stranger = account_token(&server, "stranger").await;
        let refused = reach_with_token(&reach, &stranger);
        let (ok, out, _) = refused.run(&["why", "configmap/subject", "-n", NS]).await;
        assert!(!ok, "{out}");
        assert!(out.contains("did not answer: 403"), "{out}");
    }
}

fn reach_with_token(reach: &Reach, token: &str) -> Reach {
    let mut flags = Vec::new();
    let mut skip = false;
    for flag in &reach.flags {
        if skip {
            skip = false;
            continue;
        }
        if flag == "--token" {
            skip = true;
            continue;
        }
        flags.push(flag.clone());
    }
    flags.extend(["--token".to_owned(), token.to_owned()]);
    Reach {
        bin: reach.bin.clone(),
        kubeconfig: reach.kubeconfig.clone(),
        flags,
    }
}

#[tokio::test]
async fn why_across_sharded_replicas_names_the_handover() {
    let dir = scratch("why-sharded");
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let token = cluster(&server).await;
    let ports = [free_port(), free_port(), free_port()];
    let mut hosts = Vec::new();
    for (name, port) in ["host-a", "host-b"].into_iter().zip(ports) {
        hosts.push(host(&server, &dir, name, ("sharded", &[]), port).await);
    }
    for host in &hosts {
        host.wait_log(&["ring settled", "members=2"]).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    // With 24 keys, the chance that none moves to a third replica is (2/3)^24, below 1e-4.
    let names: Vec<String> = (0..24).map(|i| format!("object-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &object(name, "ok"))
            .await
            .expect("created");
    }
    let reach = reach(&server, &dir, token.as_deref(), &ports);
    eventually_async("every object reconciled", || async {
        let seen = api.list(&Default::default()).await.ok()?;
        let seen = seen
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.ends_with("-seen"))
            })
            .count();
        (seen == names.len()).then_some(())
    })
    .await;
    // A third replica joins (its caches synced before it joins the ring): the keys the ring
    // gives it are handed over, and it reconciles them.
    hosts.push(host(&server, &dir, "host-c", ("sharded", &[]), ports[2]).await);
    for host in &hosts {
        host.wait_log(&["ring settled", "members=3"]).await;
    }
    let (added, handover) = eventually_async("a key handed over to the new replica", || async {
        for name in &names {
            let all = reach.reconciles(name).await;
            let Some(added) = all.iter().find(|entry| whys(entry) == ["added"]) else {
                continue;
            };
            if let Some(handover) = all
                .iter()
                .find(|entry| whys(entry) == ["handover"] && entry["replica"] != added["replica"])
            {
                return Some((added.clone(), handover.clone()));
            }
        }
        None
    })
    .await;
    for entry in [&added, &handover] {
        assert_eq!(entry["outcome"], "success", "{entry:#?}");
    }
    assert!(
        added["started"].as_str() < handover["started"].as_str(),
        "{added:#?} {handover:#?}"
    );
}
