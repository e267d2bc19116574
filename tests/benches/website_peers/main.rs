//! The website example against its controller-runtime twin on one kube-apiserver + etcd: CPU
//! per reconcile, reconciles/s, memory and latency, side by side in one run.
//!
//! Sides (`SIDES`, default `cr,rust,go,js`): controller-runtime's `website-controller`
//! (`benches/peers/cmd/website-controller`, the example written as a kubebuilder project would)
//! and `reconcile-host` running the example compiled from Rust, Go and JavaScript. Every side
//! applies with field manager `website`, watches the same kinds and asks for the same 60 s
//! recheck.
//!
//! 1. `WEBSITES` (10,000) Websites are created and a first, unmeasured controller-runtime run
//!    creates their Deployments and Services and writes their statuses, so that every measured
//!    side starts from the same converged state.
//! 2. Per side, one after the other, `ROUNDS` times (default 1):
//!    - **pass**: the side starts and reconciles every Website once (the no-change reconcile a
//!      restart or resync makes: three applies the server finds unchanged). From its first to its
//!      `WEBSITES`th reconcile: reconciles/s (the API server is the bound: it is said when it
//!      is), the side's CPU per reconcile;
//!    - **updates**: `UPDATES` (2,000) Websites get a new `spec.replicas`, `RATE` (20) per second;
//!      latency from the update's answer (the server has committed it; its watch event leaves
//!      then) to the bench's watch seeing the status at the new generation (the reconcile's
//!      last write); p50, p99; CPU per reconcile over the phase;
//!    - **memory**: RSS afterwards (10,000 Websites, Deployments and Services cached), and the
//!      peak;
//! 3. `CACHE_OBJECTS` (100,000; 0 skips it) ConfigMaps of ~1 KB: memory per cached object of the
//!    host and of a controller-runtime cache (typed and metadata-only), see `cache.rs`.
//!
//! `E2E_BACKEND=real cargo bench -p end-to-end --bench website_peers` (the embedded server is
//! refused: the comparison is about a real API server); `SIDES=` (empty) runs step 3 alone.

mod cache;
#[path = "../../common/mod.rs"]
mod common;
mod latency;
mod sides;

use std::time::{Duration, Instant};

use common::backend::Backend;
use common::host::scratch;
use common::process::{cpu_of, status_bytes};
use common::website::{crd, sample_website, websites};
use embedded_apiserver::Config;
use kube::api::PostParams;
use sides::{Running, Side};

const NAMESPACE: &str = "website-peers";
/// Creates in flight while the Websites are written.
const CREATE_CONCURRENCY: usize = 32;
const POLL: Duration = Duration::from_millis(100);
/// The examples' recheck, which every measured side uses.
const RECHECK: Duration = Duration::from_secs(60);

pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |n| {
        n.parse()
            .unwrap_or_else(|_| panic!("{name}={n} is not a number; give a whole number"))
    })
}

/// One side's figures from one round.
struct Row {
    side: Side,
    pass_rate: f64,
    pass_cpu_us: f64,
    server_cpu_us: f64,
    update_cpu_us: f64,
    p50_ms: f64,
    p99_ms: f64,
    rss: u64,
    peak: u64,
}

