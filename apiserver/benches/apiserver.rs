//! Benchmarks for the embedded API server's performance targets: creates/s from one kube-rs
//! client over HTTP, watch fan-out latency to 10 watchers, bulk load of 100,000 ~1 KB
//! ConfigMaps, and memory per stored object. Each prints the numbers the README quotes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use embedded_apiserver::{ApiServer, Config};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

const WATCHERS: usize = 10;
const FANOUT_WRITES: usize = 300;
const BULK_OBJECTS: usize = 100_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn cm(name: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".repeat(64))])),
        ..Default::default()
    }
}

/// A ~1 KB ConfigMap as JSON.
fn kilobyte_configmap(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("bulk-{i:06}"), "namespace": "default",
                     "labels": {"app": "bench", "shard": (i % 16).to_string()}},
        "data": {"payload": "x".repeat(880)},
    })
}

fn creates(c: &mut Criterion) {
    let rt = runtime();
    let _runtime = rt.enter();
    let server = rt
        .block_on(ApiServer::start(Config::default()))
        .expect("server");
    let api: Api<ConfigMap> = Api::default_namespaced(server.kube_client().expect("client"));
    let mut n = 0usize;
    let mut group = c.benchmark_group("creates");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("sequential_create_one_configmap", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let api = api.clone();
            let start_n = n;
            n += iters as usize;
            async move {
                let started = Instant::now();
                for i in 0..iters as usize {
                    api.create(&PostParams::default(), &cm(format!("seq-{}", start_n + i)))
                        .await
                        .expect("create");
                }
                started.elapsed()
            }
        })
    });
    group.finish();
    // Headline number: 5,000 sequential creates, then 5,000 with 16 in flight on one client.
    let (seq, conc) = rt.block_on(async {
        let started = Instant::now();
        for i in 0..5000 {
            api.create(&PostParams::default(), &cm(format!("head-{i}")))
                .await
                .expect("create");
        }
        let seq = 5000.0 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        futures::stream::iter(0..5000)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.create(&PostParams::default(), &cm(format!("conc-{i}")))
                        .await
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await
            .expect("creates");
        (seq, 5000.0 / started.elapsed().as_secs_f64())
    });
    println!(
        "RESULT creates/s from one kube-rs client over HTTP: sequential {seq:.0}, 16 in flight {conc:.0}"
    );
    rt.block_on(server.shutdown());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Fan-out latencies, per create and watcher.
#[derive(Default)]
struct Fanout {
    /// From the create call's return to the watcher's receipt (zero when the event arrived
    /// before the create response).
    after_return: Vec<Duration>,
    /// From the create request's start to the watcher's receipt.
    after_send: Vec<Duration>,
}

/// Opens `WATCHERS` watches, makes `writes` creates, and returns for each create and watcher
/// the time from the create's return to the watcher receiving the event.
async fn fanout_round(api: &Api<ConfigMap>, writes: usize, tag: u128) -> Fanout {
    let rv = api
        .list_metadata(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list version");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..WATCHERS {
        let api = api.clone();
        let tx = tx.clone();
        let rv = rv.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = api
                .watch(&WatchParams::default(), &rv)
                .await
                .expect("watch")
                .boxed();
            while let Some(Ok(e)) = stream.next().await {
                if let WatchEvent::Added(o) = e
                    && tx
                        .send((o.metadata.name.unwrap_or_default(), Instant::now()))
                        .is_err()
                {
                    break;
                }
            }
        }));
    }
    let mut latencies = Fanout::default();
    // Write 0 also waits for the watches to register; it is not measured.
    for i in 0..=writes {
        let name = format!("fan-{tag}-{i}");
        let sent = Instant::now();
        api.create(&PostParams::default(), &cm(name.clone()))
            .await
            .expect("create");
        let written = Instant::now();
        let mut got = 0;
        while got < WATCHERS {
            let (n, at) = rx.recv().await.expect("event");
            if n == name {
                got += 1;
                if i > 0 {
                    latencies
                        .after_return
                        .push(at.saturating_duration_since(written));
                    latencies
                        .after_send
                        .push(at.saturating_duration_since(sent));
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
    latencies
}

fn watch_fanout(c: &mut Criterion) {
    let rt = runtime();
    let _runtime = rt.enter();
    let server = rt
        .block_on(ApiServer::start(Config::default()))
        .expect("server");
    let api: Api<ConfigMap> = Api::default_namespaced(server.kube_client().expect("client"));
    let mut group = c.benchmark_group("watch_fanout");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("write_then_10_watchers_receive_mean_latency", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let api = api.clone();
            async move {
                let lat = fanout_round(&api, iters as usize, uuid_like()).await;
                lat.after_send.iter().sum::<Duration>() / WATCHERS as u32
            }
        })
    });
    group.finish();
    let mut lat = rt.block_on(fanout_round(&api, FANOUT_WRITES, uuid_like()));
    lat.after_return.sort();
    lat.after_send.sort();
    println!(
        "RESULT watch fan-out to {WATCHERS} watchers ({} samples): after the write returns p50 {:?}, \
         p99 {:?}, max {:?}; after the write is sent p50 {:?}, p99 {:?}",
        lat.after_return.len(),
        percentile(&lat.after_return, 0.50),
        percentile(&lat.after_return, 0.99),
        lat.after_return.last().copied().unwrap_or_default(),
        percentile(&lat.after_send, 0.50),
        percentile(&lat.after_send, 0.99),
    );
    rt.block_on(server.shutdown());
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn bulk_load(c: &mut Criterion) {
    let rt = runtime();
    let _runtime = rt.enter();
    // Headline first, before the criterion loop leaves freed memory for the allocator to reuse.
    let server = rt
        .block_on(ApiServer::start(Config::default()))
        .expect("server");
    let object_bytes = serde_json::to_vec(&kilobyte_configmap(0))
        .expect("json")
        .len();
    let rss_before = rss_bytes();
    let started = Instant::now();
    // Objects are generated on the fly so the RSS delta is what the store keeps.
    server
        .bulk_load((0..BULK_OBJECTS).map(kilobyte_configmap))
        .expect("bulk load");
    let took = started.elapsed();
    let rss_after = rss_bytes();
    let (count, stored) = server.stored_size();
    println!(
        "RESULT bulk load of {BULK_OBJECTS} ConfigMaps of {object_bytes} bytes: {took:?}; \
         stored size {} bytes/object over {count} objects; RSS delta {} bytes/object",
        stored / count.max(1),
        rss_after.saturating_sub(rss_before) / BULK_OBJECTS
    );
    rt.block_on(server.shutdown());
    let mut group = c.benchmark_group("bulk_load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("100k_1kb_configmaps", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let server = rt
                    .block_on(ApiServer::start(Config::default()))
                    .expect("server");
                let objects: Vec<Value> = (0..BULK_OBJECTS).map(kilobyte_configmap).collect();
                let started = Instant::now();
                server.bulk_load(objects).expect("bulk load");
                total += started.elapsed();
                rt.block_on(server.shutdown());
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bulk_load, creates, watch_fanout);
criterion_main!(benches);
