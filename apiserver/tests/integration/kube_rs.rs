//! Compatibility with kube-rs: typed APIs, dynamic objects via discovery, and the runtime
//! watcher recovering from dropped watches and from 410 Gone.

use crate::common;
use std::collections::BTreeMap;

use crate::common::{WAIT, eventually, server};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{self, Discovery};
use kube::runtime::watcher::{self, Event};

fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), value.to_string())])),
        ..Default::default()
    }
}

#[tokio::test]
async fn typed_configmap_api_creates_lists_patches_and_deletes() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    let created = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let err = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "2");
    let applied = api
        .patch("b", &PatchParams::apply("kube-rs-test"), &Patch::Apply(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"x": "y"}})))
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["x"], "y");
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn typed_lease_api_supports_optimistic_replace() {
    let s = server().await;
    let api: Api<Lease> = Api::namespaced(s.kube_client().unwrap(), "kube-system");
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("leader".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut mine = created.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    api.replace("leader", &PostParams::default(), &mine)
        .await
        .unwrap();
    let stale = api
        .replace("leader", &PostParams::default(), &created)
        .await
        .unwrap_err();
    assert!(
        matches!(stale, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{stale:?}"
    );
}

#[tokio::test]
async fn dynamic_objects_work_through_discovery() {
    let s = server().await;
    let client = s.kube_client().unwrap();
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery runs");
    assert!(discovery.has_group("apps") && discovery.has_group("coordination.k8s.io"));
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery runs");
    let (leases, caps) = aggregated
        .resolve_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
        .expect("leases in aggregated discovery");
    assert_eq!(
        (leases.plural.as_str(), caps.scope),
        ("leases", discovery::Scope::Namespaced)
    );
    let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
    let (ar, caps) = discovery::pinned_kind(&client, &gvk)
        .await
        .expect("deployments are discoverable");
    assert_eq!(caps.scope, discovery::Scope::Namespaced);
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let got = api.get("d").await.unwrap();
    assert_eq!(
        got.data["spec"]["template"]["spec"]["containers"][0]["image"],
        "i"
    );
}

/// Waits until the watcher stream yields an applied object named `name`.
async fn until_applied(
    stream: &mut (impl futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin),
    name: &str,
) {
    tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(o) | Event::InitApply(o))
                    if o.metadata.name.as_deref() == Some(name) =>
                {
                    return;
                }
                _ => {}
            }
        }
        panic!("watcher stream ended");
    })
    .await
    .unwrap_or_else(|_| panic!("watcher did not see {name} within {WAIT:?}"));
}

#[tokio::test]
async fn runtime_watcher_recovers_from_a_dropped_watch() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    api.create(&PostParams::default(), &cm("before", "1"))
        .await
        .unwrap();
    until_applied(&mut stream, "before").await;
    s.faults().close_watches();
    api.create(&PostParams::default(), &cm("after", "1"))
        .await
        .unwrap();
    until_applied(&mut stream, "after").await;
}

#[tokio::test]
async fn runtime_watcher_relists_after_410_gone() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    api.create(&PostParams::default(), &cm("first", "1"))
        .await
        .unwrap();
    until_applied(&mut stream, "first").await;
    // Hold requests, drop the watch, change state behind the watcher's back and forget the
    // history: its re-watch from the old version gets 410 and only a relist can show "missed".
    s.faults().pause();
    s.faults().close_watches();
    s.bulk_load([serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "missed", "namespace": "default"}})])
        .unwrap();
    s.faults().compact_history();
    s.faults().resume();
    until_applied(&mut stream, "missed").await;
    let lp = ListParams::default();
    eventually("the list to show both objects", || async {
        (api.list(&lp).await.ok()?.items.len() == 2).then_some(())
    })
    .await;
}

