//! Cost per reconcile under a realistic guest: the real `reconcile-host` binary runs the Rust
//! `website` example (each Website server-side applies a Deployment, a Service and its status)
//! over N Websites created before the host starts, until every Website has converged (its status
//! at its generation, written only after its Deployment and Service were applied; a watch follows
//! the statuses, and lists check the children once at the end).
//!
//! Reported over the window from the first poll that sees a reconcile to the first poll after
//! the last Website converged: reconciles/s and Websites/s, the host's CPU per reconcile (from `/proc`), the API
//! server's CPU per reconcile, and where a reconcile's wall time goes by the host's own counters
//! (`reconcile_host_plugin_{guest,instantiate,import,api_wait}_seconds_total`): running guest
//! code, creating its instance, host work inside imports, waiting on the API server.
//!
//! A Website is reconciled more than once: the creation of its Deployment and Service (owned
//! kinds) queues it again, and the second reconcile applies the same objects (no change); and
//! the example asks to be reconciled again 60 s after each reconcile, so when a first pass over
//! the Websites takes longer than that, rechecks share the window. Every figure is per reconcile,
//! whichever kind; the window ends at convergence, not when the queue runs dry (with rechecks
//! it never does).
//!
//! `cargo bench -p end-to-end --bench website_cost`; `WEBSITES=<n>` changes the 10,000;
//! `ACT_AS=<namespace>/<name>` makes the plugin act as that ServiceAccount (impersonated);
//! `E2E_BACKEND=real` runs against kube-apiserver and etcd (their CPU is read from `/proc`; the
//! embedded server runs inside this process, so its CPU is this process's, polling included).

#[path = "../common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::backend::Backend;
use common::host::{Host, component, manifest, scratch};
use common::process::cpu_of;
use common::website::{crd, sample_website, websites};
use embedded_apiserver::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DynamicObject, ListParams, PostParams};

const PLUGIN: &str = "website";
const NAMESPACE: &str = "website-cost";
/// Creates in flight while the Websites are written.
const CREATE_CONCURRENCY: usize = 32;
/// How often the host's metrics and the processes' CPU are sampled.
const POLL: Duration = Duration::from_millis(100);
/// The host imports, as labelled in `reconcile_host_plugin_import_seconds_total`.
const IMPORTS: [&str; 10] = [
    "cache.get",
    "cache.list",
    "client.apply",
    "client.patch",
    "client.create",
    "client.replace",
    "client.delete",
    "client.get",
    "events.record-event",
    "log.log",
];

fn websites_wanted() -> usize {
    std::env::var("WEBSITES")
        .ok()
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("WEBSITES={n} is not a count; give a whole number"))
        })
        .unwrap_or(10_000)
}

/// Upper bound on the wait for convergence: generous for the slowest backend (kube-apiserver
/// and etcd on two cores shared with the host manage about 60 of this guest's reconciles/s).
fn converge_wait(websites: usize) -> Duration {
    Duration::from_secs(120 + websites as u64 / 20)
}

