//! Many objects changing while a plugin changes: 10,000 ConfigMaps labelled `load=true` loaded
//! without HTTP, a stream of updates, and the check that the `stamp` guest reconciled every
//! object at its latest resourceVersion (no key lost).

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinHandle;

use super::host::Host;
use super::{eventually_async, stamps};

/// How many ConfigMaps [`load`] writes.
pub const OBJECTS: usize = 10_000;

/// Writes [`OBJECTS`] ConfigMaps `default/cm-NNNNN` labelled `load=true` into `server`.
pub fn load(server: &embedded_apiserver::ApiServer) {
    server
        .bulk_load((0..OBJECTS).map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("cm-{i:05}"), "namespace": "default",
                                "labels": {"load": "true"}},
                   "data": {"v": "0"}})
        }))
        .expect("bulk load");
}

/// Patches `rounds` of the loaded ConfigMaps through `api`, one every 5 ms, in the background.
pub fn updates(api: Api<ConfigMap>, rounds: usize) -> JoinHandle<()> {
    tokio::spawn(async move {
        for round in 0..rounds {
            let name = format!("cm-{:05}", (round * 37) % OBJECTS);
            let patch = json!({"data": {"v": round.to_string()}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patched");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

/// Waits until `host`'s log shows every loaded ConfigMap (listed through `api`) stamped at its
/// latest resourceVersion.
pub async fn every_object_stamped(host: &Host, api: &Api<ConfigMap>) {
    let latest: Vec<(String, String)> = api
        .list(&ListParams::default().labels("load=true"))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|cm| {
            let rv = cm.metadata.resource_version.expect("rv");
            (cm.metadata.name.expect("name"), rv)
        })
        .collect();
    assert_eq!(latest.len(), OBJECTS);
    eventually_async("every object stamped at its latest version", || async {
        let stamped = stamps(&host.log());
        let missing = latest
            .iter()
            .filter(|(name, rv)| !stamped.get(name).is_some_and(|rvs| rvs.contains(rv)))
            .count();
        (missing == 0).then_some(())
    })
    .await;
}
