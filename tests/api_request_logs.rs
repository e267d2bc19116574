//! End to end: what the real host binary logs about API requests that fail and are retried.

use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{config_map, config_maps, eventually_async};
use embedded_apiserver::{ApiServer, Config, FailRule, Failure, Verb};
use kube::api::PostParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_server_error_is_no_error_line_and_a_final_one_is_one() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("logs-retries");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    // Room for the client's retries inside one reconcile.
    let text = std::fs::read_to_string(&plugin).expect("manifest");
    assert!(text.contains("deadline: 2s"), "{text}");
    std::fs::write(&plugin, text.replace("deadline: 2s", "deadline: 60s")).expect("manifest");
    let host = Host::start(&server, &dir, &[plugin]);
    host.wait_log(&["plugins loaded"]).await;
    let api = config_maps(&server, "default");

    // Two 503s on the testbed's apply (the only PATCHes in this test), which the client
    // retries: the write lands, and the log has no ERROR line.
    server
        .faults()
        .fail_next(FailRule::new(2, Failure::Unavailable).verb(Verb::Patch));
    let mut object = config_map("retried", "1");
    object.metadata.labels = Some([("testbed".to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    eventually_async("the testbed to write through the retries", || async {
        api.get_opt("retried-seen").await.ok()?.map(|_| ())
    })
    .await;
    let log = host.log();
    assert!(
        !log.lines().any(|line| line.contains("ERROR")),
        "a retried request was logged as an error:\n{log}"
    );

    // 503s past the retries: the request's failure is one ERROR line from the host, naming
    // it and the retries spent; none of kube's per-attempt lines.
    let faults = server.faults();
    faults.fail_next(FailRule::new(usize::MAX, Failure::Unavailable).verb(Verb::Patch));
    let mut object = config_map("failing", "1");
    object.metadata.labels = Some([("testbed".to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    let line = host
        .wait_log(&["ERROR", "API request failed", "PATCH", "failing-seen"])
        .await;
    assert!(line.contains("status=503"), "{line}");
    assert!(
        line.contains(&format!(
            "retries={}",
            reconcile_host::client::DEFAULT_MAX_RETRIES
        )),
        "{line}"
    );
    assert!(
        !host.log().contains("failed with status"),
        "kube's per-attempt lines reached the log:\n{}",
        host.log()
    );
    faults.reset();
    eventually_async(
        "the failing write to land once the server recovers",
        || async { api.get_opt("failing-seen").await.ok()?.map(|_| ()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_answered_500_without_retry_after_is_sent_once() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("logs-500-once");
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let host = Host::start(&server, &dir, &[plugin]);
    host.wait_log(&["plugins loaded"]).await;
    let api = config_maps(&server, "default");
    // A 500 is most often the refusal of what the write carries: sending it again repeats it.
    server
        .faults()
        .fail_next(FailRule::new(1, Failure::InternalError).verb(Verb::Patch));
    let mut object = config_map("refused", "1");
    object.metadata.labels = Some([("testbed".to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    let line = host
        .wait_log(&["ERROR", "API request failed", "PATCH", "refused-seen"])
        .await;
    assert!(line.contains("status=500"), "{line}");
    assert!(line.contains("retries=0"), "{line}");
    // The one 500 is spent: the reconcile's requeue writes it.
    eventually_async("the write to land on a later reconcile", || async {
        api.get_opt("refused-seen").await.ok()?.map(|_| ())
    })
    .await;
}
