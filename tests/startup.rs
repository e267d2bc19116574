//! End to end: the real host binary started before its API server is up says so, keeps
//! trying, stays unready, and starts normally once the API server answers.

use crate::common::host::{Host, component, free_port, manifest, scratch};
use crate::common::{config_maps, eventually_async};
use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::core::ObjectMeta;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_before_its_api_server_waits_unready_and_then_serves() {
    let dir = scratch("startup-unreachable");
    let port = free_port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \
             'http://127.0.0.1:{port}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u, namespace: default}}}}]\n\
             current-context: x\n"
        ),
    )
    .expect("kubeconfig");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let mut command = Host::command();
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--leader-elect", "false"])
        .arg("--plugin")
        .arg(&plugin);
    let mut host = Host::spawn(command);
    host.wait_log(&[
        "cannot reach the API server",
        &format!("127.0.0.1:{port}"),
        "retry_in",
    ])
    .await;
    let ready = eventually_async("/readyz to answer", || async {
        let body = host.get("/readyz?verbose").await;
        (!body.is_empty()).then_some(body)
    })
    .await;
    assert!(ready.contains("[-]startup"), "{ready}");
    assert!(!ready.contains("not served"), "{ready}");
    assert!(host.running(), "the host gave up:\n{}", host.log());

    let server = ApiServer::start(
        Config::default()
            .http_addr(([127, 0, 0, 1], port).into())
            .https_addr(None),
    )
    .await
    .expect("API server starts");
    host.wait_log(&["API server reached"]).await;
    eventually_async("/readyz ok", || async {
        let body = host.get("/readyz?verbose").await;
        (body.contains("[+]startup ok") && !body.contains("[-]")).then_some(())
    })
    .await;
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("late".to_owned()),
            labels: Some([("testbed".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let api = config_maps(&server, "default");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    eventually_async("the testbed to reconcile", || async {
        api.get_opt("late-seen").await.ok()?.map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_plugin_directory_starts_with_a_warning() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("startup-empty");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugin dir");
    let host = Host::start(&server, &dir, &[plugins]);
    host.wait_log(&["WARN", "no plugin manifests found", "plugin.yaml"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_a_plugin_rescan_stops_the_host_cleanly() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("startup-signal-during-rescan");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugin dir");
    let mut host = Host::start(&server, &dir, std::slice::from_ref(&plugins));
    host.wait_log(&["watching plugin sources"]).await;

    // A new plugin whose module is a FIFO nobody writes: the rescan that finds it blocks in
    // reading the module until the host is told to stop.
    let slow = plugins.join("slow");
    std::fs::create_dir_all(&slow).expect("plugin dir");
    let status = std::process::Command::new("mkfifo")
        .arg(slow.join("slow.wasm"))
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo failed");
    std::fs::write(
        slow.join("plugin.yaml"),
        "name: slow\nmodule: slow.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n",
    )
    .expect("manifest");
    host.wait_log(&["plugin sources changed; rescanning"]).await;
    host.signal("TERM");
    assert_eq!(host.exit_code().await, Some(0), "{}", host.log());
    let log = host.log();
    let stopped = log.find("stopped").expect("the host logs that it stopped");
    assert!(
        !log.lines().any(|line| line.contains("ERROR")),
        "an error was logged at shutdown:\n{}",
        &log[stopped..]
    );
}
