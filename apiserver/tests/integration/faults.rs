//! Fault injection and bulk load, driven through the in-process handle, observed over HTTP.

use crate::common;
use std::time::{Duration, Instant};

use crate::common::{Http, configmap, rv, server};
use embedded_apiserver::{FailRule, Failure, Verb};
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn closing_watches_ends_every_open_stream() {
    let s = server().await;
    let h = Http::new(&s);
    let base = s.resource_version();
    let mut a = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={base}"))
        .await;
    let mut b = h
        .watch(&format!(
            "/api/v1/namespaces?watch=true&resourceVersion={base}"
        ))
        .await;
    // Both watches are registered once an event reaches them.
    h.post(CMS, &configmap("x", json!({}))).await;
    assert!(a.next().await.is_some());
    s.faults().close_watches();
    assert!(a.next().await.is_none());
    assert!(b.next().await.is_none());
}

#[tokio::test]
async fn compacting_history_makes_the_next_watch_from_an_old_version_gone() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, a) = h.post(CMS, &configmap("a", json!({}))).await;
    h.post(CMS, &configmap("b", json!({}))).await;
    let mut ok = h
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={}&timeoutSeconds=1",
            rv(&a)
        ))
        .await;
    assert_eq!(ok.next().await.expect("replayed")["type"], "ADDED");
    s.faults().compact_history();
    let mut w = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&a)))
        .await;
    assert_eq!(w.next().await.expect("error")["object"]["code"], 410);
    let mut current = h
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={}&timeoutSeconds=1",
            s.resource_version()
        ))
        .await;
    assert!(
        current.next().await.is_none(),
        "the current version is still watchable"
    );
}

#[tokio::test]
async fn failing_rules_answer_500_or_429_with_retry_after_for_matching_requests_only() {
    let s = server().await;
    let h = Http::new(&s);
    let f = s.faults();
    f.fail_next(
        FailRule::new(1, Failure::InternalError)
            .verb(Verb::Create)
            .resource("configmaps"),
    );
    f.fail_next(
        FailRule::new(
            2,
            Failure::TooManyRequests {
                retry_after_secs: 2,
            },
        )
        .verb(Verb::List),
    );
    assert_eq!(
        h.get(&format!("{CMS}/nothing")).await.0,
        404,
        "GET is not matched"
    );
    let (code, st) = h.post(CMS, &configmap("a", json!({}))).await;
    assert_eq!((code, st["reason"].as_str()), (500, Some("InternalError")));
    assert_eq!(h.post(CMS, &configmap("a", json!({}))).await.0, 201);
    for _ in 0..2 {
        // A raw request: kube's client would retry 429 by itself.
        let (code, raw) = common::raw_get(&s.url(), CMS).await;
        assert_eq!(code, 429);
        assert!(raw.to_ascii_lowercase().contains("retry-after: 2"), "{raw}");
        assert!(raw.contains("\"reason\":\"TooManyRequests\""), "{raw}");
    }
    assert_eq!(h.get(CMS).await.0, 200);
}

#[tokio::test]
async fn added_latency_delays_requests() {
    let s = server().await;
    let h = Http::new(&s);
    s.faults().set_latency(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(h.get(CMS).await.0, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
    s.faults().set_latency(Duration::ZERO);
}

#[tokio::test]
async fn paused_server_answers_only_after_resume() {
    let s = server().await;
    let h = Http::new(&s);
    s.faults().pause();
    let client = h.client.clone();
    let pending = tokio::spawn(async move {
        let req = axum::http::Request::get(CMS).body(Vec::new()).unwrap();
        client.request_text(req).await
    });
    let held = tokio::time::timeout(Duration::from_millis(300), async {
        while !pending.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(held.is_err(), "the request is held while paused");
    s.faults().resume();
    let body = tokio::time::timeout(common::WAIT, pending)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    assert!(body.contains("ConfigMapList"));
}

#[tokio::test]
async fn bulk_load_inserts_without_http_and_watchers_see_it() {
    let s = server().await;
    let h = Http::new(&s);
    let base = s.resource_version();
    let mut w = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={base}"))
        .await;
    let objects = (0..1000).map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("bulk-{i:04}"), "namespace": "default"}, "data": {"i": i.to_string()}}));
    let last = s.bulk_load(objects).expect("bulk load");
    assert_eq!(last, base + 1000);
    let (_, list) = h.get(&format!("{CMS}?limit=1")).await;
    assert_eq!(list["metadata"]["remainingItemCount"], 999);
    let e = w.next().await.expect("event");
    assert_eq!(e["object"]["metadata"]["name"], "bulk-0000");
    assert!(e["object"]["metadata"]["uid"].is_string());
    let unknown =
        s.bulk_load([json!({"apiVersion": "v9", "kind": "Nope", "metadata": {"name": "x"}})]);
    assert_eq!(unknown.unwrap_err().code(), 404);
}

#[tokio::test]
async fn https_listener_serves_clients_that_trust_the_written_ca() {
    let s = server().await;
    let dir = std::env::temp_dir().join(format!("embedded-apiserver-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    s.write_kubeconfig(&path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    assert!(config.cluster_url.to_string().starts_with("https://"));
    let client = kube::Client::try_from(config).unwrap();
    let version = client
        .apiserver_version()
        .await
        .expect("TLS request succeeds");
    assert_eq!(version.major, "1");
    std::fs::remove_dir_all(&dir).ok();
}
