//! `reconcile-host dev`, the README's "see it work" command: the real binary starts the embedded
//! API server, loads every example (Rust, Python, JavaScript, C) side by side, applies their
//! samples, and each example converges.

mod common;

use std::process::Stdio;

use common::eventually_async;
use common::host::{Host, free_port, guests, scratch, scripted_component, tool, workspace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

/// Every example in `examples/`, built (the Rust crates by cargo, the others by their
/// `build.sh`) and compiled into the tests' module cache, so that the host's start-up below is
/// not a wait for Cranelift; the example names.
fn build_examples() -> Vec<String> {
    guests();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(workspace().join("examples")).expect("examples/") {
        let dir = entry.expect("entry").path();
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("UTF-8 name")
            .to_owned();
        if dir.join("build.sh").is_file() {
            scripted_component(&format!("examples/{name}/build.sh"), &name);
        }
        let manifest = dir.join("plugin.yaml");
        if manifest.is_file() {
            let check = tool("check").arg(&manifest).output().expect("check runs");
            assert!(
                check.status.success(),
                "check {name}: {}",
                String::from_utf8_lossy(&check.stderr)
            );
            names.push(name);
        }
    }
    names.sort();
    names
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("usable kubeconfig");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_every_example_side_by_side_and_each_converges() {
    let plugins = build_examples();
    assert!(
        plugins.len() >= 5,
        "the Rust, Python, JavaScript and C examples: {plugins:?}"
    );
    let dir = scratch("dev");
    let kubeconfig = dir.join("kubeconfig");
    let mut command = tool("dev");
    command
        .current_dir(workspace())
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .args(["--api-address", &format!("127.0.0.1:{}", free_port())])
        .args(["--metrics-address", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "info")
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let host = Host::spawn(command);
    // Every example's plugin loads and its readiness check passes.
    for plugin in &plugins {
        let check = format!("[+]plugin/{plugin} ok");
        eventually_async(&check, || async {
            host.get("/readyz?verbose")
                .await
                .contains(&check)
                .then_some(())
        })
        .await;
    }
    let client = client(&kubeconfig).await;

    // configmap-replicator (Rust) and configmap-replicator-python copy their sources.
    for source in ["shared-settings", "shared-settings-python"] {
        for ns in ["team-a", "team-b"] {
            let copies: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            eventually_async(&format!("{ns}/{source}"), || async {
                copies.get_opt(source).await.ok().flatten()
            })
            .await;
        }
    }
    // website (Rust) and website-js make their Deployments and write status.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    for (group, name) in [("example.com", "hello"), ("js.example.com", "hello-js")] {
        eventually_async(&format!("deployment {name}"), || async {
            deployments.get_opt(name).await.ok().flatten()
        })
        .await;
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", "Website"));
        let websites: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &resource);
        eventually_async(&format!("status of {group} website {name}"), || async {
            let website = websites.get_opt(name).await.ok().flatten()?;
            website.data.get("status")?.get("observedGeneration")?;
            Some(())
        })
        .await;
    }
    // ttl-reaper-c (C) answers requeue-after for the ConfigMaps not yet expired.
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"ttl-reaper-c\",result=\"requeue_after\"}",
        1.0,
    )
    .await;
    for plugin in &plugins {
        for reason in ["trap", "deadline", "memory", "instantiate"] {
            let series = format!(
                "reconcile_host_plugin_failures_total{{plugin=\"{plugin}\",reason=\"{reason}\"}}"
            );
            assert_eq!(host.metric(&series).await, 0.0, "{series}\n{}", host.log());
        }
    }
}
