//! Runtime benchmarks, each a single measured run printing `RESULT` lines:
//!
//! - memory: 100,000 ConfigMaps of ~1 KB cached by our informer vs kube-runtime's reflector of
//!   `DynamicObject`, heap bytes counted by the global allocator, as a multiple of the JSON size;
//! - throughput: no-op reconciles/s with 10,000 objects and 4 workers, ours vs kube-runtime's
//!   `applier` (the core of its `Controller`) fed the same synthetic stream of keys;
//! - latency: event → reconcile start, p50/p99, at a steady 1,000 updates/s over HTTP;
//! - failover: from killing the leader to the first reconcile by the new one.
//!
//! Run: `cargo bench -p reconcile-host --bench runtime` (one part: append `-- memory`,
//! `throughput`, `latency` or `failover`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cap::Cap;
use embedded_apiserver::{ApiServer, Config};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{controller as kube_controller, watcher};
use parking_lot::Mutex;
use reconcile_host::controller::{Action, Controller, ObjectKey, Reconciler, Request};
use reconcile_host::election::ElectionConfig;
use reconcile_host::informer::{CachedObject, Informer, Predicates, Scope};
use reconcile_host::queue::{ControllerLimiter, RateLimitingQueue, default_controller_limiter};
use reconcile_host::runtime::{
    ControllerSpec, ElectionSettings, KindRef, Runtime, RuntimeSettings,
};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static HEAP: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

fn wanted(part: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|f| part.contains(f.as_str()))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if wanted("memory") {
        rt.block_on(memory());
    }
    if wanted("throughput") {
        rt.block_on(throughput());
    }
    if wanted("latency") {
        rt.block_on(latency());
    }
    if wanted("failover") {
        rt.block_on(failover(Timing::Short));
        rt.block_on(failover(Timing::Default));
    }
}

const MEMORY_OBJECTS: usize = 100_000;

fn config_map_json(i: usize) -> serde_json::Value {
    // ~1 KB: typical metadata plus a data section.
    let data: serde_json::Map<String, serde_json::Value> = (0..8)
        .map(|k| {
            (
                format!("key-{k}"),
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
            "labels": {"app": "bench", "shard": format!("{}", i % 16)},
        },
        "data": data,
    })
}

async fn memory() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    server
        .bulk_load((0..MEMORY_OBJECTS).map(config_map_json))
        .expect("bulk load");
    let client = server.kube_client().expect("client");
    let resource = ApiResource::erase::<ConfigMap>(&());

    // Ours.
    let before = HEAP.allocated();
    let informer = Informer::start(
        client.clone(),
        &resource,
        Scope {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: None,
            label_selector: None,
        },
        None,
    );
    informer.wait_synced().await;
    let ours = HEAP.allocated().saturating_sub(before);
    let json_bytes: usize = informer.store().list().iter().map(|o| o.json().len()).sum();
    assert_eq!(informer.store().len(), MEMORY_OBJECTS);
    drop(informer);

    // kube-runtime's reflector of DynamicObject.
    let before = HEAP.allocated();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
    let reader = writer.as_reader();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(|_| futures::future::ready(())));
    reader.wait_until_ready().await.expect("reflector ready");
    let theirs = HEAP.allocated().saturating_sub(before);
    assert_eq!(reader.len(), MEMORY_OBJECTS);
    task.abort();

    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "RESULT memory: {MEMORY_OBJECTS} ConfigMaps, {:.1} MB of JSON as served; our cache {:.1} MB \
         = {:.2}x the JSON; kube-runtime reflector of DynamicObject {:.1} MB = {:.2}x",
        mb(json_bytes),
        mb(ours),
        ours as f64 / json_bytes as f64,
        mb(theirs),
        theirs as f64 / json_bytes as f64
    );
    server.shutdown().await;
}

const THROUGHPUT_OBJECTS: usize = 10_000;
const THROUGHPUT_ROUNDS: usize = 20;
const WORKERS: usize = 4;

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

struct Noop(Arc<AtomicU64>);

impl Reconciler for Noop {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        debug_assert!(request.object.is_some());
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(Action::Done)
    }
}

