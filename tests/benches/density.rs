//! Density: what one reconcile-host costs per plugin, beside one controller process per CRD.
//!
//! For N in 1, 10 and 100, against the embedded API server (in this process): N CRDs
//! (`density.test/v1`, kinds `Density000` …), 100 objects of each in namespace `density`.
//!
//! 1. One real `reconcile-host run` with N plugins, each `for` its own CRD, every plugin its own
//!    module (the guest with a custom section naming its index appended, so each has its own
//!    digest, compiled code and cache entry, as distinct plugins would): once with the Rust `noop`
//!    guest, once with the JavaScript `noop-js` guest. The module cache is filled first by a
//!    start with all 100 modules, so every measured start loads precompiled modules.
//!    - start-up: process start → `/readyz` 200 (the host's own readiness: API server answered,
//!      plugins loaded, every cache listed), and → every plugin has reconciled its 100 objects
//!      (`controller_runtime_reconcile_total`);
//!    - memory idle (2 s after the last reconcile), idle with every module unloaded (the host
//!      runs with `--unload-idle-modules-after 10s`; measured once
//!      `reconcile_host_plugin_modules{state="unloaded"}` is N) and while every plugin reconciles
//!      again, its module mapped back by its first call (all N × 100 objects replaced 5 times in
//!      a row; the peak of VmRSS sampled every 10 ms, and the breakdown at the end): VmRSS, and from `/proc/<pid>/smaps` anonymous and file-backed RSS,
//!      and what of it is the wasm instance pool (mappings of 256 MiB or more: wasmtime's
//!      reservations; and pages written in a memory's copy-on-write image), memory images as
//!      mapped, compiled guest code (executable mappings, anonymous or of the module cache's
//!      `.cwasm` files; resident and mapped), the compiled modules' other sections (read-only
//!      mappings: data segments, trap tables, names) and the rest of the anonymous memory (the
//!      process heap, thread stacks: what stands in for heap, which the host does not count).
//! 2. N `density-kube-controller` processes (kube-runtime, `benches/peers/kube-runtime-controller`)
//!    and N `density-controller` processes (controller-runtime, `benches/peers/cmd/`), each on its
//!    own CRD, started together; once every one has reconciled its 100 objects and 2 s after:
//!    total VmRSS and total PSS (shared pages of the one binary counted once).
//!
//! `cargo bench -p end-to-end --bench density` (DENSITY_N=1,10 to pick the Ns; DENSITY_LANGS=rust
//! to pick the guests: rust, js; DENSITY_PEERS=off to run the host only).

#[path = "../common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::host::{
    HOST_BINARY, Host, component, free_port, http_get, module_cache, scratch, scripted_component,
};
use embedded_apiserver::{ApiServer, Config};
use serde_json::{Value, json};

const OBJECTS: usize = 100;
const GROUP: &str = "density.test";
const NAMESPACE: &str = "density";
/// Upper bound of any wait of the bench.
const LIMIT: Duration = Duration::from_secs(300);
/// The host's `--unload-idle-modules-after`: long past the idle measurement, 2 s after the
/// last reconcile.
const UNLOAD_AFTER: Duration = Duration::from_secs(10);

fn kind(i: usize) -> String {
    format!("Density{i:03}")
}

fn plural(i: usize) -> String {
    format!("density{i:03}s")
}

fn list(var: &str, default: &str) -> Vec<String> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn crd(i: usize) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{GROUP}", plural(i))},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": plural(i), "singular": format!("density{i:03}"),
                      "kind": kind(i), "listKind": format!("{}List", kind(i))},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object",
                              "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

fn objects(n: usize, round: u64) -> impl Iterator<Item = Value> {
    (0..n).flat_map(move |i| {
        (0..OBJECTS).map(move |j| {
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind(i),
                   "metadata": {"name": format!("object-{j:03}"), "namespace": NAMESPACE},
                   "spec": {"value": j, "round": round}})
        })
    })
}

/// The guest `base` with a custom section `density-plugin` holding `index` appended: a valid
/// component with its own digest.
fn distinct_module(base: &[u8], index: usize, dir: &Path, lang: &str) -> PathBuf {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"density-plugin";
    let payload = index.to_string();
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut bytes = base.to_vec();
    bytes.push(0);
    leb(body.len(), &mut bytes);
    bytes.extend_from_slice(&body);
    let path = dir.join(format!("{lang}-{index:03}.wasm"));
    std::fs::write(&path, bytes).expect("module written");
    path
}

