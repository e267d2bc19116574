//! Informers against the embedded API server over real HTTP: list then watch, recovery from a
//! dropped watch and from 410 Gone, shared subscribers, resync.

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{WAIT, config_map, eventually};
use embedded_apiserver::{ApiServer, Config, FailRule, Failure, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::ApiResource;
use parking_lot::Mutex;
use reconcile_host::informer::{Change, Informer, Scope, StoreEpoch};

fn scope() -> Scope {
    Scope {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        namespace: Some("default".to_owned()),
        label_selector: None,
    }
}

/// Every change a subscriber saw, as `verb name@resourceVersion`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn handler(&self) -> reconcile_host::informer::Handler {
        let seen = self.clone();
        Arc::new(move |change: &Change<'_>| {
            let line = match change {
                Change::Added(o) => format!("added {}", o.name()),
                Change::Updated { new, .. } => format!("updated {}", new.name()),
                Change::Deleted(o) => format!("deleted {}", o.name()),
                Change::Resync(o) => format!("resync {}", o.name()),
            };
            seen.0.lock().push(line);
        })
    }

    fn contains(&self, line: &str) -> bool {
        self.0.lock().iter().any(|l| l == line)
    }

    fn count(&self, line: &str) -> usize {
        self.0.lock().iter().filter(|l| *l == line).count()
    }
}

struct Fixture {
    server: ApiServer,
    api: Api<ConfigMap>,
    informer: Informer,
}

async fn fixture(config: Config) -> Fixture {
    let server = ApiServer::start(config).await.expect("server starts");
    let client = server.kube_client().expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name, "1"))
            .await
            .expect("create");
    }
    let informer = Informer::start(client, &ApiResource::erase::<ConfigMap>(&()), scope(), None);
    tokio::time::timeout(WAIT, informer.wait_synced())
        .await
        .expect("synced");
    Fixture {
        server,
        api,
        informer,
    }
}

fn cached_value(informer: &Informer, name: &str) -> Option<String> {
    let key = reconcile_host::controller::ObjectKey::namespaced("default", name);
    let object = informer.store().get(&key)?;
    let json: serde_json::Value = serde_json::from_str(object.json()).unwrap();
    Some(json["data"]["v"].as_str()?.to_owned())
}

#[tokio::test]
async fn the_cache_holds_the_initial_list_and_follows_later_changes() {
    let f = fixture(Config::default()).await;
    assert_eq!(f.informer.store().len(), 2);
    assert_eq!(f.informer.lists(), 1);
    let seen = Seen::default();
    let _subscription = f.informer.subscribe(seen.handler(), None);
    assert!(
        seen.contains("added a") && seen.contains("added b"),
        "replayed on subscribe"
    );

    f.api
        .replace("a", &PostParams::default(), &{
            let mut a = f.api.get("a").await.unwrap();
            a.data = Some([("v".to_owned(), "2".to_owned())].into());
            a
        })
        .await
        .unwrap();
    f.api.delete("b", &DeleteParams::default()).await.unwrap();
    f.api
        .create(&PostParams::default(), &config_map("c", "1"))
        .await
        .unwrap();
    eventually("the watch to deliver all three changes", || {
        seen.contains("updated a") && seen.contains("deleted b") && seen.contains("added c")
    })
    .await;
    assert_eq!(cached_value(&f.informer, "a").as_deref(), Some("2"));
    assert_eq!(cached_value(&f.informer, "b"), None);
    f.server.shutdown().await;
}