/// Every series of one scrape: `name{labels}` → value.
fn scrape(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// One poll: when, the CPU so far, the counters so far.
#[derive(Clone)]
struct Sample {
    at: Instant,
    host_cpu: Duration,
    server_cpu: Duration,
    reconciles: f64,
    errors: f64,
    depth: f64,
    guest: f64,
    instantiate: f64,
    api_wait: f64,
    imports: Vec<(f64, f64)>,
}

impl Sample {
    async fn take(host: &Host, server_pids: &[u32]) -> Self {
        let series = scrape(&host.get("/metrics").await);
        let plugin = format!("plugin=\"{PLUGIN}\"");
        let get = |name: &str| series.get(name).copied().unwrap_or(0.0);
        let reconciles = ["success", "requeue", "requeue_after", "error"]
            .iter()
            .map(|result| {
                get(&format!(
                    "controller_runtime_reconcile_total{{controller=\"{PLUGIN}\",result=\"{result}\"}}"
                ))
            })
            .sum();
        let imports = IMPORTS
            .iter()
            .map(|import| {
                (
                    get(&format!(
                        "reconcile_host_plugin_import_seconds_total{{{plugin},import=\"{import}\"}}"
                    )),
                    get(&format!(
                        "reconcile_host_plugin_import_calls_total{{{plugin},import=\"{import}\"}}"
                    )),
                )
            })
            .collect();
        Self {
            at: Instant::now(),
            host_cpu: host.cpu_time(),
            server_cpu: server_pids.iter().map(|pid| cpu_of(*pid)).sum(),
            reconciles,
            errors: get(&format!(
                "controller_runtime_reconcile_total{{controller=\"{PLUGIN}\",result=\"error\"}}"
            )),
            depth: get(&format!("workqueue_depth{{name=\"{PLUGIN}\"}}")),
            guest: get(&format!(
                "reconcile_host_plugin_guest_seconds_total{{{plugin}}}"
            )),
            instantiate: get(&format!(
                "reconcile_host_plugin_instantiate_seconds_total{{{plugin}}}"
            )),
            api_wait: get(&format!(
                "reconcile_host_plugin_api_wait_seconds_total{{{plugin}}}"
            )),
            imports,
        }
    }
}

/// Follows the Websites in `api` and publishes how many have their status at their generation.
fn watch_converged(api: Api<DynamicObject>) -> tokio::sync::watch::Receiver<usize> {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};

    let (tx, rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let mut done = std::collections::HashSet::new();
        let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let website = match event {
                Ok(Event::Apply(website) | Event::InitApply(website)) => website,
                Ok(Event::Delete(website)) => {
                    done.remove(&website.metadata.name.unwrap_or_default());
                    continue;
                }
                Ok(Event::Init | Event::InitDone) => continue,
                Err(error) => {
                    println!("  the Website watch failed, retrying: {error}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let name = website.metadata.name.clone().unwrap_or_default();
            if at_generation(&website) {
                done.insert(name);
            } else {
                done.remove(&name);
            }
            if tx.send(done.len()).is_err() {
                return;
            }
        }
    });
    rx
}

/// True when `website`'s status reports its current generation.
fn at_generation(website: &DynamicObject) -> bool {
    let generation = website.metadata.generation.unwrap_or(0);
    website
        .data
        .get("status")
        .and_then(|status| status.get("observedGeneration"))
        .and_then(serde_json::Value::as_i64)
        == Some(generation)
}

/// How many of the `count` Websites have converged: status at their generation, Deployment and
/// Service present. Lists once per kind.
async fn converged(backend: &Backend, count: usize) -> (usize, usize, usize) {
    let client = backend.kube_client().expect("client");
    let list = ListParams::default();
    let listed = websites(backend, "example.com", NAMESPACE)
        .list(&list)
        .await
        .expect("Websites listed");
    let with_status = listed
        .items
        .iter()
        .filter(|website| at_generation(website))
        .count();
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .list(&list)
        .await
        .expect("Deployments listed")
        .items
        .len();
    let services = Api::<Service>::namespaced(client, NAMESPACE)
        .list(&list)
        .await
        .expect("Services listed")
        .items
        .len();
    assert!(
        listed.items.len() == count,
        "{} Websites exist in namespace {NAMESPACE}, {count} were created: something else \
         writes there; use a fresh backend",
        listed.items.len()
    );
    (with_status, deployments, services)
}

#[tokio::main]
async fn main() {
    let count = websites_wanted();
    let backend = Backend::start(Config::default())
        .await
        .expect("the API server starts");
    let backend_label = if backend.is_real() {
        "real"
    } else {
        "embedded"
    };
    let server_pids: Vec<u32> = match backend.control_plane() {
        Some(plane) => {
            let (apiserver, etcd) = plane.pids();
            vec![apiserver, etcd]
        }
        None => vec![std::process::id()],
    };
    crd(&backend, "examples/website").await;
    common::namespace(&backend, NAMESPACE, &[]).await;
    let api = websites(&backend, "example.com", NAMESPACE);
    let created = Instant::now();
    let mut creators = tokio::task::JoinSet::new();
    let template = sample_website("examples/website", "site", NAMESPACE, "example.com");
    for lane in 0..CREATE_CONCURRENCY {
        let api = api.clone();
        let template = template.clone();
        creators.spawn(async move {
            for i in (lane..count).step_by(CREATE_CONCURRENCY) {
                let mut website = template.clone();
                website.metadata.name = Some(format!("site-{i:05}"));
                api.create(&PostParams::default(), &website)
                    .await
                    .unwrap_or_else(|error| panic!("Website site-{i:05} not created: {error}"));
            }
        });
    }
    while let Some(result) = creators.join_next().await {
        result.expect("a creating task panicked");
    }
    println!(
        "website_cost: {count} Websites on the {backend_label} API server, created in {:.1} s; \
         the website example (concurrency 2), client budgets raised, {} CPUs",
        created.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(1, usize::from)
    );

    let dir = scratch("bench-website-cost");
    // ACT_AS=<namespace>/<name>: the plugin acts as that ServiceAccount (every request it
    // causes impersonates it), bound to cluster-admin so that only the cost differs.
    let act_as = std::env::var("ACT_AS").ok();
    let overrides: Vec<(&str, &str)> = match act_as.as_deref().and_then(|a| a.split_once('/')) {
        Some((namespace, name)) => {
            let binding = format!(
                "{{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"ClusterRoleBinding\", \
                 \"metadata\": {{\"name\": \"bench-{namespace}-{name}\"}}, \"roleRef\": {{\"apiGroup\": \
                 \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\", \"name\": \"cluster-admin\"}}, \
                 \"subjects\": [{{\"kind\": \"ServiceAccount\", \"name\": \"{name}\", \"namespace\": \"{namespace}\"}}]}}"
            );
            let path = dir.join("binding.json");
            std::fs::write(&path, binding).expect("binding written");
            let applied = backend
                .kubectl(&dir)
                .args(["apply", "--validate=false", "-f"])
                .arg(&path)
                .output()
                .expect("kubectl runs");
            assert!(
                applied.status.success(),
                "{}",
                String::from_utf8_lossy(&applied.stderr)
            );
            println!("website_cost: the plugin acts as ServiceAccount {namespace}/{name}");
            vec![
                ("serviceAccountName", name),
                ("serviceAccountNamespace", namespace),
            ]
        }
        None => Vec::new(),
    };
    let plugin = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component(PLUGIN),
        &overrides,
    );
    let kubeconfig = dir.join("kubeconfig");
    backend
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let mut converged_count = watch_converged(api.clone());
    let mut host = Host::spawn(Host::bench_command(&kubeconfig, &plugin));

    let deadline = Instant::now() + converge_wait(count);
    let mut first: Option<Sample> = None;
    let mut latest: Option<Sample> = None;
    let last = loop {
        let seen = *converged_count.borrow_and_update();
        assert!(
            Instant::now() < deadline,
            "{seen} of the {count} Websites converged within {:?} ({} reconciles so far); read \
             the host's log:\n{}",
            converge_wait(count),
            latest.as_ref().map_or(0.0, |s| s.reconciles),
            host.log()
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(
            host.running(),
            "the host exited before the Websites converged; its log:\n{}",
            host.log()
        );
        tokio::time::sleep(POLL).await;
        let sample = Sample::take(&host, &server_pids).await;
        if sample.reconciles == 0.0 {
            continue;
        }
        if first.is_none() {
            first = Some(sample.clone());
        }
        if *converged_count.borrow() >= count {
            break sample;
        }
        latest = Some(sample);
    };
    let verified = converged(&backend, count).await;
    assert_eq!(
        verified,
        (count, count, count),
        "the watch saw every status at its generation, but the lists disagree (statuses, \
         Deployments, Services)"
    );
    let first = first.expect("sampled");

    let reconciles = last.reconciles - first.reconciles;
    let seconds = last.at.duration_since(first.at).as_secs_f64();
    let per = |seconds: f64| seconds / reconciles * 1e6;
    let host_cpu = per((last.host_cpu - first.host_cpu).as_secs_f64());
    let server_cpu = per((last.server_cpu - first.server_cpu).as_secs_f64());
    let guest = per(last.guest - first.guest);
    let instantiate = per(last.instantiate - first.instantiate);
    let api_wait = per(last.api_wait - first.api_wait);
    let import: f64 = last
        .imports
        .iter()
        .zip(&first.imports)
        .map(|(l, f)| per(l.0 - f.0))
        .sum();
    let total = guest + instantiate + import + api_wait;
    let tag = format!("website_cost backend={backend_label} websites={count}");
    println!(
        "  converged: {} statuses, {} Deployments, {} Services; {} reconciles in all, {} of them \
         failed; {} keys still queued (second reconciles and rechecks)",
        verified.0, verified.1, verified.2, last.reconciles, last.errors, last.depth
    );
    println!(
        "RESULT {tag}: {reconciles:.0} reconciles in {seconds:.2} s = {:.0} reconciles/s ({:.2} per \
         Website, {:.0} Websites/s)",
        reconciles / seconds,
        last.reconciles / count as f64,
        count as f64 / seconds
    );
    println!(
        "RESULT {tag}: CPU per reconcile: host {host_cpu:.0} µs, API server {server_cpu:.0} µs{}",
        if backend.is_real() {
            " (kube-apiserver + etcd)"
        } else {
            " (in the bench process, polling included)"
        }
    );
    println!(
        "RESULT {tag}: wall time per reconcile (host counters, summed over the workers): \
         {total:.0} µs = guest {guest:.1} µs + instantiation {instantiate:.1} µs + host import \
         work {import:.1} µs + API wait {api_wait:.1} µs"
    );
    for (i, import) in IMPORTS.iter().enumerate() {
        let calls = last.imports[i].1 - first.imports[i].1;
        if calls > 0.0 {
            println!(
                "RESULT {tag}: import {import}: {:.2} calls per reconcile, host work {:.1} µs per \
                 call",
                calls / reconciles,
                (last.imports[i].0 - first.imports[i].0) / calls * 1e6
            );
        }
    }
    drop(host);
}
