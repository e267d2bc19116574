//! The host in a cluster: it finds the API server as a pod does (service account token and CA,
//! `KUBERNETES_SERVICE_HOST`/`PORT`) over HTTPS and reconciles the examples; `rbac` prints
//! exactly the rules the example manifests need. With `E2E_BACKEND=real` the pod's token comes
//! from the real server's TokenRequest API and its permissions from `reconcile-host rbac`.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::backend::Backend;
use crate::common::host::{Host, component, manifest, scratch, workspace};
use crate::common::{eventually_async, namespace};
use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, PostParams};

const HOST: &str = common::host::HOST_BINARY;
/// The service account's token; the API server refuses requests without it.
const TOKEN: &str = "service-account-token";

async fn server() -> ApiServer {
    ApiServer::start(Config::default().require_token(TOKEN))
        .await
        .expect("API server starts")
}

/// A service account directory as the kubelet mounts it: `token`, `ca.crt`, `namespace`.
fn service_account(dir: &Path, server: &ApiServer, namespace: &str) -> PathBuf {
    let sa = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa).expect("service account dir");
    std::fs::write(sa.join("token"), TOKEN).expect("token");
    server.write_ca(&sa.join("ca.crt")).expect("ca.crt");
    std::fs::write(sa.join("namespace"), namespace).expect("namespace");
    sa
}

/// The service account directory for `backend`: on the embedded server as
/// [`service_account`]; on a real one, the token of `reconcile-system/reconcile-host` from the
/// TokenRequest API and the server's CA.
fn backend_service_account(dir: &Path, backend: &Backend, namespace: &str) -> PathBuf {
    match (backend.server(), backend.control_plane()) {
        (Some(server), _) => service_account(dir, server, namespace),
        (None, Some(plane)) => {
            let sa = dir.join("serviceaccount");
            std::fs::create_dir_all(&sa).expect("service account dir");
            let token = plane.service_account_token("reconcile-system", "reconcile-host");
            std::fs::write(sa.join("token"), token).expect("token");
            std::fs::copy(plane.ca_path(), sa.join("ca.crt")).expect("ca.crt");
            std::fs::write(sa.join("namespace"), namespace).expect("namespace");
            sa
        }
        (None, None) => unreachable!("a backend is embedded or real"),
    }
}

/// The host binary as a pod runs it: no kubeconfig anywhere, the service variables pointing at
/// the HTTPS listener, the service account in `sa`.
fn pod_host(server: &ApiServer, dir: &Path, sa: &Path, args: &[&str]) -> Host {
    let https = server.https_url().expect("HTTPS listener");
    pod_host_at(&https, dir, sa, args)
}

