//! A real Kubernetes control plane for the end-to-end tests: etcd and kube-apiserver (built by
//! `scripts/build-control-plane.sh` into `target/control-plane/<version>/`) on loopback, with an
//! admin token in `system:masters`, RBAC, service-account signing keys and a kubeconfig.
//!
//! The flags are those of `tools/control-plane/run.sh`; `tools/control-plane/README.md` explains
//! them. Each process runs in its own process group, on the list of the plane's own
//! [`Watchdog`]: when the control plane is dropped, or the test process is gone in any way, even
//! SIGKILL, it stops kube-apiserver first, then etcd (with etcd gone first kube-apiserver
//! retries it for minutes), and removes the state directory. So no process outlives the test
//! binary, also when the control plane sits in a `static`.
//!
//! Not here, since there is no kube-controller-manager: no garbage collector (owned objects stay
//! after their owner is deleted), no namespace finalisation (a deleted namespace stays
//! `Terminating`), no `default` ServiceAccount per namespace (the harness creates the one in
//! `default`; [`ControlPlane::service_account_token`] creates others on demand).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use super::host::{free_port, workspace};
use super::process::stop_group;
use super::watchdog::Watchdog;

pub mod audit;
mod wipe;

/// How long etcd may take to answer `/health`.
const ETCD_READY: Duration = Duration::from_secs(60);
/// How long kube-apiserver may take to answer `/readyz` and serve the `default` namespace.
const API_READY: Duration = Duration::from_secs(180);
/// Start-up attempts: a free port found by binding port 0 can be taken before the server binds it.
const ATTEMPTS: usize = 5;

/// A running etcd + kube-apiserver; both stopped (kube-apiserver first) when dropped.
pub struct ControlPlane {
    dir: PathBuf,
    url: String,
    token: String,
    kubeconfig: PathBuf,
    processes: parking_lot::Mutex<Processes>,
}

/// The processes of a [`ControlPlane`], replaced by [`ControlPlane::wipe_and_restart`].
struct Processes {
    etcd: Child,
    apiserver: Child,
    /// Stops both when the test process ends; `None` once the plane is dropped.
    watchdog: Option<Watchdog>,
    /// How many times the store was wiped (each wipe gets a new etcd data directory).
    wipes: usize,
}

/// A process that did not become ready, and whether a retry on other ports may help.
struct NotReady {
    message: String,
    port_clash: bool,
}

