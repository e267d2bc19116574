//! List and watch semantics over HTTP: selectors, pagination, history replay, bookmarks, the
//! history window's 410 Gone, and timeoutSeconds.

use crate::common::{Http, configmap, raw_get, rv, server, start};
use embedded_apiserver::Config;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn seed(h: &Http) {
    h.post(
        CMS,
        &configmap("web", json!({"app": "web", "tier": "front"})),
    )
    .await;
    h.post(CMS, &configmap("db", json!({"app": "db", "tier": "back"})))
        .await;
    h.post(CMS, &configmap("bare", json!({}))).await;
}

#[tokio::test]
async fn label_selectors_support_equality_sets_and_existence() {
    let s = server().await;
    let h = Http::new(&s);
    seed(&h).await;
    let q = |sel: &str| format!("{CMS}?labelSelector={}", sel.replace(' ', "%20"));
    assert_eq!(names(&h.get(&q("app=web")).await.1), ["web"]);
    assert_eq!(names(&h.get(&q("app!=web")).await.1), ["bare", "db"]);
    assert_eq!(names(&h.get(&q("app in (web,db)")).await.1), ["db", "web"]);
    assert_eq!(names(&h.get(&q("app notin (web)")).await.1), ["bare", "db"]);
    assert_eq!(names(&h.get(&q("tier")).await.1), ["db", "web"]);
    assert_eq!(names(&h.get(&q("!tier")).await.1), ["bare"]);
    let (code, st) = h.get(&q("app in (")).await;
    assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
}

#[tokio::test]
async fn field_selectors_filter_by_name_and_namespace() {
    let s = server().await;
    let h = Http::new(&s);
    seed(&h).await;
    h.post(
        "/api/v1/namespaces/kube-system/configmaps",
        &configmap("sys", json!({})),
    )
    .await;
    let (_, l) = h
        .get(&format!("{CMS}?fieldSelector=metadata.name%3Ddb"))
        .await;
    assert_eq!(names(&l), ["db"]);
    let (_, l) = h
        .get("/api/v1/configmaps?fieldSelector=metadata.namespace%3Dkube-system")
        .await;
    assert_eq!(names(&l), ["sys"]);
    let (_, l) = h
        .get("/api/v1/configmaps?fieldSelector=metadata.namespace!%3Dkube-system")
        .await;
    assert_eq!(names(&l), ["bare", "db", "web"]);
}

#[tokio::test]
async fn limit_and_continue_page_through_the_collection() {
    let s = server().await;
    let h = Http::new(&s);
    for i in 0..5 {
        h.post(CMS, &configmap(&format!("c{i}"), json!({}))).await;
    }
    let mut seen = Vec::new();
    let (_, mut page) = h.get(&format!("{CMS}?limit=2")).await;
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let first_rv = rv(&page);
    loop {
        seen.extend(names(&page));
        let Some(token) = page["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
        else {
            break;
        };
        page = h.get(&format!("{CMS}?limit=2&continue={token}")).await.1;
        assert_eq!(
            rv(&page),
            first_rv,
            "every page reports the first page's version"
        );
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4"]);
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_the_history_after_it() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, a) = h.post(CMS, &configmap("a", json!({}))).await;
    h.post(CMS, &configmap("b", json!({}))).await;
    h.delete(&format!("{CMS}/a")).await;
    let mut w = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&a)))
        .await;
    let e1 = w.next_change().await.expect("event");
    assert_eq!(
        (
            e1["type"].as_str(),
            e1["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("b"))
    );
    let e2 = w.next_change().await.expect("event");
    assert_eq!(
        (
            e2["type"].as_str(),
            e2["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("a"))
    );
    h.post(CMS, &configmap("c", json!({}))).await;
    let e3 = w.next_change().await.expect("live event");
    assert_eq!(e3["object"]["metadata"]["name"], "c");
    assert!(rv(&e3["object"]) > rv(&e2["object"]));
}

#[tokio::test]
async fn watch_without_a_version_starts_with_the_current_objects() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("a", json!({"x": "1"}))).await;
    h.post(CMS, &configmap("b", json!({}))).await;
    let mut w = h.watch(&format!("{CMS}?watch=1&labelSelector=x")).await;
    let e = w.next_change().await.expect("initial event");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("a"))
    );
    h.post(CMS, &configmap("c", json!({"x": "2"}))).await;
    let e = w.next_change().await.expect("live event");
    assert_eq!(
        e["object"]["metadata"]["name"], "c",
        "b is filtered out by the selector"
    );
}

