//! Example reconciler: turns each `Website` (`example.com/v1`, the CRD in `samples/crd.yaml`)
//! into a Deployment and a Service of the same name, owned by the Website so they are garbage
//! collected with it, and reports what it applied in the Website's status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use reconcile_guest::prelude::*;
use serde::Deserialize;
use serde_json::json;

/// The Website's API version and kind.
const API_VERSION: &str = "example.com/v1";
const KIND: &str = "Website";
/// The label on the Deployment, its pods and the Service.
const NAME_LABEL: &str = "app.kubernetes.io/name";
/// How often to look again without a change.
const RECHECK: Duration = Duration::from_secs(60);

/// A Website, as far as this reconciler reads it.
#[derive(Deserialize)]
struct Website {
    metadata: ObjectMeta,
    spec: WebsiteSpec,
}

/// What the user asks for: which image to serve, with how many replicas.
#[derive(Deserialize)]
struct WebsiteSpec {
    image: String,
    replicas: i32,
}

struct WebsiteReconciler;

impl Reconciler for WebsiteReconciler {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(website) = request.object::<Website>()? else {
            // Deleted: the Deployment and Service go by garbage collection (ownerReferences).
            return Ok(Action::done());
        };
        let name = request.name();
        let namespace = request.namespace().context("a Website is namespaced")?;
        let owner = owner_reference(&website)?;

        client::apply(&deployment(&website, namespace, &owner))
            .context("failed to apply the Deployment")?;
        client::apply(&service(name, namespace, &owner)).context("failed to apply the Service")?;
        client::apply_status(&json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": {
                "observedGeneration": website.metadata.generation,
                "image": website.spec.image,
                "replicas": website.spec.replicas,
                "deployment": name,
                "service": name,
            },
        }))
        .context("failed to apply the Website's status")?;
        debug!(
            "{} serves {} with {} replicas",
            request.target(),
            website.spec.image,
            website.spec.replicas
        );
        Ok(Action::requeue_after(RECHECK))
    }
}

reconcile_guest::export_reconciler!(WebsiteReconciler);

/// The controller reference from a child to its Website, which makes the garbage collector
/// delete the child with it.
fn owner_reference(website: &Website) -> Result<OwnerReference, Error> {
    let name = website
        .metadata
        .name
        .clone()
        .context("the Website has no name")?;
    let uid = website
        .metadata
        .uid
        .clone()
        .context("the Website has no uid")?;
    Ok(OwnerReference {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The labels of everything a Website named `name` owns.
fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())])
}

/// The metadata of a child of the Website: same name and namespace, labelled, owned.
fn child_metadata(name: &str, namespace: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels(name)),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// The Deployment serving the Website: `spec.replicas` pods of `spec.image` on port 80.
fn deployment(website: &Website, namespace: &str, owner: &OwnerReference) -> Deployment {
    let name = &owner.name;
    Deployment {
        metadata: child_metadata(name, namespace, owner),
        spec: DeploymentSpec {
            replicas: Some(website.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some(website.spec.image.clone()),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: 80,
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

/// The Service in front of the Deployment's pods, port 80.
fn service(name: &str, namespace: &str, owner: &OwnerReference) -> Service {
    Service {
        metadata: child_metadata(name, namespace, owner),
        spec: Some(ServiceSpec {
            selector: Some(labels(name)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: Some(IntOrString::Int(80)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn website() -> Website {
        serde_json::from_value(json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "hello", "namespace": "default", "uid": "u-1", "generation": 2},
            "spec": {"image": "nginx:1.27", "replicas": 2},
        }))
        .unwrap()
    }

    #[test]
    fn deployment_runs_the_image_with_the_replicas_and_is_owned_by_the_website() {
        let website = website();
        let owner = owner_reference(&website).unwrap();
        let deployment = serde_json::to_value(deployment(&website, "default", &owner)).unwrap();
        assert_eq!(deployment["apiVersion"], "apps/v1");
        assert_eq!(deployment["metadata"]["name"], "hello");
        assert_eq!(
            deployment["metadata"]["ownerReferences"],
            json!([{
                "apiVersion": "example.com/v1", "kind": "Website", "name": "hello", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true,
            }])
        );
        assert_eq!(deployment["spec"]["replicas"], 2);
        let labels = json!({"app.kubernetes.io/name": "hello"});
        assert_eq!(deployment["spec"]["selector"]["matchLabels"], labels);
        assert_eq!(deployment["spec"]["template"]["metadata"]["labels"], labels);
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.27");
        assert_eq!(container["ports"][0]["containerPort"], 80);
    }

    #[test]
    fn service_selects_the_pods_on_port_80() {
        let owner = owner_reference(&website()).unwrap();
        let service = serde_json::to_value(service("hello", "default", &owner)).unwrap();
        assert_eq!(service["kind"], "Service");
        assert_eq!(
            service["metadata"]["labels"],
            json!({"app.kubernetes.io/name": "hello"})
        );
        assert_eq!(
            service["spec"]["selector"],
            json!({"app.kubernetes.io/name": "hello"})
        );
        assert_eq!(
            service["spec"]["ports"],
            json!([{"name": "http", "port": 80, "targetPort": 80}])
        );
        assert_eq!(
            service["metadata"]["ownerReferences"][0]["controller"],
            true
        );
    }

    #[test]
    fn a_website_without_uid_cannot_own_children() {
        let mut website = website();
        website.metadata.uid = None;
        assert!(owner_reference(&website).is_err());
    }
}
