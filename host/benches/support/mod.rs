//! Pieces the plugin benchmarks share: objects, runtimes, CPU-time readings, criterion
//! measurement with wall and CPU medians, a counting controller loop over cached objects, and
//! building and loading guests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};
use reconcile_host::controller::{Action, Controller, ObjectKey, Reconciler, Request};
use reconcile_host::delivery::reconciler::{Plugin, PluginReconciler};
use reconcile_host::informer::CachedObject;
use reconcile_host::manifest::Manifest;
use reconcile_host::queue::{RateLimitingQueue, default_controller_limiter};
use reconcile_host::wasm::api::Recorder;
use reconcile_host::wasm::context::PluginContext;
use reconcile_host::wasm::engine::PluginEngine;
use reconcile_host::wasm::module::ModuleLoader;
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_owned()
}

/// The target directory the guests are built into.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from)
}

/// Builds the Rust guest crate `name` for wasm32-wasip2 the way the integration tests do and
/// returns its component's path.
pub fn build_rust_guest(name: &str) -> PathBuf {
    let target = target_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "-p",
            name,
        ])
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the {name} guest failed");
    target.join(format!(
        "wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    ))
}

/// Runs a guest's `build.sh` (relative to the workspace) and returns the component it writes,
/// `<target>/guests/<name>.wasm`.
pub fn build_scripted_guest(script: &str, name: &str) -> PathBuf {
    let target = target_dir();
    let status = Command::new("bash")
        .arg(workspace().join(script))
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("bash runs");
    assert!(status.success(), "{script} failed");
    target.join("guests").join(format!("{name}.wasm"))
}

/// The context of a plugin named `bench` for the component at `wasm`, reconciling ConfigMaps;
/// `extra` is appended to its manifest. API calls go to a recorder.
pub fn plugin_context(wasm: &Path, extra: &str) -> PluginContext {
    let text = format!(
        "name: bench\nmodule: {}\nfor: {{apiVersion: v1, kind: ConfigMap}}\n{extra}",
        wasm.display()
    );
    let manifest = Manifest::parse(&text, Path::new("/")).expect("manifest");
    PluginContext::new(
        Arc::new(manifest),
        HashMap::new(),
        Arc::new(Recorder::default()),
    )
}

/// A plugin reconciler with [`plugin_context`]'s context, its module loaded on `engine`.
pub fn plugin_reconciler(
    engine: &PluginEngine,
    rt: &Runtime,
    wasm: &Path,
    extra: &str,
) -> PluginReconciler {
    let context = plugin_context(wasm, extra);
    let module = rt
        .block_on(ModuleLoader::new(engine.clone()).load(&context.manifest.module))
        .expect("the guest loads");
    // Every plugin of a host keeps its reconcile history.
    let history = reconcile_host::delivery::history::History::new("v1/ConfigMap".to_owned());
    PluginReconciler::new(Arc::new(
        Plugin::new(Arc::new(context), module, None).with_history(Arc::new(history)),
    ))
}

/// With `PLUGINS_TRACED=1`, traces every reconcile as a host with `OTEL_EXPORTER_OTLP_ENDPOINT`
/// set does (spans batched on their own thread), to an exporter that drops them: what tracing
/// costs the reconcile, without a collector's work.
pub fn traced_from_env() -> Option<reconcile_host::telemetry::traces::Traces> {
    if std::env::var("PLUGINS_TRACED").ok().as_deref() != Some("1") {
        return None;
    }
    #[derive(Debug)]
    struct Discard;
    impl opentelemetry_sdk::trace::SpanExporter for Discard {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            std::hint::black_box(batch);
            Ok(())
        }
    }
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    Some(reconcile_host::telemetry::traces::install(provider))
}

