//! Guests across languages: the noop guest of each language — Rust (`host/tests/guests/noop`),
//! Python, JavaScript, C and Go (`host/tests/guests/noop-<language>/`, each built by its own
//! `build.sh`, which installs the pinned toolchain) — on the host's engine with the pooling
//! allocator. Every noop reads the request and answers `done`; what differs is the language
//! runtime inside the component.
//!
//! Per language:
//! - artefact: the component's size;
//! - compile: `Component::new` from the bytes with Cranelift, no module cache (median of
//!   `COMPILE_RUNS`);
//! - precompiled load: what a host restart costs with a warm module cache — a fresh
//!   `ModuleLoader` reads the file, digests it, maps the compiled code from the on-disk cache
//!   and links it (median of `LOAD_RUNS`);
//! - instantiation: a new store and an instance from the host's linker (criterion);
//! - per reconcile, fresh instance and reused instance: `PluginReconciler::reconcile` with a
//!   1 KB ConfigMap (criterion);
//! - reconciles/s: a controller with 2 workers over `THROUGHPUT_OBJECTS` cached 1 KB objects,
//!   all queued, fresh instance per call and instance reuse (criterion).
//!
//! Run: `cargo bench -p reconcile-host --bench languages` (a few minutes on 2 cores, most of it
//! compiling the Python component); `LANGUAGES=rust,c` selects languages. Besides criterion's
//! lines it prints one `RESULT` table, the README's.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine, stub_withheld};
use reconcile_host::wasm::module::{ModuleLoader, hex_sha256};
use reconcile_host::wasm::state::GuestState;
use tokio::runtime::Runtime;
use wasmtime::Store;
use wasmtime::component::Component;

use support::*;

/// Objects behind the reconciles/s runs.
const THROUGHPUT_OBJECTS: usize = 2_000;
/// Workers of the reconciles/s runs: one per core of the reference machine.
const THROUGHPUT_WORKERS: usize = 2;
/// Distinct objects cycled through by the per-call runs.
const CALL_OBJECTS: usize = 200;
const COMPILE_RUNS: usize = 3;
const LOAD_RUNS: usize = 10;
const REUSE: &str = "instanceReuse: {maxCalls: 100000}\n";

/// A language and how its noop guest is built.
struct Language {
    name: &'static str,
    build: fn() -> PathBuf,
}

const LANGUAGES: [Language; 5] = [
    Language {
        name: "rust",
        build: || build_rust_guest("noop"),
    },
    Language {
        name: "python",
        build: || build_scripted_guest("host/tests/guests/noop-python/build.sh", "noop-python"),
    },
    Language {
        name: "javascript",
        build: || build_scripted_guest("host/tests/guests/noop-js/build.sh", "noop-js"),
    },
    Language {
        name: "c",
        build: || build_scripted_guest("host/tests/guests/noop-c/build.sh", "noop-c"),
    },
    Language {
        name: "go",
        build: || build_scripted_guest("host/tests/guests/noop-go/build.sh", "noop-go"),
    },
];

#[derive(Default)]
struct Row {
    language: &'static str,
    size: u64,
    compile: Duration,
    load: Duration,
    instantiate: Option<Timing>,
    fresh: Option<Timing>,
    reuse: Option<Timing>,
    /// Seconds per reconcile of the 2-worker runs.
    rate_fresh: Option<Timing>,
    rate_reuse: Option<Timing>,
}

fn main() {
    let selected: Option<Vec<String>> = std::env::var("LANGUAGES")
        .ok()
        .map(|list| list.split(',').map(|s| s.trim().to_owned()).collect());
    let languages: Vec<&Language> = LANGUAGES
        .iter()
        .filter(|l| {
            selected
                .as_ref()
                .is_none_or(|s| s.iter().any(|n| n == l.name))
        })
        .collect();
    assert!(
        !languages.is_empty(),
        "LANGUAGES selects none of rust, python, javascript, c"
    );
    let load_before = loadavg();
    let cache = std::env::temp_dir().join(format!("languages-bench-{}", std::process::id()));
    let cached = PluginEngine::new(EngineSettings {
        pooling: true,
        module_cache: Some(cache.clone()),
    })
    .expect("engine");
    assert!(cached.pooling(), "the pooling allocator is available");
    let uncached = PluginEngine::new(EngineSettings {
        pooling: false,
        module_cache: None,
    })
    .expect("engine");
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10)
        .without_plots()
        .configure_from_args();
    let mut rows = Vec::new();
    for language in languages {
        let wasm = (language.build)();
        println!("== {}: {}", language.name, wasm.display());
        rows.push(measure_language(
            &mut criterion,
            language.name,
            &wasm,
            &cached,
            &uncached,
        ));
    }
    criterion.final_summary();
    let _ = std::fs::remove_dir_all(&cache);
    print(&rows, &load_before, &loadavg());
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn measure_language(
    c: &mut Criterion,
    language: &'static str,
    wasm: &Path,
    cached: &PluginEngine,
    uncached: &PluginEngine,
) -> Row {
    let bytes = std::fs::read(wasm).expect("component readable");
    let compile = median(
        (0..COMPILE_RUNS)
            .map(|_| {
                let start = Instant::now();
                Component::new(uncached.engine(), &bytes).expect("compiles");
                start.elapsed()
            })
            .collect(),
    );
    let rt = current_thread();
    let _context = rt.enter();
    // The first load fills the on-disk cache; the measured ones find it there.
    rt.block_on(ModuleLoader::new(cached.clone()).load(wasm))
        .expect("loads");
    let load = median(
        (0..LOAD_RUNS)
            .map(|_| {
                let loader = ModuleLoader::new(cached.clone());
                let start = Instant::now();
                rt.block_on(loader.load(wasm)).expect("loads");
                start.elapsed()
            })
            .collect(),
    );
    let objects = objects(CALL_OBJECTS, 1 << 10);
    let mut group = c.benchmark_group(format!("languages/{language}"));
    group.sampling_mode(SamplingMode::Flat);
    let instantiate = {
        // As a host loads it: mapped from the module cache.
        let component = cached
            .component(&hex_sha256(&bytes), &bytes)
            .expect("mapped from the module cache");
        // As the module loader links it: the withheld WASI interfaces stubbed.
        let mut linker = cached.linker().clone();
        stub_withheld(&mut linker, &component).expect("stubs the withheld WASI");
        let pre = linker.instantiate_pre(&component).expect("links");
        let context = Arc::new(plugin_context(wasm, ""));
        measure(&mut group, "instantiate", 10, Cpu::Thread, |n| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    let mut store = Store::new(cached.engine(), GuestState::new(context.clone()));
                    store.epoch_deadline_async_yield_and_update(1);
                    pre.instantiate_async(&mut store)
                        .await
                        .expect("instantiates");
                }
                start.elapsed()
            })
        })
    };
    let fresh = plugin_reconciler(cached, &rt, wasm, "");
    let fresh_call = measure(&mut group, "reconcile_fresh/1KB", 10, Cpu::Thread, |n| {
        rt.block_on(reconcile_n(&fresh, &objects, n))
    });
    let reused = plugin_reconciler(cached, &rt, wasm, REUSE);
    let reuse_call = measure(&mut group, "reconcile_reuse/1KB", 10, Cpu::Thread, |n| {
        rt.block_on(reconcile_n(&reused, &objects, n))
    });
    group.finish();
    drop(_context);
    let (rate_fresh, rate_reuse) = throughput(c, language, cached, wasm);
    Row {
        language,
        size: bytes.len() as u64,
        compile,
        load,
        instantiate,
        fresh: fresh_call,
        reuse: reuse_call,
        rate_fresh,
        rate_reuse,
    }
}

