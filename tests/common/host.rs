//! The real host binary with real components: guests built for wasm32-wasip2 once per test
//! binary, manifests pointed at them, the host started against an embedded API server.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::WAIT;
use super::backend::Cluster;

/// Every guest crate the tests load.
const GUESTS: [&str; 9] = [
    "testbed",
    "noop",
    "wrong-world",
    "stamp",
    "always-trap",
    "configmap-replicator",
    "website",
    "hostile",
    "ledger",
];

/// The `reconcile-host` binary under test: the host package's own binary in the host's tests,
/// the same `main.rs` built as `e2e-reconcile-host` in the end-to-end tests package.
pub const HOST_BINARY: &str = match (
    option_env!("CARGO_BIN_EXE_reconcile-host"),
    option_env!("CARGO_BIN_EXE_e2e-reconcile-host"),
) {
    (Some(binary), _) | (None, Some(binary)) => binary,
    (None, None) => panic!("the harness runs in the host's or the end-to-end tests' package"),
};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the package directory has a parent")
        .to_owned()
}

/// Builds every guest component (once per test binary) and returns the directory holding the
/// `.wasm` files.
pub fn guests() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = target_dir();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .current_dir(workspace())
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            // `make test` builds the tests with clippy-driver as the workspace's rustc wrapper;
            // the guests were built without it, and a different wrapper would build them again.
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .arg("--target-dir")
            .arg(&target);
        for guest in GUESTS {
            command.args(["-p", guest]);
        }
        let status = command.status().expect("cargo runs");
        assert!(status.success(), "building the guest components failed");
        target.join("wasm32-wasip2").join("release")
    })
}

/// `reconcile-host <subcommand> --module-cache <the tests' cache>`, for the one-shot commands
/// (`check`, `reconcile`) and hosts a test drives itself.
pub fn tool(subcommand: &str) -> Command {
    let mut command = Command::new(HOST_BINARY);
    command
        .arg(subcommand)
        .arg("--module-cache")
        .arg(module_cache());
    command
}

/// The compiled-module cache the tests' hosts share, so each component is compiled once per
/// run.
pub fn module_cache() -> PathBuf {
    target_dir().join("test-module-cache")
}

/// The target directory: `$CARGO_TARGET_DIR`, else `target/` in the workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from)
}

/// The built component of guest crate `crate_name`.
pub fn component(crate_name: &str) -> PathBuf {
    guests().join(format!("{}.wasm", crate_name.replace('-', "_")))
}

/// A scratch directory for one test, removed with everything in it when the value is dropped
/// (also when the test panics).
pub fn scratch(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!(
        "reconcile-host-plugins-{}-{test}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    Scratch(dir)
}

/// A test's scratch directory (see [`scratch`]); derefs to its path.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies the manifest at `source` (relative to the workspace) into `dir`, with `module:`
/// pointing at `module` and every `(key, value)` of `overrides` replacing that top-level line
/// and the block under it (or appended).
pub fn manifest(dir: &Path, source: &str, module: &Path, overrides: &[(&str, &str)]) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join(source)).expect("manifest readable");
    let mut lines: Vec<String> = Vec::new();
    let mut replaced = Vec::new();
    // The lines of a block (indented, or list items) under a replaced key go with it.
    let mut in_replaced_block = false;
    for line in text.lines() {
        let key = line.split(':').next().unwrap_or_default();
        if in_replaced_block && (line.starts_with(' ') || line.starts_with('-')) {
            continue;
        }
        in_replaced_block = false;
        if key == "module" {
            lines.push(format!("module: {}", module.display()));
        } else if let Some((k, v)) = overrides.iter().find(|(k, _)| *k == key) {
            lines.push(format!("{k}: {v}"));
            replaced.push(*k);
            in_replaced_block = true;
        } else {
            lines.push(line.to_owned());
        }
    }
    for (k, v) in overrides {
        if !replaced.contains(k) {
            lines.push(format!("{k}: {v}"));
        }
    }
    let name = Path::new(source)
        .parent()
        .and_then(Path::file_name)
        .expect("manifest in a directory");
    let path = dir.join(format!("{}.yaml", name.to_string_lossy()));
    std::fs::write(&path, lines.join("\n") + "\n").expect("manifest written");
    path
}

/// A running host process; killed when dropped.
pub struct Host {
    child: Child,
    /// On the shared watchdog's list (see [`super::watchdog`]): until the process is reaped.
    watched: bool,
    /// The telemetry address: as given, or, for port 0, as the host logs it once bound.
    metrics: OnceLock<String>,
    log: Arc<Mutex<String>>,
}

impl Host {
    /// Starts `reconcile-host run` on `server` with `plugins`, leader election off.
    pub fn start(server: &impl Cluster, dir: &Path, plugins: &[PathBuf]) -> Self {
        Self::start_with(server, dir, plugins, &[])
    }