#[tokio::test]
async fn bookmarks_arrive_only_when_allowed() {
    let s = start(Config::default().bookmark_interval(std::time::Duration::from_millis(50))).await;
    let h = Http::new(&s);
    let (_, list) = h.get(CMS).await;
    let base = rv(&list);
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={base}"
        ))
        .await;
    h.post(
        "/api/v1/namespaces/kube-system/configmaps",
        &configmap("elsewhere", json!({})),
    )
    .await;
    let e = w.next().await.expect("bookmark");
    assert_eq!(e["type"], "BOOKMARK");
    assert!(
        rv(&e["object"]) > base,
        "bookmark carries the newer version"
    );
    let mut plain = h
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={base}&timeoutSeconds=1"
        ))
        .await;
    assert!(
        plain.next().await.is_none(),
        "no bookmark without allowWatchBookmarks"
    );
}

#[tokio::test]
async fn send_initial_events_ends_with_an_annotated_bookmark() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("a", json!({}))).await;
    let mut w = h
        .watch(&format!("{CMS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"))
        .await;
    assert_eq!(w.next().await.expect("added")["type"], "ADDED");
    let b = w.next().await.expect("bookmark");
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(
        b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn versions_older_than_the_history_window_get_410_gone() {
    let s = start(Config::default().history_limit(3)).await;
    let h = Http::new(&s);
    let (_, first) = h.post(CMS, &configmap("first", json!({}))).await;
    let (_, page) = h.get(&format!("{CMS}?limit=1")).await;
    let token = page["metadata"]["continue"].as_str().map(str::to_string);
    for i in 0..5 {
        h.post(CMS, &configmap(&format!("c{i}"), json!({}))).await;
    }
    let mut w = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&first)))
        .await;
    let e = w.next().await.expect("error event");
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Gone");
    assert!(w.next().await.is_none(), "the stream ends after the error");
    let (code, st) = h
        .get(&format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&first)
        ))
        .await;
    assert_eq!((code, st["reason"].as_str()), (410, Some("Gone")));
    if let Some(token) = token {
        let (code, st) = h.get(&format!("{CMS}?limit=1&continue={token}")).await;
        assert_eq!((code, st["reason"].as_str()), (410, Some("Expired")));
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch() {
    let s = server().await;
    let h = Http::new(&s);
    let started = std::time::Instant::now();
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={}&timeoutSeconds=1",
            s.resource_version()
        ))
        .await;
    assert!(w.next().await.is_none());
    let took = started.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(900) && took < std::time::Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test]
async fn watch_of_one_object_by_field_selector_sees_only_it() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, a) = h.post(CMS, &configmap("a", json!({}))).await;
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&fieldSelector=metadata.name%3Da&resourceVersion={}",
            rv(&a)
        ))
        .await;
    h.post(CMS, &configmap("b", json!({}))).await;
    h.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"k": "2"}}),
    )
    .await;
    let e = w.next_change().await.expect("event");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("MODIFIED"), Some("a"))
    );
}

#[tokio::test]
async fn a_selector_watch_sees_objects_entering_as_added_and_leaving_as_deleted() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, a) = h.post(CMS, &configmap("a", json!({"app": "web"}))).await;
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&labelSelector=app%3Dweb&resourceVersion={}",
            rv(&a)
        ))
        .await;
    let path = format!("{CMS}/a");
    let ct = "application/merge-patch+json";
    let (_, left) = h
        .patch(&path, ct, &json!({"metadata": {"labels": {"app": "db"}}}))
        .await;
    let e = w.next_change().await.expect("leaving");
    // Upstream's watch cache: the last state within the selection, at the change's version.
    assert_eq!(
        (
            e["type"].as_str(),
            e["object"]["metadata"]["labels"]["app"].as_str(),
            e["object"]["metadata"]["resourceVersion"].as_str()
        ),
        (
            Some("DELETED"),
            Some("web"),
            Some(rv(&left).to_string().as_str())
        )
    );
    h.patch(&path, ct, &json!({"data": {"k": "ignored"}})).await;
    h.patch(&path, ct, &json!({"metadata": {"labels": {"app": "web"}}}))
        .await;
    let e = w.next_change().await.expect("entering");
    assert_eq!(
        e["type"], "ADDED",
        "the change while outside the selection is not sent: {e}"
    );
    h.patch(&path, ct, &json!({"data": {"k": "2"}})).await;
    assert_eq!(w.next_change().await.expect("modified")["type"], "MODIFIED");
}

