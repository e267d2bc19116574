//! ReconcilerPlugin fetches run on their own: an object whose registry accepts connections and
//! never answers (`stuck`) holds up neither another object's module from a real registry
//! (`good`, Ready while `stuck` is still fetching) nor status (`stuck` shows `Fetched` `Unknown`,
//! `Fetching`, then `RegistrySlow` naming its registry). On both API server backends.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::backend::{Backend, Cluster};
use crate::common::host::{HOST_BINARY, Host, component, scratch, workspace};
use crate::common::registry::Registry;
use crate::common::{crd_established, eventually, eventually_async};
use embedded_apiserver::Config;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use reconcile_host::manifest::ReconcilerPlugin;
use serde_json::{Value, json};

/// A registry that accepts every connection and never answers: each connection is read (the
/// request ignored) until the host closes it. Counts connections accepted and closed.
struct Silent {
    host: String,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

impl Silent {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
        let host = listener.local_addr().expect("an address").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (accepting, closing) = (Arc::clone(&accepted), Arc::clone(&closed));
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                accepting.fetch_add(1, Ordering::SeqCst);
                let closing = Arc::clone(&closing);
                std::thread::spawn(move || {
                    let mut buffer = [0; 4096];
                    while stream.read(&mut buffer).is_ok_and(|read| read > 0) {}
                    closing.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            host,
            accepted,
            closed,
        }
    }
}

/// The ReconcilerPlugins.
fn plugins(backend: &Backend) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("reconcile-host.dev", "v1alpha1", "ReconcilerPlugin");
    Api::all_with(backend.client(), &ApiResource::from_gvk(&gvk))
}

/// The testbed's manifest as the ReconcilerPlugin `name`, its module `oci: reference`.
fn testbed(name: &str, reference: &str) -> DynamicObject {
    let path = workspace().join("host/tests/guests/testbed/plugin.yaml");
    let mut spec: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("manifest")).expect("YAML");
    let fields = spec.as_object_mut().expect("a mapping");
    fields.remove("name");
    fields.remove("module");
    fields.insert("oci".to_owned(), json!(reference));
    serde_json::from_value(json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a ReconcilerPlugin")
}

/// `reconcile-host push <module> <reference> --insecure`.
fn push(module: &Path, reference: &str) {
    let output = Command::new(HOST_BINARY)
        .arg("push")
        .arg(module)
        .args([reference, "--insecure"])
        .output()
        .expect("reconcile-host runs");
    assert!(
        output.status.success(),
        "push {reference} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The condition `type_` of the plugin `name`'s status, if it has one.
async fn condition(plugins: &Api<DynamicObject>, name: &str, type_: &str) -> Option<Value> {
    let object = plugins.get_opt(name).await.ok()??;
    let conditions = object.data.get("status")?.get("conditions")?.as_array()?;
    conditions.iter().find(|c| c["type"] == type_).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_never_answers_holds_up_neither_other_plugins_nor_status() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("plugin-fetches");
    let crds: Api<CustomResourceDefinition> = Api::all(backend.client());
    crds.create(&PostParams::default(), &ReconcilerPlugin::crd())
        .await
        .expect("the CRD created");
    crd_established(&backend.client(), "reconcilerplugins.reconcile-host.dev").await;
    let registry = Registry::start(&dir);
    let good_tag = format!("{}/plugins/testbed:v1", registry.host());
    push(&component("testbed"), &good_tag);
    let silent = Silent::start();
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!(
            "pluginObjects: true\noci:\n  insecureRegistries: [\"{}\", \"{}\"]\n  cacheDir: {}\n",
            registry.host(),
            silent.host,
            dir.join("oci-cache").display()
        ),
    )
    .expect("config written");
    let host = Host::start_with(
        &backend,
        &dir,
        &[],
        &["--config", config.to_str().expect("UTF-8")],
    );
    let plugins = plugins(&backend);

    // What status says of `stuck`'s fetch, in order, from its creation on.
    let reasons = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let recorder = {
        let (plugins, reasons) = (plugins.clone(), Arc::clone(&reasons));
        tokio::spawn(async move {
            loop {
                if let Some(fetched) = condition(&plugins, "stuck", "Fetched").await {
                    let reason = format!(
                        "{}/{}",
                        fetched["status"].as_str().unwrap_or_default(),
                        fetched["reason"].as_str().unwrap_or_default()
                    );
                    let mut seen = reasons.lock();
                    if seen.last() != Some(&reason) {
                        seen.push(reason);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let stuck_reference = format!("{}/plugins/stuck:v1", silent.host);
    plugins
        .create(&PostParams::default(), &testbed("stuck", &stuck_reference))
        .await
        .expect("stuck created");
    // The host is fetching `stuck`: its registry accepted the connection and says nothing.
    eventually("the host to connect to stuck's registry", || {
        silent.accepted.load(Ordering::SeqCst) > 0
    })
    .await;

    // `good`, from a registry that answers, becomes Ready while `stuck` is still fetching.
    plugins
        .create(&PostParams::default(), &testbed("good", &good_tag))
        .await
        .expect("good created");
    eventually_async("good Ready", || async {
        let ready = condition(&plugins, "good", "Ready").await?;
        (ready["status"] == "True").then_some(())
    })
    .await;
    let fetched = condition(&plugins, "stuck", "Fetched")
        .await
        .expect("stuck has a Fetched condition while its fetch runs");
    assert_eq!(fetched["status"], "Unknown", "{fetched}");
    assert!(
        ["Fetching", "RegistrySlow"].contains(&fetched["reason"].as_str().unwrap_or_default()),
        "{fetched}"
    );

    // `stuck` showed `Fetching`, then `RegistrySlow`, naming its registry.
    let slow = eventually_async("stuck RegistrySlow", || async {
        let fetched = condition(&plugins, "stuck", "Fetched").await?;
        (fetched["reason"] == "RegistrySlow").then_some(fetched)
    })
    .await;
    let message = slow["message"].as_str().expect("a message");
    for part in [
        format!("registry {}", silent.host),
        stuck_reference.clone(),
        "not held up".to_owned(),
        "keeps serving".to_owned(),
        "gives up after 120 s".to_owned(),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
    eventually("the recorder to see RegistrySlow", || {
        reasons.lock().iter().any(|r| r == "Unknown/RegistrySlow")
    })
    .await;
    recorder.abort();
    let seen = reasons.lock().clone();
    assert_eq!(
        seen.get(..2),
        Some(
            &[
                "Unknown/Fetching".to_owned(),
                "Unknown/RegistrySlow".to_owned()
            ][..]
        ),
        "{seen:?}"
    );
    let ready = condition(&plugins, "good", "Ready").await.expect("Ready");
    assert_eq!(ready["status"], "True", "{ready}");

    // `stuck` deleted: its fetch is abandoned, the connection to its registry closed.
    plugins
        .delete("stuck", &DeleteParams::default())
        .await
        .expect("stuck deleted");
    eventually(
        "the host to close its connections to stuck's registry",
        || silent.closed.load(Ordering::SeqCst) == silent.accepted.load(Ordering::SeqCst),
    )
    .await;

    drop(host);
    let _ = plugins.delete("good", &DeleteParams::default()).await;
}
