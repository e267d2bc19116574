//! Reconcilers written in JavaScript: `examples/website-js` and `host/tests/guests/noop-js`,
//! built to components by their `build.sh` (QuickJS by default, SpiderMonkey with
//! `ENGINE=spidermonkey`), loaded by the real host binary against the embedded API server.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::backend::Backend as ApiServer;
use crate::common::eventually_async;
use crate::common::host::{Host, manifest, scratch, scripted_component, target_dir, workspace};
use crate::common::twin::{
    Port, same_calls_as_the_rust_website, same_children_and_status_as_the_rust_website,
};
use crate::common::website::{children, crd, reconcile_host, sample_website, status_at, websites};
use embedded_apiserver::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const EXAMPLE: &str = "examples/website-js";
const WEBSITE_JS: &str = "examples/website-js/build.sh";
const NOOP_JS: &str = "host/tests/guests/noop-js/build.sh";

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

/// The website-js component built by its build script (QuickJS).
fn website_js() -> PathBuf {
    scripted_component(WEBSITE_JS, "website-js")
}

/// The website-js port.
fn port() -> Port {
    Port::new("js", EXAMPLE, website_js())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn website_js_makes_the_same_children_and_status_as_the_rust_website_in_one_host() {
    let server = server().await;
    same_children_and_status_as_the_rust_website(&server, &port(), async |host| {
        // The JS sample too; it read the cache (no Deployment yet) and said so through the log
        // import.
        let sample = websites(&server, &port().group(), "default");
        sample
            .create(
                &PostParams::default(),
                &sample_website(EXAMPLE, "hello-js", "default", "js.example.com"),
            )
            .await
            .expect("sample created");
        status_at(&sample, "hello-js", 1).await;
        host.wait_log(&[
            "plugin=\"website-js\"",
            "creating the Deployment and Service of Website js/twin",
        ])
        .await;
        host.wait_metric(
            "controller_runtime_reconcile_total{controller=\"website-js\",result=\"requeue_after\"}",
            2.0,
        )
        .await;
    })
    .await;
}

/// The website-js manifest with `grants` replaced by `grants` (YAML lines).
fn website_js_manifest(dir: &Path, module: &Path, grants: &str) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("examples/website-js/plugin.yaml"))
        .expect("manifest readable");
    let head = &text[..text.find("\ngrants:").expect("the manifest has grants")];
    let head = head.replace(
        "module: ../../target/guests/website-js.wasm",
        &format!("module: {}", module.display()),
    );
    let path = dir.join("website-js.yaml");
    std::fs::write(&path, format!("{head}\ngrants:\n{grants}")).expect("manifest written");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_status_write_is_a_reconcile_error_counted_and_logged_with_its_cause() {
    let server = server().await;
    let dir = scratch("js-denied");
    crd(&server, "examples/website-js").await;
    // The Website status grant removed: the children are written, the status apply is denied.
    let plugin = website_js_manifest(
        &dir,
        &website_js(),
        "  - {apiVersion: apps/v1, kind: Deployment, verbs: [patch]}\n  \
         - {apiVersion: v1, kind: Service, verbs: [patch]}\n",
    );
    let host = Host::start(&server, &dir, &[plugin]);
    websites(&server, "js.example.com", "default")
        .create(
            &PostParams::default(),
            &sample_website(EXAMPLE, "denied", "default", "js.example.com"),
        )
        .await
        .expect("created");

    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"website-js\",reason=\"error\"}",
        2.0,
    )
    .await;
    let line = host
        .wait_log(&[
            "key=default/denied",
            "the guest returned an error: failed to apply the Website's status: \
             the plugin may not make the call: plugin `website-js` has no grant to `patch`",
        ])
        .await;
    assert!(line.contains("js.example.com/v1 Website"), "{line}");
    // The calls before it went through; the error is a WIT error, not a trap.
    let deployments: Api<Deployment> =
        Api::namespaced(server.kube_client().expect("client"), "default");
    eventually_async("the Deployment", || async {
        deployments.get_opt("denied").await.ok()?
    })
    .await;
    for reason in ["trap", "deadline", "memory", "instantiate"] {
        let series = format!(
            "reconcile_host_plugin_failures_total{{plugin=\"website-js\",reason=\"{reason}\"}}"
        );
        assert_eq!(
            host.metric(&series).await,
            0.0,
            "{series}; log:\n{}",
            host.log()
        );
    }
}

