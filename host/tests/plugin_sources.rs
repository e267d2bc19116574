//! The plugin supervisor's watch over its sources, in process against the embedded API server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::eventually_async;
use common::host::{component, scratch};
use embedded_apiserver::{ApiServer, Config};
use reconcile_host::plugin::api::SharedApi;
use reconcile_host::plugin::engine::{EngineSettings, PluginEngine};
use reconcile_host::plugin::kube_api::KubeApi;
use reconcile_host::plugin::module::ModuleLoader;
use reconcile_host::plugin::supervisor::Plugins;
use reconcile_host::runtime::{Runtime, RuntimeSettings};
use tokio_util::sync::CancellationToken;

/// A plugin written after the sources were loaded but before they are watched (as the
/// ReconcilerPlugin objects' files can be, by a writer running beside the supervisor) raises no
/// file event; the watch still finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_written_between_the_load_and_the_watch_is_loaded() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    let client = server.kube_client().expect("client");
    let dir = scratch("written-before-the-watch");
    let runtime = Runtime::new(
        client.clone(),
        RuntimeSettings {
            election: None,
            drain_timeout: Duration::from_secs(5),
        },
    );
    let engine = PluginEngine::new(EngineSettings::default()).expect("engine");
    let plugins = Arc::new(Plugins::new(
        runtime.clone(),
        ModuleLoader::new(engine),
        Arc::new(KubeApi::new(client)) as SharedApi,
        vec![dir.clone()],
    ));
    assert_eq!(plugins.load_all().await.expect("loads"), 0);

    let plugin_dir = dir.join("late");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    std::fs::copy(component("noop"), plugin_dir.join("module.wasm")).expect("module");
    std::fs::write(
        plugin_dir.join("plugin.yaml"),
        "name: late\nmodule: module.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n",
    )
    .expect("manifest");

    let stop = CancellationToken::new();
    let watching = tokio::spawn(Arc::clone(&plugins).watch(stop.clone()));
    let running = tokio::spawn(runtime.run(stop.clone()));
    let names = eventually_async("the plugin written before the watch to load", || async {
        let names: Vec<String> = plugins
            .running()
            .await
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        (!names.is_empty()).then_some(names)
    })
    .await;
    assert_eq!(names, ["late"]);
    stop.cancel();
    watching
        .await
        .expect("the watch task")
        .expect("the watch ends cleanly");
    running
        .await
        .expect("the runtime task")
        .expect("the runtime stops");
}
