//! The built-in kinds this server serves: every listable kind at a GA version (`v1`, `v2`) in
//! k8s-openapi's `latest` feature, which is what a real API server serves by default (alpha
//! and beta versions are off by default upstream). Group, version, kind, plural and scope come
//! from each type's `k8s_openapi::Resource` constants; what k8s-openapi does not carry (short
//! names, categories, subresources, verbs that are not the standard eight) is the small table
//! in [`extras`], read from Kubernetes v1.36's registry storage (`ShortNames()`,
//! `Categories()`, the subresources each `rest/storage_*.go` installs).
//!
//! The type list is generated from the crate's `impl crate::ListableResource for` blocks:
//! `grep -rn 'impl crate::ListableResource for' k8s-openapi-*/src/v1_37` keeping the paths with
//! a GA version; a type that stops being listable fails to compile here.

use k8s_openapi::{ListableResource, NamespaceResourceScope, Resource};

/// What k8s-openapi says about one kind.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Decodes an object of the kind into its k8s-openapi type: `Err` with serde's reason when
    /// a field has the wrong type (what a real server's decoding into the Go type refuses).
    pub decode: fn(&serde_json::Value) -> Result<(), String>,
    /// Adds the kind's OpenAPI schema (and those it refers to) to a generator; a reference.
    pub schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    /// Group, empty for core.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural (URL path segment).
    pub plural: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

fn kind<K>() -> Kind
where
    K: Resource + ListableResource + serde::de::DeserializeOwned + schemars::JsonSchema,
    K::Scope: 'static,
{
    Kind {
        decode: decodes::<K>,
        schema: |generator| generator.subschema_for::<K>(),
        group: K::GROUP,
        version: K::VERSION,
        kind: K::KIND,
        plural: K::URL_PATH_SEGMENT,
        namespaced: std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<NamespaceResourceScope>(),
    }
}

fn decodes<K: serde::de::DeserializeOwned>(object: &serde_json::Value) -> Result<(), String> {
    K::deserialize(object)
        .map(|_| ())
        .map_err(|error| error.to_string())
}

macro_rules! kinds {
    ($($path:path),* $(,)?) => {
        /// Every built-in kind served, a group's preferred version first.
        pub fn all() -> Vec<Kind> {
            vec![$(kind::<$path>()),*]
        }
    };
}

kinds![
    k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding,
    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    k8s_openapi::api::apps::v1::ControllerRevision,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::apps::v1::StatefulSet,
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
    k8s_openapi::api::batch::v1::CronJob,
    k8s_openapi::api::batch::v1::Job,
    k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    k8s_openapi::api::certificates::v1::ClusterTrustBundle,
    k8s_openapi::api::certificates::v1::PodCertificateRequest,
    k8s_openapi::api::coordination::v1::Lease,
    k8s_openapi::api::core::v1::ComponentStatus,
    k8s_openapi::api::core::v1::ConfigMap,
    k8s_openapi::api::core::v1::Endpoints,
    k8s_openapi::api::core::v1::Event,
    k8s_openapi::api::core::v1::LimitRange,
    k8s_openapi::api::core::v1::Namespace,
    k8s_openapi::api::core::v1::Node,
    k8s_openapi::api::core::v1::PersistentVolume,
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::PodTemplate,
    k8s_openapi::api::core::v1::ReplicationController,
    k8s_openapi::api::core::v1::ResourceQuota,
    k8s_openapi::api::core::v1::Secret,
    k8s_openapi::api::core::v1::Service,
    k8s_openapi::api::core::v1::ServiceAccount,
    k8s_openapi::api::discovery::v1::EndpointSlice,
    k8s_openapi::api::events::v1::Event,
    k8s_openapi::api::flowcontrol::v1::FlowSchema,
    k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    k8s_openapi::api::networking::v1::IPAddress,
    k8s_openapi::api::networking::v1::Ingress,
    k8s_openapi::api::networking::v1::IngressClass,
    k8s_openapi::api::networking::v1::NetworkPolicy,
    k8s_openapi::api::networking::v1::ServiceCIDR,
    k8s_openapi::api::node::v1::RuntimeClass,
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    k8s_openapi::api::rbac::v1::ClusterRole,
    k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    k8s_openapi::api::rbac::v1::Role,
    k8s_openapi::api::rbac::v1::RoleBinding,
    k8s_openapi::api::resource::v1::DeviceClass,
    k8s_openapi::api::resource::v1::DeviceTaintRule,
    k8s_openapi::api::resource::v1::ResourceClaim,
    k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    k8s_openapi::api::resource::v1::ResourceSlice,
    k8s_openapi::api::scheduling::v1::PriorityClass,
    k8s_openapi::api::storage::v1::CSIDriver,
    k8s_openapi::api::storage::v1::CSINode,
    k8s_openapi::api::storage::v1::CSIStorageCapacity,
    k8s_openapi::api::storage::v1::StorageClass,
    k8s_openapi::api::storage::v1::VolumeAttachment,
    k8s_openapi::api::storage::v1::VolumeAttributesClass,
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
];

/// The version upstream stores a built-in resource in: the version served, but
/// HorizontalPodAutoscalers are stored as `autoscaling/v2`, and ComponentStatuses (computed
/// on each read) not at all.
pub fn storage_version<'a>(group: &str, plural: &str, served: &'a str) -> Option<&'a str> {
    match (group, plural) {
        ("autoscaling", "horizontalpodautoscalers") => Some("v2"),
        ("", "componentstatuses") => None,
        _ => Some(served),
    }
}