#[test]
fn reconcile_cli_records_the_same_calls_and_requeue_after_as_the_rust_website() {
    let run = same_calls_as_the_rust_website(&port());
    assert_eq!(run["calls"].as_array().map(Vec::len), Some(3), "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_js_reads_the_request_and_answers_done() {
    let server = server().await;
    let dir = scratch("js-noop");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-js/plugin.yaml",
        &scripted_component(NOOP_JS, "noop-js"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    let mut object = common::config_map("quiet", "x");
    object.metadata.labels = Some([("noop-js".to_owned(), "true".to_owned())].into());
    Api::<ConfigMap>::namespaced(server.kube_client().expect("client"), "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    host.wait_metric(
        "controller_runtime_reconcile_total{controller=\"noop-js\",result=\"success\"}",
        1.0,
    )
    .await;
    let failures = "controller_runtime_reconcile_errors_total{controller=\"noop-js\"}";
    assert_eq!(host.metric(failures).await, 0.0, "log:\n{}", host.log());
}

/// The directory of the installed npm toolchain of `engine` (installed by toolchain.sh if
/// missing).
fn toolchain(engine: &str) -> PathBuf {
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source examples/website-js/toolchain.sh && js_toolchain {engine}"
        ))
        .current_dir(workspace())
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "installing the {engine} toolchain failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_javascript_builds_are_refused_at_load_with_the_reason() {
    let server = server().await;
    let dir = scratch("js-broken");
    crd(&server, "examples/website-js").await;
    let website = workspace().join("examples/website-js/website.js");
    let noop = workspace().join("host/tests/guests/noop-js/noop.js");
    let componentize = toolchain("quickjs").join("node_modules/.bin/componentize-qjs");
    // Two realistic mistakes: componentize-qjs without --sync (its default, the component-model
    // async ABI, which the host does not enable), and a build against another world's WIT
    // (noop.js against the wrong-world test guest's: `reconcile: func(request: string) -> u32`).
    let async_abi = dir.join("website-js-async.wasm");
    let other_world = dir.join("website-js-other-world.wasm");
    let builds = [
        (
            &async_abi,
            &website,
            workspace().join("wit/reconcile.wit"),
            None,
        ),
        (
            &other_world,
            &noop,
            workspace().join("host/tests/guests/wrong-world/wit"),
            Some("--sync"),
        ),
    ];
    for (module, source, wit, sync) in builds {
        let status = Command::new(&componentize)
            .arg("--wit")
            .arg(&wit)
            .args(["--world", "reconciler", "--js"])
            .arg(source)
            .args(sync)
            .arg("--output")
            .arg(module)
            .status()
            .expect("componentize-qjs runs");
        assert!(
            status.success(),
            "componentize-qjs failed for {}",
            module.display()
        );
    }

    let cases = [
        (
            &async_abi,
            "is not a valid WebAssembly component",
            "requires the component model async feature",
        ),
        (
            &other_world,
            "does not match the `reconciler` world",
            "expected `record` found `string`",
        ),
    ];
    for (module, problem, cause) in cases {
        let plugin = website_js_manifest(
            &dir,
            module,
            "  - {apiVersion: apps/v1, kind: Deployment, verbs: [patch]}\n",
        );
        let mut host = Host::start(&server, &dir, &[plugin]);
        assert_eq!(host.exit_code().await, Some(2), "log:\n{}", host.log());
        let log = host.log();
        for expected in [
            "plugin `website-js`",
            &module.display().to_string(),
            problem,
            cause,
        ] {
            assert!(log.contains(expected), "expected `{expected}` in:\n{log}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spidermonkey_build_of_the_same_source_loads_and_reconciles() {
    let server = server().await;
    let dir = scratch("js-spidermonkey");
    let target = target_dir().join("js-spidermonkey");
    let status = Command::new("bash")
        .arg(workspace().join(WEBSITE_JS))
        .env("ENGINE", "spidermonkey")
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("bash runs");
    assert!(status.success(), "ENGINE=spidermonkey {WEBSITE_JS} failed");
    let module = target.join("guests/website-js.wasm");
    let plugin = manifest(&dir, "examples/website-js/plugin.yaml", &module, &[]);
    // Compiles the 12 MB component into the module cache first, so the host below loads it at once.
    let sample = workspace().join("examples/website-js/samples/website.yaml");
    let check = reconcile_host(&[
        "check",
        plugin.to_str().expect("UTF-8"),
        "--sample",
        sample.to_str().expect("UTF-8"),
    ]);
    let printed = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        !printed.contains("wasi:"),
        "WASI=none imports no WASI:\n{printed}"
    );

    crd(&server, "examples/website-js").await;
    let host = Host::start(&server, &dir, &[plugin]);
    let websites = websites(&server, "js.example.com", "default");
    websites
        .create(
            &PostParams::default(),
            &sample_website(EXAMPLE, "monkey", "default", "js.example.com"),
        )
        .await
        .expect("created");
    let status = status_at(&websites, "monkey", 1).await;
    assert_eq!(
        (&status["image"], &status["replicas"]),
        (&json!("nginx:1.27"), &json!(2))
    );
    let children = children(&server, "default", "monkey").await;
    assert_eq!(children["deployment"]["spec"]["replicas"], 2);
    host.wait_log(&[
        "plugin=\"website-js\"",
        "creating the Deployment and Service of Website default/monkey",
    ])
    .await;
}