fn plugin_manifest(dir: &Path, lang: &str, index: usize, module: &Path) -> PathBuf {
    let path = dir.join(format!("{lang}-{index:03}.yaml"));
    let text = format!(
        "name: density-{lang}-{index:03}\nmodule: {}\nfor:\n  apiVersion: {GROUP}/v1\n  kind: {}\n",
        module.display(),
        kind(index)
    );
    std::fs::write(&path, text).expect("manifest written");
    path
}

/// Memory of one process, in bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Memory {
    rss: u64,
    pss: u64,
    anon: u64,
    file: u64,
    /// The instance pool: wasmtime's reservations (mappings of 256 MiB or more) and the pages
    /// guests wrote in their memories' copy-on-write images.
    pool: u64,
    /// Linear memories' initial images, as mapped (memfd or the compiled module's file) and
    /// not written.
    images: u64,
    /// Compiled guest code: executable mappings, anonymous or of a compiled module's file.
    code: u64,
    /// The size of those mappings, resident or not.
    code_mapped: u64,
    /// The compiled modules' other sections (data segments, trap tables, function names):
    /// read-only mappings, anonymous or of a compiled module's file.
    code_data: u64,
    /// The rest of the anonymous memory: the process heap and thread stacks.
    rest: u64,
}

impl Memory {
    /// `<prefix>_rss_mib=… <prefix>_pss_mib=…`: every figure, for a `RESULT` line.
    fn fields(&self, prefix: &str) -> String {
        [
            ("rss", self.rss),
            ("pss", self.pss),
            ("anon", self.anon),
            ("file", self.file),
            ("pool", self.pool),
            ("images", self.images),
            ("code", self.code),
            ("code_mapped", self.code_mapped),
            ("code_data", self.code_data),
            ("heap", self.rest),
        ]
        .iter()
        .map(|(name, bytes)| format!("{prefix}_{name}_mib={:.1}", mib(*bytes)))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

impl std::ops::AddAssign for Memory {
    fn add_assign(&mut self, o: Self) {
        self.rss += o.rss;
        self.pss += o.pss;
        self.anon += o.anon;
        self.file += o.file;
        self.pool += o.pool;
        self.images += o.images;
        self.code += o.code;
        self.code_mapped += o.code_mapped;
        self.code_data += o.code_data;
        self.rest += o.rest;
    }
}

fn vm_rss(pid: u32) -> u64 {
    common::process::status_bytes(pid, "VmRSS")
}

/// What a mapping in smaps is, for [`memory`].
#[derive(Clone, Copy, PartialEq)]
enum Mapping {
    /// A pool reservation (anonymous, 256 MiB or more).
    Pool,
    /// A memory image: memfd, or a writable mapping of a compiled module's file.
    Image,
    /// Executable code of a guest: anonymous, or of a compiled module's file.
    Code,
    /// Read-only sections of a compiled module: anonymous, or of its file.
    CodeData,
    /// Other anonymous memory.
    Anonymous,
    /// Other files: the binary, shared libraries.
    File,
}

/// VmRSS, and from smaps: PSS, anonymous and file-backed RSS, and the split by [`Mapping`].
fn memory(pid: u32) -> Memory {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut m = Memory {
        rss: vm_rss(pid),
        ..Memory::default()
    };
    let mut mapping = Mapping::File;
    let mut rss = 0_u64;
    let kb = |line: &str| -> u64 {
        line.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            let mut fields = line.split_whitespace();
            let range = fields.next().unwrap_or_default();
            let perms = fields.next().unwrap_or_default();
            let path = line.split_whitespace().nth(5).unwrap_or_default();
            let (start, end) = range.split_once('-').unwrap_or(("0", "0"));
            let parse = |h: &str| u64::from_str_radix(h, 16).unwrap_or(0);
            let size = parse(end) - parse(start);
            let anonymous = path.is_empty() || path.starts_with('[');
            let module = anonymous || path.ends_with(".cwasm");
            let kind = if anonymous && size >= 256 << 20 {
                Mapping::Pool
            } else if path.starts_with("/memfd:")
                || (path.ends_with(".cwasm") && perms.contains('w'))
            {
                Mapping::Image
            } else if module && perms.contains('x') {
                Mapping::Code
            } else if module && !perms.contains('w') && perms.contains('r') {
                Mapping::CodeData
            } else if anonymous {
                Mapping::Anonymous
            } else {
                Mapping::File
            };
            if kind == Mapping::Code {
                m.code_mapped += size;
            }
            mapping = kind;
        } else if first == "Rss:" {
            rss = kb(line);
            match mapping {
                Mapping::Code => m.code += rss,
                Mapping::CodeData => m.code_data += rss,
                _ => {}
            }
        } else if first == "Pss:" {
            m.pss += kb(line);
        } else if first == "Anonymous:" {
            let written = kb(line);
            m.anon += written;
            match mapping {
                Mapping::Pool => m.pool += written,
                Mapping::Image => {
                    m.pool += written;
                    m.images += rss - written.min(rss);
                }
                Mapping::Anonymous => m.rest += written,
                Mapping::Code | Mapping::CodeData | Mapping::File => {}
            }
        }
    }
    m.file = m.rss.saturating_sub(m.anon);
    m
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

async fn reconciles(metrics: &str) -> f64 {
    let Some(body) = http_get(metrics, "/metrics").await else {
        return 0.0;
    };
    body.lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_total{") && l.contains("result=\"success\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The host's `reconcile_host_plugin_modules{state="<state>"}`.
async fn modules(metrics: &str, state: &str) -> f64 {
    let series = format!("reconcile_host_plugin_modules{{state=\"{state}\"}} ");
    let Some(body) = http_get(metrics, "/metrics").await else {
        return 0.0;
    };
    body.lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn ready(metrics: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(metrics).await else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response.starts_with("HTTP/1.1 200")
}

/// Waits until `probe` holds, at most [`LIMIT`]; panics naming `what`.
async fn until<F, Fut>(what: &str, host: Option<&Host>, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + LIMIT;
    while !probe().await {
        if Instant::now() >= deadline {
            let log = host.map(Host::log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "density: timed out after {LIMIT:?} waiting for {what}; host log tail:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn host_command(kubeconfig: &Path, metrics: &str, plugins: &[PathBuf]) -> Command {
    let mut command = Command::new(HOST_BINARY);
    command
        .arg("run")
        .args(["--metrics-address", metrics])
        .args(["--qps", "500", "--burst", "1000"])
        .arg("--module-cache")
        .arg(module_cache())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--leader-elect", "false"])
        .args([
            "--unload-idle-modules-after",
            &format!("{}s", UNLOAD_AFTER.as_secs()),
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for plugin in plugins {
        command.arg("--plugin").arg(plugin);
    }
    command
}

struct HostRun {
    ready: Duration,
    reconciled: Duration,
    idle: Memory,
    /// Modules loaded at the idle measurement.
    idle_loaded: f64,
    unloaded: Memory,
    busy_peak: u64,
    busy: Memory,
}

/// Starts a host with `plugins` (N = `plugins.len()`), measures it, stops it.
async fn run_host(
    server: &ApiServer,
    kubeconfig: &Path,
    plugins: &[PathBuf],
    round: &mut u64,
) -> HostRun {
    let n = plugins.len();
    let expected = (n * OBJECTS) as f64;
    let metrics = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let mut host = Host::spawn(host_command(kubeconfig, &metrics, plugins));
    until("/readyz to answer 200", Some(&host), || ready(&metrics)).await;
    let ready_after = started.elapsed();
    until(&format!("{expected} reconciles"), Some(&host), || async {
        reconciles(&metrics).await >= expected
    })
    .await;
    let reconciled = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = host.pid();
    let idle = memory(pid);
    let idle_loaded = modules(&metrics, "loaded").await;

    // Idle past UNLOAD_AFTER: every module unloaded.
    until("every module unloaded", Some(&host), || async {
        modules(&metrics, "unloaded").await >= n as f64
    })
    .await;
    let unloaded = memory(pid);

    // Busy: every object replaced 5 times; VmRSS sampled meanwhile.
    let before = reconciles(&metrics).await;
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(vm_rss(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    for _ in 0..5 {
        *round += 1;
        server
            .bulk_load(objects(n, *round))
            .expect("objects replaced");
    }
    // Each replace is an update event: at least one reconcile per object (updates of a key still
    // queued merge), so wait for N × 100 more and for the count to settle.
    until("the updates to be reconciled", Some(&host), || async {
        reconciles(&metrics).await >= before + expected
    })
    .await;
    let mut last = reconciles(&metrics).await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = reconciles(&metrics).await;
        if now == last {
            break;
        }
        last = now;
    }
    let busy = memory(pid);
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    host.signal("TERM");
    let _ = host.exit_code().await;
    HostRun {
        ready: ready_after,
        reconciled,
        idle,
        idle_loaded,
        unloaded,
        busy_peak: peak.load(Ordering::Relaxed).max(busy.rss),
        busy,
    }
}

/// Peer controller processes; killed (and waited for) when dropped.
struct Peers(Vec<Child>);

impl Drop for Peers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// Starts `n` processes of `binary`, one per CRD; waits until each printed `synced`; their memory
/// 2 s later, summed, and the time until the last one synced.
async fn run_peers(binary: &Path, kubeconfig: &Path, n: usize) -> (Memory, Duration) {
    let started = Instant::now();
    let synced = Arc::new(AtomicU64::new(0));
    let mut peers = Peers(Vec::new());
    for i in 0..n {
        let mut child = Command::new(binary)
            .args([GROUP, "v1", &kind(i), &plural(i), &OBJECTS.to_string()])
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("density: cannot start {}: {e}", binary.display()));
        let stdout = child.stdout.take().expect("stdout piped");
        let synced = Arc::clone(&synced);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("synced") {
                    synced.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        peers.0.push(child);
    }
    let what = format!("{n} {} processes to sync", binary.display());
    until(&what, None, || {
        let done = synced.load(Ordering::Relaxed) as usize >= n;
        async move { done }
    })
    .await;
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut total = Memory::default();
    for child in &mut peers.0 {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "density: a {} process exited early",
            binary.display()
        );
        total += memory(child.id());
    }
    (total, elapsed)
}

/// One line of the summary table.
struct Row {
    what: String,
    n: usize,
    rss: u64,
    pss: u64,
    /// The host's idle RSS once every module is unloaded.
    unloaded: Option<u64>,
    busy: Option<u64>,
    ready: Option<Duration>,
    synced: Duration,
}

fn print_table(table: &[Row]) {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "—".to_owned());
    println!(
        "\n| N | what | RSS idle (MiB) | PSS idle (MiB) | RSS idle, modules unloaded (MiB) | \
         RSS while reconciling, peak (MiB) | /readyz (s) | all objects reconciled (s) |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut rows: Vec<&Row> = table.iter().collect();
    rows.sort_by_key(|r| r.n);
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {} | {} | {} | {:.2} |",
            r.n,
            r.what,
            mib(r.rss),
            mib(r.pss),
            opt(r.unloaded.map(|b| format!("{:.1}", mib(b)))),
            opt(r.busy.map(|b| format!("{:.1}", mib(b)))),
            opt(r.ready.map(|d| format!("{:.2}", d.as_secs_f64()))),
            r.synced.as_secs_f64()
        );
    }
    // What one more plugin or process costs: the growth from the fewest to the most.
    let mut whats: Vec<&str> = table.iter().map(|r| r.what.as_str()).collect();
    whats.sort_unstable();
    whats.dedup();
    for what in whats {
        let runs = || table.iter().filter(|r| r.what == what);
        let (Some(low), Some(high)) = (runs().min_by_key(|r| r.n), runs().max_by_key(|r| r.n))
        else {
            continue;
        };
        if high.n > low.n {
            let per = |a: u64, b: u64| (mib(b) - mib(a)) / (high.n - low.n) as f64;
            println!(
                "RESULT density marginal what=\"{what}\" from_n={} to_n={} \
                 rss_per_unit_mib={:.3} pss_per_unit_mib={:.3}",
                low.n,
                high.n,
                per(low.rss, high.rss),
                per(low.pss, high.pss)
            );
        }
    }
}

fn go_controller() -> PathBuf {
    common::host::go_peer("density-controller")
}

#[tokio::main]
async fn main() {
    let ns: Vec<usize> = list("DENSITY_N", "1,10,100")
        .iter()
        .map(|n| {
            n.parse()
                .expect("DENSITY_N is a list of counts, e.g. 1,10,100")
        })
        .collect();
    let langs = list("DENSITY_LANGS", "rust,js");
    let most = ns.iter().copied().max().unwrap_or(1);
    let kube_controller = PathBuf::from(env!("CARGO_BIN_EXE_density-kube-controller"));
    let go = go_controller();
    let dir = scratch("bench-density");
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server");
    server
        .bulk_load(std::iter::once(
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE}}),
        ))
        .expect("namespace");
    server.bulk_load((0..most).map(crd)).expect("CRDs");
    let mut round = 0;
    server.bulk_load(objects(most, round)).expect("objects");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    println!(
        "density: {most} CRDs × {OBJECTS} objects, {} CPUs, load average {}",
        std::thread::available_parallelism().map_or(1, usize::from),
        uptime()
    );

    let mut table = Vec::new();
    for lang in &langs {
        let base = match lang.as_str() {
            "rust" => component("noop"),
            "js" => scripted_component("host/tests/guests/noop-js/build.sh", "noop-js"),
            other => panic!("DENSITY_LANGS: `{other}` is not a guest; use rust or js"),
        };
        let bytes = std::fs::read(&base).expect("guest component readable");
        let modules: Vec<PathBuf> = (0..most)
            .map(|i| distinct_module(&bytes, i, &dir, lang))
            .collect();
        let manifests: Vec<PathBuf> = (0..most)
            .map(|i| plugin_manifest(&dir, lang, i, &modules[i]))
            .collect();
        // Fill the module cache: one start with every module.
        let warm = run_host(&server, &kubeconfig, &manifests, &mut round).await;
        println!(
            "  {lang}: filling the module cache, {most} plugins: ready in {:.2} s",
            warm.ready.as_secs_f64()
        );
        for &n in &ns {
            let load = uptime();
            let run = run_host(&server, &kubeconfig, &manifests[..n], &mut round).await;
            let per = |bytes: u64| mib(bytes) / n as f64;
            println!(
                "RESULT density host lang={lang} n={n} ready_s={:.3} reconciled_s={:.3} {} \
                 busy_peak_rss_mib={:.1} {} idle_rss_per_plugin_mib={:.2} \
                 idle_modules_loaded={} {} load=\"{load}\"",
                run.ready.as_secs_f64(),
                run.reconciled.as_secs_f64(),
                run.idle.fields("idle"),
                mib(run.busy_peak),
                run.busy.fields("busy"),
                per(run.idle.rss),
                run.idle_loaded,
                run.unloaded.fields("unloaded"),
            );
            table.push(Row {
                what: format!("reconcile-host, {lang} plugins"),
                n,
                rss: run.idle.rss,
                pss: run.idle.pss,
                unloaded: Some(run.unloaded.rss),
                busy: Some(run.busy_peak),
                ready: Some(run.ready),
                synced: run.reconciled,
            });
        }
    }
    let peers = !matches!(std::env::var("DENSITY_PEERS").as_deref(), Ok("off"));
    for &n in ns.iter().filter(|_| peers) {
        for (name, binary) in [
            ("kube-runtime", &kube_controller),
            ("controller-runtime", &go),
        ] {
            let load = uptime();
            let (total, synced) = run_peers(binary, &kubeconfig, n).await;
            println!(
                "RESULT density peers kind={name} n={n} synced_s={:.3} total_rss_mib={:.1} \
                 total_pss_mib={:.1} total_anon_mib={:.1} rss_per_process_mib={:.2} load=\"{load}\"",
                synced.as_secs_f64(),
                mib(total.rss),
                mib(total.pss),
                mib(total.anon),
                mib(total.rss) / n as f64,
            );
            table.push(Row {
                what: format!("{name} processes"),
                n,
                rss: total.rss,
                pss: total.pss,
                unloaded: None,
                busy: None,
                ready: None,
                synced,
            });
        }
    }
    print_table(&table);
    println!("load average after: {}", uptime());
}