async fn throughput() {
    // Ours: 20 rounds of adding every key, 4 workers, objects looked up in a map like a store.
    let objects: HashMap<ObjectKey, Arc<CachedObject>> = (0..THROUGHPUT_OBJECTS)
        .map(|i| {
            let object = CachedObject::from_json(&config_map_json(i).to_string()).unwrap();
            (object.key(), Arc::new(object))
        })
        .collect();
    let keys: Vec<ObjectKey> = objects.keys().cloned().collect();
    let count = Arc::new(AtomicU64::new(0));
    let queue = RateLimitingQueue::new(default_controller_limiter());
    let controller = Arc::new(Controller::new(
        "bench",
        queue.clone(),
        Noop(Arc::clone(&count)),
        move |key: &ObjectKey| objects.get(key).cloned(),
        WORKERS,
    ));
    let intake = CancellationToken::new();
    let start = Instant::now();
    let workers = tokio::spawn({
        let (controller, intake) = (Arc::clone(&controller), intake.clone());
        async move { controller.run(intake, CancellationToken::new()).await }
    });
    for _ in 0..THROUGHPUT_ROUNDS {
        for (i, key) in keys.iter().enumerate() {
            queue.add(key.clone());
            if i % 256 == 255 {
                tokio::task::yield_now().await;
            }
        }
    }
    while !(queue.is_empty() && queue.processing() == 0) {
        tokio::task::yield_now().await;
    }
    let ours_elapsed = start.elapsed();
    intake.cancel();
    workers.await.unwrap();
    let ours = count.load(Ordering::Relaxed);

    // kube-runtime: its applier (the core of `Controller`) over a ready reflector store, fed the
    // same rounds of object refs through a stream that stays open, as a controller's trigger
    // stream does (a finished stream starts the applier's shutdown).
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Init);
    let refs: Vec<ObjectRef<ConfigMap>> = (0..THROUGHPUT_OBJECTS)
        .map(|i| {
            let cm: ConfigMap = serde_json::from_value(config_map_json(i)).expect("ConfigMap");
            let r = ObjectRef::from_obj(&cm);
            writer.apply_watcher_event(&watcher::Event::InitApply(cm));
            r
        })
        .collect();
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let theirs = Arc::new(AtomicU64::new(0));
    let requests = futures::stream::iter(
        (0..THROUGHPUT_ROUNDS).flat_map(move |_| refs.clone().into_iter().map(Ok::<_, Infallible>)),
    )
    .chain(futures::stream::pending());
    let start = Instant::now();
    let last = Arc::new(Mutex::new(start));
    let (counter, stamp) = (Arc::clone(&theirs), Arc::clone(&last));
    let applier = kube_controller::applier(
        move |_object: Arc<ConfigMap>, _ctx: Arc<()>| {
            counter.fetch_add(1, Ordering::Relaxed);
            *stamp.lock() = Instant::now();
            futures::future::ready(Ok::<_, Never>(kube_controller::Action::await_change()))
        },
        |_object, _error: &Never, _ctx| kube_controller::Action::await_change(),
        Arc::new(()),
        reader,
        requests,
        kube_controller::Config::default().concurrency(WORKERS as u16),
    )
    .for_each(|_| futures::future::ready(()));
    let running = tokio::spawn(applier);
    quiet(&theirs).await;
    running.abort();
    let theirs_elapsed = *last.lock() - start;
    let theirs = theirs.load(Ordering::Relaxed);

    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "RESULT throughput ({THROUGHPUT_ROUNDS} rounds of {THROUGHPUT_OBJECTS} keys, duplicates \
         merged, {WORKERS} workers, no-op reconciler): ours {ours} reconciles in {:.1} ms = \
         {:.0}/s; kube-runtime applier {theirs} in {:.1} ms = {:.0}/s; ratio {:.2}",
        ours_elapsed.as_secs_f64() * 1e3,
        rate(ours, ours_elapsed),
        theirs_elapsed.as_secs_f64() * 1e3,
        rate(theirs, theirs_elapsed),
        rate(ours, ours_elapsed) / rate(theirs, theirs_elapsed)
    );
}

/// Waits until `count` has been non-zero and unchanged for 200 ms; at most 60 s.
async fn quiet(count: &AtomicU64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = count.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = count.load(Ordering::Relaxed);
        if now == seen && now > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "reconciles never settled ({now} so far)"
        );
        seen = now;
    }
}

/// Reconcile start times by (name, resourceVersion).
type Seen = Arc<Mutex<HashMap<(String, String), Instant>>>;

struct Timestamps(Seen);

impl Reconciler for Timestamps {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        let now = Instant::now();
        if let Some(object) = request.object {
            self.0
                .lock()
                .entry((
                    object.name().to_owned(),
                    object.resource_version().to_owned(),
                ))
                .or_insert(now);
        }
        Ok(Action::Done)
    }
}

fn spec() -> ControllerSpec {
    ControllerSpec {
        name: "bench".into(),
        for_kind: KindRef::new("v1", "ConfigMap"),
        owns: Vec::new(),
        namespace: Some("default".into()),
        label_selector: None,
        predicates: Predicates::default(),
        resync: None,
        workers: WORKERS,
        limiter: ControllerLimiter::default(),
        placement: reconcile_host::shard::Placement::Keys,
    }
}

const LATENCY_OBJECTS: usize = 100;
const LATENCY_RATE: u64 = 1_000;
const LATENCY_SECONDS: u64 = 5;

