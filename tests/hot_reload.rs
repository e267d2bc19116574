//! End to end: plugins added, swapped, rebuilt and removed in a running host, by changing files
//! in its plugins directory.

use crate::common;
use std::path::{Path, PathBuf};

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, component, scratch};
use crate::common::{churn, eventually_async};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use serde_json::json;

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

fn config_maps(server: &impl common::backend::Cluster) -> Api<ConfigMap> {
    Api::namespaced(server.client(), "default")
}

/// Writes `plugins/<name>/plugin.yaml` (reconciling ConfigMaps labelled `<name>=true`) with
/// `module` copied next to it as `plugin.wasm`; `extra` is appended to the manifest.
fn plugin_dir(plugins: &Path, name: &str, module: &Path, extra: &str) -> PathBuf {
    let dir = plugins.join(name);
    std::fs::create_dir_all(&dir).expect("plugin dir");
    std::fs::copy(module, dir.join("plugin.wasm")).expect("module copied");
    write_manifest(&dir, name, extra);
    dir
}

fn write_manifest(dir: &Path, name: &str, extra: &str) {
    let manifest = format!(
        "name: {name}\nmodule: plugin.wasm\nfor: {{apiVersion: v1, kind: ConfigMap}}\n\
         labelSelector: {name}=true\n\
         limits: {{deadline: 5s, memory: 64Mi, logLinesPerSecond: 100000}}\n\
         grants:\n  - {{apiVersion: v1, kind: ConfigMap, verbs: [get, create, update, patch, delete]}}\n\
         {extra}"
    );
    std::fs::write(dir.join("plugin.yaml"), manifest).expect("manifest written");
}

/// Replaces `dir/plugin.wasm` the way editors and `cp` + `mv` do: write aside, then rename.
fn replace_module(dir: &Path, module: &Path) {
    let aside = dir.join(".plugin.wasm.new");
    std::fs::copy(module, &aside).expect("copied aside");
    std::fs::rename(&aside, dir.join("plugin.wasm")).expect("renamed over");
}

