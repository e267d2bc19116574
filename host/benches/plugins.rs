//! Plugin dispatch benchmarks: what the host adds to a bare wasmtime call of the `noop` guest
//! (`host/tests/guests/noop`, built by this bench), on the one engine every plugin shares.
//!
//! 1. bare fresh-instance call: `Store<()>`, instantiate from an `InstancePre`, call `reconcile`
//!    with a 1 KB and a 16 KB object, drop the store;
//! 2. dispatch, fresh instance per call: `PluginReconciler::reconcile` per call, and a
//!    controller loop per key (dequeue → cached object → guest → action applied to the queue,
//!    one worker), each as a multiple of (1);
//! 3. reconciles/s of a controller with 2 workers over 10,000 cached 1 KB objects, all keys
//!    queued, until all are processed: the `noop` guest vs a native no-op reconciler;
//! 4. instance reuse (`instanceReuse: {maxCalls: 100000}`): dispatch per call at 1 KB vs a bare
//!    call on one reused instance.
//!
//! Every per-call variant cycles through the same 1,000 distinct objects. Each number is given
//! as wall-clock time and as CPU time (the scheduler's accounting of the threads doing the
//! work), which stays meaningful when other processes compete for the cores; for (3) the CPU
//! time per reconcile also gives the rate the workers would reach with every core to
//! themselves.
//!
//! Run: `cargo bench -p reconcile-host --bench plugins` (about 90 s on 2 idle cores);
//! `PLUGINS_QUICK=1` for a smoke run of about 20 s; criterion's filter arguments select
//! benchmarks (`-- reuse/`). Besides criterion's lines it prints one `RESULT` table with every
//! number the README quotes and the goals. No tracing subscriber is installed, so spans cost
//! what a disabled callsite costs. `RUST_BACKTRACE`/`RUST_LIB_BACKTRACE` are removed (the bench
//! runs itself again without them) because error values would capture backtraces.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use reconcile_host::delivery::reconciler::PluginReconciler;
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine};
use tokio::runtime::Runtime;
use wasmtime::Store;
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentType, InstancePre, Lift, Linker, Lower, TypedFunc,
};

use support::*;

/// Objects behind the throughput run (part 3).
const THROUGHPUT_OBJECTS: usize = 10_000;
/// Workers of the throughput run: one per core of the reference machine.
const THROUGHPUT_WORKERS: usize = 2;
/// Distinct keys cycled through by the per-key controller loops.
const LOOP_OBJECTS: usize = 1_000;
/// Object sizes of parts 1 and 2.
const SIZES: [(&str, usize); 2] = [("1KB", 1 << 10), ("16KB", 16 << 10)];
/// The reuse manifest's `maxCalls`.
const REUSE_MAX_CALLS: u32 = 100_000;

// Goals.
const FRESH_RATIO_GOAL: f64 = 1.3;
const THROUGHPUT_GOAL: f64 = 120_000.0;
const REUSE_OVERHEAD_GOAL_US: f64 = 0.6;
const RECORDING_GOAL_PERCENT: f64 = 2.0;
/// Alternating rounds of the recording comparison.
const RECORDING_ROUNDS: usize = 15;

// The `reconcile` export's types, mirrored for wasmtime's typed-function API (the host's
// generated bindings are private to the crate). Lowering and lifting cost what the generated
// bindings cost: both are the same derive.

#[derive(ComponentType, Lower)]
#[component(record)]
struct GuestKind {
    #[component(name = "api-version")]
    api_version: String,
    kind: String,
}

#[derive(ComponentType, Lower)]
#[component(record)]
struct GuestObjectRef {
    kind: GuestKind,
    namespace: Option<String>,
    name: String,
}

#[derive(ComponentType, Lower)]
#[component(record)]
struct GuestRequest {
    target: GuestObjectRef,
    object: Option<String>,
    requeues: u32,
}

#[derive(ComponentType, Lift, Debug, PartialEq, Eq)]
#[component(variant)]
enum GuestAction {
    #[component(name = "done")]
    Done,
    #[component(name = "requeue")]
    Requeue,
    #[component(name = "requeue-after")]
    RequeueAfter(u32),
}

#[derive(ComponentType, Lift)]
#[component(record)]
struct GuestError {
    message: String,
}

type GuestResult = Result<GuestAction, GuestError>;

fn assert_done(result: GuestResult) {
    match result {
        Ok(action) => assert_eq!(action, GuestAction::Done),
        Err(error) => panic!("the noop guest returned an error: {}", error.message),
    }
}

