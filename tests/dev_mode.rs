//! `reconcile-host dev`, the README's "see it work" command: the real binary starts the embedded
//! API server and the dev registry, pushes every example (Rust, Python, JavaScript, C, Go) and
//! declares it as a ReconcilerPlugin object, applies their samples, and each example converges;
//! an edited example reaches the host through its object.

use crate::common;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::eventually_async;
use crate::common::host::{Host, component, guests, scratch, scripted_component, tool, workspace};
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

/// `reconcile-host dev` on the examples in `examples`, its kubeconfig written to `kubeconfig`.
fn dev(examples: &Path, kubeconfig: &Path) -> Host {
    let mut command = tool("dev");
    command
        .current_dir(workspace())
        .arg("--examples")
        .arg(examples)
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .args(["--api-address", "127.0.0.1:0"])
        .args(["--registry-address", "127.0.0.1:0"])
        .args(["--metrics-address", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Host::spawn(command)
}

/// Each ReconcilerPlugin's Ready condition and resolved digest as `kubectl get` prints them
/// (waiting, bounded, until every one has a Ready condition).
fn kubectl_ready(kubeconfig: &Path) -> BTreeMap<String, (String, String)> {
    let deadline = std::time::Instant::now() + common::WAIT;
    loop {
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "get",
                "reconcilerplugins",
                "-o",
                "custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status,DIGEST:.status.resolvedDigest",
                "--no-headers",
            ])
            .output()
            .expect("kubectl runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let rows: BTreeMap<String, (String, String)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let name = fields.next()?.to_owned();
                Some((name, (fields.next()?.to_owned(), fields.next()?.to_owned())))
            })
            .collect();
        let settled = output.status.success()
            && !rows.is_empty()
            && rows.values().all(|(ready, _)| ready == "True");
        if settled || std::time::Instant::now() >= deadline {
            return rows;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
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
    let host = dev(&workspace().join("examples"), &kubeconfig);
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

    // `kubectl get reconcilerplugins` shows every example Ready, serving the digest it was
    // pushed as.
    let ready = kubectl_ready(&kubeconfig);
    let names: Vec<&str> = ready.keys().map(String::as_str).collect();
    assert_eq!(names, plugins, "kubectl get reconcilerplugins");
    for (name, (ready, digest)) in &ready {
        assert_eq!(ready, "True", "{name} is not Ready:\n{}", host.log());
        assert!(digest.starts_with("sha256:"), "{name}'s digest: {digest}");
    }

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

/// An edited example is pushed and declared again: its ReconcilerPlugin object takes the new
/// spec and the host rebuilds the plugin's controller from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_example_reaches_the_host_through_its_object() {
    guests();
    let dir = scratch("dev-edit");
    let examples = dir.join("examples");
    let website = examples.join("website");
    std::fs::create_dir_all(website.join("samples")).expect("example dir");
    for sample in ["crd.yaml", "website.yaml"] {
        std::fs::copy(
            workspace().join("examples/website/samples").join(sample),
            website.join("samples").join(sample),
        )
        .expect("sample copied");
    }
    let manifest = common::host::manifest(
        &website,
        "examples/website/plugin.yaml",
        &component("website"),
        &[("concurrency", "1")],
    );
    std::fs::rename(&manifest, website.join("plugin.yaml")).expect("manifest in place");
    let kubeconfig = dir.join("kubeconfig");
    let host = dev(&examples, &kubeconfig);
    host.wait_log(&["plugin added", "plugin=website"]).await;
    let client = client(&kubeconfig).await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "reconcile-host.dev",
        "v1alpha1",
        "ReconcilerPlugin",
    ));
    let objects: Api<DynamicObject> = Api::all_with(client, &resource);
    let concurrency = |object: &DynamicObject| object.data["spec"]["concurrency"].as_i64();
    assert_eq!(
        concurrency(&objects.get("website").await.expect("the website object")),
        Some(1)
    );

    let text = std::fs::read_to_string(website.join("plugin.yaml")).expect("manifest");
    let edited = text.replace("concurrency: 1", "concurrency: 4");
    assert_ne!(text, edited, "the manifest sets concurrency: 1");
    std::fs::write(website.join("plugin.yaml"), edited).expect("manifest edited");
    eventually_async("the object to take the edited spec", || async {
        let object = objects.get("website").await.ok()?;
        (concurrency(&object) == Some(4)).then_some(())
    })
    .await;
    host.wait_log(&["plugin rebuilt", "plugin=website"]).await;
}

/// The dev registry takes pushes from anyone who reaches it, so `dev` refuses to serve it on
/// anything but loopback, naming the fix.
#[test]
fn dev_refuses_a_registry_address_off_loopback() {
    let dir = scratch("dev-registry-address");
    let out = tool("dev")
        .current_dir(workspace())
        .arg("--kubeconfig-out")
        .arg(dir.join("kubeconfig"))
        .args(["--registry-address", "0.0.0.0:0"])
        .output()
        .expect("reconcile-host runs");
    assert!(!out.status.success(), "dev served its registry on 0.0.0.0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a loopback address") && stderr.contains("127.0.0.1:<port>"),
        "{stderr}"
    );
}