async fn latency() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    server
        .bulk_load((0..LATENCY_OBJECTS).map(config_map_json))
        .expect("bulk load");
    let client = server.kube_client().expect("client");
    let seen: Seen = Arc::default();
    let runtime = Runtime::new(
        client.clone(),
        RuntimeSettings {
            election: None,
            drain_timeout: Duration::from_secs(5),
        },
    );
    runtime
        .add_controller(spec(), Timestamps(Arc::clone(&seen)))
        .await
        .expect("controller");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));

    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut writes = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / LATENCY_RATE));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let total = (LATENCY_RATE * LATENCY_SECONDS) as usize;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    for i in 0..total {
        ticks.tick().await;
        let (api, tx) = (api.clone(), tx.clone());
        let name = format!("cm-{:06}", i % LATENCY_OBJECTS);
        tokio::spawn(async move {
            let patch = json!({"data": {"tick": i.to_string()}});
            let params = kube::api::PatchParams::default();
            let sent = Instant::now();
            if let Ok(cm) = api
                .patch(&name, &params, &kube::api::Patch::Merge(&patch))
                .await
            {
                let rv = cm.metadata.resource_version.unwrap_or_default();
                let _ = tx.send((name, rv, sent, Instant::now()));
            }
        });
    }
    drop(tx);
    while let Some(write) = rx.recv().await {
        writes.push(write);
    }
    let offered = total as f64 / started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    let (mut from_sent, mut from_returned): (Vec<f64>, Vec<f64>) = {
        let seen = seen.lock();
        writes
            .iter()
            .filter_map(|(name, rv, sent, returned)| {
                let at = seen.get(&(name.clone(), rv.clone()))?;
                let ms = |since: &Instant| at.saturating_duration_since(*since).as_secs_f64() * 1e3;
                Some((ms(sent), ms(returned)))
            })
            .unzip()
    };
    from_sent.sort_by(f64::total_cmp);
    from_returned.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!(
        "RESULT latency: {} updates at {offered:.0}/s over HTTP, {} reconciled at their own \
         version; write sent -> reconcile start p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; \
         write returned -> reconcile start p50 {:.2} ms, p99 {:.2} ms (the watch event often \
         reaches the host before the response reaches the writer)",
        writes.len(),
        from_sent.len(),
        at(&from_sent, 0.5),
        at(&from_sent, 0.99),
        at(&from_sent, 1.0),
        at(&from_returned, 0.5),
        at(&from_returned, 0.99),
    );
    server.shutdown().await;
}

#[derive(Clone, Copy, Debug)]
enum Timing {
    Short,
    Default,
}

async fn failover(timing: Timing) {
    let (lease, renew, retry) = match timing {
        Timing::Short => (
            Duration::from_secs(3),
            Duration::from_secs(2),
            Duration::from_millis(500),
        ),
        Timing::Default => (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2),
        ),
    };
    let server = ApiServer::start(Config::default()).await.expect("server");
    server
        .bulk_load((0..10).map(config_map_json))
        .expect("bulk load");
    let client = server.kube_client().expect("client");
    let dispatches: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let mut replicas = HashMap::new();
    for id in ["a", "b"] {
        let runtime = Runtime::new(
            client.clone(),
            RuntimeSettings {
                election: Some(ElectionSettings {
                    lease_namespace: "default".into(),
                    lease_name: "failover".into(),
                    config: ElectionConfig {
                        identity: id.into(),
                        lease_duration: lease,
                        renew_deadline: renew,
                        retry_period: retry,
                        release_on_cancel: true,
                    },
                    exit_on_loss: false,
                    sharded: false,
                }),
                drain_timeout: Duration::from_secs(5),
            },
        );
        runtime
            .add_controller(spec(), Recording(id.into(), Arc::clone(&dispatches)))
            .await
            .expect("controller");
        let mut leading = runtime.leading();
        let running = tokio::spawn(runtime.run(CancellationToken::new()));
        replicas.insert(id, (running, leading.clone()));
        let _ = leading.borrow_and_update();
    }
    // Wait for a leader, then kill it without release.
    let leader = loop {
        if let Some((id, _)) = replicas.iter().find(|(_, (_, l))| *l.borrow()) {
            break *id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (task, _) = replicas.remove(leader).unwrap();
    task.abort();
    let killed = Instant::now();
    let writer = tokio::spawn(async move {
        for i in 0.. {
            let patch = json!({"data": {"tick": i.to_string()}});
            let _ = api
                .patch(
                    "cm-000000",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let first = loop {
        let next = dispatches
            .lock()
            .iter()
            .find(|(id, at)| id != leader && *at > killed)
            .map(|(_, at)| *at);
        if let Some(at) = next {
            break at;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    writer.abort();
    println!(
        "RESULT failover ({timing:?}: lease {lease:?}, renew {renew:?}, retry {retry:?}): leader \
         killed -> first reconcile by the new leader {:.2} s",
        (first - killed).as_secs_f64()
    );
    for (_, (task, _)) in replicas {
        task.abort();
    }
    server.shutdown().await;
}

struct Recording(String, Arc<Mutex<Vec<(String, Instant)>>>);

impl Reconciler for Recording {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, _request: Request<CachedObject>) -> Result<Action, Never> {
        self.1.lock().push((self.0.clone(), Instant::now()));
        Ok(Action::Done)
    }
}
