//! The end-to-end harness: API server helpers, bounded waits, and (in `host`) hosts as processes,
//! components built once per run, manifests and scratch directories.
#![allow(dead_code)]

pub mod backend;
pub mod churn;
pub mod control_plane;
pub mod faults;
pub mod host;
pub mod otlp;
pub mod process;
pub mod registry;
pub mod secure_telemetry;
pub mod twin;
pub mod watchdog;
pub mod website;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use tokio::time::Instant;

/// Upper bound for any condition a test waits for.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `condition` every 10 ms until it holds; fails after [`WAIT`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `probe` every 20 ms until it yields a value; fails after [`WAIT`].
pub async fn eventually_async<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A ConfigMap `default/<name>` with `data.v = value`.
pub fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// A ConfigMap `namespace/name` with `labels` and `data`.
pub fn labelled_config_map(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    data: &[(&str, &str)],
) -> ConfigMap {
    let pairs = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(pairs(labels)),
            ..ObjectMeta::default()
        },
        data: Some(pairs(data)),
        ..ConfigMap::default()
    }
}

/// ConfigMaps of `namespace` on `server`.
pub fn config_maps(server: &impl backend::Cluster, namespace: &str) -> kube::Api<ConfigMap> {
    kube::Api::namespaced(server.client(), namespace)
}

/// The label of a namespace that accepts the replicator examples' copies.
pub const ACCEPT_COPIES: (&str, &str) = ("replicator.example.com/accept-copies", "true");

/// Creates the namespace `name` with `labels`.
pub async fn namespace(server: &impl backend::Cluster, name: &str, labels: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(server.client());
    let object = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&kube::api::PostParams::default(), &object)
        .await
        .expect("namespace created");
}

/// Waits until the CustomResourceDefinition `name` is Established: a real API server serves a
/// new CRD's kind a moment after creating it (the embedded one at once).
pub async fn crd_established(client: &kube::Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    eventually_async(&format!("the CRD {name} to be established"), || async {
        let crd = crds.get_opt(name).await.ok()??;
        crd.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// Waits until the object `name` of `api`, owned by the object with uid `owner_uid` that the
/// test just deleted, is gone. The embedded server collects it (garbage collection); a real API
/// server here runs no kube-controller-manager, so there the object must name the owner as its
/// controlling owner and the test deletes it itself.
pub async fn collected<K>(real: bool, api: &kube::Api<K>, name: &str, owner_uid: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if real {
        let object = api.get(name).await.expect("the owned object");
        let owned = object
            .meta()
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.uid == owner_uid && owner.controller == Some(true));
        assert!(owned, "{name} does not name {owner_uid} as its controller");
        api.delete(name, &kube::api::DeleteParams::default())
            .await
            .expect("deleted");
    }
    eventually_async(&format!("{name} deleted"), || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

/// The resourceVersions each object was stamped at by the `stamp` guest, from the host log.
pub fn stamps(log: &str) -> std::collections::HashMap<String, std::collections::HashSet<String>> {
    let mut stamped: std::collections::HashMap<String, std::collections::HashSet<String>> =
        std::collections::HashMap::new();
    for line in log.lines() {
        let Some(rest) = line.split("stamp default/").nth(1) else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(rv)) = (parts.next(), parts.next()) else {
            continue;
        };
        // The guest's text is the line's quoted `text` field: `text="stamp default/x rv=7"`.
        if let Some(rv) = rv.strip_prefix("rv=").map(|rv| rv.trim_end_matches('"')) {
            stamped
                .entry(name.to_owned())
                .or_default()
                .insert(rv.to_owned());
        }
    }
    stamped
}
