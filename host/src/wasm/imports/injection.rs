//! Hostile object references against a real API server: whatever strings a guest passes as
//! namespace and name, the requests that reach the server are exactly the granted kind, verb,
//! namespace and name, or nothing at all. Checked at the HTTP level, in the embedded API
//! server's request log.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use crate::informer::Store;
use crate::manifest::Manifest;
use crate::runtime::KindRef;
use crate::wasm::bindings::kube::reconcile::{cache, client, events};
use crate::wasm::bindings::{Kind, ObjectRef};
use crate::wasm::context::PluginContext;
use crate::wasm::kube_api::KubeApi;
use crate::wasm::state::GuestState;

/// Granted only get, patch and delete of ConfigMaps in namespace `hostile`.
const MANIFEST: &str = "\
name: hostile
module: hostile.wasm
for: {apiVersion: v1, kind: ConfigMap}
grants:
  - {apiVersion: v1, kind: ConfigMap, verbs: [get, patch, delete], namespaces: [hostile]}
";

/// The attacks seen against the host, and generated strings around them.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("hostile/secrets/stolen?x=".to_owned()),
        Just("hostile".to_owned()),
        Just("?labelSelector=a".to_owned()),
        Just("a?watch=true".to_owned()),
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("a%2Fb".to_owned()),
        Just("stolen#frag".to_owned()),
        Just("ok-name".to_owned()),
        "[a-z0-9]{1,8}",
        "[a-z0-9./?#%=&-]{0,24}",
        any::<String>(),
    ]
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    server: embedded_apiserver::ApiServer,
    state: GuestState,
}

fn harness() -> Harness {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let server = runtime.block_on(async {
        embedded_apiserver::ApiServer::start(
            embedded_apiserver::Config::default().record_requests(true),
        )
        .await
        .expect("server")
    });
    let client = runtime.block_on(async { server.kube_client().expect("client") });
    let manifest = Manifest::parse(MANIFEST, Path::new("/plugins/hostile")).expect("manifest");
    let mut caches = HashMap::new();
    caches.insert(KindRef::new("v1", "ConfigMap"), Arc::new(Store::default()));
    let context = PluginContext::new(Arc::new(manifest), caches, Arc::new(KubeApi::new(client)));
    let state = GuestState::new(Arc::new(context));
    Harness {
        runtime,
        server,
        state,
    }
}

fn config_map_kind() -> Kind {
    Kind {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
    }
}

/// Every import that takes a reference, called with `namespace` and `name`.
async fn attack(state: &mut GuestState, namespace: &str, name: &str) {
    let target = ObjectRef {
        kind: config_map_kind(),
        namespace: Some(namespace.to_owned()),
        name: name.to_owned(),
    };
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": namespace, "name": name},
    })
    .to_string();
    let _ = client::Host::get(state, target.clone()).await;
    let _ = client::Host::delete(state, target.clone()).await;
    let _ = client::Host::patch(
        state,
        target.clone(),
        client::PatchBody::Merge("{}".into()),
        None,
    )
    .await;
    let _ = client::Host::patch(
        state,
        target.clone(),
        client::PatchBody::Merge("{}".into()),
        Some(name.to_owned()),
    )
    .await;
    let _ = client::Host::apply(state, object.clone(), true, None).await;
    let _ = client::Host::create(state, object.clone()).await;
    let _ = client::Host::replace(state, object).await;
    let _ = cache::Host::get(
        state,
        config_map_kind(),
        Some(namespace.to_owned()),
        name.to_owned(),
    )
    .await;
    let _ = cache::Host::list(state, config_map_kind(), Some(namespace.to_owned()), None).await;
    let _ = events::Host::record_event(
        state,
        target,
        events::EventType::Warning,
        "Probe".into(),
        "note".into(),
    )
    .await;
}

/// Whether `request` is one the grants allow for `name`: get, patch or delete of
/// `hostile/<name>` (`name` itself, as a valid name needs no escaping), with no query but the
/// field manager and `force`; an Event about it in `hostile`; or the discovery of the core and
/// events groups.
fn allowed(request: &embedded_apiserver::RecordedRequest, name: &str) -> bool {
    let discovery = ["/api/v1", "/apis/events.k8s.io/v1"];
    if request.method == "GET" && discovery.contains(&request.path.as_str()) {
        return request.query.is_none();
    }
    let object = request.path == format!("/api/v1/namespaces/hostile/configmaps/{name}")
        && matches!(request.method.as_str(), "GET" | "PATCH" | "DELETE");
    let event = request.path == "/apis/events.k8s.io/v1/namespaces/hostile/events"
        && request.method == "POST";
    let query_ok = request.query.as_deref().is_none_or(|query| {
        query.split('&').all(|pair| {
            matches!(
                pair,
                "fieldManager=hostile" | "force=true" | "force=false" | ""
            )
        })
    });
    (object || event) && query_ok
}

#[test]
fn hostile_references_reach_the_api_server_only_as_the_granted_request() {
    let mut harness = harness();
    let config = ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    // proptest's closure is `Fn`: the state is taken out for each case and put back.
    let state = std::cell::Cell::new(None::<&mut GuestState>);
    state.set(Some(&mut harness.state));
    let (runtime, server) = (&harness.runtime, &harness.server);
    proptest!(config, |(namespace in hostile_text(), name in hostile_text())| {
        let seen = server.requests().len();
        // A call that never returns (a watch opened through a name) is a failure too.
        let guest = state.take().expect("the state is back");
        let finished = runtime.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                attack(&mut *guest, &namespace, &name),
            )
            .await
        });
        state.set(Some(guest));
        prop_assert!(finished.is_ok(), "namespace {namespace:?}, name {name:?}: a call hung");
        for request in &server.requests()[seen..] {
            prop_assert!(
                allowed(request, &name),
                "namespace {namespace:?}, name {name:?} sent {request:?}"
            );
        }
    });
    // The grant does work: a valid reference in the granted namespace reaches the server.
    let seen = harness.server.requests().len();
    let Harness { runtime, state, .. } = &mut harness;
    runtime.block_on(attack(state, "hostile", "ok-name"));
    let reached: Vec<_> = harness.server.requests()[seen..]
        .iter()
        .filter(|request| request.path.starts_with("/api/v1/namespaces/hostile/"))
        .map(|request| format!("{} {}", request.method, request.path))
        .collect();
    let object = "/api/v1/namespaces/hostile/configmaps/ok-name";
    assert_eq!(
        reached,
        [
            format!("GET {object}"),
            format!("DELETE {object}"),
            format!("PATCH {object}"),
            format!("PATCH {object}"),
            // The Event's object is not cached: its uid is read.
            format!("GET {object}"),
        ],
        "{reached:?}"
    );
    let events = harness.server.requests()[seen..]
        .iter()
        .filter(|request| request.path == "/apis/events.k8s.io/v1/namespaces/hostile/events")
        .count();
    assert_eq!(events, 1);
}