/// [`pod_host`] for the server at `https` (`https://127.0.0.1:<port>`).
fn pod_host_at(https: &str, dir: &Path, sa: &Path, args: &[&str]) -> Host {
    let port = https
        .rsplit(':')
        .next()
        .expect("port")
        .trim_end_matches('/')
        .to_owned();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut command = Host::command();
    command
        .arg("--service-account-dir")
        .arg(sa)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("RECONCILE_HOST_KUBECONFIG")
        .env_remove("RECONCILE_HOST_LEASE_NAMESPACE")
        .env("HOME", &home)
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &port);
    Host::spawn(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_the_host_finds_the_api_server_over_https_and_reconciles() {
    let server = Backend::start(Config::default().require_token(TOKEN))
        .await
        .expect("API server starts");
    let dir = scratch("cluster-in-pod");
    for ns in ["team-a", "team-b"] {
        namespace(&server, ns, &[common::ACCEPT_COPIES]).await;
    }
    namespace(&server, "reconcile-system", &[]).await;
    let plugin = manifest(
        &dir,
        "examples/configmap-replicator/plugin.yaml",
        &component("configmap-replicator"),
        &[],
    );
    let plugin = plugin.display().to_string();
    // A real server authorizes: the service account gets what `rbac --include-host` prints.
    let rbac_file = dir.join("rbac.yaml");
    if let Some(plane) = server.control_plane() {
        let (code, stdout, stderr) = rbac(&[&plugin, "--include-host"]);
        assert_eq!(code, Some(0), "{stderr}");
        std::fs::write(&rbac_file, stdout).expect("rbac.yaml written");
        let applied = plane
            .kubectl()
            .arg("apply")
            .arg("-f")
            .arg(&rbac_file)
            .output()
            .expect("kubectl runs");
        assert!(
            applied.status.success(),
            "applying the generated RBAC failed: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
    let sa = backend_service_account(&dir, &server, "reconcile-system\n");
    let host = pod_host_at(&server.url(), &dir, &sa, &["--plugin", &plugin]);

    let client = server.kube_client().expect("client");
    let text = std::fs::read_to_string(
        workspace().join("examples/configmap-replicator/samples/configmap.yaml"),
    )
    .expect("sample");
    let source: ConfigMap = serde_yaml_ng::from_str(&text).expect("sample parses");
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &source)
        .await
        .expect("source created");
    for ns in ["team-a", "team-b"] {
        let copies: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        eventually_async(&format!("a copy in {ns}"), || async {
            let copy = copies.get_opt("shared-settings").await.ok().flatten()?;
            (copy.data?.get("log-level")? == "info").then_some(())
        })
        .await;
    }
    // The Lease is in the namespace the service account's `namespace` file names.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "reconcile-system");
    let lease = eventually_async("the host's Lease in reconcile-system", || async {
        leases.get_opt("reconcile-host").await.ok().flatten()
    })
    .await;
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    let log = host.log();
    assert!(
        log.lines().any(|line| line.contains("API server")
            && line.contains(&format!("in-cluster service account {}", sa.display()))),
        "the host says where its configuration came from:\n{log}"
    );
    // No garbage collector on a real server: the source is deleted while the host runs (its
    // finalizer removes the copies), then the RBAC the test applied.
    let sources: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    sources
        .delete("shared-settings", &kube::api::DeleteParams::default())
        .await
        .expect("source deleted");
    for ns in ["default", "team-a", "team-b"] {
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        eventually_async(&format!("shared-settings gone from {ns}"), || async {
            config_maps
                .get_opt("shared-settings")
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await;
    }
    drop(host);
    if let Some(plane) = server.control_plane() {
        let _ = plane
            .kubectl()
            .arg("delete")
            .arg("-f")
            .arg(&rbac_file)
            .arg("--wait=false")
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_the_token_is_what_authenticates_the_host() {
    let server = server().await;
    let dir = scratch("cluster-wrong-token");
    let sa = service_account(&dir, &server, "default");
    std::fs::write(sa.join("token"), "another-token").expect("token");
    let host = pod_host(&server, &dir, &sa, &[]);
    host.wait_log(&["Unauthorized"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_the_servers_certificate_is_checked_against_ca_crt() {
    let other = server().await;
    let server = server().await;
    let dir = scratch("cluster-wrong-ca");
    // The CA of another server: the connection must be refused, not trusted blindly; the host
    // says so and keeps trying.
    let sa = service_account(&dir, &other, "default");
    let host = pod_host(&server, &dir, &sa, &[]);
    host.wait_log(&[
        "cannot reach the API server",
        "invalid peer certificate",
        "certificate is trusted",
    ])
    .await;
    let leases: Api<Lease> = Api::namespaced(server.kube_client().expect("client"), "default");
    assert!(
        leases
            .get_opt("reconcile-host")
            .await
            .expect("get")
            .is_none(),
        "no Lease was written through an untrusted connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_without_a_token_the_host_exits_2_naming_the_file_and_the_fix() {
    let server = server().await;
    let dir = scratch("cluster-no-token");
    let sa = service_account(&dir, &server, "default");
    std::fs::remove_file(sa.join("token")).expect("token removed");
    let mut host = pod_host(&server, &dir, &sa, &[]);
    let code = host.exit_code().await;
    let log = host.log();
    assert_eq!(code, Some(2), "{log}");
    let token = sa.join("token");
    assert!(
        log.contains(&format!(
            "cannot use the service account token {}: No such file",
            token.display()
        )),
        "{log}"
    );
    assert!(log.contains("--service-account-dir"), "{log}");
}

/// `reconcile-host rbac` with `args`: exit code, stdout, stderr.
fn rbac(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(HOST)
        .arg("rbac")
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("rbac runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The objects of `rbac`'s output, each parsed as its kind.
#[derive(Debug, Default)]
struct Output {
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
}

impl Output {
    fn parse(yaml: &str) -> Self {
        use serde::Deserialize;
        let mut output = Self::default();
        for document in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value = serde_json::Value::deserialize(document).expect("YAML document");
            let kind = value["kind"].as_str().expect("kind").to_owned();
            let value = || value.clone();
            match kind.as_str() {
                "ClusterRole" => output
                    .cluster_roles
                    .push(serde_json::from_value(value()).expect("ClusterRole")),
                "ClusterRoleBinding" => output
                    .cluster_role_bindings
                    .push(serde_json::from_value(value()).expect("ClusterRoleBinding")),
                "Role" => output
                    .roles
                    .push(serde_json::from_value(value()).expect("Role")),
                "RoleBinding" => output
                    .role_bindings
                    .push(serde_json::from_value(value()).expect("RoleBinding")),
                other => panic!("unexpected kind {other}"),
            }
        }
        output
    }

    fn role(&self, namespace: &str) -> Vec<PolicyRule> {
        let role = self
            .roles
            .iter()
            .find(|r| r.metadata.namespace.as_deref() == Some(namespace))
            .unwrap_or_else(|| panic!("a Role in {namespace}: {self:#?}"));
        role.rules.clone().unwrap_or_default()
    }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

#[test]
fn rbac_for_the_examples_has_exactly_the_rules_they_need() {
    let (code, stdout, stderr) = rbac(&[
        "examples/configmap-replicator/plugin.yaml",
        "examples/website/plugin.yaml",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "#   examples/configmap-replicator/plugin.yaml (plugin `configmap-replicator`)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   examples/website/plugin.yaml (plugin `website`)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("example.com/v1 Website -> websites"),
        "the guess is flagged:\n{stdout}"
    );
    assert!(
        stdout.contains("Not included: the host's own Lease"),
        "{stdout}"
    );
    let output = Output::parse(&stdout);
    assert!(
        output.roles.is_empty() && output.role_bindings.is_empty(),
        "{output:#?}"
    );
    let [role] = output.cluster_roles.as_slice() else {
        panic!("one ClusterRole: {output:#?}");
    };
    assert_eq!(
        role.metadata.name.as_deref(),
        Some("reconcile-host-plugins")
    );
    assert_eq!(
        role.rules.clone().unwrap_or_default(),
        vec![
            // configmap-replicator: `for` and `cache` ConfigMap; grant get, create, patch,
            // delete.
            rule(
                "",
                &["configmaps"],
                &["create", "delete", "get", "list", "patch", "watch"]
            ),
            // configmap-replicator: `cache` Namespace (which accept copies).
            rule("", &["namespaces"], &["get", "list", "watch"]),
            // website: owns Service, grant patch.
            rule(
                "",
                &["services"],
                &["create", "get", "list", "patch", "watch"]
            ),
            // website: owns Deployment, grant patch.
            rule(
                "apps",
                &["deployments"],
                &["create", "get", "list", "patch", "watch"]
            ),
            // Both: events the host records for them.
            rule("events.k8s.io", &["events"], &["create"]),
            // website: `for` Website, grant patch on it and its status.
            rule(
                "example.com",
                &["websites"],
                &["create", "get", "list", "patch", "watch"]
            ),
            rule("example.com", &["websites/status"], &["patch"]),
        ]
    );
    let [binding] = output.cluster_role_bindings.as_slice() else {
        panic!("one ClusterRoleBinding: {output:#?}");
    };
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.role_ref.name, "reconcile-host-plugins");
    let subjects = binding.subjects.clone().unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(subjects[0].namespace.as_deref(), Some("reconcile-system"));
    assert_eq!(subjects[0].name, "reconcile-host");

    // The same manifests found in a directory, as `run --plugin` finds them, give the same
    // rules.
    let dir = scratch("rbac-directory");
    for example in ["website", "configmap-replicator"] {
        std::fs::create_dir_all(dir.join(example)).expect("plugin dir");
        std::fs::copy(
            workspace()
                .join("examples")
                .join(example)
                .join("plugin.yaml"),
            dir.join(example).join("plugin.yaml"),
        )
        .expect("manifest copied");
    }
    let (code, again, stderr) = rbac(&[&dir.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    let rules = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rules(&again), rules(&stdout), "deterministic output");
}

const NAMESPACED: &str = "name: team-tool
module: tool.wasm
for: {apiVersion: v1, kind: Secret}
owns:
  - {apiVersion: apps/v1, kind: Deployment}
namespace: team-a
grants:
  - apiVersion: apps/v1
    kind: Deployment
    verbs: [get, update]
    namespaces: [team-a, team-b]
    subresources: [scale]
  - apiVersion: v1
    kind: ConfigMap
    verbs: [patch]
  - apiVersion: v1
    kind: Secret
    verbs: [delete]
    namespaces: [team-a]
";

#[test]
fn rbac_puts_a_namespaced_plugin_and_namespaced_grants_in_roles() {
    let dir = scratch("rbac-namespaced");
    let path = dir.join("team-tool.yaml");
    std::fs::write(&path, NAMESPACED).expect("manifest");
    let path = path.display().to_string();
    let (code, stdout, stderr) = rbac(&[
        &path,
        "--service-account",
        "ops/host",
        "--name",
        "tools",
        "--include-host",
        "--lease-name",
        "tools-lease",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let output = Output::parse(&stdout);
    // Cluster-wide: the ConfigMap grant, which names no namespaces, and with --include-host the
    // host's reading of namespace kube-system, the reviews of its secured telemetry port, and the
    // role a scraper of /metrics is bound to, and those a `kubectl reconcile` user is.
    let [cluster, identity, reviews, reader, debug, recordings] = output.cluster_roles.as_slice()
    else {
        panic!("six ClusterRoles: {output:#?}");
    };
    assert_eq!(debug.metadata.name.as_deref(), Some("tools-debug-reader"));
    assert_eq!(
        debug.rules.clone().unwrap_or_default(),
        vec![PolicyRule {
            non_resource_urls: Some(vec![
                "/debug/reconciles".to_owned(),
                "/debug/reconciles/*".to_owned(),
                "/debug/logs".to_owned(),
                "/debug/logs/*".to_owned(),
            ]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]
    );
    assert_eq!(
        recordings.metadata.name.as_deref(),
        Some("tools-recording-reader")
    );
    assert_eq!(
        recordings.rules.clone().unwrap_or_default(),
        vec![PolicyRule {
            non_resource_urls: Some(vec![
                "/debug/recordings".to_owned(),
                "/debug/recordings/*".to_owned(),
            ]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]
    );
    assert_eq!(
        reviews.metadata.name.as_deref(),
        Some("tools-telemetry-reviews")
    );
    assert_eq!(
        reviews.rules.clone().unwrap_or_default(),
        vec![
            rule("authentication.k8s.io", &["tokenreviews"], &["create"]),
            rule(
                "authorization.k8s.io",
                &["subjectaccessreviews"],
                &["create"]
            ),
        ]
    );
    assert_eq!(
        reader.metadata.name.as_deref(),
        Some("tools-metrics-reader")
    );
    assert_eq!(
        reader.rules.clone().unwrap_or_default(),
        vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]
    );
    assert_eq!(cluster.metadata.name.as_deref(), Some("tools"));
    assert_eq!(
        identity.metadata.name.as_deref(),
        Some("tools-cluster-identity")
    );
    assert_eq!(
        identity.rules.clone().unwrap_or_default(),
        vec![PolicyRule {
            resource_names: Some(vec!["kube-system".to_owned()]),
            ..rule("", &["namespaces"], &["get"])
        }]
    );
    assert_eq!(
        cluster.rules.clone().unwrap_or_default(),
        vec![rule("", &["configmaps"], &["create", "patch"])]
    );
    // team-a: what it watches (Secret, Deployment), its events, and the namespaced grants.
    assert_eq!(
        output.role("team-a"),
        vec![
            rule("", &["secrets"], &["delete", "get", "list", "watch"]),
            rule(
                "apps",
                &["deployments"],
                &["get", "list", "update", "watch"]
            ),
            rule("apps", &["deployments/scale"], &["get", "update"]),
            rule("events.k8s.io", &["events"], &["create"]),
        ]
    );
    // team-b: only the Deployment grant.
    assert_eq!(
        output.role("team-b"),
        vec![rule(
            "apps",
            &["deployments", "deployments/scale"],
            &["get", "update"]
        )]
    );
    // ops: the host's Lease (--include-host), in the service account's namespace.
    let lease_rules = output.role("ops");
    assert_eq!(lease_rules.len(), 2, "{lease_rules:#?}");
    assert_eq!(
        lease_rules[0],
        rule("coordination.k8s.io", &["leases"], &["create"])
    );
    assert_eq!(
        lease_rules[1],
        PolicyRule {
            resource_names: Some(vec!["tools-lease".to_owned()]),
            ..rule("coordination.k8s.io", &["leases"], &["get", "update"])
        }
    );
    let lease_role = output
        .roles
        .iter()
        .find(|r| r.metadata.namespace.as_deref() == Some("ops"));
    assert_eq!(
        lease_role.and_then(|r| r.metadata.name.as_deref()),
        Some("tools-leader-election")
    );
    // Every Role has its RoleBinding to ops/host.
    assert_eq!(output.role_bindings.len(), 3);
    for binding in &output.role_bindings {
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(
            binding.role_ref.name,
            binding.metadata.name.clone().unwrap_or_default()
        );
        let subject = &binding.subjects.as_ref().expect("subjects")[0];
        assert_eq!(
            (subject.namespace.as_deref(), subject.name.as_str()),
            (Some("ops"), "host")
        );
    }
    assert!(stdout.contains("Includes the host's own rules"), "{stdout}");
}

#[test]
fn rbac_takes_plurals_that_are_not_derived_from_the_kind() {
    let dir = scratch("rbac-plural");
    let path = dir.join("octopus.yaml");
    std::fs::write(
        &path,
        "name: octopus\nmodule: o.wasm\nfor: {apiVersion: sea.example.com/v1, kind: Octopus}\n",
    )
    .expect("manifest");
    let path = path.display().to_string();
    let (code, stdout, _) = rbac(&[&path]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("sea.example.com/v1 Octopus -> octopuses"),
        "flagged guess:\n{stdout}"
    );
    let (code, stdout, stderr) = rbac(&[&path, "--plural", "Octopus.sea.example.com=octopi"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("-> octopuses"), "{stdout}");
    let output = Output::parse(&stdout);
    let rules = output.cluster_roles[0].rules.clone().unwrap_or_default();
    assert_eq!(
        rules[1],
        rule("sea.example.com", &["octopi"], &["get", "list", "watch"])
    );
    let (code, _, stderr) = rbac(&[&path, "--plural", "Squid.sea.example.com=squid"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("names a kind no manifest uses"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_discover_reads_plurals_from_the_api_server() {
    let server = server().await;
    let dir = scratch("rbac-discover");
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_yaml_ng::from_str(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata: {name: octopi.sea.example.com}\nspec:\n  group: sea.example.com\n  \
             scope: Namespaced\n  names: {plural: octopi, singular: octopus, kind: Octopus}\n  \
             versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      \
             openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
        )
        .expect("CRD");
    Api::all(server.kube_client().expect("client"))
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    let path = dir.join("octopus.yaml");
    std::fs::write(
        &path,
        "name: octopus\nmodule: o.wasm\nfor: {apiVersion: sea.example.com/v1, kind: Octopus}\n",
    )
    .expect("manifest");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let (path, kubeconfig) = (path.display().to_string(), kubeconfig.display().to_string());
    let args = [
        "--discover".to_owned(),
        "--kubeconfig".to_owned(),
        kubeconfig,
        path,
    ];
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || rbac(&args.each_ref().map(String::as_str)))
            .await
            .expect("rbac ran");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("-> octopuses"), "{stdout}");
    let output = Output::parse(&stdout);
    let rules = output.cluster_roles[0].rules.clone().unwrap_or_default();
    assert_eq!(
        rules[1],
        rule("sea.example.com", &["octopi"], &["get", "list", "watch"])
    );
}

#[test]
fn rbac_exits_2_with_the_manifests_own_message() {
    let dir = scratch("rbac-bad");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "name: bad\nmodule: b.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\nconcurrency: 0\n",
    )
    .expect("manifest");
    let path_text = path.display().to_string();
    let (code, stdout, stderr) = rbac(&[&path_text]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with(&format!(
            "error: plugin manifest {path_text}: `concurrency`: `0` is out of range"
        )),
        "{stderr}"
    );
    let (code, _, stderr) = rbac(&[&dir.join("missing.yaml").display().to_string()]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("missing.yaml does not exist"), "{stderr}");
    // A directory is read as `run --plugin` reads it: `<name>/plugin.yaml` inside.
    let (code, _, stderr) = rbac(&["examples/website"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("no plugin manifests in examples/website: a directory is read as"),
        "{stderr}"
    );
}
