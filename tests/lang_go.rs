//! Reconcilers written in Go: `examples/website-go` and `host/tests/guests/noop-go`, built to
//! components by their `build.sh` (standard Go for wasip1, wit-bindgen go, the preview1 reactor
//! adapter; see docs/guests/go.md), loaded by the real host binary against the embedded API
//! server.

use crate::common;
use std::path::PathBuf;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, manifest, scratch, scripted_component, workspace};
use crate::common::website::{
    children, crd, normalized_calls, reconcile_host, reconcile_json, sample_website, status_at,
    websites,
};
use crate::common::{collected, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const EXAMPLE: &str = "examples/website-go";
const WEBSITE_GO: &str = "examples/website-go/build.sh";
const NOOP_GO: &str = "host/tests/guests/noop-go/build.sh";

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

/// The website-go component built by its build script.
fn website_go() -> PathBuf {
    scripted_component(WEBSITE_GO, "website-go")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn website_go_makes_the_same_children_and_status_as_the_rust_website_in_one_host() {
    let server = server().await;
    let dir = scratch("go-twins");
    crd(&server, "examples/website").await;
    crd(&server, "examples/website-go").await;
    for ns in ["rust", "go"] {
        namespace(&server, ns, &[]).await;
    }
    let plugins = [
        manifest(
            &dir,
            "examples/website/plugin.yaml",
            &component("website"),
            &[],
        ),
        manifest(&dir, "examples/website-go/plugin.yaml", &website_go(), &[]),
    ];
    let host = Host::start(&server, &dir, &plugins);

    // The same spec as a Rust Website and as a Go one, side by side.
    let rust = websites(&server, "example.com", "rust");
    let go = websites(&server, "go.example.com", "go");
    rust.create(
        &PostParams::default(),
        &sample_website(EXAMPLE, "twin", "rust", "example.com"),
    )
    .await
    .expect("rust website created");
    go.create(
        &PostParams::default(),
        &sample_website(EXAMPLE, "twin", "go", "go.example.com"),
    )
    .await
    .expect("go website created");

    let go_status = status_at(&go, "twin", 1).await;
    assert_eq!(go_status, status_at(&rust, "twin", 1).await);
    assert_eq!(
        go_status,
        json!({"observedGeneration": 1, "image": "nginx:1.27", "replicas": 2,
               "deployment": "twin", "service": "twin"})
    );
    let go_children = children(&server, "go", "twin").await;
    assert_eq!(go_children, children(&server, "rust", "twin").await);
    assert_eq!(go_children["deployment"]["spec"]["replicas"], 2);
    assert_eq!(
        go_children["deployment"]["ownerReferences"],
        json!([{"kind": "Website", "name": "twin", "controller": true, "blockOwnerDeletion": true}])
    );
    // Its answer is a requeue decision: look again in 60 s.
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"website-go\",result=\"requeue_after\"}",
        1.0,
    )
    .await;

    // A spec change reaches both the same way.
    let patch = json!({"spec": {"image": "nginx:1.28", "replicas": 3}});
    for websites in [&rust, &go] {
        websites
            .patch("twin", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
    }
    let go_status = status_at(&go, "twin", 2).await;
    assert_eq!(go_status, status_at(&rust, "twin", 2).await);
    let updated = eventually_async("both Deployments at 3 replicas", || async {
        let go_children = children(&server, "go", "twin").await;
        let rust_children = children(&server, "rust", "twin").await;
        (go_children["deployment"]["spec"]["replicas"] == 3
            && rust_children["deployment"]["spec"]["replicas"] == 3)
            .then_some((go_children, rust_children))
    })
    .await;
    assert_eq!(updated.0, updated.1);
    assert_eq!(
        updated.0["deployment"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    for reason in ["trap", "deadline", "memory", "instantiate"] {
        let series = format!(
            "reconcile_host_plugin_failures_total{{plugin=\"website-go\",reason=\"{reason}\"}}"
        );
        assert_eq!(
            host.metric(&series).await,
            0.0,
            "{series}; log:\n{}",
            host.log()
        );
    }

    // Deleting the Website takes its children with it (garbage collection; see `collected`).
    let uid = go
        .get("twin")
        .await
        .expect("the Website")
        .metadata
        .uid
        .expect("a uid");
    go.delete("twin", &DeleteParams::default())
        .await
        .expect("deleted");
    let client = server.kube_client().expect("client");
    let real = server.is_real();
    collected(
        real,
        &Api::<Deployment>::namespaced(client.clone(), "go"),
        "twin",
        &uid,
    )
    .await;
    collected(
        real,
        &Api::<Service>::namespaced(client, "go"),
        "twin",
        &uid,
    )
    .await;
}

#[test]
fn reconcile_cli_records_the_same_calls_and_requeue_after_as_the_rust_website() {
    let dir = scratch("go-cli");
    let go = manifest(&dir, "examples/website-go/plugin.yaml", &website_go(), &[]);
    let rust = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let check = reconcile_host(&["check", go.to_str().expect("UTF-8")]);
    let printed = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{printed}");
    assert!(
        printed.contains("ok: plugin `website-go` is valid"),
        "{printed}"
    );

    let go_object = workspace().join("examples/website-go/samples/website.yaml");
    let rust_object = dir.join("rust-website.yaml");
    let text = std::fs::read_to_string(&go_object).expect("sample");
    std::fs::write(
        &rust_object,
        text.replace("go.example.com", "example.com")
            .replace("hello-go", "hello"),
    )
    .expect("written");
    let go_run = reconcile_json(&go, &go_object);
    let rust_run = reconcile_json(&rust, &rust_object);
    assert_eq!(
        go_run["action"],
        json!({"type": "requeue-after", "afterMs": 60000}),
        "{go_run}"
    );
    assert_eq!(go_run["action"], rust_run["action"]);
    assert_eq!(go_run["denied"], json!([]));
    let rust_calls = normalized_calls(
        &rust_run,
        &[
            ("\"hello\"", "\"hello-go\""),
            ("example.com", "go.example.com"),
        ],
    );
    assert_eq!(normalized_calls(&go_run, &[]), rust_calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_go_reads_the_request_and_answers_done() {
    let server = server().await;
    let dir = scratch("go-noop");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-go/plugin.yaml",
        &scripted_component(NOOP_GO, "noop-go"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    let mut object = common::config_map("quiet", "x");
    object.metadata.labels = Some([("noop-go".to_owned(), "true".to_owned())].into());
    Api::<ConfigMap>::namespaced(server.kube_client().expect("client"), "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"noop-go\",result=\"success\"}",
        1.0,
    )
    .await;
    let failures = "controller_runtime_reconcile_errors_total{controller=\"noop-go\"}";
    assert_eq!(host.metric(failures).await, 0.0, "log:\n{}", host.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_panic_is_a_reconcile_error_with_its_message_not_a_trap() {
    let server = server().await;
    let dir = scratch("go-panic");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-go/plugin.yaml",
        &scripted_component(NOOP_GO, "noop-go"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    let mut object = common::config_map("loud", "x");
    object.metadata.labels = Some([("noop-go".to_owned(), "true".to_owned())].into());
    object.data = Some([("panic".to_owned(), "the sky is falling".to_owned())].into());
    Api::<ConfigMap>::namespaced(server.kube_client().expect("client"), "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"noop-go\",reason=\"error\"}",
        2.0,
    )
    .await;
    host.wait_log(&[
        "key=default/loud",
        "the guest returned an error: panic: the sky is falling",
    ])
    .await;
    let traps = "reconcile_host_plugin_failures_total{plugin=\"noop-go\",reason=\"trap\"}";
    assert_eq!(host.metric(traps).await, 0.0, "log:\n{}", host.log());
}

/// Regression: on a reused instance the Go heap grows until a garbage collection falls inside
/// `cabi_realloc` (the host lifting a request into the guest), where the collector read the
/// wall clock, an import the component model forbids there, and the instance trapped. The SDK
/// turns automatic collection off and collects inside the export instead (docs/guests/go.md,
/// the traps). Large objects make the heap cross the collector's goal within a few calls; 100
/// objects of 256 KiB, each held three times (lifted, the guest's clone, decoded), allocate more
/// than the 64 MiB memory limit, so the SDK's own collections must run too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_go_instance_reconciles_many_large_objects_without_a_trap() {
    const OBJECTS: usize = 100;
    let server = server().await;
    let dir = scratch("go-reuse");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-go/plugin.yaml",
        &scripted_component(NOOP_GO, "noop-go"),
        &[("instanceReuse", "{maxCalls: 100000}")],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    let config_maps =
        Api::<ConfigMap>::namespaced(server.kube_client().expect("client"), "default");
    let value = "x".repeat(256 * 1024);
    for i in 0..OBJECTS {
        let mut object = common::config_map(&format!("large-{i}"), &value);
        object.metadata.labels = Some([("noop-go".to_owned(), "true".to_owned())].into());
        // The key `decode` makes the guest decode the object (the third copy).
        object.data = Some(
            [
                ("v".to_owned(), value.clone()),
                ("decode".to_owned(), "yes".to_owned()),
            ]
            .into(),
        );
        config_maps
            .create(&PostParams::default(), &object)
            .await
            .expect("created");
    }
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"noop-go\",result=\"success\"}",
        OBJECTS as f64,
    )
    .await;
    let traps = "reconcile_host_plugin_failures_total{plugin=\"noop-go\",reason=\"trap\"}";
    assert_eq!(host.metric(traps).await, 0.0, "log:\n{}", host.log());
    let failures = "controller_runtime_reconcile_errors_total{controller=\"noop-go\"}";
    assert_eq!(host.metric(failures).await, 0.0, "log:\n{}", host.log());
}
