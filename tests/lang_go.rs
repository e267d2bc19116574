//! Reconcilers written in Go: `examples/website-go` and `host/tests/guests/noop-go`, built to
//! components by their `build.sh` (standard Go for wasip1, wit-bindgen go, the preview1 reactor
//! adapter; see docs/guests/go.md), loaded by the real host binary against the embedded API
//! server.

use crate::common;
use std::path::PathBuf;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, manifest, scratch, scripted_component};
use crate::common::twin::{
    Port, same_calls_as_the_rust_website, same_children_and_status_as_the_rust_website,
};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

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

/// The website-go port.
fn port() -> Port {
    Port::new("go", EXAMPLE, website_go())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn website_go_makes_the_same_children_and_status_as_the_rust_website_in_one_host() {
    let server = server().await;
    same_children_and_status_as_the_rust_website(&server, &port(), async |_| {}).await;
}

#[test]
fn reconcile_cli_records_the_same_calls_and_requeue_after_as_the_rust_website() {
    same_calls_as_the_rust_website(&port());
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
