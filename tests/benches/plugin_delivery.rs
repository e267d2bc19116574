//! How fast a plugin travels from a registry into a running host, with the real parts: Debian's
//! `docker-registry` on loopback, the real `reconcile-host` binary, the embedded API server.
//!
//! For every example component: `reconcile-host push`, then `reconcile-host pull` into an empty
//! disk cache (cold) and again (cached), and the compile the host does after a pull, with an
//! empty and with a warm compiled-module cache. Then a host loading `ReconcilerPlugin` objects:
//! the time from a spec change naming another digest to the new module serving (the swap logged)
//! and to `Ready` with that digest in status.
//!
//! `cargo bench -p end-to-end --bench plugin_delivery` (ROUNDS=<n> for the swap rounds, default 10).

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::host::{HOST_BINARY, Host, component, scratch, scripted_component, workspace};
use common::registry::Registry;
use embedded_apiserver::{ApiServer, Config};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine};
use reconcile_host::wasm::module::ModuleLoader;
use serde_json::{Value, json};

/// The example components: name, and how to get the file.
fn examples() -> Vec<(&'static str, PathBuf)> {
    vec![
        (
            "configmap-replicator (Rust)",
            component("configmap-replicator"),
        ),
        ("website (Rust)", component("website")),
        (
            "ttl-reaper-c (C)",
            scripted_component("examples/ttl-reaper-c/build.sh", "ttl-reaper-c"),
        ),
        (
            "website-js (JavaScript)",
            scripted_component("examples/website-js/build.sh", "website-js"),
        ),
        (
            "website-go (Go)",
            scripted_component("examples/website-go/build.sh", "website-go"),
        ),
        (
            "configmap-replicator-python (Python)",
            scripted_component(
                "examples/configmap-replicator-python/build.sh",
                "configmap-replicator-python",
            ),
        ),
    ]
}