/// Whether a DELETE that removes an object of `group`/`plural` at once answers with the object
/// (upstream's storages with `ReturnDeletedObject: true`) rather than a Success Status.
pub fn returns_deleted_object(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        (
            "",
            "resourcequotas"
                | "persistentvolumes"
                | "serviceaccounts"
                | "persistentvolumeclaims"
                | "namespaces"
                | "pods"
                | "services"
                | "podtemplates"
        ) | (
            "storage.k8s.io",
            "csidrivers"
                | "storageclasses"
                | "volumeattachments"
                | "csinodes"
                | "volumeattributesclasses"
        ) | (
            "resource.k8s.io",
            "resourceclaimtemplates"
                | "resourceslices"
                | "resourceclaims"
                | "deviceclasses"
                | "devicetaintrules"
                | "resourcepoolstatusrequests"
        )
    )
}

/// Short names, categories, subresources and (when not the standard eight) verbs of a kind
/// by `(group, plural)`, as a real server publishes them. Subresources are upstream's; this
/// server serves only `status` and `scale` among them (the others are listed in discovery by upstream but
/// not here, see `README.md`).
pub struct Extras {
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Categories (`all`, `api-extensions`).
    pub categories: &'static [&'static str],
    /// Upstream's subresources.
    pub subresources: &'static [&'static str],
    /// Verbs, when not all eight.
    pub verbs: Option<&'static [&'static str]>,
}

/// Short names, categories, subresources, verbs.
type Row = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    Option<&'static [&'static str]>,
);

/// The [`Extras`] of `(group, plural)`.
pub fn extras(group: &str, plural: &str) -> Extras {
    const ALL: &[&str] = &["all"];
    const EXT: &[&str] = &["api-extensions"];
    const STATUS: &[&str] = &["status"];
    const STATUS_SCALE: &[&str] = &["status", "scale"];
    let (short_names, categories, subresources, verbs): Row = match (group, plural) {
        ("", "componentstatuses") => (&["cs"], &[], &[], Some(&["get", "list"])),
        ("", "configmaps") => (&["cm"], &[], &[], None),
        ("", "endpoints") => (&["ep"], &[], &[], None),
        ("", "events") | ("events.k8s.io", "events") => (&["ev"], &[], &[], None),
        ("", "limitranges") => (&["limits"], &[], &[], None),
        ("", "namespaces") => (
            &["ns"],
            &[],
            &["status", "finalize"],
            Some(&[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ]),
        ),
        ("", "nodes") => (&["no"], &[], &["status", "proxy"], None),
        ("", "persistentvolumeclaims") => (&["pvc"], &[], STATUS, None),
        ("", "persistentvolumes") => (&["pv"], &[], STATUS, None),
        ("", "pods") => (
            &["po"],
            ALL,
            &[
                "status",
                "attach",
                "binding",
                "ephemeralcontainers",
                "eviction",
                "exec",
                "log",
                "portforward",
                "proxy",
                "resize",
            ],
            None,
        ),
        ("", "replicationcontrollers") => (&["rc"], ALL, STATUS_SCALE, None),
        ("", "resourcequotas") => (&["quota"], &[], STATUS, None),
        ("", "serviceaccounts") => (&["sa"], &[], &["token"], None),
        ("", "services") => (&["svc"], ALL, &["status", "proxy"], None),
        ("apps", "daemonsets") => (&["ds"], ALL, STATUS, None),
        ("apps", "deployments") => (&["deploy"], ALL, STATUS_SCALE, None),
        ("apps", "replicasets") => (&["rs"], ALL, STATUS_SCALE, None),
        ("apps", "statefulsets") => (&["sts"], ALL, STATUS_SCALE, None),
        ("autoscaling", "horizontalpodautoscalers") => (&["hpa"], ALL, STATUS, None),
        ("batch", "cronjobs") => (&["cj"], ALL, STATUS, None),
        ("batch", "jobs") => (&[], ALL, STATUS, None),
        ("certificates.k8s.io", "certificatesigningrequests") => {
            (&["csr"], &[], &["status", "approval"], None)
        }
        ("certificates.k8s.io", "podcertificaterequests") => (&[], &[], STATUS, None),
        ("networking.k8s.io", "ingresses") => (&["ing"], &[], STATUS, None),
        ("networking.k8s.io", "ipaddresses") => (&["ip"], &[], &[], None),
        ("networking.k8s.io", "networkpolicies") => (&["netpol"], &[], &[], None),
        ("networking.k8s.io", "servicecidrs") => (&[], &[], STATUS, None),
        ("policy", "poddisruptionbudgets") => (&["pdb"], &[], STATUS, None),
        ("scheduling.k8s.io", "priorityclasses") => (&["pc"], &[], &[], None),
        ("storage.k8s.io", "storageclasses") => (&["sc"], &[], &[], None),
        ("storage.k8s.io", "volumeattachments") => (&[], &[], STATUS, None),
        ("storage.k8s.io", "volumeattributesclasses") => (&["vac"], &[], &[], None),
        ("flowcontrol.apiserver.k8s.io", "flowschemas" | "prioritylevelconfigurations") => {
            (&[], &[], STATUS, None)
        }
        ("resource.k8s.io", "resourceclaims" | "devicetaintrules") => (&[], &[], STATUS, None),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => (&[], EXT, STATUS, None),
        ("admissionregistration.k8s.io", _) => (&[], EXT, &[], None),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            (&["crd", "crds"], EXT, STATUS, None)
        }
        ("apiregistration.k8s.io", "apiservices") => (&[], EXT, STATUS, None),
        _ => (&[], &[], &[], None),
    };
    Extras {
        short_names,
        categories,
        subresources,
        verbs,
    }
}
