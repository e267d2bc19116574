//! An API server that comes back without its state (etcd wiped or replaced, the server restarted
//! on the same address): the host notices the new store, reports its caches stale on `/readyz`,
//! lists again and reconciles the objects made since. On a real kube-apiserver a watch resumed
//! from a version of the old store is not refused: without the host noticing, the new objects
//! would wait forever behind a silent watch.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};

use crate::common::backend::Backend as ApiServer;
use crate::common::eventually_async;
use crate::common::host::{Host, component, manifest, scratch};
use crate::common::website::{crd, sample_website, websites};
use embedded_apiserver::Config;

const EXAMPLE: &str = "examples/website";
const CACHE: &str = "cache/example.com/v1/Website";

/// The body of `/readyz?verbose` once its status is `code`-like: 200 when `ready`, else any
/// failure.
async fn readiness(host: &Host, ready: bool, what: &str, holds: impl Fn(&str) -> bool) -> String {
    eventually_async(what, || async {
        let (code, body) = host.get_status("/readyz?verbose").await?;
        ((code == 200) == ready && holds(&body)).then_some(body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_back_without_its_state_is_listed_again_and_its_new_objects_reconciled() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("state-loss");
    crd(&server, EXAMPLE).await;
    let plugin = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    let deployment = |server: &ApiServer, name: &'static str| {
        let deployments: Api<Deployment> =
            Api::namespaced(server.kube_client().expect("client"), "default");
        async move {
            eventually_async(&format!("the Deployment of Website {name}"), || async {
                deployments.get_opt(name).await.ok()?
            })
            .await
        }
    };
    websites(&server, "example.com", "default")
        .create(
            &PostParams::default(),
            &sample_website(EXAMPLE, "before", "default", "example.com"),
        )
        .await
        .expect("Website created");
    deployment(&server, "before").await;
    readiness(&host, true, "the host to be ready", |body| {
        body.contains(CACHE)
    })
    .await;

    let server = server.wipe_and_restart().await;
    let stale = readiness(
        &host,
        false,
        "/readyz to report the Website cache stale",
        |body| {
            body.lines()
                .any(|line| line.contains(CACHE) && line.contains("stale"))
        },
    )
    .await;
    assert!(
        stale.contains("the API server's store was replaced"),
        "{stale}"
    );
    // The new store has no Website kind until its CRD is applied again.
    crd(&server, EXAMPLE).await;
    websites(&server, "example.com", "default")
        .create(
            &PostParams::default(),
            &sample_website(EXAMPLE, "after", "default", "example.com"),
        )
        .await
        .expect("Website created in the new store");
    deployment(&server, "after").await;
    readiness(&host, true, "the host to be ready again", |body| {
        body.contains(CACHE)
    })
    .await;
    assert!(
        host.log().contains("the API server's store was replaced"),
        "the host says why it lists again"
    );
}
