//! End to end: a hostile plugin (`host/tests/guests/hostile`) beside a well-behaved one, in the
//! real host binary against the embedded API server. Whatever the hostile guest does, it reaches
//! nothing outside its grants, and the host and the other plugin keep working.

use std::path::{Path, PathBuf};

use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::{ApiServer, Config, RecordedRequest};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;

async fn server() -> ApiServer {
    let server = ApiServer::start(Config::default().record_requests(true))
        .await
        .expect("API server starts");
    namespace(&server, "hostile", &[]).await;
    server
}

fn hostile(dir: &Path, overrides: &[(&str, &str)]) -> PathBuf {
    manifest(
        dir,
        "host/tests/guests/hostile/plugin.yaml",
        &component("hostile"),
        overrides,
    )
}

fn testbed(dir: &Path) -> PathBuf {
    manifest(
        dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    )
}

/// Creates `namespace/name` labelled `label=true` with `data`.
async fn labelled(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    label: &str,
    data: &[(&str, &str)],
) {
    let object = ConfigMap {
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
    };
    config_maps(server, namespace)
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
}

/// An attack on the hostile plugin: `hostile/<name>` with `attack` and more data.
async fn attack(server: &ApiServer, name: &str, data: &[(&str, &str)]) {
    labelled(server, "hostile", name, "hostile", data).await;
}

fn reconciled(plugin: &str, result: &str) -> String {
    format!("controller_runtime_reconcile_total{{controller=\"{plugin}\",result=\"{result}\"}}")
}

/// Waits until the testbed has reconciled `default/<name>` (its `<name>-seen` exists).
async fn testbed_converges(server: &ApiServer, name: &str) {
    labelled(server, "default", name, "testbed", &[]).await;
    let api = config_maps(server, "default");
    let seen = format!("{name}-seen");
    eventually_async(&format!("the testbed to reconcile {name}"), || async {
        api.get_opt(&seen).await.ok()?.map(|_| ())
    })
    .await;
}