    /// As [`start`](Self::start), with extra arguments.
    pub fn start_with(
        server: &impl Cluster,
        dir: &Path,
        plugins: &[PathBuf],
        args: &[&str],
    ) -> Self {
        let kubeconfig = dir.join("kubeconfig");
        server.kubeconfig_to(&kubeconfig);
        let mut command = Self::command();
        command
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--leader-elect", "false"])
            .args(args);
        for plugin in plugins {
            command.arg("--plugin").arg(plugin);
        }
        Self::spawn(command)
    }

    /// `reconcile-host run` with the tests' settings: a free metrics port, client limits high
    /// enough not to throttle, the guests' module cache, debug logs of controllers and plugins.
    pub fn command() -> Command {
        Self::command_of(Path::new(HOST_BINARY))
    }

    /// As [`command`](Self::command), for the host binary at `binary` (another build).
    pub fn command_of(binary: &Path) -> Command {
        Self::command_at(binary, "127.0.0.1:0")
    }

    /// As [`command_of`](Self::command_of), its telemetry on `metrics_address`.
    pub fn command_at(binary: &Path, metrics_address: &str) -> Command {
        let mut command = Command::new(binary);
        command
            .arg("run")
            .args(["--metrics-address", metrics_address])
            .args(["--qps", "500", "--burst", "1000"])
            .args(["--plugin-qps", "500", "--plugin-burst", "1000"])
            .arg("--module-cache")
            .arg(module_cache())
            .env(
                "RUST_LOG",
                "info,reconcile_host::controller=debug,reconcile_host::delivery::supervisor=debug",
            )
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// `reconcile-host run` for a benchmark: `plugin` only, no election, client limits high
    /// enough that the CPU, not a rate limit, bounds the work, info logs.
    pub fn bench_command(kubeconfig: &Path, plugin: &Path) -> Command {
        let mut command = Command::new(HOST_BINARY);
        command
            .arg("run")
            .args(["--metrics-address", "127.0.0.1:0"])
            .args(["--qps", "100000", "--burst", "100000"])
            .args(["--plugin-qps", "100000", "--plugin-burst", "100000"])
            .arg("--module-cache")
            .arg(module_cache())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--leader-elect", "false"])
            .arg("--plugin")
            .arg(plugin)
            .env("RUST_LOG", "info")
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// Spawns `command` (from [`command`](Self::command), with more arguments), collecting its
    /// log.
    pub fn spawn(mut command: Command) -> Self {
        let given = command
            .get_args()
            .skip_while(|arg| *arg != "--metrics-address")
            .nth(1)
            .and_then(|arg| arg.to_str())
            .expect("the command has --metrics-address");
        let metrics = OnceLock::new();
        if !given.ends_with(":0") {
            let _ = metrics.set(given.to_owned());
        }
        let mut child = super::watchdog::spawn(&mut command).expect("host spawns");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock();
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self {
            child,
            watched: true,
            metrics,
            log,
        }
    }

    /// Sends `signal` (`STOP`, `CONT`, `TERM`, ...) to the host process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Sends `signal` unless the process has exited (its pid may belong to another by then).
    pub fn signal_if_running(&mut self, signal: &str) {
        if self.running() {
            self.signal(signal);
        }
    }

    /// The telemetry address; `None` while a host given port 0 has not yet logged the one
    /// it bound.
    fn metrics(&self) -> Option<&str> {
        if self.metrics.get().is_none() {
            let bound = bound_metrics_address(&self.log.lock())?;
            let _ = self.metrics.set(bound);
        }
        self.metrics.get().map(String::as_str)
    }

    /// GET `path` from the metrics address (`/readyz?verbose`, `/metrics`); empty while the
    /// host does not answer.
    pub async fn get(&self, path: &str) -> String {
        let Some(address) = self.metrics() else {
            return String::new();
        };
        http_get(address, path).await.unwrap_or_default()
    }

    /// POSTs to `path` on the host's telemetry port: the status code and the body.
    pub async fn post(&self, path: &str) -> Option<(u16, String)> {
        self.send("POST", path).await
    }

    /// GETs `path` on the host's telemetry port: the status code and the body, whatever the
    /// status.
    pub async fn get_status(&self, path: &str) -> Option<(u16, String)> {
        self.send("GET", path).await
    }

    async fn send(&self, method: &str, path: &str) -> Option<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.metrics()?;
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_owned()))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's CPU time so far (user and system), from `/proc`.
    pub fn cpu_time(&self) -> std::time::Duration {
        super::process::cpu_of(self.child.id())
    }

    /// Everything the host logged so far.
    pub fn log(&self) -> String {
        self.log.lock().clone()
    }

