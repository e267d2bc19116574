//! End to end: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the host exports a span per reconcile
//! linked to the watch event that queued it (its kind, event and resourceVersion), with a child
//! span per host import call and a client span per API request, the guest's log lines its events
//! and `span.attribute` lines its attributes; and on kube-apiserver (its
//! tracing pointed at the same receiver) the server's spans for the guest's writes carry the
//! reconcile's trace, through the `traceparent` the host sends.

use std::path::Path;

use crate::common::backend::Backend as ApiServer;
use crate::common::backend::Cluster;
use crate::common::host::{HOST_BINARY, Host, component, manifest, scratch};
use crate::common::otlp::{Received, Receiver, attribute, hex};
use crate::common::{eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "traced";

#[tokio::test]
async fn a_reconcile_span_links_its_watch_event_and_the_api_server_joins_its_trace() {
    let dir = scratch("traces");
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, NS, &[]).await;
    // On the real server, where kube-apiserver sends its spans; the host sends there too.
    let address = server.control_plane().map_or_else(
        || "127.0.0.1:0".parse().expect("address"),
        |plane| plane.otlp_address(),
    );
    let receiver = Receiver::start(address).await;
    let kubeconfig = dir.join("kubeconfig");
    server.kubeconfig_to(&kubeconfig);
    let plugin = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let mut command = Host::command_at(Path::new(HOST_BINARY), "127.0.0.1:0");
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--leader-elect", "false"])
        .arg("--plugin")
        .arg(plugin)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SERVICE_NAME");
    let host = Host::spawn(command);
    host.wait_log(&["plugin loaded", "testbed"]).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), NS);
    let object: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "subject", "labels": {"testbed": "true"}},
        "data": {"behave": "ok", "value": "1"},
    }))
    .expect("a ConfigMap");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    // The create's reconcile first, so the update's is its own (a change that arrives before a
    // queued key's reconcile starts joins it, and its causes read "added,modified").
    eventually_async("the create's reconcile span", || async {
        receiver
            .spans()
            .iter()
            .any(|s| {
                s.span.name == "reconcile"
                    && s.attribute("reconcile.key").as_deref() == Some("traced/subject")
                    && s.attribute("reconcile.causes").as_deref() == Some("added")
            })
            .then_some(())
    })
    .await;
    let updated = api
        .patch(
            "subject",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "2"}})),
        )
        .await
        .expect("updated");
    let rv = updated.metadata.resource_version.expect("rv");

    // The reconcile of the update: linked to the span of the watch event that queued it.
    let (watch, reconcile) = eventually_async("the update's reconcile span", || async {
        let spans = receiver.spans();
        let watch = spans.iter().find(|s| {
            s.span.name == "watch ConfigMap modified"
                && s.attribute("k8s.resource_version").as_deref() == Some(rv.as_str())
        })?;
        let reconcile = spans.iter().find(|s| {
            s.span.name == "reconcile"
                && s.span.links.iter().any(|link| {
                    hex(&link.span_id) == watch.span_id() && hex(&link.trace_id) == watch.trace_id()
                })
        })?;
        Some((watch.clone(), reconcile.clone()))
    })
    .await;
    assert_eq!(reconcile.service, "reconcile-host");
    assert_eq!(
        watch.attribute("k8s.object.key").as_deref(),
        Some("traced/subject")
    );
    assert_eq!(watch.attribute("watch.event").as_deref(), Some("modified"));
    assert_eq!(
        reconcile.attribute("reconcile.plugin").as_deref(),
        Some("testbed")
    );
    assert_eq!(
        reconcile.attribute("reconcile.key").as_deref(),
        Some("traced/subject")
    );
    assert_eq!(
        reconcile.attribute("reconcile.causes").as_deref(),
        Some("modified")
    );
    assert_eq!(
        reconcile.attribute("reconcile.outcome").as_deref(),
        Some("success")
    );
    assert!(
        reconcile
            .attribute("reconcile.module")
            .is_some_and(|digest| digest.len() == 64),
        "{reconcile:?}"
    );
    assert_ne!(
        reconcile.trace_id(),
        watch.trace_id(),
        "a reconcile is the root of its own trace, linked to its cause"
    );

    // Its children: the import call and the API request it made.
    let children = eventually_async("the reconcile's child spans", || async {
        let children: Vec<Received> = receiver
            .spans()
            .into_iter()
            .filter(|s| hex(&s.span.parent_span_id) == reconcile.span_id())
            .collect();
        (children.len() >= 2).then_some(children)
    })
    .await;
    let names: Vec<&str> = children.iter().map(|s| s.span.name.as_str()).collect();
    assert!(names.contains(&"client.apply"), "{names:?}");
    let request = children
        .iter()
        .find(|s| s.span.name == "patch ConfigMap")
        .unwrap_or_else(|| panic!("the apply's client span among {names:?}"));
    assert_eq!(
        request.attribute("k8s.object.name").as_deref(),
        Some("subject-seen")
    );
    assert!(
        children
            .iter()
            .all(|s| s.trace_id() == reconcile.trace_id())
    );

    // A guest's log lines are events of its reconcile's span, and `span.attribute` lines
    // (the SDKs' `span_attribute`) its attributes.
    let talker: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "talker", "labels": {"testbed": "true"}},
        "data": {"behave": "log"},
    }))
    .expect("a ConfigMap");
    api.create(&PostParams::default(), &talker)
        .await
        .expect("created");
    let talking = eventually_async("the talker's reconcile span", || async {
        receiver.spans().into_iter().find(|s| {
            s.span.name == "reconcile"
                && s.attribute("reconcile.key").as_deref() == Some("traced/talker")
        })
    })
    .await;
    assert_eq!(
        talking.attribute("guest.greeted").as_deref(),
        Some("talker"),
        "{talking:?}"
    );
    let logged: Vec<(Option<String>, Option<String>)> = talking
        .span
        .events
        .iter()
        .filter(|event| event.name == "guest.log")
        .map(|event| {
            (
                attribute(&event.attributes, "log.level"),
                attribute(&event.attributes, "log.message"),
            )
        })
        .collect();
    assert_eq!(
        logged,
        [(
            Some("INFO".to_owned()),
            Some("testbed: hello from talker".to_owned())
        )],
        "the log call an event, the attribute line not one"
    );

    if server.is_real() {
        // kube-apiserver traced the apply under the host's client span: same trace.
        let joined = eventually_async(
            "kube-apiserver's spans in the reconcile's trace",
            || async {
                let spans: Vec<Received> = receiver
                    .spans()
                    .into_iter()
                    .filter(|s| s.service == "apiserver" && s.trace_id() == reconcile.trace_id())
                    .collect();
                (!spans.is_empty()).then_some(spans)
            },
        )
        .await;
        assert!(
            joined
                .iter()
                .any(|s| hex(&s.span.parent_span_id) == request.span_id()),
            "the API server's request span is a child of the host's client span: {:?}",
            joined.iter().map(|s| &s.span.name).collect::<Vec<_>>()
        );
    }
}