#[tokio::test]
async fn after_a_dropped_watch_and_after_410_the_cache_ends_at_the_latest_versions() {
    let f = fixture(Config::default()).await;
    let seen = Seen::default();
    let _subscription = f.informer.subscribe(seen.handler(), None);
    let faults = f.server.faults();

    // A dropped watch resumes from the last version seen.
    faults.close_watches();
    let mut a = f.api.get("a").await.unwrap();
    a.data = Some([("v".to_owned(), "after-drop".to_owned())].into());
    f.api
        .replace("a", &PostParams::default(), &a)
        .await
        .unwrap();
    eventually("the update after the dropped watch", || {
        cached_value(&f.informer, "a").as_deref() == Some("after-drop")
    })
    .await;
    assert_eq!(
        f.informer.lists(),
        1,
        "a dropped watch resumes without a relist"
    );

    // Keep the watch away (its reconnects fail) while objects change and history is compacted:
    // the reconnect from the stale version gets 410 Gone and the informer must relist, so the
    // deletion it never saw as an event still reaches subscribers.
    faults.fail_next(FailRule::new(2, Failure::InternalError).verb(Verb::Watch));
    faults.close_watches();
    f.api.delete("b", &DeleteParams::default()).await.unwrap();
    let mut a = f.api.get("a").await.unwrap();
    a.data = Some([("v".to_owned(), "after-410".to_owned())].into());
    f.api
        .replace("a", &PostParams::default(), &a)
        .await
        .unwrap();
    faults.compact_history();
    eventually("the cache to reach the latest versions", || {
        cached_value(&f.informer, "a").as_deref() == Some("after-410")
            && cached_value(&f.informer, "b").is_none()
    })
    .await;
    assert_eq!(seen.count("deleted b"), 1, "deleted exactly once");
    assert_eq!(
        f.informer.lists(),
        2,
        "the initial list and one relist after 410"
    );
    f.server.shutdown().await;
}

#[tokio::test]
async fn every_subscriber_gets_every_change_and_resync_redelivers_without_api_calls() {
    let f = fixture(Config::default()).await;
    let (first, second) = (Seen::default(), Seen::default());
    let _one = f.informer.subscribe(first.handler(), None);
    let two = f
        .informer
        .subscribe(second.handler(), Some(Duration::from_millis(200)));
    assert_eq!(f.informer.subscribers(), 2);
    f.api
        .create(&PostParams::default(), &config_map("c", "1"))
        .await
        .unwrap();
    eventually("both subscribers to see the new object", || {
        first.contains("added c") && second.contains("added c")
    })
    .await;
    let version_before = f.server.resource_version();
    eventually("two resync rounds", || second.count("resync c") >= 2).await;
    assert_eq!(first.count("resync c"), 0, "resync is per subscriber");
    assert_eq!(
        f.server.resource_version(),
        version_before,
        "resync wrote nothing"
    );
    drop(two);
    assert_eq!(f.informer.subscribers(), 1);
    f.server.shutdown().await;
}

/// A server on a fixed loopback port, so a second one can take its place.
async fn server_on(port: u16) -> ApiServer {
    ApiServer::start(
        Config::default()
            .http_addr(([127, 0, 0, 1], port).into())
            .https_addr(None),
    )
    .await
    .expect("server starts")
}

#[tokio::test]
async fn an_api_server_that_comes_back_without_its_state_is_listed_afresh() {
    let port = common::host::free_port();
    let first = server_on(port).await;
    // The host's client, as the host watches with it (kube's own retry layer would resend the
    // refused watch by itself).
    let mut config = kube::Config::new(first.url().parse().expect("URL"));
    config.default_namespace = "default".into();
    let client =
        reconcile_host::client::client(config, &reconcile_host::client::ClientLimits::default())
            .expect("client");
    let api: Api<ConfigMap> = Api::namespaced(first.kube_client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("old", "1"))
        .await
        .expect("create");
    // Versions the second server will not reach before the test ends.
    for i in 0..30 {
        api.create(&PostParams::default(), &config_map(&format!("c{i}"), "1"))
            .await
            .expect("create");
    }
    let informer = Informer::start(client, &ApiResource::erase::<ConfigMap>(&()), scope(), None);
    tokio::time::timeout(WAIT, informer.wait_synced())
        .await
        .expect("synced");
    let seen = Seen::default();
    let _subscription = informer.subscribe(seen.handler(), None);
    let old_version = first.resource_version();
    first.shutdown().await;

    let second = server_on(port).await;
    let api: Api<ConfigMap> = Api::namespaced(second.kube_client().expect("client"), "default");
    api.create(&PostParams::default(), &config_map("new", "1"))
        .await
        .expect("create");
    assert!(second.resource_version() < old_version);
    eventually("the informer to list the new server", || {
        seen.contains("added new") && seen.contains("deleted old")
    })
    .await;
    assert_eq!(cached_value(&informer, "new").as_deref(), Some("1"));
    assert_eq!(informer.store().len(), 1);
    assert!(informer.lists() >= 2);
}