    /// Waits until the log has a line containing every one of `parts`; returns that line.
    pub async fn wait_log(&self, parts: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let found = self
                .log
                .lock()
                .lines()
                .find(|line| parts.iter().all(|part| line.contains(part)))
                .map(str::to_owned);
            if let Some(line) = found {
                return line;
            }
            if tokio::time::Instant::now() >= deadline {
                let log = self.log();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "timed out waiting for a log line with {parts:?}; last lines:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The value of the metric series whose line starts with `series` (name and labels, e.g.
    /// `reconcile_host_plugin_failures_total{plugin="testbed",reason="trap"}`), 0 if absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let Some(address) = self.metrics() else {
            return 0.0;
        };
        let Some(body) = http_get(address, "/metrics").await else {
            return 0.0;
        };
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until the metric `series` reaches at least `at_least`.
    pub async fn wait_metric(&self, series: &str, at_least: f64) -> f64 {
        super::eventually_async(&format!("{series} >= {at_least}"), || async {
            let value = self.metric(series).await;
            (value >= at_least).then_some(value)
        })
        .await
    }

    /// Waits for the process to exit by itself; its exit code.
    pub async fn exit_code(&mut self) -> Option<i32> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                self.unwatch();
                // The reader thread ends (dropping its handle on the log) once it has read the
                // pipe to its end.
                super::eventually("the host's stderr to be read to its end", || {
                    Arc::strong_count(&self.log) == 1
                })
                .await;
                return status.code();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the host did not exit; log:\n{}",
                self.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        let running = self.child.try_wait().expect("wait").is_none();
        if !running {
            self.unwatch();
        }
        running
    }

    /// Takes the process off the shared watchdog's list, once: its id may be another's after.
    fn unwatch(&mut self) {
        if std::mem::take(&mut self.watched) {
            super::watchdog::forget(self.child.id());
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.unwatch();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address a host's telemetry server bound, from its log line
/// `serving /metrics, /healthz and /readyz local_addr=<address>`.
fn bound_metrics_address(log: &str) -> Option<String> {
    log.lines()
        .filter(|line| line.contains("serving /metrics"))
        .find_map(|line| {
            let value = line.split_once("local_addr=")?.1;
            Some(value.split_whitespace().next()?.to_owned())
        })
}

/// A loopback port free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// GET `path` from `address`; the body, or `None` if the request failed.
pub async fn http_get(address: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// Builds the Go program `benches/peers/cmd/<name>` (a controller-runtime peer) into
/// `<target>/peers/<name>`; its path.
pub fn go_peer(name: &str) -> PathBuf {
    let out = target_dir().join("peers").join(name);
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(format!("./cmd/{name}"))
        .current_dir(workspace().join("benches/peers"))
        .status()
        .expect("cannot run `go`; install Go 1.26 (benches/peers/README.md)");
    assert!(
        status.success(),
        "`go build ./cmd/{name}` in benches/peers failed"
    );
    out
}

/// Runs `script` (relative to the workspace; a guest's `build.sh`) once per test binary and
/// returns the component it writes, `<target>/guests/<name>.wasm`. Build scripts install their
/// pinned toolchain themselves, so a fresh machine needs nothing beforehand.
///
/// The scripts of one language (the suffix of the guest's directory: `-python`, `-js`, `-c`,
/// `-go`) take turns, as they share the toolchain the first of them may install; a test waiting
/// for a JavaScript build does not wait for a Python one.
pub fn scripted_component(script: &str, name: &str) -> PathBuf {
    type Built = Mutex<std::collections::HashMap<String, PathBuf>>;
    static LANGUAGES: OnceLock<Mutex<std::collections::HashMap<String, Arc<Built>>>> =
        OnceLock::new();
    let language = Path::new(script)
        .parent()
        .and_then(Path::file_name)
        .and_then(|guest| guest.to_str())
        .and_then(|guest| guest.rsplit_once('-'))
        .map_or("", |(_, language)| language)
        .to_owned();
    let built = Arc::clone(
        LANGUAGES
            .get_or_init(Default::default)
            .lock()
            .entry(language)
            .or_default(),
    );
    let mut built = built.lock();
    if let Some(path) = built.get(script) {
        return path.clone();
    }
    let target = target_dir();
    let status = Command::new("bash")
        .arg(workspace().join(script))
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTC_WORKSPACE_WRAPPER") // as in `guests`: wit-c was built without it
        .env_remove("CLIPPY_ARGS")
        .status()
        .expect("bash runs");
    assert!(status.success(), "{script} failed");
    let path = target.join("guests").join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{script} succeeded but wrote no {}",
        path.display()
    );
    built.insert(script.to_owned(), path.clone());
    path
}
