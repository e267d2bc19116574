//! The plugin supervisor's watch over its sources, in process against the embedded API server.

use std::sync::Arc;
use std::time::Duration;

use crate::common::eventually_async;
use crate::common::host::{component, scratch};
use embedded_apiserver::{ApiServer, Config};
use reconcile_host::delivery::supervisor::Plugins;
use reconcile_host::runtime::{Runtime, RuntimeSettings};
use reconcile_host::wasm::api::SharedApi;
use reconcile_host::wasm::engine::{EngineSettings, PluginEngine};
use reconcile_host::wasm::kube_api::KubeApi;
use reconcile_host::wasm::module::ModuleLoader;
use tokio_util::sync::CancellationToken;

/// The plugins over `sources` against a fresh embedded API server, loaded; the runtime task
/// and the supervisor (not yet watching).
async fn supervisor(
    server: &ApiServer,
    sources: Vec<std::path::PathBuf>,
) -> (Arc<Plugins>, Runtime) {
    let client = server.kube_client().expect("client");
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
        sources,
    ));
    plugins.load_all().await.expect("loads");
    (plugins, runtime)
}

/// Writes the noop plugin `name` as `<dir>/<name>/plugin.yaml`; the manifest's path.
fn noop_plugin(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let plugin_dir = dir.join(name);
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    std::fs::copy(component("noop"), plugin_dir.join("module.wasm")).expect("module");
    let manifest = plugin_dir.join("plugin.yaml");
    std::fs::write(
        &manifest,
        format!("name: {name}\nmodule: module.wasm\nfor: {{apiVersion: v1, kind: ConfigMap}}\n"),
    )
    .expect("manifest");
    manifest
}

/// The supervisor watching its sources and the runtime running, until [`Watching::stop`].
struct Watching {
    stop: CancellationToken,
    watch: tokio::task::JoinHandle<Result<(), notify::Error>>,
    runtime: tokio::task::JoinHandle<Result<(), reconcile_host::runtime::RuntimeError>>,
}

impl Watching {
    fn start(plugins: &Arc<Plugins>, runtime: Runtime) -> Self {
        let stop = CancellationToken::new();
        Self {
            watch: tokio::spawn(Arc::clone(plugins).watch(stop.clone())),
            runtime: tokio::spawn(runtime.run(stop.clone())),
            stop,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.watch
            .await
            .expect("watch task")
            .expect("the watch ends");
        self.runtime
            .await
            .expect("runtime task")
            .expect("the runtime stops");
    }
}

/// The names of the running plugins, once `expected` of them run.
async fn running(plugins: &Plugins, expected: usize) -> Vec<String> {
    eventually_async(&format!("{expected} plugins running"), || async {
        let names: Vec<String> = plugins
            .running()
            .await
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        (names.len() == expected).then_some(names)
    })
    .await
}

/// A manifest file given as a source and then deleted keeps its plugin running and holds up no
/// other source: a plugin added to a directory source afterwards loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_manifest_file_source_keeps_its_plugin_and_blocks_no_other_source() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    let dir = scratch("deleted-file-source");
    let file_source = noop_plugin(&dir.join("files"), "from-file");
    let directory = dir.join("directory");
    std::fs::create_dir_all(&directory).expect("directory source");
    let (plugins, runtime) =
        supervisor(&server, vec![file_source.clone(), directory.clone()]).await;
    let running_host = Watching::start(&plugins, runtime);
    assert_eq!(running(&plugins, 1).await, ["from-file"]);

    std::fs::remove_file(&file_source).expect("manifest file deleted");
    noop_plugin(&directory, "added-later");
    let mut names = running(&plugins, 2).await;
    names.sort();
    assert_eq!(names, ["added-later", "from-file"]);
    running_host.stop().await;
}

/// A plugin written after the sources were loaded but before they are watched (as the
/// ReconcilerPlugin objects' files can be, by a writer running beside the supervisor) raises no
/// file event; the watch still finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_written_between_the_load_and_the_watch_is_loaded() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts");
    let dir = scratch("written-before-the-watch");
    let (plugins, runtime) = supervisor(&server, vec![dir.clone()]).await;
    assert!(plugins.running().await.is_empty());

    noop_plugin(&dir, "late");
    let running_host = Watching::start(&plugins, runtime);
    assert_eq!(running(&plugins, 1).await, ["late"]);
    running_host.stop().await;
}
