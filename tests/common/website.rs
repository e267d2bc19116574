//! The website example and its ports to other languages, compared: the CRD and samples applied,
//! each port's status and children read in a form that leaves out what necessarily differs, and
//! the calls of `reconcile-host reconcile` documents normalised for comparison.

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::backend::Backend as ApiServer;
use super::eventually_async;
use super::host::{tool, workspace};

/// Applies the CRD in `<example>/samples/crd.yaml`.
pub async fn crd(server: &ApiServer, example: &str) {
    let path = workspace().join(example).join("samples/crd.yaml");
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("crd sample"))
            .expect("crd parses");
    let client = server.kube_client().expect("client");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("crd created");
    super::crd_established(&client, crd.metadata.name.as_deref().expect("named")).await;
}

/// The Websites of `group` in `namespace`.
pub fn websites(server: &ApiServer, group: &str, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", "Website"));
    Api::namespaced_with(server.kube_client().expect("client"), namespace, &resource)
}

/// The sample Website of `example` (`<example>/samples/website.yaml`), renamed to `name` in
/// `namespace` and moved to `group`.
pub fn sample_website(example: &str, name: &str, namespace: &str, group: &str) -> DynamicObject {
    let path = workspace().join(example).join("samples/website.yaml");
    let mut website: DynamicObject =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("website sample"))
            .expect("website parses");
    website.metadata.name = Some(name.to_owned());
    website.metadata.namespace = Some(namespace.to_owned());
    website.types.as_mut().expect("typed").api_version = format!("{group}/v1");
    website
}

/// Waits for the Website's status to describe generation `generation`; returns the status.
pub async fn status_at(websites: &Api<DynamicObject>, name: &str, generation: i64) -> Value {
    eventually_async(
        &format!("the status of Website {name} at generation {generation}"),
        || async {
            let object = websites.get_opt(name).await.ok()??;
            let status = object.data.get("status")?.clone();
            (status["observedGeneration"] == generation).then_some(status)
        },
    )
    .await
}

/// What a Website's children look like, without what necessarily differs between two Websites
/// of different groups and namespaces (the owner's apiVersion and uid, the namespace, the
/// Service's allocated cluster IPs, the server's bookkeeping).
pub async fn children(server: &ApiServer, namespace: &str, name: &str) -> Value {
    let client = server.kube_client().expect("client");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client, namespace);
    let deployment = eventually_async(&format!("Deployment {namespace}/{name}"), || async {
        deployments.get_opt(name).await.ok()?
    })
    .await;
    let service = eventually_async(&format!("Service {namespace}/{name}"), || async {
        services.get_opt(name).await.ok()?
    })
    .await;
    let owners = |references: &Option<Vec<_>>| -> Value {
        let mut value = serde_json::to_value(references).expect("serializes");
        for owner in value.as_array_mut().into_iter().flatten() {
            let owner = owner.as_object_mut().expect("an owner reference");
            owner.remove("uid");
            owner.remove("apiVersion");
        }
        value
    };
    let mut service_spec = serde_json::to_value(&service.spec).expect("serializes");
    if let Some(spec) = service_spec.as_object_mut() {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    json!({
        "deployment": {
            "labels": deployment.metadata.labels,
            "ownerReferences": owners(&deployment.metadata.owner_references),
            "spec": deployment.spec,
        },
        "service": {
            "labels": service.metadata.labels,
            "ownerReferences": owners(&service.metadata.owner_references),
            "spec": service_spec,
        },
    })
}

/// Runs `reconcile-host` with `args` (a subcommand first) and the tests' module cache.
pub fn reconcile_host(args: &[&str]) -> Output {
    let (subcommand, args) = args.split_first().expect("a subcommand");
    tool(subcommand)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("reconcile-host runs")
}

/// `reconcile --output json` of `manifest` on the object in `object`: the document printed.
pub fn reconcile_json(manifest: &Path, object: &Path) -> Value {
    let output = reconcile_host(&[
        "reconcile",
        manifest.to_str().expect("UTF-8"),
        "--object",
        object.to_str().expect("UTF-8"),
        "--output",
        "json",
    ]);
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "reconcile printed no JSON ({error}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The calls of a `reconcile` document with the owners' uids removed and each `(from, to)` of
/// `replace` applied to the JSON text.
pub fn normalized_calls(document: &Value, replace: &[(&str, &str)]) -> Value {
    let mut text = serde_json::to_string(&document["calls"]).expect("serializes");
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    let mut calls: Value = serde_json::from_str(&text).expect("parses");
    for call in calls.as_array_mut().expect("calls") {
        if let Some(owners) = call["body"]["metadata"]["ownerReferences"].as_array_mut() {
            for owner in owners {
                owner.as_object_mut().expect("owner").remove("uid");
            }
        }
    }
    calls
}