/// [`plugin_reconciler`] recording its calls as a host does by default (failures kept).
pub fn recording_plugin(engine: &PluginEngine, rt: &Runtime, wasm: &Path) -> PluginReconciler {
    let context = plugin_context(wasm, "");
    let module = rt
        .block_on(ModuleLoader::new(engine.clone()).load(&context.manifest.module))
        .expect("the guest loads");
    let recordings = reconcile_host::upgrade::recordings::PluginRecordings::new(
        "bench",
        reconcile_host::config::RecordingConfig::default(),
    );
    let history = reconcile_host::delivery::history::History::new("v1/ConfigMap".to_owned());
    PluginReconciler::new(Arc::new(
        Plugin::new(Arc::new(context), module, None)
            .with_recordings(Arc::new(recordings))
            .with_history(Arc::new(history)),
    ))
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// A ConfigMap of about `bytes` bytes of JSON (metadata plus a data section).
pub fn config_map(i: usize, bytes: usize) -> String {
    let object = |entries: usize| {
        let data: serde_json::Map<String, serde_json::Value> = (0..entries)
            .map(|k| {
                (
                    format!("key-{k:04}"),
                    json!(format!("{i:08}-{}", "x".repeat(96))),
                )
            })
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": format!("cm-{i:06}"),
                "namespace": "default",
                "resourceVersion": "1",
                "labels": {"app": "bench", "shard": format!("{}", i % 16)},
            },
            "data": data,
        })
        .to_string()
    };
    // Every data entry after the first adds the same number of bytes.
    let (one, two) = (object(1).len(), object(2).len());
    object(1 + bytes.saturating_sub(one) / (two - one))
}

pub fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub fn multi_thread(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Nanoseconds on a CPU of the threads listed in `dir` (`/proc/thread-self` for the calling
/// thread, `/proc/self/task` for the whole process), as the scheduler accounts them (updated at
/// least every scheduler tick, so a reading may be a few milliseconds behind).
pub fn cpu_time(dir: &str) -> Duration {
    let runtime = |path: &Path| -> Option<u64> {
        let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
        stat.split_whitespace().next()?.parse().ok()
    };
    let nanos = if dir.ends_with("task") {
        std::fs::read_dir(dir)
            .map(|tasks| {
                tasks
                    .filter_map(Result::ok)
                    .filter_map(|task| runtime(&task.path()))
                    .sum()
            })
            .unwrap_or(0)
    } else {
        runtime(Path::new(dir)).unwrap_or(0)
    };
    Duration::from_nanos(nanos)
}

/// Whose CPU time a measurement counts.
#[derive(Clone, Copy)]
pub enum Cpu {
    /// The calling thread (a current-thread runtime does all the work on it).
    Thread,
    /// Every thread of the process.
    Process,
}

impl Cpu {
    pub fn now(self) -> Duration {
        match self {
            Self::Thread => cpu_time("/proc/thread-self"),
            Self::Process => cpu_time("/proc/self/task"),
        }
    }
}

/// Seconds per iteration: wall clock and CPU time, medians over criterion's measured samples.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub wall: f64,
    pub cpu: f64,
}

/// Runs `routine(iters)` (returning the wall time of `iters` iterations) as criterion bench
/// `id` of `group`; returns the medians per iteration over the last `sample_size` samples
/// (criterion's measured ones; its warm-up comes first), `None` when filtered out.
pub fn measure(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    sample_size: usize,
    cpu: Cpu,
    mut routine: impl FnMut(u64) -> Duration,
) -> Option<Timing> {
    let mut samples: Vec<(f64, f64)> = Vec::new();
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let before = cpu.now();
            let wall = routine(iters);
            let used = cpu.now().saturating_sub(before);
            let n = iters as f64;
            samples.push((wall.as_secs_f64() / n, used.as_secs_f64() / n));
            wall
        });
    });
    let measured = &samples[samples.len().saturating_sub(sample_size)..];
    let median = |pick: fn(&(f64, f64)) -> f64| {
        let mut values: Vec<f64> = measured.iter().map(pick).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    Some(Timing {
        wall: median(|s| s.0)?,
        cpu: median(|s| s.1)?,
    })
}

/// Counts reconciles and wakes a waiter when a target count is reached.
#[derive(Default)]
pub struct Counter {
    done: AtomicU64,
    target: AtomicU64,
    reached: Notify,
}

impl Counter {
    /// Waits until `target` reconciles have been counted since the last `reset`.
    pub async fn wait_for(&self, target: u64) {
        self.target.store(target, Ordering::SeqCst);
        // A permit left by an earlier round only wakes this loop once more.
        while self.done.load(Ordering::SeqCst) < target {
            self.reached.notified().await;
        }
    }

    pub fn reset(&self) {
        self.done.store(0, Ordering::SeqCst);
        self.target.store(u64::MAX, Ordering::SeqCst);
    }
}

/// A reconciler that counts the reconciles of `inner`.
pub struct Counting<R> {
    inner: R,
    counter: Arc<Counter>,
}

impl<R: Reconciler> Reconciler for Counting<R> {
    type Object = R::Object;
    type Error = R::Error;

