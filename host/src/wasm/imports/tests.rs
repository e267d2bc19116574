//! The host imports called directly, without wasm: grants, caches and the recorded API calls.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::informer::{CachedObject, Store};
use crate::manifest::Manifest;
use crate::runtime::KindRef;
use crate::wasm::api::{ApiCall, PatchDoc, Recorder};
use crate::wasm::bindings::kube::reconcile::{cache, client, events, log};
use crate::wasm::bindings::{CallError, Kind, ObjectRef};
use crate::wasm::context::PluginContext;
use crate::wasm::state::GuestState;

const MANIFEST: &str = "\
name: web
module: web.wasm
for: {apiVersion: example.com/v1, kind: Website}
owns: [{apiVersion: apps/v1, kind: Deployment}]
grants:
  - {apiVersion: apps/v1, kind: Deployment, verbs: [get, patch], namespaces: [default]}
  - {apiVersion: example.com/v1, kind: Website, verbs: [patch], subresources: [status]}
";

fn config_map(namespace: &str, name: &str, labels: &str) -> CachedObject {
    CachedObject::from_json(&format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"uid-{namespace}-{name}","resourceVersion":"1","labels":{labels}}}}}"#
    ))
    .unwrap()
}

fn state() -> (GuestState, Arc<Recorder>) {
    let manifest = Manifest::parse(MANIFEST, Path::new("/plugins/web")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let mut caches = HashMap::new();
    caches.insert(
        KindRef::new("apps/v1", "Deployment"),
        Arc::new(Store::from_objects([
            config_map("b", "z", r#"{"app":"web"}"#),
            config_map("a", "y", r#"{"app":"web","tier":"db"}"#),
            config_map("a", "x", r#"{"app":"api"}"#),
        ])),
    );
    let api = Arc::clone(&recorder);
    let context = PluginContext::new(Arc::new(manifest), caches, api);
    (GuestState::new(Arc::new(context)), recorder)
}

fn kind(api_version: &str, kind: &str) -> Kind {
    Kind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    }
}

fn deployment(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: kind("apps/v1", "Deployment"),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
    }
}

fn names(objects: &[String]) -> Vec<String> {
    objects
        .iter()
        .map(|text| {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            format!(
                "{}/{}",
                value["metadata"]["namespace"].as_str().unwrap(),
                value["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn cache_reads_declared_kinds_sorted_filtered_by_namespace_and_selector() {
    let (mut state, _) = state();
    let deployments = kind("apps/v1", "Deployment");
    let all = cache::Host::list(&mut state, deployments.clone(), None, None)
        .await
        .unwrap();
    assert_eq!(names(&all), ["a/x", "a/y", "b/z"]);
    let in_a = cache::Host::list(&mut state, deployments.clone(), Some("a".into()), None)
        .await
        .unwrap();
    assert_eq!(names(&in_a), ["a/x", "a/y"]);
    let selected = cache::Host::list(
        &mut state,
        deployments.clone(),
        None,
        Some("app=web,!tier".into()),
    )
    .await
    .unwrap();
    assert_eq!(names(&selected), ["b/z"]);
    let one = cache::Host::get(
        &mut state,
        deployments.clone(),
        Some("a".into()),
        "y".into(),
    )
    .await
    .unwrap();
    assert!(one.unwrap().contains(r#""tier":"db""#));
    let none = cache::Host::get(
        &mut state,
        deployments.clone(),
        Some("a".into()),
        "q".into(),
    )
    .await
    .unwrap();
    assert_eq!(none, None);
    let bad = cache::Host::list(&mut state, deployments, None, Some("app in (".into())).await;
    assert!(matches!(bad, Err(CallError::Invalid(m)) if m.contains("label selector")));
}

#[tokio::test]
async fn cache_refuses_kinds_the_manifest_does_not_declare() {
    let (mut state, _) = state();
    let denied = cache::Host::list(&mut state, kind("v1", "Secret"), None, None).await;
    assert!(
        matches!(&denied, Err(CallError::Denied(m)) if m.contains("does not cache v1/Secret")),
        "{denied:?}"
    );
}

#[tokio::test]
async fn client_calls_within_the_grants_reach_the_backend_with_the_plugin_as_field_manager() {
    let (mut state, recorder) = state();
    let object = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2}}"#;
    let stored = client::Host::apply(&mut state, object.into(), true, None)
        .await
        .unwrap();
    assert!(stored.contains(r#""replicas":2"#));
    let status = r#"{"apiVersion":"example.com/v1","kind":"Website","metadata":{"name":"web","namespace":"default"},"status":{"ok":true}}"#;
    client::Host::apply(&mut state, status.into(), true, Some("status".into()))
        .await
        .unwrap();
    let patch =
        client::PatchBody::Json(r#"[{"op":"add","path":"/spec/paused","value":true}]"#.into());
    client::Host::patch(&mut state, deployment("default", "web"), patch, None)
        .await
        .unwrap();
    let got = client::Host::get(&mut state, deployment("default", "web"))
        .await
        .unwrap();
    assert_eq!(got, None, "the recorder has no fixture");
    let calls = recorder.calls();
    assert_eq!(calls.len(), 4);
    assert!(
        matches!(&calls[0], ApiCall::Apply { field_manager, force: true, subresource: None, .. } if field_manager == "web")
    );
    assert!(matches!(&calls[1], ApiCall::Apply { subresource: Some(s), .. } if s == "status"));
    assert!(matches!(
        &calls[2],
        ApiCall::Patch {
            body: PatchDoc::Json(_),
            ..
        }
    ));
    assert!(matches!(&calls[3], ApiCall::Get { target } if target.name == "web"));
}

#[tokio::test]
async fn client_calls_outside_the_grants_are_denied_before_the_backend() {
    let (mut state, recorder) = state();
    let cases: Vec<(&str, Result<(), CallError>)> = vec![
        (
            "kind",
            client::Host::delete(
                &mut state,
                ObjectRef {
                    kind: kind("v1", "Secret"),
                    namespace: Some("default".into()),
                    name: "s".into(),
                },
            )
            .await,
        ),
        (
            "verb",
            client::Host::delete(&mut state, deployment("default", "web")).await,
        ),
        (
            "namespace",
            client::Host::get(&mut state, deployment("prod", "web"))
                .await
                .map(drop),
        ),
        (
            "subresource",
            client::Host::patch(
                &mut state,
                deployment("default", "web"),
                client::PatchBody::Merge("{}".into()),
                Some("scale".into()),
            )
            .await
            .map(drop),
        ),
    ];
    for (what, result) in cases {
        assert!(
            matches!(&result, Err(CallError::Denied(m)) if m.contains("plugin `web` has no grant")),
            "{what}: {result:?}"
        );
    }
    assert!(recorder.calls().is_empty());
    let refused = recorder.refused_calls();
    assert_eq!(refused.len(), 4, "every refusal is reported to the backend");
    assert!(
        refused[1].1.contains("add `delete` to the `verbs`"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn malformed_objects_and_patches_are_invalid_without_a_call() {
    let (mut state, recorder) = state();
    let not_json = client::Host::create(&mut state, "{".into()).await;
    assert!(matches!(not_json, Err(CallError::Invalid(m)) if m.contains("not valid JSON")));
    let no_kind = client::Host::apply(
        &mut state,
        r#"{"apiVersion":"apps/v1","metadata":{"name":"x"}}"#.into(),
        true,
        None,
    )
    .await;
    assert!(matches!(no_kind, Err(CallError::Invalid(m)) if m.contains("no `kind`")));
    let no_name = client::Host::replace(
        &mut state,
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{}}"#.into(),
    )
    .await;
    assert!(matches!(no_name, Err(CallError::Invalid(m)) if m.contains("no `metadata.name`")));
    let bad_patch = client::Host::patch(
        &mut state,
        deployment("default", "web"),
        client::PatchBody::Merge("nope".into()),
        None,
    )
    .await;
    assert!(matches!(bad_patch, Err(CallError::Invalid(_))));
    assert!(recorder.calls().is_empty());
}

#[tokio::test]
async fn events_need_no_grant_and_are_reported_by_the_plugin() {
    let (mut state, recorder) = state();
    events::Host::record_event(
        &mut state,
        deployment("default", "web"),
        events::EventType::Warning,
        "Failed".into(),
        "x".repeat(2000),
    )
    .await
    .unwrap();
    log::Host::log(&mut state, log::Level::Info, "hello".into()).await;
    let calls = recorder.calls();
    // Not cached: its uid is read (the plugin may get Deployments in `default`); the recorder
    // has no such object, so the Event names none.
    let [
        ApiCall::Get { target: read },
        ApiCall::Create { target, object, .. },
    ] = calls.as_slice()
    else {
        panic!("a get and a create: {calls:?}");
    };
    assert_eq!(
        (read.namespace.as_deref(), read.name.as_str()),
        (Some("default"), "web")
    );
    assert_eq!(target.kind, KindRef::new("events.k8s.io/v1", "Event"));
    assert_eq!(object["reportingController"], "reconcile-host/web");
    assert_eq!(object["type"], "Warning");
    assert_eq!(object["regarding"]["name"], "web");
    assert!(object["regarding"].get("uid").is_none(), "{object}");
    assert_eq!(object["note"].as_str().unwrap().len(), 1024);
}

#[tokio::test]
async fn an_event_about_a_cached_object_names_its_uid_without_reading_the_api() {
    let (mut state, recorder) = state();
    events::Host::record_event(
        &mut state,
        deployment("a", "y"),
        events::EventType::Normal,
        "Synced".into(),
        "n".into(),
    )
    .await
    .unwrap();
    let calls = recorder.calls();
    let [ApiCall::Create { object, .. }] = calls.as_slice() else {
        panic!("one create: {calls:?}");
    };
    assert_eq!(object["regarding"]["uid"], "uid-a-y");
    assert_eq!(object["regarding"]["resourceVersion"], "1");
}

#[tokio::test]
async fn an_event_reason_must_be_a_word_and_a_note_is_one_escaped_line() {
    let (mut state, recorder) = state();
    for reason in [
        "",
        "Forged\nLine",
        "Ok\u{202e}desrever",
        "With Space",
        &"R".repeat(129),
    ] {
        let refused = events::Host::record_event(
            &mut state,
            deployment("default", "web"),
            events::EventType::Warning,
            reason.to_owned(),
            "n".into(),
        )
        .await;
        assert!(
            matches!(&refused, Err(CallError::Invalid(m)) if m.contains("UpperCamelCase") && !m.contains('\n')),
            "{reason:?}: {refused:?}"
        );
    }
    assert!(recorder.calls().is_empty());
    events::Host::record_event(
        &mut state,
        deployment("default", "web"),
        events::EventType::Normal,
        "Synced".into(),
        "line one\nline two \u{202e}".into(),
    )
    .await
    .unwrap();
    let calls = recorder.calls();
    let [ApiCall::Get { .. }, ApiCall::Create { object, .. }] = calls.as_slice() else {
        panic!("a get of its uid and a create: {calls:?}");
    };
    assert_eq!(object["reason"], "Synced");
    assert_eq!(object["note"], "line one\\nline two \\u{202e}");
}

/// Answers every call after [`SLOW_API`], as an API server far away would.
struct SlowApi;

const SLOW_API: std::time::Duration = std::time::Duration::from_millis(60);

impl crate::wasm::api::ApiBackend for SlowApi {
    fn call(&self, call: ApiCall) -> crate::wasm::api::ApiFuture<'_> {
        Box::pin(async move {
            tokio::time::sleep(SLOW_API).await;
            Ok(Some(format!("{{\"verb\":{:?}}}", call.target().name)))
        })
    }
}

#[tokio::test]
async fn a_slow_api_server_shows_up_as_api_wait_not_as_guest_or_host_work() {
    use crate::wasm::cost::Import;
    use std::time::{Duration, Instant};
    let manifest = Manifest::parse(MANIFEST, Path::new("/plugins/web")).unwrap();
    let mut caches = HashMap::new();
    caches.insert(
        KindRef::new("apps/v1", "Deployment"),
        Arc::new(Store::from_objects([config_map("a", "x", "{}")])),
    );
    let context = PluginContext::new(Arc::new(manifest), caches, Arc::new(SlowApi));
    let mut state = GuestState::new(Arc::new(context));
    state.begin_call();
    let called = Instant::now();
    let object = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"}}"#;
    client::Host::apply(&mut state, object.into(), true, None)
        .await
        .unwrap();
    cache::Host::get(
        &mut state,
        kind("apps/v1", "Deployment"),
        Some("a".into()),
        "x".into(),
    )
    .await
    .unwrap()
    .expect("cached");
    let wall = called.elapsed();
    let cost = state.cost.finish(wall, Duration::ZERO);
    assert!(cost.api_wait >= SLOW_API, "{cost:?}");
    assert!(
        cost.guest + cost.host_total() < SLOW_API / 2,
        "the wait must not count as guest time or host work: {cost:?}"
    );
    assert_eq!(cost.guest + cost.host_total() + cost.api_wait, wall);
    assert_eq!(cost.calls[Import::ClientApply as usize], 1);
    assert_eq!(cost.calls[Import::CacheGet as usize], 1);
    assert!(
        cost.host[Import::CacheGet as usize] > Duration::ZERO,
        "{cost:?}"
    );
    // A new call starts from nothing.
    state.begin_call();
    assert_eq!(
        state.cost.finish(Duration::ZERO, Duration::ZERO),
        crate::wasm::cost::CallCost::default()
    );
}