/// Waits until `running` has made `target` reconciles; the samples at its first reconcile and at
/// the end: (when, reconciles, its CPU, the API server's CPU).
async fn pass(
    running: &mut Running,
    target: f64,
    server: &[u32],
    limit: Duration,
) -> [(Instant, f64, Duration, Duration); 2] {
    let deadline = Instant::now() + limit;
    let pid = running.pid();
    let sample = |reconciles: f64| {
        (
            Instant::now(),
            reconciles,
            cpu_of(pid),
            server.iter().map(|pid| cpu_of(*pid)).sum::<Duration>(),
        )
    };
    let mut first = None;
    loop {
        assert!(
            running.running(),
            "website_peers: the side exited; its log:\n{}",
            running.log_tail()
        );
        let reconciles = running.reconciles().await;
        assert!(
            Instant::now() < deadline,
            "website_peers: {reconciles} of {target} reconciles within {limit:?}; its log:\n{}",
            running.log_tail()
        );
        if reconciles > 0.0 && first.is_none() {
            first = Some(sample(reconciles));
        }
        if reconciles >= target {
            return [first.expect("sampled"), sample(reconciles)];
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn measure(
    side: Side,
    backend: &Backend,
    server: &[u32],
    round: u64,
    kubeconfig: &std::path::Path,
) -> Row {
    let count = env_number("WEBSITES", 10_000);
    let dir = scratch(&format!("website-peers-{}", side.label()));
    let mut running = Running::start(side, kubeconfig, &dir, RECHECK);
    let limit = Duration::from_secs(300 + count / 10);
    let [first, last] = pass(&mut running, count as f64, server, limit).await;
    let reconciles = last.1 - first.1;
    let seconds = last.0.duration_since(first.0).as_secs_f64();
    let per = |d: Duration| d.as_secs_f64() / reconciles * 1e6;
    let (pass_rate, pass_cpu_us, server_cpu_us) = (
        reconciles / seconds,
        per(last.2 - first.2),
        per(last.3 - first.3),
    );
    println!(
        "RESULT website_peers side={} round={round} phase=pass reconciles={reconciles:.0} \
         seconds={seconds:.2} rate={pass_rate:.0}/s cpu_per_reconcile_us={pass_cpu_us:.0} \
         apiserver_cpu_per_reconcile_us={server_cpu_us:.0}",
        side.label()
    );
    if let Some([guest, instantiate, import]) = running.plugin_seconds().await {
        let per = |seconds: f64| seconds / last.1 * 1e6;
        println!(
            "RESULT website_peers side={} round={round} phase=pass-split guest_us={:.0} \
             instantiate_us={:.0} import_us={:.0} (wall time per reconcile, host counters)",
            side.label(),
            per(guest),
            per(instantiate),
            per(import)
        );
    }

    let updates = env_number("UPDATES", 2_000) as usize;
    let rate = env_number("RATE", 20);
    let api = websites(backend, "example.com", NAMESPACE);
    let cpu_before = cpu_of(running.pid());
    let reconciles_before = running.reconciles().await;
    // A value no Website holds yet (the sample's is 2): the update changes every Website it
    // touches.
    let replicas = 10 + round * 4 + side as u64;
    let latencies = latency::updates(&api, count as usize, updates, rate, replicas).await;
    let update_reconciles = running.reconciles().await - reconciles_before;
    let update_cpu_us =
        (cpu_of(running.pid()) - cpu_before).as_secs_f64() / update_reconciles * 1e6;
    let (p50_ms, p99_ms) = (
        latency::quantile(&latencies, 0.5),
        latency::quantile(&latencies, 0.99),
    );
    println!(
        "RESULT website_peers side={} round={round} phase=updates updates={updates} rate={rate}/s \
         reconciles={update_reconciles:.0} cpu_per_reconcile_us={update_cpu_us:.0} \
         latency_p50_ms={p50_ms:.1} latency_p99_ms={p99_ms:.1} max_ms={:.1}",
        side.label(),
        latency::quantile(&latencies, 1.0)
    );
    assert!(running.running(), "website_peers: the side exited");
    let (rss, peak) = (
        status_bytes(running.pid(), "VmRSS"),
        status_bytes(running.pid(), "VmHWM"),
    );
    println!(
        "RESULT website_peers side={} round={round} phase=memory rss_mib={:.1} peak_mib={:.1}",
        side.label(),
        rss as f64 / 1048576.0,
        peak as f64 / 1048576.0
    );
    Row {
        side,
        pass_rate,
        pass_cpu_us,
        server_cpu_us,
        update_cpu_us,
        p50_ms,
        p99_ms,
        rss,
        peak,
    }
}

/// Creates the Websites and lets controller-runtime converge them once, unmeasured.
async fn populate(backend: &Backend, kubeconfig: &std::path::Path) {
    let count = env_number("WEBSITES", 10_000) as usize;
    crd(backend, "examples/website").await;
    common::namespace(backend, NAMESPACE, &[]).await;
    let api = websites(backend, "example.com", NAMESPACE);
    let created = Instant::now();
    let template = sample_website("examples/website", "site", NAMESPACE, "example.com");
    let mut creators = tokio::task::JoinSet::new();
    for lane in 0..CREATE_CONCURRENCY {
        let (api, template) = (api.clone(), template.clone());
        creators.spawn(async move {
            for i in (lane..count).step_by(CREATE_CONCURRENCY) {
                let mut website = template.clone();
                website.metadata.name = Some(latency::site(i));
                api.create(&PostParams::default(), &website)
                    .await
                    .unwrap_or_else(|error| {
                        panic!("Website {} not created: {error}", latency::site(i))
                    });
            }
        });
    }
    while let Some(result) = creators.join_next().await {
        result.expect("a creating task panicked");
    }
    println!(
        "website_peers: {count} Websites created in {:.1} s",
        created.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let dir = scratch("website-peers-populate");
    // A long recheck: this run only has to create the children once.
    let mut running = Running::start(
        Side::ControllerRuntime,
        kubeconfig,
        &dir,
        Duration::from_secs(3600),
    );
    let seen = latency::Statuses::follow(api.clone());
    seen.wait_all_at_generation(count, Duration::from_secs(600 + count as u64 / 5))
        .await;
    assert!(
        running.running(),
        "website_peers: the populating controller exited"
    );
    drop(running);
    println!(
        "website_peers: their Deployments, Services and statuses written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| side | reconciles/s (pass) | CPU/reconcile, pass | CPU/reconcile, updates | API server CPU/reconcile, pass | latency p50 / p99 | RSS after / peak |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows {
        println!(
            "| {} | {:.0} | {:.0} µs | {:.0} µs | {:.0} µs | {:.1} / {:.1} ms | {:.1} / {:.1} MiB |",
            row.side.label(),
            row.pass_rate,
            row.pass_cpu_us,
            row.update_cpu_us,
            row.server_cpu_us,
            row.p50_ms,
            row.p99_ms,
            row.rss as f64 / 1048576.0,
            row.peak as f64 / 1048576.0
        );
    }
}

#[tokio::main]
async fn main() {
    assert!(
        common::backend::real(),
        "website_peers compares controllers on kube-apiserver: run it with E2E_BACKEND=real"
    );
    // `SIDES=` (empty) measures the cache alone.
    let sides: Vec<Side> = std::env::var("SIDES")
        .unwrap_or_else(|_| "cr,rust,go,js".to_owned())
        .split(',')
        .filter(|side| !side.trim().is_empty())
        .map(Side::parse)
        .collect();
    let rounds = env_number("ROUNDS", 1);
    let build_dir = scratch("website-peers-build");
    for side in &sides {
        sides::prepare(*side, &build_dir);
    }
    let cache_objects = env_number("CACHE_OBJECTS", 100_000) as usize;
    if cache_objects > 0 {
        cache::prepare();
    }
    let backend = Backend::start(Config::default())
        .await
        .expect("the API server starts");
    let plane = backend.control_plane().expect("a real control plane");
    let (apiserver, etcd) = plane.pids();
    let server = [apiserver, etcd];
    let dir = scratch("website-peers");
    let kubeconfig = dir.join("kubeconfig");
    backend
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    println!(
        "website_peers: {} CPUs; load average {}",
        std::thread::available_parallelism().map_or(1, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    if !sides.is_empty() {
        populate(&backend, &kubeconfig).await;
    }
    let mut rows = Vec::new();
    for round in 0..rounds {
        // Alternate the order from round to round.
        let order: Vec<Side> = if round % 2 == 0 {
            sides.clone()
        } else {
            sides.iter().rev().copied().collect()
        };
        for side in order {
            rows.push(measure(side, &backend, &server, round, &kubeconfig).await);
        }
    }
    if !rows.is_empty() {
        print_table(&rows);
    }
    if cache_objects > 0 {
        cache::run(&backend, &kubeconfig, cache_objects).await;
    }
    println!(
        "website_peers: load average at the end {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