fn main() {
    if std::env::var_os("RUST_BACKTRACE").is_some()
        || std::env::var_os("RUST_LIB_BACKTRACE").is_some()
    {
        // Error values capture a backtrace when these are set; run again without them.
        let status = Command::new(std::env::current_exe().expect("own path"))
            .args(std::env::args_os().skip(1))
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .status()
            .expect("bench re-runs itself");
        std::process::exit(status.code().unwrap_or(1));
    }
    let quick = std::env::var_os("PLUGINS_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let _traced = support::traced_from_env();
    let load_before = loadavg();
    let sample_size = if quick { 10 } else { 30 };
    let bench = Bench::new(build_rust_guest("noop"), sample_size);
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(if quick { 200 } else { 1_000 }))
        .measurement_time(Duration::from_millis(if quick { 400 } else { 3_000 }))
        .sample_size(sample_size)
        .without_plots()
        .configure_from_args();
    let mut results = Results::default();
    bench.fresh(&mut criterion, &mut results);
    bench.throughput(&mut criterion, &mut results, quick);
    bench.reuse(&mut criterion, &mut results);
    criterion.final_summary();
    results.print(&load_before, &loadavg(), quick);
}

/// The `reconcile` export on the bare wasmtime path: no host state, no imports.
struct Bare {
    pre: InstancePre<()>,
    reconcile: ComponentExportIndex,
}

impl Bare {
    fn new(engine: &PluginEngine, wasm: &Path) -> Self {
        let component = Component::from_file(engine.engine(), wasm).expect("noop compiles");
        let mut linker = Linker::<()>::new(engine.engine());
        // The noop guest imports only the type-only `types` interface.
        linker
            .define_unknown_imports_as_traps(&component)
            .expect("stub imports");
        let pre = linker.instantiate_pre(&component).expect("pre-linked");
        let (_, reconcile) = component
            .get_export(None, "reconcile")
            .expect("reconcile export");
        Self { pre, reconcile }
    }

    fn store(&self) -> Store<()> {
        let mut store = Store::new(self.pre.engine(), ());
        store.epoch_deadline_async_yield_and_update(1);
        store
    }

    async fn instantiate<'a>(
        &self,
        store: &mut Store<()>,
    ) -> TypedFunc<(&'a GuestRequest,), (GuestResult,)> {
        let instance = self
            .pre
            .instantiate_async(&mut *store)
            .await
            .expect("instantiates");
        instance
            .get_typed_func(&mut *store, self.reconcile)
            .expect("reconcile has the world's signature")
    }

    /// One fresh-instance call.
    async fn fresh_call(&self, request: &GuestRequest) {
        let mut store = self.store();
        let reconcile = self.instantiate(&mut store).await;
        let (result,) = reconcile
            .call_async(&mut store, (request,))
            .await
            .expect("no trap");
        assert_done(result);
    }
}

fn guest_request(name: &str, json: &str) -> GuestRequest {
    GuestRequest {
        target: GuestObjectRef {
            kind: GuestKind {
                api_version: "v1".to_owned(),
                kind: "ConfigMap".to_owned(),
            },
            namespace: Some("default".to_owned()),
            name: name.to_owned(),
        },
        object: Some(json.to_owned()),
        requeues: 0,
    }
}

struct Bench {
    engine: PluginEngine,
    wasm: PathBuf,
    bare: Bare,
    /// Criterion's sample size for the per-call benchmarks.
    sample_size: usize,
}

impl Bench {
    fn new(wasm: PathBuf, sample_size: usize) -> Self {
        let engine = PluginEngine::new(EngineSettings::default()).expect("engine");
        assert!(engine.pooling(), "the pooling allocator is available");
        let bare = Bare::new(&engine, &wasm);
        Self {
            engine,
            wasm,
            bare,
            sample_size,
        }
    }

    /// A plugin reconciler for the noop guest; `extra` is appended to its manifest.
    fn plugin(&self, rt: &Runtime, extra: &str) -> PluginReconciler {
        plugin_reconciler(&self.engine, rt, &self.wasm, extra)
    }

