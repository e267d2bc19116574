//! The host's API client against the embedded API server over HTTP: client-side rate limit,
//! `Retry-After`, bounded retries, and which verbs retry.

use std::future::Future;
use std::time::Duration;

use embedded_apiserver::{ApiServer, Config, FailRule, Failure, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchParams};
use reconcile_host::client::{ClientLimits, ClientStats, client_with_stats};
use tokio::time::Instant;

/// Upper bound for any single test step.
const WAIT: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("the embedded API server starts")
}

/// A kube config pointing at `url` over plain HTTP.
fn http_config(url: &str) -> kube::Config {
    let mut config = kube::Config::new(url.parse().expect("server URL parses"));
    config.default_namespace = "default".into();
    config
}

/// Limits that never throttle and retry quickly, for tests about retries.
fn quick_retries() -> ClientLimits {
    ClientLimits::default()
        .qps(1000.0)
        .burst(1000)
        .backoff_base(ms(10))
        .backoff_max(Duration::from_secs(2))
}

/// ConfigMaps in `default` through the host's client with `limits`, and that client's stats.
fn configmaps(server: &ApiServer, limits: &ClientLimits) -> (Api<ConfigMap>, ClientStats) {
    let stats = ClientStats::default();
    let client = client_with_stats(http_config(&server.url()), limits, &stats)
        .expect("the host's client builds");
    (Api::default_namespaced(client), stats)
}

/// ConfigMaps in `default` through kube's plain client (no host limits), to arrange and check.
fn plain_configmaps(server: &ApiServer) -> Api<ConfigMap> {
    Api::default_namespaced(server.kube_client().expect("plain kube client"))
}

fn configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {WAIT:?}"))
}

/// The HTTP status of an API error; panics on any other error.
fn status_code(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API status error, got {other:?}"),
    }
}

#[tokio::test]
async fn get_answered_429_twice_succeeds_on_the_third_try_after_the_retry_after_waits() {
    let server = server().await;
    plain_configmaps(&server)
        .create(&PostParams::default(), &configmap("app"))
        .await
        .expect("arrange: create");
    let (api, stats) = configmaps(&server, &quick_retries());
    server.faults().fail_next(
        FailRule::new(
            2,
            Failure::TooManyRequests {
                retry_after_secs: 1,
            },
        )
        .verb(Verb::Get)
        .resource("configmaps"),
    );

    let start = Instant::now();
    let got = bounded("the GET", api.get("app"))
        .await
        .expect("third try succeeds");
    let took = start.elapsed();

    assert_eq!(got.metadata.name.as_deref(), Some("app"));
    assert!(
        took >= Duration::from_secs(2),
        "took {took:?}, less than two Retry-After waits"
    );
    let stats = stats.snapshot();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.retries_too_many_requests, 2);
    assert_eq!(stats.retries(), 2);
}

#[tokio::test]
async fn get_answered_500_twice_succeeds_on_the_third_try() {
    let server = server().await;
    plain_configmaps(&server)
        .create(&PostParams::default(), &configmap("app"))
        .await
        .expect("arrange: create");
    let (api, stats) = configmaps(&server, &quick_retries());
    server.faults().fail_next(
        FailRule::new(2, Failure::InternalError)
            .verb(Verb::Get)
            .resource("configmaps"),
    );

    bounded("the GET", api.get("app"))
        .await
        .expect("third try succeeds");

    let stats = stats.snapshot();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.retries_server_error, 2);
    assert_eq!(stats.retries_exhausted, 0);
}

#[tokio::test]
async fn create_answered_500_is_not_retried_and_returns_the_error() {
    let server = server().await;
    let (api, stats) = configmaps(&server, &quick_retries());
    // One failure only: a retry would succeed, so an error proves there was none.
    server.faults().fail_next(
        FailRule::new(1, Failure::InternalError)
            .verb(Verb::Create)
            .resource("configmaps"),
    );

    let err = bounded(
        "the create",
        api.create(&PostParams::default(), &configmap("app")),
    )
    .await
    .expect_err("the 500 reaches the caller");

    assert_eq!(status_code(&err), 500);
    let stats = stats.snapshot();
    assert_eq!(stats.requests, 1);
    assert_eq!(stats.retries(), 0);
}

#[tokio::test]
async fn create_answered_429_is_retried_because_the_server_did_not_apply_it() {
    let server = server().await;
    let (api, stats) = configmaps(&server, &quick_retries());
    server.faults().fail_next(
        FailRule::new(
            1,
            Failure::TooManyRequests {
                retry_after_secs: 0,
            },
        )
        .verb(Verb::Create)
        .resource("configmaps"),
    );

    bounded(
        "the create",
        api.create(&PostParams::default(), &configmap("app")),
    )
    .await
    .expect("the retry creates the object");

    assert_eq!(stats.snapshot().retries_too_many_requests, 1);
    plain_configmaps(&server)
        .get("app")
        .await
        .expect("the object exists once");
}

