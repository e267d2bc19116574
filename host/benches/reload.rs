//! Hot reload of a plugin module, two numbers:
//!
//! 1. **Reload pause**: the longest gap between two completed reconciles of the plugin while
//!    its module is read, compiled (off the hot path, on a blocking thread) and swapped in, with
//!    two workers busy on 10,000 keys the whole time; next to the longest gap of a run without a
//!    swap on the same setup.
//! 2. **File change to new version serving**: the real host path — a `Plugins` supervisor
//!    watching a plugins directory against the embedded API server; the module file is
//!    replaced (write aside, rename) and the clock runs until the first reconcile by the new
//!    module. Includes the watcher's settle time (`SETTLE`) and the compile.
//!
//! `cargo bench -p reconcile-host --bench reload` (builds the `noop` and `stamp` guests first).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_apiserver::{ApiServer, Config};
use parking_lot::Mutex;
use reconcile_host::controller::{Action, Controller, ObjectKey, Reconciler, Request};
use reconcile_host::delivery::reconciler::{Plugin, PluginReconciler};
use reconcile_host::delivery::supervisor::{Plugins, SETTLE};
use reconcile_host::informer::{CachedObject, Store};
use reconcile_host::manifest::Manifest;
use reconcile_host::queue::RateLimitingQueue;
use reconcile_host::runtime::{Runtime, RuntimeSettings};
use reconcile_host::wasm::api::Recorder;
use reconcile_host::wasm::context::PluginContext;
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine};
use reconcile_host::wasm::module::ModuleLoader;
use tokio_util::sync::CancellationToken;

const OBJECTS: usize = 10_000;
const WORKERS: usize = 2;
const ROUNDS: usize = 5;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_owned()
}

/// Builds the guests and returns the directory of the `.wasm` files.
fn guests() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .arg("--target-dir")
        .arg(&target)
        .args(["-p", "noop", "-p", "stamp"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the guests failed");
    target.join("wasm32-wasip2").join("release")
}

fn object(i: usize) -> CachedObject {
    CachedObject::from_json(&format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i:05}","namespace":"default","resourceVersion":"1"}},"data":{{"v":"{}"}}}}"#,
        "x".repeat(900)
    ))
    .expect("object")
}

/// Reconciles through the plugin, notes when each call completed, and queues the key again
/// so the workers never run dry.
struct Busy {
    inner: PluginReconciler,
    queue: RateLimitingQueue<ObjectKey>,
    done: Arc<Mutex<Vec<Instant>>>,
}

impl Reconciler for Busy {
    type Object = CachedObject;
    type Error = reconcile_host::delivery::reconciler::PluginError;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Self::Error> {
        let key = request.key.clone();
        let action = self.inner.reconcile(request).await?;
        self.done.lock().push(Instant::now());
        self.queue.add(key);
        Ok(action)
    }
}

fn longest_gap(times: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut window: Vec<Instant> = times
        .iter()
        .copied()
        .filter(|t| *t >= from && *t <= to)
        .collect();
    window.sort_unstable();
    window
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default()
}