impl ControlPlane {
    /// Starts a control plane in a fresh temporary directory. Builds the binaries first if they
    /// are missing (the build script is cached and locked, so concurrent test binaries wait for
    /// one build). Blocking: call it outside an async runtime, or in `spawn_blocking`.
    ///
    /// # Panics
    /// When the binaries cannot be built or the control plane does not become ready; the
    /// message names the log to read.
    pub fn start() -> Self {
        let bin = binaries();
        let dir = std::env::temp_dir().join(format!(
            "reconcile-host-control-plane-{}-{}",
            std::process::id(),
            unique()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the control plane's state directory is created");
        let token = random_hex(24);
        std::fs::write(
            dir.join("tokens.csv"),
            format!("{token},admin,admin-uid,system:masters\n"),
        )
        .expect("tokens.csv written");
        service_account_keys(&dir);
        let mut watchdog = Watchdog::start("control-plane-watchdog", Some(&dir));

        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            let started = Instant::now();
            let etcd_dir = dir.join(format!("etcd-{attempt}"));
            let (mut etcd, etcd_url) = match start_etcd(&bin, &dir, &etcd_dir, &mut watchdog) {
                Ok(started) => started,
                Err(failure) if failure.port_clash => {
                    last = failure.message;
                    continue;
                }
                Err(failure) => panic!("{}", failure.message),
            };
            let etcd_ready = started.elapsed();
            match start_apiserver(&bin, &dir, &etcd_url, &token, &mut watchdog, None) {
                Ok((apiserver, url)) => {
                    let ready = started.elapsed();
                    let kubeconfig = dir.join("kubeconfig");
                    write_kubeconfig(&kubeconfig, &url, &dir, &token);
                    let plane = Self {
                        dir,
                        url,
                        token,
                        kubeconfig,
                        processes: parking_lot::Mutex::new(Processes {
                            etcd,
                            apiserver,
                            watchdog: Some(watchdog),
                            wipes: 0,
                        }),
                    };
                    plane.create_default_service_account();
                    eprintln!(
                        "control plane {}: etcd ready in {} ms, kube-apiserver ready (readyz and \
                         the default namespace) {} ms after start; RSS etcd {} MiB, \
                         kube-apiserver {} MiB; state in {}",
                        version(),
                        etcd_ready.as_millis(),
                        ready.as_millis(),
                        rss_mib(plane.pids().1),
                        rss_mib(plane.pids().0),
                        plane.dir.display(),
                    );
                    return plane;
                }
                Err(failure) => {
                    watchdog.stop_group(&mut etcd);
                    if failure.port_clash {
                        last = failure.message;
                        continue;
                    }
                    panic!("{}", failure.message);
                }
            }
        }
        panic!("the control plane did not start in {ATTEMPTS} attempts (ports taken?): {last}");
    }

    /// Where kube-apiserver sends the spans of requests that carry a sampled `traceparent`:
    /// an OTLP gRPC receiver the test starts there gets them.
    pub fn otlp_address(&self) -> std::net::SocketAddr {
        otlp_address_of(&self.dir)
    }

    /// The process ids of kube-apiserver and etcd, in that order (to read their CPU time).
    pub fn pids(&self) -> (u32, u32) {
        let processes = self.processes.lock();
        (processes.apiserver.id(), processes.etcd.id())
    }

    /// Sends `signal` (`STOP`, `CONT`) to kube-apiserver: stopped, it accepts connections and
    /// answers nothing, as a server out of reach.
    pub fn signal_apiserver(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pids().0.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} kube-apiserver failed");
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The admin's bearer token (a `system:masters` member).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The kubeconfig for the admin: the server's self-signed certificate as the CA, the token.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The PEM of the certificate the server serves (self-signed; it is its own CA).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("certs").join("apiserver.crt")
    }

    /// Writes the admin kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::copy(&self.kubeconfig, path).map(drop)
    }

    /// An admin kube client. The certificate is not verified: this client only prepares and
    /// checks a test's objects; the hosts under test use the kubeconfig, which trusts the CA.
    pub fn kube_client(&self) -> kube::Client {
        self.kube_client_as(None)
    }

    /// A kube client of the admin impersonating `user` (when given), as
    /// [`kube_client`](Self::kube_client).
    pub fn kube_client_as(&self, user: Option<&str>) -> kube::Client {
        let mut config = kube::Config::new(self.url.parse().expect("the server URL parses"));
        config.default_namespace = "default".into();
        config.accept_invalid_certs = true;
        config.auth_info.token = Some(self.token.clone().into());
        config.auth_info.impersonate = user.map(ToOwned::to_owned);
        kube::Client::try_from(config).expect("a kube client for the control plane")
    }

    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new("kubectl");
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// A token for the service account `namespace/name` from the real TokenRequest API, creating
    /// the service account if needed (nothing else does: there is no controller-manager).
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let create = self
            .kubectl()
            .args(["create", "serviceaccount", name, "-n", namespace])
            .output()
            .expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&create.stderr);
        assert!(
            create.status.success() || stderr.contains("already exists"),
            "kubectl create serviceaccount {namespace}/{name} failed: {stderr}"
        );
        let token = self
            .kubectl()
            .args(["create", "token", name, "-n", namespace, "--duration=1h"])
            .output()
            .expect("kubectl runs");
        assert!(
            token.status.success(),
            "kubectl create token {namespace}/{name} failed: {}",
            String::from_utf8_lossy(&token.stderr)
        );
        String::from_utf8(token.stdout)
            .expect("a token is ASCII")
            .trim()
            .to_owned()
    }

    fn create_default_service_account(&self) {
        let output = self
            .kubectl()
            .args(["create", "serviceaccount", "default", "-n", "default"])
            .output()
            .expect("kubectl runs");
        assert!(
            output.status.success(),
            "creating the default ServiceAccount failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // In order: kube-apiserver, then etcd.
        let processes = self.processes.get_mut();
        if let Some(mut watchdog) = processes.watchdog.take() {
            watchdog.stop_group(&mut processes.apiserver);
            watchdog.stop_group(&mut processes.etcd);
            // With its list closed, the watchdog removes the state directory.
            watchdog.finish();
        } else {
            stop_group(&mut processes.apiserver);
            stop_group(&mut processes.etcd);
        }
    }
}