#[tokio::test]
async fn retries_are_bounded_and_the_final_status_surfaces() {
    let server = server().await;
    plain_configmaps(&server)
        .create(&PostParams::default(), &configmap("app"))
        .await
        .expect("arrange: create");
    let (api, stats) = configmaps(&server, &quick_retries().max_retries(2));
    server.faults().fail_next(
        FailRule::new(5, Failure::InternalError)
            .verb(Verb::Get)
            .resource("configmaps"),
    );

    let err = bounded("the GET", api.get("app"))
        .await
        .expect_err("failures outlast the retries");

    assert_eq!(status_code(&err), 500);
    let snapshot = stats.snapshot();
    assert_eq!(snapshot.requests, 3, "one try and two retries");
    assert_eq!(snapshot.retries_server_error, 2);
    assert_eq!(snapshot.retries_exhausted, 1);
    // Exactly three of the five failures were used: kube's plain client (which does not retry
    // 500) sees the remaining two, then success.
    let plain = plain_configmaps(&server);
    for remaining in [2, 1] {
        let err = plain
            .get("app")
            .await
            .expect_err("an injected failure is left");
        assert_eq!(status_code(&err), 500, "{remaining} failures left");
    }
    plain.get("app").await.expect("the failures are used up");
}

#[tokio::test]
async fn burst_of_requests_takes_at_least_the_excess_over_burst_divided_by_qps() {
    let server = server().await;
    let (qps, burst, n) = (20.0, 5, 15);
    let (api, stats) = configmaps(&server, &ClientLimits::default().qps(qps).burst(burst));

    let start = Instant::now();
    // Clones of one client share its bucket.
    let lists = (0..n).map(|_| {
        let api = api.clone();
        async move { api.list(&Default::default()).await }
    });
    let results = bounded("the burst", futures::future::join_all(lists)).await;
    let took = start.elapsed();

    for result in results {
        result.expect("every list succeeds");
    }
    let floor = Duration::from_secs_f64(f64::from(n - burst) / qps);
    assert!(took >= floor, "{n} requests took {took:?}, under {floor:?}");
    let snapshot = stats.snapshot();
    assert_eq!(snapshot.requests, u64::from(n));
    assert!(snapshot.throttled >= 1, "{snapshot:?}");
    assert!(snapshot.throttled_wait > Duration::ZERO, "{snapshot:?}");
}

#[tokio::test]
async fn watch_answered_429_is_not_retried() {
    let server = server().await;
    let (api, stats) = configmaps(&server, &quick_retries());
    server.faults().fail_next(
        FailRule::new(
            1,
            Failure::TooManyRequests {
                retry_after_secs: 0,
            },
        )
        .verb(Verb::Watch)
        .resource("configmaps"),
    );

    let err = match bounded("the watch", api.watch(&WatchParams::default(), "0")).await {
        Ok(_) => panic!("the first watch gets the 429"),
        Err(err) => err,
    };

    assert_eq!(status_code(&err), 429);
    let snapshot = stats.snapshot();
    assert_eq!(snapshot.requests, 1);
    assert_eq!(snapshot.retries(), 0);
    let _stream = bounded("the second watch", api.watch(&WatchParams::default(), "0"))
        .await
        .expect("the failure was used once; the next watch opens");
}

#[tokio::test]
async fn refused_connection_is_retried_up_to_the_bound_then_surfaces() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let stats = ClientStats::default();
    let limits = quick_retries().max_retries(3);
    let client = client_with_stats(
        http_config(&format!("http://127.0.0.1:{port}")),
        &limits,
        &stats,
    )
    .expect("the host's client builds");
    let api: Api<ConfigMap> = Api::default_namespaced(client);

    let err = bounded("the GET", api.get("app"))
        .await
        .expect_err("nothing listens");

    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    let snapshot = stats.snapshot();
    assert_eq!(snapshot.requests, 4, "one try and three retries");
    assert_eq!(snapshot.retries_connect_refused, 3);
    assert_eq!(snapshot.retries_exhausted, 1);
}

#[tokio::test]
async fn client_from_the_servers_kubeconfig_works_over_https() {
    let server = server().await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kube config from the kubeconfig");
    assert_eq!(config.cluster_url.scheme_str(), Some("https"));
    let stats = ClientStats::default();
    let client = client_with_stats(config, &ClientLimits::default(), &stats).expect("client");
    let api: Api<ConfigMap> = Api::default_namespaced(client);

    bounded(
        "the create",
        api.create(&PostParams::default(), &configmap("app")),
    )
    .await
    .expect("create over HTTPS");

    assert_eq!(stats.snapshot().requests, 1);
}
