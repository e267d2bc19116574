//! The runtime end to end against the embedded API server over HTTP: informers feeding
//! controllers, owned objects, shared informers, leader election across three replicas, and
//! graceful shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{config_map, eventually, eventually_async};
use embedded_apiserver::{ApiServer, Config, FailRule, Failure, Verb};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use parking_lot::Mutex;
use reconcile_host::controller::{Action, Reconciler, Request};
use reconcile_host::election::ElectionConfig;
use reconcile_host::informer::{CachedObject, Predicates};
use reconcile_host::queue::ControllerLimiter;
use reconcile_host::runtime::{
    ControllerSpec, ElectionSettings, KindRef, Runtime, RuntimeSettings,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How late a watcher may learn that a replica's leadership changed (one scheduler turn and a
/// channel notification); the election's own bounds are exact.
const NOTIFY_SLACK: Duration = Duration::from_millis(250);

/// One reconcile as an outside observer saw it.
#[derive(Clone, Debug)]
struct Dispatch {
    replica: String,
    key: String,
    resource_version: Option<String>,
    start: Instant,
    end: Instant,
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Dispatch>>>);

impl Log {
    fn last_version(&self, key: &str) -> Option<Option<String>> {
        let log = self.0.lock();
        let last = log.iter().rev().find(|d| d.key == key)?;
        Some(last.resource_version.clone())
    }

    fn replicas(&self) -> Vec<String> {
        let mut replicas: Vec<String> = Vec::new();
        for dispatch in self.0.lock().iter() {
            if replicas.last() != Some(&dispatch.replica) {
                replicas.push(dispatch.replica.clone());
            }
        }
        replicas
    }

    /// No two replicas had a reconcile running at the same instant.
    fn assert_no_overlap_between_replicas(&self) {
        let mut log = self.0.lock().clone();
        log.sort_by_key(|d| d.start);
        let mut last_end: HashMap<String, Instant> = HashMap::new();
        for d in &log {
            for (replica, end) in &last_end {
                assert!(
                    replica == &d.replica || *end <= d.start,
                    "{} reconciled until {end:?} while {} started at {:?}",
                    replica,
                    d.replica,
                    d.start
                );
            }
            let end = last_end.entry(d.replica.clone()).or_insert(d.end);
            *end = (*end).max(d.end);
        }
    }

    fn last_start_of(&self, replica: &str) -> Option<Instant> {
        self.0
            .lock()
            .iter()
            .filter(|d| d.replica == replica)
            .map(|d| d.start)
            .max()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never fails")]
struct Never;

struct Recorder {
    replica: String,
    log: Log,
    took: Duration,
}

impl Reconciler for Recorder {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        let start = Instant::now();
        tokio::time::sleep(self.took).await;
        self.log.0.lock().push(Dispatch {
            replica: self.replica.clone(),
            key: request.key.to_string(),
            resource_version: request.object.map(|o| o.resource_version().to_owned()),
            start,
            end: Instant::now(),
        });
        Ok(Action::Done)
    }
}

fn spec(name: &str) -> ControllerSpec {
    ControllerSpec {
        name: name.to_owned(),
        for_kind: KindRef::new("v1", "ConfigMap"),
        owns: Vec::new(),
        namespace: Some("default".to_owned()),
        label_selector: None,
        predicates: Predicates::default(),
        resync: None,
        workers: 2,
        limiter: ControllerLimiter::default(),
        placement: reconcile_host::shard::Placement::Keys,
    }
}

fn no_election() -> RuntimeSettings {
    RuntimeSettings {
        election: None,
        drain_timeout: Duration::from_secs(10),
    }
}

async fn server() -> (ApiServer, kube::Client) {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let client = server.kube_client().expect("client");
    (server, client)
}

async fn set(api: &Api<ConfigMap>, name: &str, value: &str) -> String {
    let mut cm = api.get(name).await.expect("get");
    cm.data = Some([("v".to_owned(), value.to_owned())].into());
    let cm = api
        .replace(name, &PostParams::default(), &cm)
        .await
        .expect("replace");
    cm.metadata.resource_version.expect("resourceVersion")
}

#[tokio::test]
async fn every_object_ends_reconciled_at_its_latest_version_and_deleted_ones_with_none() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name, "0"))
            .await
            .unwrap();
    }
    let log = Log::default();
    let runtime = Runtime::new(client.clone(), no_election());
    let recorder = Recorder {
        replica: "solo".into(),
        log: log.clone(),
        took: Duration::ZERO,
    };
    runtime.add_controller(spec("cm"), recorder).await.unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));

    let mut latest = String::new();
    for i in 1..=20 {
        latest = set(&api, "a", &i.to_string()).await;
    }
    api.delete("b", &DeleteParams::default()).await.unwrap();
    eventually(
        "a reconciled at its latest version and b with no object",
        || {
            log.last_version("default/a") == Some(Some(latest.clone()))
                && log.last_version("default/b") == Some(None)
        },
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn owned_object_changes_reach_the_owner_and_informers_are_shared() {
    let (server, client) = server().await;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let owner = configs
        .create(&PostParams::default(), &config_map("owner", "0"))
        .await
        .unwrap();
    let log = Log::default();
    let runtime = Runtime::new(client.clone(), no_election());
    let mut owning = spec("owning");
    owning.owns = vec![KindRef::new("v1", "Secret")];
    let recorder = |replica: &str| Recorder {
        replica: replica.into(),
        log: log.clone(),
        took: Duration::ZERO,
    };
    runtime
        .add_controller(owning, recorder("owning"))
        .await
        .unwrap();
    runtime
        .add_controller(spec("second"), recorder("second"))
        .await
        .unwrap();
    assert_eq!(
        runtime.registry().informers().len(),
        2,
        "one ConfigMap informer shared by both controllers, one Secret informer"
    );
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));
    eventually("the initial reconcile of the owner", || {
        log.last_version("default/owner").is_some()
    })
    .await;
    let before = log.0.lock().len();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("child".into()),
            namespace: Some("default".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: owner.metadata.uid.clone().unwrap(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually("the owning controller to reconcile the owner again", || {
        log.0.lock()[before..]
            .iter()
            .any(|d| d.replica == "owning" && d.key == "default/owner")
    })
    .await;
    assert!(
        log.0.lock()[before..].iter().all(|d| d.replica == "owning"),
        "the controller that does not own Secrets is not triggered"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
    server.shutdown().await;
}

struct Replica {
    shutdown: CancellationToken,
    running: tokio::task::JoinHandle<Result<(), reconcile_host::runtime::RuntimeError>>,
    leading: tokio::sync::watch::Receiver<bool>,
}

fn election(identity: &str) -> RuntimeSettings {
    RuntimeSettings {
        election: Some(ElectionSettings {
            lease_namespace: "default".into(),
            lease_name: "runtime-test".into(),
            config: ElectionConfig {
                identity: identity.into(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(500),
                release_on_cancel: true,
            },
            exit_on_loss: false,
            sharded: false,
        }),
        drain_timeout: Duration::from_secs(5),
    }
}

async fn replica(client: &kube::Client, identity: &str, log: &Log, took: Duration) -> Replica {
    let runtime = Runtime::new(client.clone(), election(identity));
    let recorder = Recorder {
        replica: identity.into(),
        log: log.clone(),
        took,
    };
    runtime.add_controller(spec("cm"), recorder).await.unwrap();
    let leading = runtime.leading();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));
    Replica {
        shutdown,
        running,
        leading,
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt("runtime-test").await.ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Keeps changing a ConfigMap so the leader always has work.
fn writer(api: Api<ConfigMap>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = 0;
        while !stop.is_cancelled() {
            i += 1;
            let _ = set(&api, "busy", &i.to_string()).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_never_dispatch_at_once_through_kill_renew_failures_and_release() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &config_map("busy", "0"))
        .await
        .unwrap();
    let log = Log::default();
    let took = Duration::from_millis(5);
    let mut replicas = HashMap::new();
    for id in ["r1", "r2", "r3"] {
        replicas.insert(id, replica(&client, id, &log, took).await);
    }
    let stop = CancellationToken::new();
    let writing = writer(api.clone(), stop.clone());

    // Killed leader (no release): another replica takes over after the lease expires.
    eventually_async("a first leader", || holder(&leases)).await;
    let first = holder(&leases).await.unwrap();
    eventually("the first leader to dispatch", || {
        log.last_start_of(&first).is_some()
    })
    .await;
    replicas.remove(first.as_str()).unwrap().running.abort();
    let killed = Instant::now();
    let second = eventually_async("a second leader", || async {
        holder(&leases).await.filter(|h| *h != first)
    })
    .await;
    eventually("the second leader to dispatch", || {
        log.last_start_of(&second).is_some_and(|t| t > killed)
    })
    .await;

    // Renewals failing: the leader stops dispatching within its renew deadline (2 s) of its
    // last successful renewal, which came before the failures, so before its lease (3 s) could
    // expire for the others. It may lead again once renewals work.
    let mut leading = replicas[second.as_str()].leading.clone();
    assert!(*leading.borrow(), "{second} leads");
    let faults = server.faults();
    faults.fail_next(
        FailRule::new(4, Failure::InternalError)
            .verb(Verb::Update)
            .resource("leases"),
    );
    let failing = Instant::now();
    leading.wait_for(|leading| !*leading).await.unwrap();
    let stepped_down = failing.elapsed();
    assert!(
        stepped_down <= Duration::from_secs(2) + NOTIFY_SLACK,
        "{second} stepped down {stepped_down:?} after its renewals started failing"
    );
    // The record may still name the replica that just stepped down (until it expires or that
    // replica renews again): the leader is the holder whose runtime says it leads.
    let third = eventually_async("a leader after the failures", || async {
        let holder = holder(&leases).await?;
        let leads = replicas
            .get(holder.as_str())
            .is_some_and(|replica| *replica.leading.borrow());
        leads.then_some(holder)
    })
    .await;
    let led = Instant::now();

    // Release on shutdown: the last replica standing takes over within about a retry period.
    eventually("the leader after the failures to dispatch", || {
        log.last_start_of(&third).is_some_and(|t| t > led)
    })
    .await;
    let survivor = replicas.keys().find(|id| **id != third).copied();
    let leader = replicas.remove(third.as_str()).unwrap();
    leader.shutdown.cancel();
    let released = Instant::now();
    leader.running.await.unwrap().unwrap();
    if let Some(survivor) = survivor {
        eventually_async("the survivor to take the released lease", || async {
            holder(&leases).await.filter(|h| h == survivor)
        })
        .await;
        assert!(
            released.elapsed() < Duration::from_secs(3),
            "took {:?}: the lease was not released",
            released.elapsed()
        );
        eventually("the survivor to dispatch", || {
            log.last_start_of(survivor).is_some_and(|t| t > released)
        })
        .await;
    }

    stop.cancel();
    writing.await.unwrap();
    log.assert_no_overlap_between_replicas();
    assert!(log.replicas().len() >= 3, "leaders: {:?}", log.replicas());
    for (_, replica) in replicas {
        replica.shutdown.cancel();
        replica.running.await.unwrap().unwrap();
    }
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_drains_reconciles_in_progress_then_releases_the_lease() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &config_map("slow", "0"))
        .await
        .unwrap();
    let log = Log::default();
    let solo = replica(&client, "solo", &log, Duration::from_secs(1)).await;
    eventually_async("leadership", || holder(&leases)).await;
    // The reconcile takes a second: shut down while it runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    solo.shutdown.cancel();
    solo.running.await.unwrap().unwrap();
    assert_eq!(
        log.last_version("default/slow").map(|v| v.is_some()),
        Some(true),
        "the reconcile in progress finished"
    );
    assert_eq!(holder(&leases).await, None, "released");
    server.shutdown().await;
}

#[tokio::test]
async fn the_generation_filter_drops_status_only_updates_of_a_deployment() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams};

    let (server, client) = server().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}
            }
        }
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    let log = Log::default();
    let runtime = Runtime::new(client.clone(), no_election());
    let recorder = |replica: &str| Recorder {
        replica: replica.into(),
        log: log.clone(),
        took: Duration::ZERO,
    };
    let for_deployments = |name: &str, generation_changed: bool| ControllerSpec {
        for_kind: KindRef::new("apps/v1", "Deployment"),
        predicates: Predicates { generation_changed },
        ..spec(name)
    };
    // Subscribed first, so its handler sees every event before the witness's does.
    let filtered_queue = runtime
        .add_controller(for_deployments("filtered", true), recorder("filtered"))
        .await
        .unwrap();
    runtime
        .add_controller(for_deployments("witness", false), recorder("witness"))
        .await
        .unwrap();
    assert_eq!(
        runtime.registry().informers().len(),
        1,
        "one shared informer"
    );
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));
    let reconciled = |replica: &str, rv: &str| {
        log.0
            .lock()
            .iter()
            .any(|d| d.replica == replica && d.resource_version.as_deref() == Some(rv))
    };
    let count = |replica: &str| log.0.lock().iter().filter(|d| d.replica == replica).count();
    eventually("both controllers to reconcile the new Deployment", || {
        count("filtered") == 1 && count("witness") == 1
    })
    .await;

    let status = serde_json::json!({"status": {"observedGeneration": 1, "replicas": 1}});
    let written = deployments
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        written.metadata.generation,
        Some(1),
        "status does not bump generation"
    );
    let status_rv = written.metadata.resource_version.unwrap();
    eventually("the witness to reconcile the status-only update", || {
        reconciled("witness", &status_rv)
    })
    .await;
    assert_eq!(
        count("filtered"),
        1,
        "the status-only update was not reconciled"
    );
    assert_eq!(
        (
            filtered_queue.queue().len(),
            filtered_queue.queue().processing()
        ),
        (0, 0),
        "nor enqueued"
    );

    let spec = serde_json::json!({"spec": {"replicas": 2}});
    let written = deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    assert_eq!(written.metadata.generation, Some(2));
    let spec_rv = written.metadata.resource_version.unwrap();
    eventually(
        "the filtered controller to reconcile the spec change",
        || reconciled("filtered", &spec_rv),
    )
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn custom_resources_are_reconciled_through_discovery_and_unknown_kinds_are_refused() {
    use kube::api::DynamicObject;
    use kube::core::{ApiResource, GroupVersionKind};

    let (server, client) = server().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let crd = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();

    let log = Log::default();
    let runtime = Runtime::new(client.clone(), no_election());
    let mut widgets = spec("widgets");
    widgets.for_kind = KindRef::new("example.com/v1", "Widget");
    let recorder = Recorder {
        replica: "widgets".into(),
        log: log.clone(),
        took: Duration::ZERO,
    };
    runtime.add_controller(widgets, recorder).await.unwrap();

    let mut gadgets = spec("gadgets");
    gadgets.for_kind = KindRef::new("example.com/v1", "Gadget");
    let recorder = Recorder {
        replica: "gadgets".into(),
        log: log.clone(),
        took: Duration::ZERO,
    };
    let error = runtime.add_controller(gadgets, recorder).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("kind example.com/v1/Gadget is not served by the API server"),
        "{error}"
    );

    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.run(shutdown.clone()));
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let widget: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &widget).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    eventually("the widget to be reconciled", || {
        log.last_version("default/w1") == Some(Some(rv.clone()))
    })
    .await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    server.shutdown().await;
}