#[tokio::test]
async fn events_can_be_selected_by_involved_object_and_unknown_fields_are_refused() {
    let s = server().await;
    let h = Http::new(&s);
    let events = "/api/v1/namespaces/default/events";
    for (name, target) in [("e1", "demo"), ("e2", "other")] {
        let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "ConfigMap", "name": target, "namespace": "default"},
            "reason": "Tested", "type": "Normal"});
        assert_eq!(h.post(events, &event).await.0, 201);
    }
    let (_, l) = h
        .get(&format!(
            "{events}?fieldSelector=involvedObject.name%3Ddemo,involvedObject.kind%3DConfigMap"
        ))
        .await;
    assert_eq!(names(&l), ["e1"]);
    let (code, st) = h.get(&format!("{CMS}?fieldSelector=data.k%3Dv")).await;
    assert_eq!((code, st["reason"].as_str()), (400, Some("BadRequest")));
}

#[tokio::test]
async fn every_watch_line_names_its_type_before_its_object() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, created) = h.post(CMS, &configmap("a", json!({}))).await;
    let base = rv(&created);
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={base}"
        ))
        .await;
    h.post(CMS, &configmap("b", json!({}))).await;
    h.post(
        "/api/v1/namespaces/kube-system/configmaps",
        &configmap("elsewhere", json!({})),
    )
    .await;
    let added = w.next_line().await.expect("added");
    assert!(
        added.starts_with(r#"{"type":"ADDED","object":{"#),
        "{added}"
    );
    let bookmark = w.next_line().await.expect("bookmark");
    assert!(
        bookmark.starts_with(r#"{"type":"BOOKMARK","object":{"#),
        "{bookmark}"
    );
    s.faults().compact_history();
    let mut expired = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={base}"))
        .await;
    let error = expired.next_line().await.expect("error");
    assert!(
        error.starts_with(r#"{"type":"ERROR","object":{"#),
        "{error}"
    );
    assert!(error.contains(r#""code":410"#), "{error}");
}

#[tokio::test]
async fn a_watch_from_a_version_newer_than_the_server_gets_504_too_large() {
    let s = server().await;
    let h = Http::new(&s);
    let current = s.resource_version();
    // Sent by hand: the test client's kube retry layer would resend a 504 by itself.
    let (code, raw) = raw_get(
        &s.url(),
        &format!("{CMS}?watch=true&resourceVersion={}", current + 100),
    )
    .await;
    let body = &raw[raw.find('{').expect("a JSON body")..=raw.rfind('}').expect("a JSON body")];
    let status: Value = serde_json::from_str(body).expect("a Status");
    assert_eq!(code, 504, "{raw}");
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "Too large resource version: {}, current: {current}",
            current + 100
        )),
        "{message}"
    );
    let mut w = h
        .watch(&format!("{CMS}?watch=true&resourceVersion={current}"))
        .await;
    h.post(CMS, &configmap("after", json!({}))).await;
    assert_eq!(w.next().await.expect("event")["type"], "ADDED");
}

#[tokio::test]
async fn send_initial_events_false_starts_at_the_current_version_and_lists_refuse_it() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("before", json!({}))).await;
    let mut w = h
        .watch(&format!(
            "{CMS}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    h.post(CMS, &configmap("after", json!({}))).await;
    let e = w.next_change().await.expect("an event");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("after")),
        "no initial state: the first event is the new object"
    );
    let (code, status) = h.get(&format!("{CMS}?sendInitialEvents=true")).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"].as_str(),
        Some("sendInitialEvents")
    );
    let (code, status) = h
        .get(&format!("{CMS}?watch=true&sendInitialEvents=true"))
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"].as_str(),
        Some("resourceVersionMatch")
    );
}