/// Requests that reached outside the hostile plugin's grant: anything about Secrets, any
/// namespaced ConfigMap request with a query that lists or watches, any write outside
/// `hostile`.
fn outside_the_grant(requests: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    requests
        .iter()
        .filter(|request| {
            let query = request.query.as_deref().unwrap_or_default();
            let namespaced_config_map = request.path.starts_with("/api/v1/namespaces/")
                && request.path.contains("/configmaps");
            request.path.contains("secrets")
                || (namespaced_config_map
                    && (query.contains("watch") || query.contains("labelSelector")))
                || (request.method != "GET"
                    && request.path.starts_with("/api/v1/namespaces/")
                    && !request.path.starts_with("/api/v1/namespaces/hostile/")
                    && !request.path.starts_with("/api/v1/namespaces/default/"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_that_would_rewrite_the_request_path_reach_nothing_outside_the_grant() {
    let server = server().await;
    let dir = scratch("isolation-inject");
    let secrets: Api<Secret> = Api::namespaced(server.kube_client().expect("client"), "hostile");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("stolen".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            [(
                "password".to_owned(),
                k8s_openapi::ByteString(b"hunter2".to_vec()),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let before = server.requests().len();
    let host = Host::start(&server, &dir, &[hostile(&dir, &[])]);
    let attacks = [
        ("hostile/secrets/stolen?x=", "ok"),
        ("hostile", "?labelSelector=a"),
        ("hostile", "a?watch=true"),
        ("hostile", "../secrets/stolen"),
        ("hostile", "stolen%2F..%2F..%2Fsecrets%2Fstolen"),
        ("hostile/../hostile", "stolen"),
        ("kube-system", "coredns"),
    ];
    for (i, (namespace, name)) in attacks.iter().enumerate() {
        let object = format!("inject-{i}");
        attack(
            &server,
            &object,
            &[
                ("attack", "inject"),
                ("namespace", namespace),
                ("name", name),
            ],
        )
        .await;
    }
    host.wait_metric(&reconciled("hostile", "success"), attacks.len() as f64)
        .await;
    let requests = server.requests();
    let outside = outside_the_grant(&requests[before..]);
    assert!(
        outside.is_empty(),
        "requests outside the grant: {outside:#?}"
    );
    let kept = secrets
        .get("stolen")
        .await
        .expect("the secret is still there");
    assert!(kept.data.is_some_and(|data| data.contains_key("password")));
    // The refusals name the rule that was broken.
    host.wait_log(&[
        "hostile: get refused",
        "namespace \\\"hostile/secrets/stolen?x=\\\" must be a lowercase DNS-1123 label",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_writing_100_mb_keeps_the_host_ready_and_the_other_plugin_reconciling() {
    let server = server().await;
    let dir = scratch("isolation-stdout");
    let host = Host::start(
        &server,
        &dir,
        &[hostile(&dir, &[("concurrency", "2")]), testbed(&dir)],
    );
    testbed_converges(&server, "before").await;
    attack(&server, "flood-stdout", &[("attack", "stdout")]).await;
    attack(&server, "flood-log", &[("attack", "log")]).await;
    attack(&server, "flood-stdout-again", &[("attack", "stdout")]).await;
    attack(
        &server,
        "flood-error",
        &[("attack", "error"), ("bytes", "10485760")],
    )
    .await;
    let dropped = "reconcile_host_plugin_log_dropped_bytes_total{plugin=\"hostile\"}";
    host.wait_metric(dropped, f64::from(3 * (100 << 20) - 3 * (64 << 10)))
        .await;
    // While the floods are retried (the error one keeps failing), the host answers and the
    // other plugin keeps converging.
    testbed_converges(&server, "during").await;
    let ready = host.get("/readyz").await;
    assert!(ready.contains("ok"), "readyz: {ready}");
    let log = host.log();
    let longest = log.lines().map(str::len).max().unwrap_or_default();
    assert!(longest < 16 << 10, "a log line of {longest} bytes");
    assert!(
        log.contains("more bytes cut"),
        "the error text is cut:\n{}",
        &log[..log.len().min(4000)]
    );
    assert!(log.contains("guest output dropped"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_write_a_line_that_looks_like_the_hosts() {
    let server = server().await;
    let dir = scratch("isolation-forge");
    let host = Host::start(&server, &dir, &[hostile(&dir, &[])]);
    let forged = "fine\n2001-01-01T00:00:00.000000Z  INFO reconcile{plugin=\"testbed\" \
                  key=default/x}: reconcile_host::controller: forged";
    attack(&server, "forge", &[("attack", "forge"), ("line", forged)]).await;
    host.wait_metric(&reconciled("hostile", "success"), 1.0)
        .await;
    host.wait_log(&["plugin=\"hostile\"", "stream=\"stdout\"", "forged"])
        .await;
    let log = host.log();
    assert!(
        !log.lines().any(|line| line.starts_with("2001-01-01")),
        "a forged line:\n{log}"
    );
    // The log import's message is one line with its newline escaped; stdout's text is split
    // at its newline, and each piece is a quoted field of a line the host wrote.
    let count = |part: &str| log.lines().filter(|line| line.contains(part)).count();
    assert_eq!(count("text=\"fine\\n2001-01-01"), 1, "{log}");
    assert_eq!(count("stream=\"stdout\" text=\"2001-01-01"), 1, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_hammering_the_api_spends_only_its_own_budget() {
    let server = server().await;
    let dir = scratch("isolation-hammer");
    let plugins = [
        hostile(
            &dir,
            &[
                ("concurrency", "8"),
                ("apiRateLimit", "{qps: 20, burst: 20}"),
            ],
        ),
        testbed(&dir),
    ];
    let started = std::time::Instant::now();
    let host = Host::start(&server, &dir, &plugins);
    for i in 0..8 {
        attack(
            &server,
            &format!("hammer-{i}"),
            &[("attack", "hammer"), ("calls", "100000")],
        )
        .await;
    }
    // The hammering reconciles run into their deadline, throttled by their own bucket.
    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"hostile\",reason=\"deadline\"}",
        1.0,
    )
    .await;
    for name in ["a", "b", "c"] {
        testbed_converges(&server, name).await;
    }
    // 20 requests a second, 20 at once: at most 20 + 20 × elapsed seconds reached the server.
    let gets = server
        .requests()
        .iter()
        .filter(|request| {
            request.method == "GET" && request.path.contains("/hostile/configmaps/hammer-")
        })
        .count();
    let ceiling = 20.0 + 20.0 * started.elapsed().as_secs_f64();
    assert!(
        (gets as f64) <= ceiling,
        "{gets} GETs, at most {ceiling} allowed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_zero_is_raised_to_the_minimum_and_reported() {
    let server = server().await;
    let dir = scratch("isolation-hot");
    let host = Host::start(&server, &dir, &[hostile(&dir, &[])]);
    attack(&server, "hot", &[("attack", "hot")]).await;
    host.wait_metric(
        "reconcile_host_plugin_hot_requeues_total{plugin=\"hostile\"}",
        3.0,
    )
    .await;
    host.wait_log(&[
        "requeue-after below the plugin's minimum",
        "key=hostile/hot",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_about_objects_outside_the_grants_are_denied() {
    let server = server().await;
    let dir = scratch("isolation-event");
    let host = Host::start(&server, &dir, &[hostile(&dir, &[])]);
    attack(
        &server,
        "event",
        &[
            ("attack", "event"),
            ("namespace", "kube-system"),
            ("name", "token"),
        ],
    )
    .await;
    host.wait_log(&["hostile: event refused: denied=true"])
        .await;
    let events: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|request| request.path.contains("/events"))
        .collect();
    assert!(events.is_empty(), "{events:#?}");
}