/// Runs `reconcile-host` with `args`; stdout, or the failure's stderr as a panic.
fn run(args: &[&str]) -> String {
    let output = Command::new(HOST_BINARY)
        .args(args)
        .output()
        .expect("reconcile-host runs");
    assert!(
        output.status.success(),
        "reconcile-host {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The `elapsed-ms` a `pull` printed.
fn pull_ms(reference: &str, cache: &Path) -> f64 {
    let printed = run(&[
        "pull",
        reference,
        "--insecure",
        "--cache-dir",
        cache.to_str().expect("UTF-8"),
    ]);
    printed
        .lines()
        .find_map(|line| line.trim().strip_prefix("elapsed-ms"))
        .and_then(|rest| rest.trim_start_matches([' ', ':', '=']).trim().parse().ok())
        .unwrap_or_else(|| panic!("pull printed no elapsed-ms: {printed}"))
}

/// Milliseconds to compile `bytes` as the host does, with the module cache `cache`.
async fn compile_ms(path: &Path, bytes: &[u8], cache: Option<PathBuf>) -> f64 {
    let engine = PluginEngine::new(EngineSettings {
        pooling: false,
        module_cache: cache,
    })
    .expect("engine");
    let loader = ModuleLoader::new(engine);
    let started = Instant::now();
    loader
        .load_bytes(path, bytes.to_vec())
        .await
        .expect("the component loads");
    started.elapsed().as_secs_f64() * 1e3
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let dir = scratch("bench-plugin-delivery");
    let registry = Registry::start(&dir);
    let host_port = registry.host();

    println!("pull and compile of each example from a loopback registry (release binary)");
    println!(
        "| component | size | push ms | pull cold ms | pull cached ms | compile cold ms | compile cached ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, path)) in examples().into_iter().enumerate() {
        let bytes = std::fs::read(&path).expect("component");
        let tag = format!("{host_port}/bench/example-{i}:v1");
        let started = Instant::now();
        let pinned = run(&["push", path.to_str().expect("UTF-8"), &tag, "--insecure"]);
        let push = started.elapsed().as_secs_f64() * 1e3;
        let cache = dir.join(format!("pull-cache-{i}"));
        let cold = pull_ms(&pinned, &cache);
        let cached = median((0..3).map(|_| pull_ms(&pinned, &cache)).collect());
        let module_cache = dir.join(format!("module-cache-{i}"));
        let compile_cold = compile_ms(&path, &bytes, Some(module_cache.clone())).await;
        let compile_cached = compile_ms(&path, &bytes, Some(module_cache)).await;
        println!(
            "| {name} | {:.1} MB | {push:.0} | {cold:.0} | {cached:.0} | {compile_cold:.0} | {compile_cached:.0} |",
            bytes.len() as f64 / 1e6
        );
    }

    // A host loading ReconcilerPlugin objects; the testbed's spec switched between two digests.
    let server = ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    let client = server.kube_client().expect("client");
    let crd = run(&["crd"]);
    let crd_path = dir.join("crd.yaml");
    std::fs::write(&crd_path, crd).expect("crd");
    let kubeconfig = dir.join("kubectl.kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let applied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "-f"])
        .arg(&crd_path)
        .output()
        .expect("kubectl runs");
    assert!(applied.status.success(), "the CRD applies");
    common::crd_established(&client, "reconcilerplugins.reconcile-host.dev").await;
    let digests: Vec<String> = ["testbed", "noop"]
        .iter()
        .map(|guest| {
            run(&[
                "push",
                component(guest).to_str().expect("UTF-8"),
                &format!("{host_port}/bench/swap:{guest}"),
                "--insecure",
            ])
        })
        .collect();
    let manifest: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(workspace().join("host/tests/guests/testbed/plugin.yaml"))
            .expect("manifest"),
    )
    .expect("YAML");
    let mut spec = manifest;
    let fields = spec.as_object_mut().expect("a mapping");
    fields.remove("name");
    fields.remove("module");
    fields.insert("oci".to_owned(), json!(digests[0]));
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": "testbed"},
        "spec": spec,
    }))
    .expect("object");
    let gvk = GroupVersionKind::gvk("reconcile-host.dev", "v1alpha1", "ReconcilerPlugin");
    let plugins: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    plugins
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!(
            "pluginObjects: true\noci:\n  insecureRegistries: [\"{host_port}\"]\n  cacheDir: {}\n",
            dir.join("host-oci-cache").display()
        ),
    )
    .expect("config");
    let config_arg = config.display().to_string();
    let host = Host::start_with(&server, &dir, &[], &["--config", &config_arg]);
    host.wait_log(&["plugin added", "plugin=testbed"]).await;

    let mut swapped = Vec::new();
    let mut ready = Vec::new();
    for round in 1..=rounds {
        let reference = &digests[round % 2];
        let digest = reference.rsplit_once('@').expect("a digest").1.to_owned();
        let swaps_before = host.log().matches("plugin module swapped").count();
        let started = Instant::now();
        let patch = json!({"spec": {"oci": reference}});
        plugins
            .patch("testbed", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
        let deadline = started + Duration::from_secs(60);
        let mut swap_ms = None;
        loop {
            assert!(
                Instant::now() < deadline,
                "round {round}: no swap and Ready in 60 s"
            );
            let log = host.log();
            if swap_ms.is_none() && log.matches("plugin module swapped").count() > swaps_before {
                swap_ms = Some(started.elapsed().as_secs_f64() * 1e3);
            }
            let object = plugins.get("testbed").await.expect("the object");
            let status = object.data.get("status").cloned().unwrap_or_default();
            let is_ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            if swap_ms.is_some() && is_ready && status["resolvedDigest"] == json!(digest) {
                ready.push(started.elapsed().as_secs_f64() * 1e3);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        swapped.push(swap_ms.expect("swapped"));
    }
    println!();
    println!(
        "a ReconcilerPlugin's spec changed to another digest (testbed ↔ noop, {rounds} rounds)"
    );
    println!(
        "| to the new module serving (swap logged), median ms | max ms | to Ready with the digest in status, median ms | max ms |"
    );
    println!("|---|---|---|---|");
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "| {:.0} | {:.0} | {:.0} | {:.0} |",
        median(swapped.clone()),
        max(&swapped),
        median(ready.clone()),
        max(&ready)
    );
    drop(host);
    server.shutdown().await;
}
