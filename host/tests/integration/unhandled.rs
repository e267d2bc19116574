//! The age of the oldest unhandled change, as the runtime wires it: noted when an informer
//! delivers a change, cleared when a reconcile of that key starts, reported on `/metrics` and
//! as the readiness check `unhandled/<controller>`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::{config_map, eventually};
use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use reconcile_host::controller::{Action, Reconciler, Request};
use reconcile_host::informer::{CachedObject, Predicates};
use reconcile_host::queue::ControllerLimiter;
use reconcile_host::runtime::{ControllerSpec, KindRef, Runtime, RuntimeSettings};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Holds the reconcile of `default/stuck` until released; every other key is done at once.
struct HoldsOne {
    release: Arc<Notify>,
    holding: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("never fails")]
struct Never;

impl Reconciler for HoldsOne {
    type Object = CachedObject;
    type Error = Never;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, Never> {
        if request.key.to_string() == "default/stuck" {
            self.holding.store(true, Ordering::SeqCst);
            self.release.notified().await;
        }
        Ok(Action::Done)
    }
}

/// The value of `reconcile_host_oldest_unhandled_change_seconds{controller="cm"}`.
fn oldest(runtime: &Runtime) -> Option<f64> {
    let text = runtime.telemetry().metrics().encode();
    text.lines()
        .find(|line| {
            line.starts_with("reconcile_host_oldest_unhandled_change_seconds{controller=\"cm\"}")
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn a_change_waiting_behind_a_busy_worker_ages_until_its_reconcile_starts() {
    let server = ApiServer::start(Config::default()).await.expect("server");
    let client = server.kube_client().expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let runtime = Runtime::new(
        client,
        RuntimeSettings {
            election: None,
            drain_timeout: Duration::from_secs(10),
        },
    );
    let release = Arc::new(Notify::new());
    let spec = ControllerSpec {
        name: "cm".to_owned(),
        for_kind: KindRef::new("v1", "ConfigMap"),
        owns: Vec::new(),
        namespace: Some("default".to_owned()),
        label_selector: None,
        predicates: Predicates::default(),
        resync: None,
        // One worker: while it holds `stuck`, `waiting` waits.
        workers: 1,
        limiter: ControllerLimiter::default(),
        placement: reconcile_host::shard::Placement::Keys,
    };
    let holding = Arc::new(AtomicBool::new(false));
    let holds = HoldsOne {
        release: Arc::clone(&release),
        holding: Arc::clone(&holding),
    };
    runtime.add_controller(spec, holds).await.expect("added");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(runtime.clone().run(shutdown.clone()));
    api.create(&PostParams::default(), &config_map("stuck", "1"))
        .await
        .expect("create");
    eventually("the worker to hold stuck", || {
        holding.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(oldest(&runtime), Some(0.0), "a reconcile started for stuck");
    api.create(&PostParams::default(), &config_map("waiting", "1"))
        .await
        .expect("create");
    eventually("the change of waiting to age past a second", || {
        oldest(&runtime).is_some_and(|age| age >= 1.0)
    })
    .await;
    let readiness = runtime.telemetry().health().readiness();
    let check = readiness
        .checks
        .iter()
        .find(|check| &*check.name == "unhandled/cm")
        .expect("the controller's readiness check");
    assert_eq!(check.result, Ok(()), "within the bound");
    release.notify_one();
    eventually("waiting to be reconciled", || oldest(&runtime) == Some(0.0)).await;
    shutdown.cancel();
    running.await.expect("joined").expect("runtime ran");
    server.shutdown().await;
}
