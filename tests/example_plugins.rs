//! End to end: the real host binary loads real components built from `examples/` and
//! `host/tests/guests/`, against the embedded API server over HTTP.

use crate::common;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{ACCEPT_COPIES, config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, ObjectMeta};

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

/// Creates `default/<name>` labelled for the testbed, with `data`.
async fn testbed_object(server: &ApiServer, name: &str, data: &[(&str, &str)]) {
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("testbed".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    };
    config_maps(server, "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
}

/// Waits until ConfigMap `namespace/name` exists and `accept` takes its data.
async fn data_when(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    accept: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let api = config_maps(server, namespace);
    eventually_async(&format!("ConfigMap {namespace}/{name}"), || async {
        let data = api.get_opt(name).await.ok()??.data.unwrap_or_default();
        accept(&data).then_some(data)
    })
    .await
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually_async(&format!("{name} deleted"), || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

fn testbed(dir: &std::path::Path, overrides: &[(&str, &str)]) -> PathBuf {
    manifest(
        dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        overrides,
    )
}

/// Unix-ms values of the keys `<prefix><n>` of `data`, ordered by `n`.
fn series(data: &BTreeMap<String, String>, prefix: &str) -> Vec<u64> {
    let mut points: Vec<(u64, u64)> = data
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.parse().ok()?, v.parse().ok()?)))
        .collect();
    points.sort_unstable();
    points.into_iter().map(|(_, at)| at).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_guests_are_contained_and_everything_else_keeps_reconciling() {
    let server = server().await;
    let dir = scratch("contained");
    namespace(&server, "team-a", &[ACCEPT_COPIES]).await;
    let plugins = [
        testbed(&dir, &[("concurrency", "3")]),
        manifest(
            &dir,
            "examples/configmap-replicator/plugin.yaml",
            &component("configmap-replicator"),
            &[],
        ),
    ];
    let mut host = Host::start(&server, &dir, &plugins);
    for behave in ["panic", "loop", "alloc", "ungranted", "connect"] {
        testbed_object(&server, behave, &[("behave", behave)]).await;
    }
    let failures = |reason: &str| {
        format!("reconcile_host_plugin_failures_total{{plugin=\"testbed\",reason=\"{reason}\"}}")
    };
    host.wait_metric(&failures("trap"), 1.0).await;
    host.wait_metric(&failures("deadline"), 1.0).await;
    host.wait_metric(&failures("memory"), 1.0).await;
    host.wait_metric(&failures("error"), 1.0).await;

    // Each is reported with the plugin, the key and what happened.
    host.wait_log(&["key=default/panic", "testbed: asked to panic"])
        .await;
    host.wait_log(&["key=default/panic", "plugin `testbed`", "trapped"])
        .await;
    host.wait_log(&["key=default/connect", "plugin `testbed`", "trapped"])
        .await;
    host.wait_log(&[
        "`wasi:sockets/tcp-create-socket@0.2.6#create-tcp-socket` called",
        "plugins have no network access",
    ])
    .await;
    host.wait_log(&["key=default/loop", "ran past its deadline of 2s"])
        .await;
    host.wait_log(&[
        "key=default/alloc",
        "exceeded its memory limit of 33554432 bytes",
    ])
    .await;
    let denied = data_when(&server, "default", "ungranted-seen", |d| {
        d.contains_key("denied")
    })
    .await;
    assert!(
        denied["denied"].contains("plugin `testbed` has no grant to `get` v1 Secret"),
        "{denied:?}"
    );
    host.wait_log(&["key=default/ungranted", "no grant to `get` v1 Secret"])
        .await;

    // Other keys of the same plugin, and another plugin, go on while the bad keys retry.
    testbed_object(&server, "fine", &[("value", "42")]).await;
    let seen = data_when(&server, "default", "fine-seen", |_| true).await;
    assert_eq!(seen.get("value").map(String::as_str), Some("42"));
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("shared".to_owned()),
            labels: Some(
                [(
                    "replicator.example.com/replicate".to_owned(),
                    "true".to_owned(),
                )]
                .into(),
            ),
            annotations: Some(
                [(
                    "replicator.example.com/namespaces".to_owned(),
                    "team-a".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_owned(), "v".to_owned())].into()),
        ..ConfigMap::default()
    };
    config_maps(&server, "default")
        .create(&PostParams::default(), &source)
        .await
        .expect("created");
    data_when(&server, "team-a", "shared", |d| {
        d.get("k").map(String::as_str) == Some("v")
    })
    .await;

    // The bad keys keep failing, retried, and the host is still up.
    let traps = host.metric(&failures("trap")).await;
    host.wait_metric(&failures("trap"), traps + 1.0).await;
    assert!(host.running(), "the host died; log:\n{}", host.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_is_honoured_and_failures_back_off_with_growing_delays() {
    let server = server().await;
    let dir = scratch("timing");
    let host = Host::start(&server, &dir, &[testbed(&dir, &[("concurrency", "2")])]);
    testbed_object(&server, "ticker", &[("behave", "requeue-after:300")]).await;
    testbed_object(&server, "failing", &[("behave", "error")]).await;

    let ticks = data_when(&server, "default", "ticker-ticks", |d| {
        series(d, "tick-").len() >= 4
    })
    .await;
    let ticks = series(&ticks, "tick-");
    for pair in ticks.windows(2) {
        assert!(
            pair[1] - pair[0] >= 300,
            "ticks came sooner than requeue-after(300 ms): {ticks:?}"
        );
    }

    let attempts = data_when(&server, "default", "failing-attempts", |d| {
        series(d, "attempt-").len() >= 8
    })
    .await;
    let attempts = series(&attempts, "attempt-");
    let gaps: Vec<u64> = attempts.windows(2).map(|p| p[1] - p[0]).collect();
    // Backoff 5 ms · 2^n: from the fourth retry on (40 ms and up) each gap exceeds the last.
    for pair in gaps[3..].windows(2) {
        assert!(pair[1] > pair[0], "retry delays did not grow: {gaps:?}");
    }
    assert!(
        gaps.last().copied().unwrap_or(0) >= 320,
        "the eighth retry should wait at least 5 ms · 2^6: {gaps:?}"
    );
    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"testbed\",reason=\"error\"}",
        8.0,
    )
    .await;
    host.wait_log(&["key=default/failing", "testbed: asked to fail (attempt 3)"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_logs_and_stdio_reach_the_host_log_with_plugin_and_key() {
    let server = server().await;
    let dir = scratch("stdio");
    let host = Host::start(&server, &dir, &[testbed(&dir, &[])]);
    testbed_object(&server, "chatty", &[("behave", "log")]).await;
    host.wait_log(&[
        "key=default/chatty",
        "plugin=\"testbed\"",
        "testbed: hello from chatty",
    ])
    .await;
    host.wait_log(&[
        "key=default/chatty",
        "stream=\"stdout\"",
        "testbed stdout chatty",
    ])
    .await;
    host.wait_log(&["WARN", "key=default/chatty", "testbed stderr chatty"])
        .await;
    data_when(&server, "default", "chatty-seen", |_| true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_that_do_not_fit_are_refused_at_load_with_the_reason() {
    let server = server().await;
    let dir = scratch("refused");
    let core_module = dir.join("core.wasm");
    std::fs::write(&core_module, b"\0asm\x01\0\0\0").expect("written");
    let garbage = dir.join("garbage.wasm");
    std::fs::write(&garbage, b"not wasm at all").expect("written");
    let cases = [
        (
            component("wrong-world"),
            "does not match the `reconciler` world",
        ),
        (core_module, "is not a valid WebAssembly component"),
        (garbage, "is not a valid WebAssembly component"),
        (dir.join("missing.wasm"), "cannot read plugin module"),
    ];
    for (module, expected) in cases {
        let plugin = manifest(&dir, "host/tests/guests/testbed/plugin.yaml", &module, &[]);
        let mut host = Host::start(&server, &dir, &[plugin]);
        assert_eq!(host.exit_code().await, Some(2), "log:\n{}", host.log());
        let log = host.log();
        assert!(log.contains(expected), "expected `{expected}` in:\n{log}");
        assert!(log.contains("plugin `testbed`"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_replicator_copies_syncs_prunes_and_cleans_up_with_its_finalizer() {
    let server = server().await;
    let dir = scratch("replicator");
    for ns in ["team-a", "team-b"] {
        namespace(&server, ns, &[ACCEPT_COPIES]).await;
    }
    let plugin = manifest(
        &dir,
        "examples/configmap-replicator/plugin.yaml",
        &component("configmap-replicator"),
        &[],
    );
    let _host = Host::start(&server, &dir, &[plugin]);
    let sources = config_maps(&server, "default");
    let text = std::fs::read_to_string(
        common::host::workspace().join("examples/configmap-replicator/samples/configmap.yaml"),
    )
    .expect("sample");
    let source: ConfigMap = serde_yaml_ng::from_str(&text).expect("sample parses");
    sources
        .create(&PostParams::default(), &source)
        .await
        .expect("created");
    for ns in ["team-a", "team-b"] {
        data_when(&server, ns, "shared-settings", |d| {
            d.get("log-level").map(String::as_str) == Some("info")
        })
        .await;
    }
    // The source carries the finalizer.
    let stored = sources.get("shared-settings").await.expect("source");
    assert!(
        stored
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"replicator.example.com/cleanup".to_owned())
    );

    // A change in the source reaches the copies.
    let patch = serde_json::json!({"data": {"log-level": "debug"}});
    sources
        .patch(
            "shared-settings",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("patched");
    for ns in ["team-a", "team-b"] {
        data_when(&server, ns, "shared-settings", |d| {
            d.get("log-level").map(String::as_str) == Some("debug")
        })
        .await;
    }

    // A namespace dropped from the annotation loses its copy.
    let patch = serde_json::json!({"metadata": {"annotations": {
        "replicator.example.com/namespaces": "team-a"}}});
    sources
        .patch(
            "shared-settings",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("patched");
    gone(&config_maps(&server, "team-b"), "shared-settings").await;

    // Deleting the source removes every copy, then the source itself.
    sources
        .delete("shared-settings", &DeleteParams::default())
        .await
        .expect("deleted");
    gone(&config_maps(&server, "team-a"), "shared-settings").await;
    gone(&sources, "shared-settings").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn website_becomes_an_owned_deployment_and_service_with_status() {
    let server = server().await;
    let dir = scratch("website");
    let client = server.kube_client().expect("client");
    let samples = common::host::workspace().join("examples/website/samples");
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(
        &std::fs::read_to_string(samples.join("crd.yaml")).expect("crd sample"),
    )
    .expect("crd parses");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("crd created");
    common::crd_established(&client, crd.metadata.name.as_deref().expect("named")).await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Website"));
    let websites: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let website: DynamicObject = serde_yaml_ng::from_str(
        &std::fs::read_to_string(samples.join("website.yaml")).expect("website sample"),
    )
    .expect("website parses");
    let plugin = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    websites
        .create(&PostParams::default(), &website)
        .await
        .expect("website created");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let deployment = eventually_async("the Deployment", || async {
        deployments.get_opt("hello").await.ok()?
    })
    .await;
    let spec = deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    let container = &spec.template.spec.expect("pod spec").containers[0];
    assert_eq!(container.image.as_deref(), Some("nginx:1.27"));
    let owner = &deployment.metadata.owner_references.expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Website", Some(true))
    );
    eventually_async("the Service", || async {
        services.get_opt("hello").await.ok()?
    })
    .await;
    let status = eventually_async("the status", || async {
        let object = websites.get_opt("hello").await.ok()??;
        let status = object.data.get("status")?.clone();
        (status["observedGeneration"] == 1).then_some(status)
    })
    .await;
    assert_eq!(status["image"], "nginx:1.27");

    // A spec change reaches the Deployment and the status.
    let patch = serde_json::json!({"spec": {"image": "nginx:1.28", "replicas": 3}});
    websites
        .patch("hello", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    eventually_async("the updated Deployment", || async {
        let spec = deployments.get_opt("hello").await.ok()??.spec;
        let image = spec.template.spec?.containers.first()?.image.clone()?;
        (spec.replicas == Some(3) && image == "nginx:1.28").then_some(())
    })
    .await;
    eventually_async("the updated status", || async {
        let object = websites.get_opt("hello").await.ok()??;
        (object.data.get("status")?["observedGeneration"] == 2).then_some(())
    })
    .await;

    // The status writes do not feed back: the reconcile count settles.
    let total =
        "controller_runtime_reconcile_total{controller=\"website\",result=\"requeue_after\"}";
    let settled = eventually_async("the reconcile count to settle for 1 s", || async {
        let before = host.metric(total).await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let after = host.metric(total).await;
        (before == after).then_some(after)
    })
    .await;
    assert!(
        settled <= 8.0,
        "{settled} reconciles for two generations: something feeds back"
    );

    // Deleting the Website takes its children with it (garbage collection). A real API server
    // without kube-controller-manager has no garbage collector: there the children must name
    // the Website as their controlling owner, and the test removes them itself.
    let uid = websites
        .get("hello")
        .await
        .expect("the Website")
        .metadata
        .uid;
    let owned_by_website = |owners: Option<Vec<OwnerReference>>| {
        owners.unwrap_or_default().iter().any(|owner| {
            owner.kind == "Website"
                && owner.controller == Some(true)
                && Some(&owner.uid) == uid.as_ref()
        })
    };
    let deployment = deployments.get("hello").await.expect("the Deployment");
    assert!(
        owned_by_website(deployment.metadata.owner_references),
        "the Deployment is owned"
    );
    let service = services.get("hello").await.expect("the Service");
    assert!(
        owned_by_website(service.metadata.owner_references),
        "the Service is owned"
    );
    websites
        .delete("hello", &DeleteParams::default())
        .await
        .expect("deleted");
    if server.is_real() {
        // The children's deletion queues the Website again, and a host that has not yet seen the
        // Website's own deletion reconciles it from its cache and applies them once more (a
        // garbage collector would remove those orphans too): delete until both stay gone.
        eventually_async("hello's Deployment and Service deleted", || async {
            let deleted = |result: Result<(), kube::Error>| match result {
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                other => other.expect("hello's child deleted"),
            };
            deleted(
                deployments
                    .delete("hello", &DeleteParams::default())
                    .await
                    .map(|_| ()),
            );
            deleted(
                services
                    .delete("hello", &DeleteParams::default())
                    .await
                    .map(|_| ()),
            );
            let deployment = deployments.get_opt("hello").await.ok()?;
            let service = services.get_opt("hello").await.ok()?;
            (deployment.is_none() && service.is_none()).then_some(())
        })
        .await;
    }
    gone(&deployments, "hello").await;
    gone(&services, "hello").await;
}

/// Runs `kubectl` (the server's admin) off the async runtime: whether it succeeded, and what it
/// printed (stdout, then stderr).
async fn kubectl(server: &ApiServer, dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let mut command = server.kubectl(dir);
    command.args(args);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the blocking pool runs kubectl")
        .expect("kubectl runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_website_with_an_unknown_field_and_no_replicas_is_pruned_and_defaulted() {
    let server = server().await;
    let dir = scratch("website-schema");
    common::website::crd(&server, "examples/website").await;
    let plugin = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let _host = Host::start(&server, &dir, &[plugin]);
    // Beside the plugin manifests, not among them (the host reads every manifest there).
    let objects = scratch("website-schema-objects");
    let website = objects.join("website.yaml");
    std::fs::write(
        &website,
        "apiVersion: example.com/v1\nkind: Website\nmetadata: {name: lean, namespace: default}\n\
         spec: {image: 'nginx:1.27', colour: red}\n",
    )
    .expect("manifest written");
    let path = website.to_str().expect("UTF-8");

    // kubectl validates by default (the server's Strict): the unknown field is refused.
    let (ok, printed) = kubectl(&server, &objects, &["apply", "-f", path]).await;
    assert!(
        !ok && printed.contains(r#"unknown field "spec.colour""#),
        "{printed}"
    );
    // With warnings only, the Website is stored without it, and with the default replicas.
    let (ok, printed) = kubectl(&server, &objects, &["apply", "--validate=warn", "-f", path]).await;
    assert!(ok, "{printed}");
    assert!(
        printed.contains(r#"Warning: unknown field "spec.colour""#),
        "{printed}"
    );
    let websites = common::website::websites(&server, "example.com", "default");
    let stored = websites.get("lean").await.expect("the Website");
    assert_eq!(
        stored.data["spec"],
        serde_json::json!({"image": "nginx:1.27", "replicas": 1})
    );
    // The plugin sees the defaulted spec.
    let client = server.kube_client().expect("client");
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let replicas = eventually_async("the Deployment", || async {
        deployments.get_opt("lean").await.ok()??.spec.replicas
    })
    .await;
    assert_eq!(replicas, 1);
}