    /// Parts 1 and 2: a fresh instance per call. Every variant cycles through the same
    /// `LOOP_OBJECTS` distinct objects, so all of them find the objects at the same levels of
    /// the memory hierarchy.
    fn fresh(&self, c: &mut Criterion, results: &mut Results) {
        let rt = current_thread();
        let _context = rt.enter();
        let plugin = self.plugin(&rt, "");
        let sample_size = self.sample_size;
        let mut group = per_call_group(c, "fresh", sample_size);
        for (label, bytes) in SIZES {
            let objects = objects(LOOP_OBJECTS, bytes);
            let lengths: Vec<usize> = objects.iter().map(|o| o.json().len()).collect();
            results.sizes.push((
                label,
                *lengths.iter().min().expect("objects"),
                *lengths.iter().max().expect("objects"),
            ));
            let requests: Vec<GuestRequest> = objects
                .iter()
                .map(|o| guest_request(o.name(), o.json()))
                .collect();
            let bare = measure(
                &mut group,
                &format!("bare_call/{label}"),
                sample_size,
                Cpu::Thread,
                |n| {
                    rt.block_on(async {
                        let start = Instant::now();
                        for request in requests.iter().cycle().take(n as usize) {
                            self.bare.fresh_call(request).await;
                        }
                        start.elapsed()
                    })
                },
            );
            let call = measure(
                &mut group,
                &format!("plugin_reconciler/{label}"),
                sample_size,
                Cpu::Thread,
                |n| rt.block_on(reconcile_n(&plugin, &objects, n)),
            );
            let looped = Loop::new(plugin.clone(), &objects, 1);
            let controller = measure(
                &mut group,
                &format!("controller_loop/{label}"),
                sample_size,
                Cpu::Thread,
                |n| rt.block_on(looped.run(n, false)),
            );
            results.fresh.push(FreshRow {
                label,
                bare,
                call,
                controller,
            });
        }
        let native = Loop::new(NativeNoop, &objects(LOOP_OBJECTS, 1 << 10), 1);
        results.native_loop = measure(
            &mut group,
            "native_noop_controller_loop/1KB",
            sample_size,
            Cpu::Thread,
            |n| rt.block_on(native.run(n, false)),
        );
        group.finish();
    }

    /// Part 3: reconciles/s of 2 workers over 10,000 cached 1 KB objects, all queued before
    /// the workers start.
    fn throughput(&self, c: &mut Criterion, results: &mut Results, quick: bool) {
        let rt = multi_thread(THROUGHPUT_WORKERS);
        let _context = rt.enter();
        let objects = objects(THROUGHPUT_OBJECTS, 1 << 10);
        let mut group = c.benchmark_group("throughput");
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(if quick { 200 } else { 1_000 }))
            .measurement_time(Duration::from_millis(if quick { 500 } else { 3_000 }))
            .throughput(Throughput::Elements(THROUGHPUT_OBJECTS as u64));
        let mut rate = |id: &str, looped: &dyn Fn() -> Duration| {
            measure(&mut group, id, 10, Cpu::Process, |n| {
                (0..n).map(|_| looped()).sum()
            })
            .map(|run| Timing {
                wall: run.wall / THROUGHPUT_OBJECTS as f64,
                cpu: run.cpu / THROUGHPUT_OBJECTS as f64,
            })
        };
        let all = THROUGHPUT_OBJECTS as u64;
        let plugin = Loop::new(self.plugin(&rt, ""), &objects, THROUGHPUT_WORKERS);
        results.throughput_fresh = rate("noop_guest_fresh/2_workers", &|| {
            rt.block_on(plugin.run(all, true))
        });
        drop(plugin);
        let recording = Loop::new(
            recording_plugin(&self.engine, &rt, &self.wasm),
            &objects,
            THROUGHPUT_WORKERS,
        );
        results.throughput_recording = rate("noop_guest_fresh_recording/2_workers", &|| {
            rt.block_on(recording.run(all, true))
        });
        // Sequential runs drift by more than the difference sought: alternate the two.
        let plain = Loop::new(self.plugin(&rt, ""), &objects, THROUGHPUT_WORKERS);
        let rounds = if quick { 3 } else { RECORDING_ROUNDS };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..=rounds {
            let x = rt.block_on(plain.run(all, true));
            let y = rt.block_on(recording.run(all, true));
            // Round 0 warms both.
            if round > 0 {
                a.push(x);
                b.push(y);
            }
        }
        a.sort();
        b.sort();
        results.recording_rounds = Some((rounds, a[a.len() / 2], b[b.len() / 2]));
        drop((plain, recording));
        let reuse = format!("instanceReuse: {{maxCalls: {REUSE_MAX_CALLS}}}\n");
        let plugin = Loop::new(self.plugin(&rt, &reuse), &objects, THROUGHPUT_WORKERS);
        results.throughput_reuse = rate("noop_guest_reuse/2_workers", &|| {
            rt.block_on(plugin.run(all, true))
        });
        drop(plugin);
        let native = Loop::new(NativeNoop, &objects, THROUGHPUT_WORKERS);
        results.throughput_native = rate("native_noop/2_workers", &|| {
            rt.block_on(native.run(all, true))
        });
        group.finish();
    }

    /// Part 4: reused instances, 1 KB.
    fn reuse(&self, c: &mut Criterion, results: &mut Results) {
        let rt = current_thread();
        let _context = rt.enter();
        let reuse = format!("instanceReuse: {{maxCalls: {REUSE_MAX_CALLS}}}\n");
        let plugin = self.plugin(&rt, &reuse);
        let objects = objects(LOOP_OBJECTS, 1 << 10);
        let requests: Vec<GuestRequest> = objects
            .iter()
            .map(|o| guest_request(o.name(), o.json()))
            .collect();
        let sample_size = self.sample_size;
        let mut group = per_call_group(c, "reuse", sample_size);
        let mut store = self.bare.store();
        let reconcile = rt.block_on(self.bare.instantiate(&mut store));
        results.reuse_bare = measure(&mut group, "bare_call/1KB", sample_size, Cpu::Thread, |n| {
            rt.block_on(async {
                let start = Instant::now();
                for request in requests.iter().cycle().take(n as usize) {
                    let (result,) = reconcile
                        .call_async(&mut store, (request,))
                        .await
                        .expect("no trap");
                    assert_done(result);
                }
                start.elapsed()
            })
        });
        results.reuse_call = measure(
            &mut group,
            "plugin_reconciler/1KB",
            sample_size,
            Cpu::Thread,
            |n| rt.block_on(reconcile_n(&plugin, &objects, n)),
        );
        let looped = Loop::new(plugin, &objects, 1);
        results.reuse_loop = measure(
            &mut group,
            "controller_loop/1KB",
            sample_size,
            Cpu::Thread,
            |n| rt.block_on(looped.run(n, false)),
        );
        group.finish();
    }
}