#[tokio::test]
async fn status_is_patched_and_applied_through_the_status_subresource() {
    use k8s_openapi::api::apps::v1::Deployment;
    let s = server().await;
    let api: Api<Deployment> = Api::default_namespaced(s.kube_client().unwrap());
    let deploy: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &deploy).await.unwrap();
    let merged = api
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.status.unwrap().replicas, Some(2));
    let applied = api
        .patch_status(
            "d",
            &PatchParams::apply("status-writer"),
            &Patch::Apply(
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d"}, "status": {"readyReplicas": 1}}),
            ),
        )
        .await
        .unwrap();
    let status = applied.status.unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (Some(2), Some(1)));
    assert_eq!(
        applied.metadata.generation,
        Some(1),
        "status writes keep generation"
    );
}

#[tokio::test]
async fn runtime_watcher_in_streaming_list_mode_sees_existing_then_new_objects() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    api.create(&PostParams::default(), &cm("existing", "1"))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher::watcher(api.clone(), config).boxed();
    let init_done = tokio::time::timeout(WAIT, async {
        let mut saw_existing = false;
        while let Some(event) = stream.next().await {
            match event.expect("no watch error") {
                Event::InitApply(o) if o.metadata.name.as_deref() == Some("existing") => {
                    saw_existing = true
                }
                Event::InitDone => return saw_existing,
                _ => {}
            }
        }
        false
    })
    .await
    .expect("the initial events end within the wait bound");
    assert!(init_done, "the existing object arrives before InitDone");
    api.create(&PostParams::default(), &cm("new", "1"))
        .await
        .unwrap();
    until_applied(&mut stream, "new").await;
}

#[tokio::test]
async fn metadata_only_lists_and_watches_return_partial_object_metadata() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    api.create(&PostParams::default(), &cm("m", "1"))
        .await
        .unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("m"));
    let one = api.get_metadata("m").await.unwrap();
    assert_eq!(
        one.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::default_namespaced(s.kube_client().unwrap());
    let mut stream = watcher::watcher(meta_api, watcher::Config::default()).boxed();
    let seen = tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.next().await {
            if let Ok(Event::InitApply(o) | Event::Apply(o)) = event
                && o.metadata.name.as_deref() == Some("m")
            {
                return true;
            }
        }
        false
    })
    .await
    .expect("the metadata watcher sees the object");
    assert!(seen);
}

#[tokio::test]
async fn a_required_token_is_checked_on_every_request() {
    let s = common::start(embedded_apiserver::Config::default().require_token("s3cret")).await;
    // The client the server hands out carries the token.
    let api: Api<ConfigMap> = Api::default_namespaced(s.kube_client().unwrap());
    api.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("the server's own client is let in");
    assert!(s.kubeconfig().contains("\"token\": \"s3cret\""));
    // No token, or another one: 401 with a Status.
    let (code, body) = common::raw_get(&s.url(), "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
    let mut config = kube::Config::new(s.url().parse().unwrap());
    config.auth_info.token = Some("wrong".to_string().into());
    let other: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let error = other.get("a").await.unwrap_err();
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 401),
        "{error:?}"
    );
}