/// The Kubernetes version `tools/control-plane/go.mod` requires, e.g. `v1.36.3`.
pub fn version() -> String {
    let go_mod = std::fs::read_to_string(workspace().join("tools/control-plane/go.mod"))
        .expect("tools/control-plane/go.mod readable");
    go_mod
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("k8s.io/kubernetes"))
                .then(|| words.next())
                .flatten()
                .map(str::to_owned)
        })
        .expect("tools/control-plane/go.mod requires k8s.io/kubernetes")
}

/// The directory with `etcd` and `kube-apiserver`, built by the build script when missing.
fn binaries() -> PathBuf {
    let base = std::env::var_os("CONTROL_PLANE_DIR").map_or_else(
        || super::host::target_dir().join("control-plane"),
        PathBuf::from,
    );
    let bin = base.join(version());
    let present = |bin: &Path| bin.join("etcd").is_file() && bin.join("kube-apiserver").is_file();
    if !present(&bin) {
        eprintln!(
            "the control plane is not built in {}; running scripts/build-control-plane.sh (a \
             cold build takes minutes)",
            bin.display()
        );
        let status = Command::new("bash")
            .arg(workspace().join("scripts/build-control-plane.sh"))
            .env("CONTROL_PLANE_DIR", &base)
            .status()
            .expect("bash runs");
        assert!(
            status.success() && present(&bin),
            "scripts/build-control-plane.sh failed ({status}); it needs Go and the Go module \
             proxy; `make control-plane` shows the error"
        );
    }
    bin
}