struct FreshRow {
    label: &'static str,
    bare: Option<Timing>,
    call: Option<Timing>,
    controller: Option<Timing>,
}

#[derive(Default)]
struct Results {
    /// Label, smallest and largest object in bytes.
    sizes: Vec<(&'static str, usize, usize)>,
    fresh: Vec<FreshRow>,
    native_loop: Option<Timing>,
    /// Seconds per reconcile (wall: elapsed / reconciles; CPU: all threads).
    throughput_fresh: Option<Timing>,
    throughput_recording: Option<Timing>,
    /// Alternating rounds of the fresh-instance run without and with recording: rounds and the
    /// median time of each.
    recording_rounds: Option<(usize, Duration, Duration)>,
    throughput_reuse: Option<Timing>,
    throughput_native: Option<Timing>,
    reuse_bare: Option<Timing>,
    reuse_call: Option<Timing>,
    reuse_loop: Option<Timing>,
}

fn us(seconds: f64) -> String {
    format!("{:.2} µs", seconds * 1e6)
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// `wall / CPU` cells of one value.
fn both(timing: Option<Timing>, cell: impl Fn(f64) -> String) -> String {
    timing.map_or_else(
        || "-".to_owned(),
        |t| format!("{} / {}", cell(t.wall), cell(t.cpu)),
    )
}

impl Results {
    fn print(&self, load_before: &str, load_after: &str, quick: bool) {
        let sizes: Vec<String> = self
            .sizes
            .iter()
            .map(|(label, min, max)| format!("{label} = {min}..{max} B"))
            .collect();
        println!(
            "\nRESULT plugins{}{}: noop guest, pooling allocator, objects {}, {LOOP_OBJECTS} \
             distinct objects cycled by every per-call variant; load average before \
             {load_before}, after {load_after}; each cell is wall / CPU time (median over \
             criterion's samples)",
            if std::env::var("PLUGINS_TRACED").ok().as_deref() == Some("1") {
                " [PLUGINS_TRACED: every reconcile traced, spans dropped by the exporter]"
            } else {
                ""
            },
            if quick {
                " [PLUGINS_QUICK smoke run]"
            } else {
                ""
            },
            sizes.join(", "),
        );
        println!("| per call | time | over bare | goal (wall / CPU) |");
        println!("|---|---|---|---|");
        let timing = |t: Option<Timing>| both(t, us);
        let ratio = |value: Option<Timing>, bare: Option<Timing>| {
            value.zip(bare).map(|(v, b)| Timing {
                wall: v.wall / b.wall,
                cpu: v.cpu / b.cpu,
            })
        };
        let delta = |value: Option<Timing>, bare: Option<Timing>| {
            value.zip(bare).map(|(v, b)| Timing {
                wall: v.wall - b.wall,
                cpu: v.cpu - b.cpu,
            })
        };
        for row in &self.fresh {
            let label = row.label;
            println!(
                "| 1. bare fresh-instance call, {label} | {} | | |",
                timing(row.bare)
            );
            for (what, value) in [
                ("PluginReconciler::reconcile", row.call),
                ("controller loop per key, 1 worker", row.controller),
            ] {
                let r = ratio(value, row.bare);
                println!(
                    "| 2. fresh instance, {label}: {what} | {} | {} ({} µs) | ≤ {FRESH_RATIO_GOAL:.1}x: {} |",
                    timing(value),
                    both(r, |x| format!("{x:.2}x")),
                    both(delta(value, row.bare), |x| format!("{:+.2}", x * 1e6)),
                    both(r, |x| verdict(x <= FRESH_RATIO_GOAL).to_owned()),
                );
            }
        }
        println!(
            "| native no-op reconciler: controller loop per key, 1 worker, 1KB | {} | | |",
            timing(self.native_loop)
        );
        println!(
            "| 4. bare reused-instance call, 1KB | {} | | |",
            timing(self.reuse_bare)
        );
        let net_loop = delta(self.reuse_loop, self.native_loop);
        for (what, value) in [
            ("PluginReconciler::reconcile", self.reuse_call),
            ("controller loop per key, 1 worker", self.reuse_loop),
            (
                "controller loop per key minus the native no-op loop",
                net_loop,
            ),
        ] {
            let over = delta(value, self.reuse_bare);
            println!(
                "| 4. reused instance, 1KB: {what} | {} | {} µs | ≤ +{REUSE_OVERHEAD_GOAL_US} µs: {} |",
                timing(value),
                both(over, |x| format!("{:+.2}", x * 1e6)),
                both(over, |x| verdict(x * 1e6 <= REUSE_OVERHEAD_GOAL_US)
                    .to_owned()),
            );
        }
        println!(
            "\n| 3. {THROUGHPUT_OBJECTS} cached 1KB objects queued, {THROUGHPUT_WORKERS} workers \
             | reconciles/s | vs native | CPU per reconcile (all threads) | {THROUGHPUT_WORKERS} \
             cores / CPU per reconcile | goal |"
        );
        println!("|---|---|---|---|---|---|");
        for (what, rate, goal) in [
            ("noop guest, fresh instance", self.throughput_fresh, true),
            (
                "noop guest, fresh instance, failures recorded (the host's default)",
                self.throughput_recording,
                false,
            ),
            ("noop guest, instance reuse", self.throughput_reuse, false),
            ("native no-op reconciler", self.throughput_native, false),
        ] {
            let Some(rate) = rate else {
                println!("| {what} | - | - | - | - | |");
                continue;
            };
            let vs_native = self
                .throughput_native
                .map_or_else(|| "-".to_owned(), |n| format!("{:.3}x", n.wall / rate.wall));
            let goal = if goal {
                format!(
                    "≥ {THROUGHPUT_GOAL:.0}/s: {}",
                    verdict(1.0 / rate.wall >= THROUGHPUT_GOAL)
                )
            } else {
                String::new()
            };
            println!(
                "| {what} | {:.0}/s | {vs_native} | {} | {:.0}/s | {goal} |",
                1.0 / rate.wall,
                us(rate.cpu),
                THROUGHPUT_WORKERS as f64 / rate.cpu,
            );
        }
        if let Some((rounds, plain, recording)) = self.recording_rounds {
            let rate = |d: Duration| THROUGHPUT_OBJECTS as f64 / d.as_secs_f64();
            let cost = (1.0 - rate(recording) / rate(plain)) * 100.0;
            println!(
                "\nrecording failures (the host's default), {rounds} alternating rounds, median: \
                 {:.0}/s without, {:.0}/s with: {cost:+.1}% of reconciles/s (goal: < \
                 {RECORDING_GOAL_PERCENT}%: {})",
                rate(plain),
                rate(recording),
                verdict(cost < RECORDING_GOAL_PERCENT)
            );
        }
    }
}