#[tokio::test]
async fn watches_refused_for_seconds_resume_once_the_server_recovers() {
    let f = fixture(Config::default()).await;
    let faults = f.server.faults();
    faults.fail_next(FailRule::new(usize::MAX, Failure::InternalError).verb(Verb::Watch));
    faults.close_watches();
    // Long enough for the backoff to reach its cap: 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s.
    tokio::time::sleep(Duration::from_secs(8)).await;
    faults.reset();
    let recovered = std::time::Instant::now();
    f.api
        .create(&PostParams::default(), &config_map("after", "1"))
        .await
        .expect("create");
    eventually("the object created after recovery to be cached", || {
        cached_value(&f.informer, "after").is_some()
    })
    .await;
    // The figure quoted for watch recovery; the cap itself is checked by the watch task's
    // unit tests, not by a timed assertion here.
    eprintln!(
        "converged {} ms after the API server recovered",
        recovered.elapsed().as_millis()
    );
}

#[tokio::test]
async fn a_new_store_epoch_marks_the_cache_stale_until_it_lists_again() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("server starts");
    let client = server.kube_client().expect("client");
    let (epoch, follow) = tokio::sync::watch::channel(0_u64);
    let informer = Informer::start(
        client,
        &ApiResource::erase::<ConfigMap>(&()),
        scope(),
        Some(follow),
    );
    tokio::time::timeout(WAIT, informer.wait_synced())
        .await
        .expect("synced");
    assert!(!informer.is_stale());
    assert_eq!(informer.lists(), 1);
    // Lists fail, so the stale state lasts until the faults are lifted.
    let faults = server.faults();
    faults.fail_next(FailRule::new(usize::MAX, Failure::InternalError).verb(Verb::List));
    epoch.send_modify(|epoch| *epoch += 1);
    eventually("the cache to be marked stale", || informer.is_stale()).await;
    assert_eq!(informer.lists(), 1, "no list could complete");
    faults.reset();
    eventually("a new list to replace the stale cache", || {
        !informer.is_stale() && informer.lists() == 2
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn the_epoch_changes_when_the_server_comes_back_with_another_store() {
    let port = common::host::free_port();
    let first = ApiServer::start(
        Config::default()
            .http_addr(([127, 0, 0, 1], port).into())
            .https_addr(None)
            .record_requests(true),
    )
    .await
    .expect("server starts");
    let mut config = kube::Config::new(first.url().parse().expect("URL"));
    config.default_namespace = "default".into();
    let client =
        reconcile_host::client::client(config, &reconcile_host::client::ClientLimits::default())
            .expect("client");
    let epoch = StoreEpoch::spawn(client, Duration::from_millis(100));
    let follow = epoch.subscribe();
    let readings = || {
        first
            .requests()
            .iter()
            .filter(|r| r.path == "/api/v1/namespaces/kube-system")
            .count()
    };
    eventually("three readings of the same store", || readings() >= 3).await;
    assert_eq!(*follow.borrow(), 0, "the same store read again");
    first.shutdown().await;
    let second = server_on(port).await;
    eventually("the epoch to go up", || *follow.borrow() >= 1).await;
    second.shutdown().await;
}