/// Runs the busy controller for a while and returns (longest gap without a swap, longest gap
/// around a swap, swap time from read to swapped).
async fn pause(wasm: &Path) -> (Duration, Duration, Duration) {
    let engine = PluginEngine::new(EngineSettings::default()).expect("engine");
    let loader = ModuleLoader::new(engine);
    let noop = loader.load(&wasm.join("noop.wasm")).await.expect("noop");
    let manifest = Manifest::parse(
        "name: bench\nmodule: noop.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n",
        Path::new("/plugins"),
    )
    .expect("manifest");
    let store = Arc::new(Store::from_objects((0..OBJECTS).map(object)));
    let caches = HashMap::from([(manifest.for_kind.clone(), Arc::clone(&store))]);
    let context = PluginContext::new(Arc::new(manifest), caches, Arc::new(Recorder::default()));
    let plugin = Arc::new(Plugin::new(Arc::new(context), noop, None));
    let queue = RateLimitingQueue::new(reconcile_host::queue::default_controller_limiter());
    let done = Arc::new(Mutex::new(Vec::with_capacity(4_000_000)));
    let lookup = Arc::clone(&store);
    let controller = Arc::new(Controller::new(
        "bench",
        queue.clone(),
        Busy {
            inner: PluginReconciler::new(Arc::clone(&plugin)),
            queue: queue.clone(),
            done: Arc::clone(&done),
        },
        move |key: &ObjectKey| lookup.get(key),
        WORKERS,
    ));
    for object in store.list() {
        queue.add(object.key());
    }
    let intake = CancellationToken::new();
    let running = {
        let (controller, intake) = (Arc::clone(&controller), intake.clone());
        tokio::spawn(async move { controller.run(intake, CancellationToken::new()).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let quiet_from = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let quiet_to = Instant::now();

    let change = Instant::now();
    let bytes = tokio::fs::read(wasm.join("stamp.wasm"))
        .await
        .expect("stamp");
    let stamp = loader
        .load_bytes(&wasm.join("stamp.wasm"), bytes)
        .await
        .expect("stamp compiles");
    plugin.swap(stamp);
    for object in store.list() {
        queue.add(object.key());
    }
    let swapped = change.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = Instant::now();
    intake.cancel();
    running.await.expect("controller");
    let times = done.lock();
    (
        longest_gap(&times, quiet_from, quiet_to),
        longest_gap(&times, change, after),
        swapped,
    )
}

/// Rename-to-swapped-in through the watching supervisor (the next dispatch uses the new module),
/// with new module bytes each round (noop and stamp alternate, each with a custom section naming
/// the round, so every swap compiles; the compiled-module cache is off).
async fn file_change_to_serving(wasm: &Path, rounds: usize) -> Vec<Duration> {
    let server = ApiServer::start(Config::default()).await.expect("server");
    server
        .bulk_load((0..100).map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "default",
                             "labels": {"bench": "true"}}})
        }))
        .expect("bulk load");
    let dir = std::env::temp_dir().join(format!(
        "reconcile-host-reload-bench-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let plugin_dir = dir.join("bench");
    std::fs::create_dir_all(&plugin_dir).expect("dir");
    std::fs::write(
        plugin_dir.join("plugin.yaml"),
        "name: bench\nmodule: plugin.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n\
         labelSelector: bench=true\nconcurrency: 2\n",
    )
    .expect("manifest");
    std::fs::copy(wasm.join("noop.wasm"), plugin_dir.join("plugin.wasm")).expect("module");
    let client = server.kube_client().expect("client");
    let runtime = Runtime::new(
        client.clone(),
        RuntimeSettings {
            election: None,
            drain_timeout: Duration::from_secs(5),
        },
    );
    let engine = PluginEngine::new(EngineSettings::default()).expect("engine");
    let plugins = Arc::new(Plugins::new(
        runtime.clone(),
        ModuleLoader::new(engine),
        Arc::new(reconcile_host::wasm::kube_api::KubeApi::new(client))
            as reconcile_host::wasm::api::SharedApi,
        vec![dir.clone()],
    ));
    plugins.load_all().await.expect("loads");
    let stop = CancellationToken::new();
    let watching = tokio::spawn(Arc::clone(&plugins).watch(stop.clone()));
    let running = tokio::spawn(runtime.run(stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut took = Vec::new();
    for round in 0..rounds {
        let next = if round % 2 == 0 {
            "stamp.wasm"
        } else {
            "noop.wasm"
        };
        let before = plugins.running().await[0].1.clone();
        let aside = plugin_dir.join(".plugin.wasm.new");
        let mut bytes = std::fs::read(wasm.join(next)).expect("module");
        bytes.extend(custom_section(round));
        std::fs::write(&aside, bytes).expect("written aside");
        let change = Instant::now();
        std::fs::rename(&aside, plugin_dir.join("plugin.wasm")).expect("rename");
        loop {
            if plugins.running().await[0].1 != before {
                break;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        took.push(change.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.cancel();
    let _ = watching.await;
    let _ = running.await;
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    took
}

/// A custom section `bench-round` holding `round`: valid anywhere in a component, and it makes
/// the bytes (and so the digest) new.
fn custom_section(round: usize) -> Vec<u8> {
    let name = b"bench-round";
    let payload = round.to_le_bytes();
    let size = 1 + name.len() + payload.len();
    let mut section = vec![0u8, u8::try_from(size).expect("small")];
    section.push(u8::try_from(name.len()).expect("small"));
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    section
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // wasmtime captures a backtrace on an internal error path when this is set.
    if std::env::var_os("RUST_BACKTRACE").is_some() {
        eprintln!("note: RUST_BACKTRACE is set; unset it for representative numbers");
    }
    let wasm = guests();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut quiet = Vec::new();
        let mut swap = Vec::new();
        let mut swapped = Vec::new();
        for _ in 0..ROUNDS {
            let (q, s, t) = pause(&wasm).await;
            quiet.push(q);
            swap.push(s);
            swapped.push(t);
        }
        let serving = file_change_to_serving(&wasm, ROUNDS).await;
        let max = |v: &[Duration]| v.iter().copied().max().unwrap_or_default();
        let median = |v: &[Duration]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v[v.len() / 2]
        };
        println!("\nplugin reload, {ROUNDS} rounds, {WORKERS} workers busy on {OBJECTS} keys (noop -> stamp)");
        println!("| measure | median | max | goal |");
        println!("| --- | --- | --- | --- |");
        println!(
            "| longest dispatch gap, no swap | {:.2} ms | {:.2} ms | — |",
            ms(median(&quiet)),
            ms(max(&quiet))
        );
        println!(
            "| longest dispatch gap around a swap (reload pause) | {:.2} ms | {:.2} ms | ≤ 50 ms |",
            ms(median(&swap)),
            ms(max(&swap))
        );
        println!(
            "| read + compile + swap, in process | {:.1} ms | {:.1} ms | — |",
            ms(median(&swapped)),
            ms(max(&swapped))
        );
        println!(
            "| file renamed → new module swapped in (settle {} ms included) | {:.1} ms | {:.1} ms | — |",
            SETTLE.as_millis(),
            ms(median(&serving)),
            ms(max(&serving))
        );
    });
}