/// Seconds per reconcile of 2 workers over `THROUGHPUT_OBJECTS` queued objects: fresh instances,
/// then instance reuse.
fn throughput(
    c: &mut Criterion,
    language: &str,
    engine: &PluginEngine,
    wasm: &Path,
) -> (Option<Timing>, Option<Timing>) {
    let rt: Runtime = multi_thread(THROUGHPUT_WORKERS);
    let _context = rt.enter();
    let objects = objects(THROUGHPUT_OBJECTS, 1 << 10);
    let mut group = c.benchmark_group(format!("languages/{language}/throughput"));
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(THROUGHPUT_OBJECTS as u64));
    let all = THROUGHPUT_OBJECTS as u64;
    let mut rate = |id: &str, extra: &str| {
        let looped = Loop::new(
            plugin_reconciler(engine, &rt, wasm, extra),
            &objects,
            THROUGHPUT_WORKERS,
        );
        measure(&mut group, id, 10, Cpu::Process, |n| {
            (0..n).map(|_| rt.block_on(looped.run(all, true))).sum()
        })
        .map(|run| Timing {
            wall: run.wall / THROUGHPUT_OBJECTS as f64,
            cpu: run.cpu / THROUGHPUT_OBJECTS as f64,
        })
    };
    let fresh = rate("fresh/2_workers", "");
    let reuse = rate("reuse/2_workers", REUSE);
    group.finish();
    (fresh, reuse)
}

fn print(rows: &[Row], load_before: &str, load_after: &str) {
    println!(
        "\nRESULT languages: noop guest per language, pooling allocator, 1 KB ConfigMaps; load \
         average before {load_before}, after {load_after}; timings are wall-clock medians \
         (CPU time in parentheses where criterion measured it)"
    );
    let header: Vec<&str> = rows.iter().map(|r| r.language).collect();
    println!("| | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(rows.len()));
    let line = |what: &str, cell: &dyn Fn(&Row) -> String| {
        let cells: Vec<String> = rows.iter().map(cell).collect();
        println!("| {what} | {} |", cells.join(" | "));
    };
    let time = |t: Option<Timing>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| format!("{} ({})", human(t.wall), human(t.cpu)),
        )
    };
    let rate =
        |t: Option<Timing>| t.map_or_else(|| "-".to_owned(), |t| format!("{:.0}/s", 1.0 / t.wall));
    line("component size", &|r| {
        if r.size >= 1_000_000 {
            format!("{:.1} MB", r.size as f64 / 1e6)
        } else {
            format!("{:.0} KB", r.size as f64 / 1e3)
        }
    });
    line("compile (Cranelift, no cache)", &|r| {
        human(r.compile.as_secs_f64())
    });
    line("precompiled load (warm module cache)", &|r| {
        human(r.load.as_secs_f64())
    });
    line("instantiation", &|r| time(r.instantiate));
    line("reconcile, fresh instance", &|r| time(r.fresh));
    line("reconcile, reused instance", &|r| time(r.reuse));
    line(
        &format!("reconciles/s, {THROUGHPUT_WORKERS} workers, fresh instance"),
        &|r| rate(r.rate_fresh),
    );
    line(
        &format!("reconciles/s, {THROUGHPUT_WORKERS} workers, reused instance"),
        &|r| rate(r.rate_reuse),
    );
}

/// Seconds in the unit that suits them.
fn human(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.2} µs", seconds * 1e6)
    }
}