#[tokio::test]
async fn events_written_through_either_api_are_read_through_the_other() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use k8s_openapi::api::events::v1::Event as EventsV1;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    let s = server().await;
    let client = s.kube_client().unwrap();
    let new_api: Api<EventsV1> = Api::default_namespaced(client.clone());
    let core_api: Api<CoreEvent> = Api::default_namespaced(client);
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("demo".into()),
        namespace: Some("default".into()),
        uid: Some("0000-demo".into()),
        ..Default::default()
    };
    let event = EventsV1 {
        metadata: kube::api::ObjectMeta {
            name: Some("demo.1".into()),
            ..Default::default()
        },
        regarding: Some(regarding.clone()),
        note: Some("reconciled by the plugin".into()),
        reason: Some("Reconciled".into()),
        type_: Some("Normal".into()),
        action: Some("Reconcile".into()),
        reporting_controller: Some("example.com/plugin".into()),
        reporting_instance: Some("host-0".into()),
        deprecated_count: Some(2),
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        ..Default::default()
    };
    new_api
        .create(&PostParams::default(), &event)
        .await
        .unwrap();

    let core = core_api.get("demo.1").await.unwrap();
    assert_eq!(core.message.as_deref(), Some("reconciled by the plugin"));
    assert_eq!(core.involved_object.name.as_deref(), Some("demo"));
    assert_eq!(core.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("example.com/plugin")
    );
    assert_eq!(core.reporting_instance.as_deref(), Some("host-0"));
    assert_eq!(core.count, Some(2));
    assert_eq!(core.reason.as_deref(), Some("Reconciled"));
    let selected = core_api
        .list(
            &ListParams::default().fields("involvedObject.name=demo,involvedObject.kind=ConfigMap"),
        )
        .await
        .unwrap();
    assert_eq!(
        selected.items.len(),
        1,
        "kubectl describe's field selector finds it"
    );

    let core_written = CoreEvent {
        metadata: kube::api::ObjectMeta {
            name: Some("demo.2".into()),
            ..Default::default()
        },
        involved_object: regarding,
        message: Some("written through core v1".into()),
        reason: Some("Legacy".into()),
        type_: Some("Warning".into()),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some("old-controller".into()),
            host: None,
        }),
        count: Some(5),
        ..Default::default()
    };
    core_api
        .create(&PostParams::default(), &core_written)
        .await
        .unwrap();
    let seen = new_api.get("demo.2").await.unwrap();
    assert_eq!(seen.note.as_deref(), Some("written through core v1"));
    assert_eq!(
        seen.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("demo")
    );
    assert_eq!(seen.deprecated_count, Some(5));
    assert_eq!(
        seen.deprecated_source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("old-controller")
    );
    let both = new_api
        .list(&ListParams::default().fields("regarding.name=demo"))
        .await
        .unwrap();
    assert_eq!(both.items.len(), 2, "one storage behind both APIs");
    let patched = new_api
        .patch(
            "demo.2",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"note": "patched through events.k8s.io"})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.note.as_deref(),
        Some("patched through events.k8s.io")
    );
    let core = core_api.get("demo.2").await.unwrap();
    assert_eq!(
        core.message.as_deref(),
        Some("patched through events.k8s.io")
    );
}

#[tokio::test]
async fn resource_quota_is_served_created_listed_and_discovered() {
    use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    let s = server().await;
    let client = s.kube_client().unwrap();
    let api: Api<ResourceQuota> = Api::default_namespaced(client.clone());
    let quota = ResourceQuota {
        metadata: kube::api::ObjectMeta {
            name: Some("compute".into()),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec {
            hard: Some(BTreeMap::from([(
                "pods".to_string(),
                Quantity("10".into()),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    };
    api.create(&PostParams::default(), &quota).await.unwrap();
    let got = api.get("compute").await.unwrap();
    assert_eq!(
        got.spec.unwrap().hard.unwrap()["pods"],
        Quantity("10".into())
    );
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let discovery = Discovery::new(client).run().await.unwrap();
    let (quotas, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "ResourceQuota"))
        .expect("ResourceQuota discovered");
    assert_eq!(quotas.plural, "resourcequotas");
    assert_eq!(caps.scope, discovery::Scope::Namespaced);
    for gvk in [
        GroupVersionKind::gvk("apps", "v1", "StatefulSet"),
        GroupVersionKind::gvk("batch", "v1", "CronJob"),
        GroupVersionKind::gvk("networking.k8s.io", "v1", "Ingress"),
        GroupVersionKind::gvk("", "v1", "PersistentVolume"),
        GroupVersionKind::gvk("storage.k8s.io", "v1", "StorageClass"),
        GroupVersionKind::gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
    ] {
        assert!(
            discovery.resolve_gvk(&gvk).is_some(),
            "{gvk:?} not discovered"
        );
    }
}
