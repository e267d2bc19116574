//! The `reconcile-host` binary: configuration errors, help, and `run` against the embedded API
//! server with real signals.

use crate::common;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

const WAIT: Duration = Duration::from_secs(30);

fn host() -> Command {
    Command::new(common::host::HOST_BINARY)
}

#[test]
fn a_config_that_could_overlap_leaders_exits_2_naming_the_field() {
    let dir = common::host::scratch("invalid");
    let file = dir.join("host.yaml");
    std::fs::write(
        &file,
        "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n",
    )
    .unwrap();
    let out = host()
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("config `leaderElection.leaseDuration`: must be greater than renewDeadline"),
        "{stderr}"
    );
}

#[test]
fn flags_and_environment_override_the_file_and_are_validated_too() {
    let dir = common::host::scratch("override");
    let file = dir.join("host.yaml");
    std::fs::write(&file, "client:\n  qps: 5\n").unwrap();
    let out = host()
        .args(["run", "--config"])
        .arg(&file)
        .env("RECONCILE_HOST_QPS", "0")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("config `client.qps`"));
    let out = host()
        .args(["run", "--lease-duration", "soon"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "clap also exits 2");
    assert!(String::from_utf8_lossy(&out.stderr).contains("`soon` is not a duration"));
}

#[test]
fn run_help_lists_every_setting_with_its_environment_variable() {
    let out = host().args(["run", "--help"]).output().expect("runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, env) in [
        ("--config", "RECONCILE_HOST_CONFIG"),
        ("--kubeconfig", "RECONCILE_HOST_KUBECONFIG"),
        (
            "--service-account-dir",
            "RECONCILE_HOST_SERVICE_ACCOUNT_DIR",
        ),
        ("--context", "RECONCILE_HOST_CONTEXT"),
        ("--leader-elect", "RECONCILE_HOST_LEADER_ELECT"),
        ("--lease-name", "RECONCILE_HOST_LEASE_NAME"),
        ("--lease-namespace", "RECONCILE_HOST_LEASE_NAMESPACE"),
        ("--lease-duration", "RECONCILE_HOST_LEASE_DURATION"),
        ("--renew-deadline", "RECONCILE_HOST_RENEW_DEADLINE"),
        ("--retry-period", "RECONCILE_HOST_RETRY_PERIOD"),
        (
            "--exit-on-lost-leadership",
            "RECONCILE_HOST_EXIT_ON_LOST_LEADERSHIP",
        ),
        ("--metrics-address", "RECONCILE_HOST_METRICS_ADDRESS"),
        ("--qps", "RECONCILE_HOST_QPS"),
        ("--burst", "RECONCILE_HOST_BURST"),
        ("--drain-timeout", "RECONCILE_HOST_DRAIN_TIMEOUT"),
        ("--plugin", "RECONCILE_HOST_PLUGINS"),
        ("--module-cache", "RECONCILE_HOST_MODULE_CACHE"),
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
        assert!(help.contains(env), "{env} missing from:\n{help}");
    }
}

struct Running {
    child: Child,
    leases: Api<Lease>,
    metrics: String,
}

/// A loopback port free right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// GET `path` from `address` over HTTP/1.1; the status line and body.
async fn get(address: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    Some(response)
}

async fn start(server: &ApiServer, name: &str, timing: [&str; 3]) -> Running {
    let dir = common::host::scratch(name);
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = host()
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--lease-name", name, "--lease-namespace", "default"])
        .args(["--lease-duration", timing[0], "--renew-deadline", timing[1]])
        .args(["--retry-period", timing[2], "--metrics-address", &metrics])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    let leases = Api::namespaced(server.kube_client().expect("client"), "default");
    Running {
        child,
        leases,
        metrics,
    }
}

async fn holder(leases: &Api<Lease>, name: &str) -> Option<String> {
    let lease = leases.get_opt(name).await.ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

async fn exited(mut child: Child) -> Output {
    let deadline = Instant::now() + WAIT;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        assert!(Instant::now() < deadline, "the host did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_holder(leases: &Api<Lease>, name: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(holder) = holder(leases, name).await {
            return holder;
        }
        assert!(Instant::now() < deadline, "nobody took lease {name}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn run_leads_and_sigterm_releases_the_lease_and_exits_0() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let running = start(&server, "sigterm", ["3s", "2s", "500ms"]).await;
    let identity = wait_for_holder(&running.leases, "sigterm").await;
    assert!(
        identity.contains('_'),
        "identity is hostname_random: {identity}"
    );
    let leading = "leader_election_master_status{name=\"sigterm\"} 1";
    let deadline = Instant::now() + WAIT;
    loop {
        let scrape = get(&running.metrics, "/metrics").await.unwrap_or_default();
        if scrape.contains(leading) {
            break;
        }
        assert!(Instant::now() < deadline, "no `{leading}` in:\n{scrape}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ready = get(&running.metrics, "/readyz")
        .await
        .expect("readyz answers");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let healthy = get(&running.metrics, "/healthz")
        .await
        .expect("healthz answers");
    assert!(healthy.starts_with("HTTP/1.1 200"), "{healthy}");
    signal(&running.child, "-TERM");
    let out = exited(running.child).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(holder(&running.leases, "sigterm").await, None, "released");
    assert!(stderr.contains("released the lease"), "{stderr}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_second_signal_exits_at_once_without_finishing_the_shutdown() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let running = start(&server, "twice", ["30s", "20s", "2s"]).await;
    wait_for_holder(&running.leases, "twice").await;
    // With the API server paused, releasing the Lease hangs (up to the 20 s renew deadline).
    server.faults().pause();
    signal(&running.child, "-TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = Instant::now();
    signal(&running.child, "-INT");
    let out = exited(running.child).await;
    assert!(
        second.elapsed() < Duration::from_secs(5),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.faults().resume();
    server.shutdown().await;
}

#[test]
fn a_metrics_address_in_use_exits_2_naming_it() {
    let dir = common::host::scratch("port-in-use");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n\
         current-context: x\n",
    )
    .unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
    let address = busy.local_addr().expect("address").to_string();
    let out = host()
        .args([
            "run",
            "--leader-elect",
            "false",
            "--metrics-address",
            &address,
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot serve /metrics, /healthz and /readyz on {address}"
        )) && stderr.contains("pick another --metrics-address"),
        "{stderr}"
    );
}

#[test]
fn a_missing_kubeconfig_names_its_cause_once() {
    let out = host()
        .args(["run", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
}