fn labelled(name: &str, label: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(label.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

async fn create(server: &ApiServer, object: &ConfigMap) {
    config_maps(server)
        .create(&PostParams::default(), object)
        .await
        .expect("created");
}

async fn seen(server: &ApiServer, name: &str) {
    let api = config_maps(server);
    eventually_async(&format!("{name}-seen"), || async {
        api.get_opt(&format!("{name}-seen")).await.ok()?
    })
    .await;
}

fn reloads(plugin: &str, result: &str) -> String {
    format!("plugin_reloads_total{{plugin=\"{plugin}\",result=\"{result}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_swapped_under_load_reconciles_every_object_at_its_latest_version() {
    // Embedded only: bulk_load writes the objects without HTTP.
    let server = embedded_apiserver::ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    churn::load(&server);
    let dir = scratch("swap-under-load");
    let plugins = dir.join("plugins");
    // Every reconcile logs its stamp: the plugin may log as fast as it reconciles.
    let plugin = plugin_dir(&plugins, "load", &component("noop"), "concurrency: 2\n");
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    host.wait_log(&["plugin loaded", "plugin=load"]).await;

    // A stream of updates while the module changes.
    let updater = churn::updates(config_maps(&server), 200);
    replace_module(&plugin, &component("stamp"));
    host.wait_log(&["plugin module swapped", "plugin=load"])
        .await;
    updater.await.expect("updater");
    churn::every_object_stamped(&host, &config_maps(&server)).await;
    for reason in ["trap", "instantiate", "deadline", "memory", "error"] {
        let series =
            format!("reconcile_host_plugin_failures_total{{plugin=\"load\",reason=\"{reason}\"}}");
        assert_eq!(host.metric(&series).await, 0.0, "{series}");
    }
    assert_eq!(host.metric(&reloads("load", "success")).await, 2.0);
    assert_eq!(host.metric(&reloads("load", "failure")).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_modules_do_not_replace_a_good_one() {
    let server = server().await;
    let dir = scratch("broken");
    let plugins = dir.join("plugins");
    let plugin = plugin_dir(&plugins, "testbed", &component("testbed"), "");
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    for name in ["first", "second", "third"] {
        create(&server, &labelled(name, "testbed", &[])).await;
        seen(&server, name).await;
    }

    let garbage = dir.join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm not really").expect("written");
    let broken = [
        (garbage, "is not a valid WebAssembly component"),
        (
            component("wrong-world"),
            "does not match the `reconciler` world",
        ),
    ];
    for (failures, (module, reason)) in (1..).zip(broken) {
        replace_module(&plugin, &module);
        host.wait_metric(&reloads("testbed", "failure"), f64::from(failures))
            .await;
        host.wait_log(&["previous version keeps serving", reason])
            .await;
        let readyz = host.get("/readyz?verbose").await;
        assert!(readyz.contains("[-]plugin/testbed failed"), "{readyz}");
        let name = format!("after-{failures}");
        create(&server, &labelled(&name, "testbed", &[])).await;
        seen(&server, &name).await;
    }

    // A module that loads but traps in every call is rolled back after its first calls.
    replace_module(&plugin, &component("always-trap"));
    host.wait_log(&["plugin module swapped", "plugin=testbed"])
        .await;
    host.wait_metric(&reloads("testbed", "failure"), 3.0).await;
    host.wait_log(&["calls trapped; back to module"]).await;
    create(&server, &labelled("after-rollback", "testbed", &[])).await;
    seen(&server, "after-rollback").await;

    let readyz = host.get("/readyz?verbose").await;
    assert!(readyz.contains("[-]plugin/testbed failed"), "{readyz}");

    // Putting back the module that serves heals the readiness check: disk and service agree.
    replace_module(&plugin, &component("testbed"));
    eventually_async(
        "readiness back after the serving module was restored",
        || async {
            let readyz = host.get("/readyz?verbose").await;
            readyz.contains("[+]plugin/testbed ok").then_some(())
        },
    )
    .await;

    // The rolled-back module, put back after another one served, is tried (and rolled back)
    // again rather than skipped in silence.
    replace_module(&plugin, &component("always-trap"));
    host.wait_metric(&reloads("testbed", "failure"), 4.0).await;
    create(&server, &labelled("after-second-rollback", "testbed", &[])).await;
    seen(&server, "after-second-rollback").await;

    // A new good module heals the readiness check.
    replace_module(&plugin, &component("stamp"));
    host.wait_log(&["stamp default/after-second-rollback"])
        .await;
    let readyz = host.get("/readyz?verbose").await;
    assert!(readyz.contains("[+]plugin/testbed ok"), "{readyz}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_style_data_symlink_swap_reloads_exactly_once() {
    let server = server().await;
    let dir = scratch("symlink-swap");
    let plugins = dir.join("plugins");
    // The layout the kubelet gives a mounted ConfigMap: files are symlinks through `..data`,
    // which points at a timestamped directory and is replaced atomically on update.
    let mount = plugins.join("stamped");
    let first = mount.join("..2026_11_22_00_00_00.000000001");
    std::fs::create_dir_all(&first).expect("dir");
    std::fs::copy(component("noop"), first.join("plugin.wasm")).expect("module");
    write_manifest(&first, "stamped", "");
    std::os::unix::fs::symlink(first.file_name().expect("name"), mount.join("..data"))
        .expect("..data");
    for file in ["plugin.yaml", "plugin.wasm"] {
        std::os::unix::fs::symlink(Path::new("..data").join(file), mount.join(file))
            .expect("file link");
    }
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    host.wait_log(&["plugin loaded", "plugin=stamped"]).await;

    let second = mount.join("..2026_11_22_00_00_01.000000002");
    std::fs::create_dir_all(&second).expect("dir");
    std::fs::copy(component("stamp"), second.join("plugin.wasm")).expect("module");
    write_manifest(&second, "stamped", "");
    std::os::unix::fs::symlink(second.file_name().expect("name"), mount.join("..data_tmp"))
        .expect("..data_tmp");
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).expect("swap");
    std::fs::remove_dir_all(&first).expect("old data removed");
    host.wait_log(&["plugin module swapped", "plugin=stamped"])
        .await;

    // Once a later, unrelated change has been rescanned, every event of the swap has been.
    let rescans = host.log().matches("plugin sources rescanned").count();
    std::fs::write(plugins.join("unrelated.txt"), "x").expect("touched");
    eventually_async("a rescan after the swap", || async {
        (host.log().matches("plugin sources rescanned").count() > rescans).then_some(())
    })
    .await;
    assert_eq!(host.metric(&reloads("stamped", "success")).await, 2.0);
    assert_eq!(host.log().matches("plugin module swapped").count(), 1);
    create(&server, &labelled("probe", "stamped", &[])).await;
    host.wait_log(&["stamp default/probe"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_come_and_go_and_a_changed_manifest_rebuilds_the_controller() {
    let server = server().await;
    let dir = scratch("lifecycle");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("dir");
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    host.wait_log(&["watching plugin sources"]).await;

    // Added: a plugin dropped into the directory starts.
    let testbed = plugin_dir(&plugins, "testbed", &component("testbed"), "");
    create(&server, &labelled("one", "testbed", &[])).await;
    seen(&server, "one").await;
    plugin_dir(&plugins, "stamped", &component("stamp"), "");
    create(&server, &labelled("mark", "stamped", &[])).await;
    host.wait_log(&["stamp default/mark"]).await;

    // Changed manifest: rebuilt with the new settings; objects keep being reconciled.
    write_manifest(&testbed, "testbed", "concurrency: 3\n");
    host.wait_log(&["plugin rebuilt for its new manifest", "plugin=testbed"])
        .await;
    let metrics = host.get("/metrics").await;
    assert!(
        metrics.contains("controller_runtime_max_concurrent_reconciles{controller=\"testbed\"} 3"),
        "{metrics}"
    );
    create(&server, &labelled("two", "testbed", &[])).await;
    seen(&server, "two").await;

    // Removed: drained and stopped, its cache released; the other plugin goes on.
    std::fs::remove_dir_all(plugins.join("stamped")).expect("removed");
    host.wait_log(&["plugin removed", "plugin=stamped"]).await;
    let readyz = host.get("/readyz?verbose").await;
    assert!(!readyz.contains("plugin/stamped"), "{readyz}");
    assert!(
        !readyz.contains("stamped=true"),
        "its cache is gone: {readyz}"
    );
    create(&server, &labelled("late", "stamped", &[])).await;
    create(&server, &labelled("three", "testbed", &[])).await;
    seen(&server, "three").await;
    assert!(!host.log().contains("stamp default/late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_plugin_leaves_no_queue_depth_behind() {
    const OBJECTS: usize = 100;
    // Embedded only: bulk_load writes the objects without HTTP.
    let server = embedded_apiserver::ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    server
        .bulk_load((0..OBJECTS).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("slow-{i:03}"), "namespace": "default",
                                "labels": {"spinner": "true"}},
                   "data": {"attack": "spin", "ms": "20"}})
        }))
        .expect("bulk load");
    let dir = scratch("rebuild-depth");
    let plugins = dir.join("plugins");
    let plugin = plugin_dir(&plugins, "spinner", &component("hostile"), "");
    let host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    let success = "controller_runtime_reconcile_total{controller=\"spinner\",result=\"success\"}";
    host.wait_metric(success, 1.0).await;
    // Rebuilt while most keys are still queued (one worker, 20 ms a key): the old queue's keys
    // move to the new one.
    write_manifest(&plugin, "spinner", "concurrency: 2\n");
    host.wait_log(&["plugin rebuilt for its new manifest", "plugin=spinner"])
        .await;
    host.wait_metric(success, OBJECTS as f64).await;
    let depth = "workqueue_depth{name=\"spinner\"}";
    eventually_async("the queue depth back to 0", || async {
        (host.metric(depth).await == 0.0).then_some(())
    })
    .await;
}

/// A module idle for `--unload-idle-modules-after` has its compiled code unmapped, and the next
/// object's reconcile maps it again from the module cache: the guest runs as before, nothing
/// fails, and it is unloaded again once idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_module_is_unloaded_and_its_next_call_maps_it_again() {
    let server = server().await;
    let dir = scratch("idle-unload");
    let plugins = dir.join("plugins");
    plugin_dir(&plugins, "testbed", &component("testbed"), "");
    let host = Host::start_with(
        &server,
        &dir,
        std::slice::from_ref(&plugins),
        &["--unload-idle-modules-after", "300ms"],
    );
    let loaded = "reconcile_host_plugin_modules{state=\"loaded\"}";
    let unloaded = "reconcile_host_plugin_modules{state=\"unloaded\"}";
    for (round, name) in (1..).zip(["first", "second", "third"]) {
        create(&server, &labelled(name, "testbed", &[])).await;
        seen(&server, name).await;
        eventually_async(&format!("unloaded after `{name}`"), || async {
            let states = (host.metric(loaded).await, host.metric(unloaded).await);
            (states == (0.0, 1.0)).then_some(())
        })
        .await;
        eventually_async(&format!("{round} unloads logged"), || async {
            let unloads = host.log().matches("unloaded idle plugin modules").count();
            (unloads >= round).then_some(())
        })
        .await;
    }
    for reason in ["trap", "instantiate", "deadline", "memory", "error"] {
        let series = format!(
            "reconcile_host_plugin_failures_total{{plugin=\"testbed\",reason=\"{reason}\"}}"
        );
        assert_eq!(host.metric(&series).await, 0.0, "{series}");
    }
}