/// An ECDSA P-256 key pair: `sa.key` signs service-account tokens, `sa.pub` (a PUBLIC KEY PEM:
/// kube-apiserver refuses a private key there) verifies them.
fn service_account_keys(dir: &Path) {
    let run = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs (install it to run the tests against a real API server)");
        assert!(
            output.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "sa.key",
    ]);
    run(&["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);
}

fn start_etcd(
    bin: &Path,
    dir: &Path,
    data: &Path,
    watchdog: &mut Watchdog,
) -> Result<(Child, String), NotReady> {
    let (client, peer) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = dir.join("etcd.log");
    let mut child = spawn(
        Command::new(bin.join("etcd"))
            .arg("--name=test")
            .arg(format!("--data-dir={}", data.display()))
            .arg("--unsafe-no-fsync")
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=test={peer_url}"))
            .arg("--log-level=warn"),
        &log,
    );
    watchdog.watch(child.id());
    let health = format!("{client_url}/health");
    wait_ready("etcd", &mut child, &log, ETCD_READY, || {
        curl(&["-fsS", &health])
    })?;
    Ok((child, client_url))
}

/// Where kube-apiserver sends its spans: the OTLP gRPC address of `dir`'s plane, chosen once.
fn otlp_address_of(dir: &Path) -> std::net::SocketAddr {
    let file = dir.join("otlp-port");
    let port = match std::fs::read_to_string(&file) {
        Ok(port) => port.trim().parse().expect("otlp-port holds a port"),
        Err(_) => {
            let port = free_port();
            std::fs::write(&file, port.to_string()).expect("otlp-port written");
            port
        }
    };
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// kube-apiserver's tracing: to [`otlp_address_of`], sampling only requests whose caller's
/// `traceparent` is sampled (rate 0: it starts no trace of its own), so only a test that sends
/// traced requests, and listens there, gets spans.
fn tracing_flag(dir: &Path) -> String {
    let file = dir.join("tracing.yaml");
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n\
         endpoint: {}\nsamplingRatePerMillion: 0\n",
        otlp_address_of(dir)
    );
    std::fs::write(&file, config).expect("tracing configuration written");
    format!("--tracing-config-file={}", file.display())
}

fn start_apiserver(
    bin: &Path,
    dir: &Path,
    etcd: &str,
    token: &str,
    watchdog: &mut Watchdog,
    port: Option<u16>,
) -> Result<(Child, String), NotReady> {
    let port = port.unwrap_or_else(free_port);
    let url = format!("https://127.0.0.1:{port}");
    let log = dir.join("kube-apiserver.log");
    let mut child = spawn(
        Command::new(bin.join("kube-apiserver"))
            .arg(format!("--etcd-servers={etcd}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", dir.join("certs").display()))
            .arg(format!(
                "--token-auth-file={}",
                dir.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-key-file={}",
                dir.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                dir.join("sa.key").display()
            ))
            .arg("--service-cluster-ip-range=10.0.0.0/16")
            .args(audit::flags(dir))
            .arg(tracing_flag(dir)),
        &log,
    );
    watchdog.watch(child.id());
    let authorization = format!("Authorization: Bearer {token}");
    let readyz = format!("{url}/readyz");
    let default = format!("{url}/api/v1/namespaces/default");
    let result = wait_ready("kube-apiserver", &mut child, &log, API_READY, || {
        curl(&["-fsSk", "-H", &authorization, &readyz])
            && curl(&["-fsSk", "-H", &authorization, &default])
    });
    match result {
        Ok(()) => Ok((child, url)),
        Err(failure) => {
            watchdog.stop_group(&mut child);
            Err(failure)
        }
    }
}

/// Spawns `command` in its own process group, stdout and stderr appended to `log`.
fn spawn(command: &mut Command, log: &Path) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file opens");
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file handle"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", command.get_program()))
}

/// Waits (bounded) until `ready` holds; fails when the process exits first or time runs out.
fn wait_ready(
    what: &str,
    child: &mut Child,
    log: &Path,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), NotReady> {
    let deadline = Instant::now() + limit;
    loop {
        if ready() {
            return Ok(());
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() >= deadline {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
            let why = match exited {
                Some(status) => format!("exited ({status})"),
                None => format!("not ready after {} s", limit.as_secs()),
            };
            return Err(NotReady {
                port_clash: exited.is_some() && text.contains("address already in use"),
                message: format!(
                    "{what} {why}; the last lines of {} follow:\n{tail}",
                    log.display()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when `curl <args>` succeeds.
fn curl(args: &[&str]) -> bool {
    Command::new("curl")
        .args(["--max-time", "5"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn write_kubeconfig(path: &Path, url: &str, dir: &Path, token: &str) {
    let ca = dir.join("certs").join("apiserver.crt");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: control-plane\n  cluster:\n    server: \
         {url}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: \
         {token}\ncontexts:\n- name: admin\n  context: {{cluster: control-plane, user: admin, \
         namespace: default}}\ncurrent-context: admin\n",
        ca.display()
    );
    std::fs::write(path, text).expect("kubeconfig written");
}

/// The resident set size of process `pid` in MiB, 0 if unknown.
fn rss_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// `bytes` random bytes from the kernel, as hex.
fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buffer = vec![0; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut buffer))
        .expect("/dev/urandom readable");
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number unique within this process.
fn unique() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