    async fn reconcile(&self, request: Request<R::Object>) -> Result<Action, R::Error> {
        let result = self.inner.reconcile(request).await;
        let done = self.counter.done.fetch_add(1, Ordering::SeqCst) + 1;
        if done == self.counter.target.load(Ordering::SeqCst) {
            self.counter.reached.notify_one();
        }
        result
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;

/// A native no-op reconciler.
pub struct NativeNoop;

impl Reconciler for NativeNoop {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        debug_assert!(request.object.is_some());
        Ok(Action::Done)
    }
}

/// A controller over a fixed set of cached objects, with its queue and reconcile counter.
pub struct Loop<R: Reconciler> {
    controller: Arc<Controller<Counting<R>>>,
    queue: RateLimitingQueue<ObjectKey>,
    keys: Vec<ObjectKey>,
    counter: Arc<Counter>,
}

impl<R: Reconciler<Object = CachedObject>> Loop<R> {
    pub fn new(reconciler: R, objects: &[Arc<CachedObject>], workers: usize) -> Self {
        // Hashed as the informer's store hashes.
        let map: HashMap<ObjectKey, Arc<CachedObject>, foldhash::fast::RandomState> =
            objects.iter().map(|o| (o.key(), Arc::clone(o))).collect();
        let keys = objects.iter().map(|o| o.key()).collect();
        let queue = RateLimitingQueue::new(default_controller_limiter());
        let counter = Arc::new(Counter::default());
        let controller = Controller::new(
            "bench",
            queue.clone(),
            Counting {
                inner: reconciler,
                counter: Arc::clone(&counter),
            },
            move |key: &ObjectKey| map.get(key).cloned(),
            workers,
        );
        Self {
            controller: Arc::new(controller),
            queue,
            keys,
            counter,
        }
    }

    /// Queues `total` keys (cycling through the objects, at most one round queued at a time)
    /// and returns the time until all were reconciled. With `prequeue`, the first round is
    /// queued before the workers start and the clock starts with them.
    pub async fn run(&self, total: u64, prequeue: bool) -> Duration {
        self.counter.reset();
        let round = self.keys.len() as u64;
        let first = total.min(round);
        if prequeue {
            for key in &self.keys[..first as usize] {
                self.queue.add(key.clone());
            }
        }
        let intake = CancellationToken::new();
        let start = Instant::now();
        let workers = tokio::spawn({
            let (controller, intake) = (Arc::clone(&self.controller), intake.clone());
            async move { controller.run(intake, CancellationToken::new()).await }
        });
        let mut queued = 0;
        while queued < total {
            let batch = (total - queued).min(round);
            if !(prequeue && queued == 0) {
                for key in &self.keys[..batch as usize] {
                    self.queue.add(key.clone());
                }
            }
            queued += batch;
            self.counter.wait_for(queued).await;
        }
        let elapsed = start.elapsed();
        intake.cancel();
        workers.await.expect("controller runs");
        assert!(self.queue.is_empty(), "every key was processed");
        elapsed
    }
}

/// Cached objects of about `bytes` bytes each.
pub fn objects(count: usize, bytes: usize) -> Vec<Arc<CachedObject>> {
    (0..count)
        .map(|i| Arc::new(CachedObject::from_json(&config_map(i, bytes)).expect("object")))
        .collect()
}

/// A group of per-call benchmarks: equal-sized samples, so each is long enough for the CPU
/// time readings.
pub fn per_call_group<'a>(
    c: &'a mut Criterion,
    name: &str,
    sample_size: usize,
) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(sample_size)
        .sampling_mode(SamplingMode::Flat);
    group
}

/// `n` calls of `PluginReconciler::reconcile`, cycling through `objects`; their total time.
pub async fn reconcile_n(
    plugin: &PluginReconciler,
    objects: &[Arc<CachedObject>],
    n: u64,
) -> Duration {
    let keys: Vec<ObjectKey> = objects.iter().map(|o| o.key()).collect();
    let causes = Arc::new(reconcile_host::controller::causes::Taken::default());
    let start = Instant::now();
    for (key, object) in keys.iter().zip(objects).cycle().take(n as usize) {
        let action = plugin
            .reconcile(Request {
                key: key.clone(),
                object: Some(Arc::clone(object)),
                requeues: 0,
                causes: Arc::clone(&causes),
                trace: None,
            })
            .await
            .expect("noop succeeds");
        assert_eq!(action, Action::Done);
    }
    start.elapsed()
}
