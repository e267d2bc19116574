//! The slice of the built-in kinds' schema that patching needs: how each list merges and which
//! maps are atomic, keyed by field path.
//!
//! The table restates Kubernetes' `patchStrategy`/`patchMergeKey` struct tags (published as
//! `x-kubernetes-patch-strategy`/`x-kubernetes-patch-merge-key`) and `listType`/`listMapKey`
//! markers (`x-kubernetes-list-type`/`x-kubernetes-list-map-keys`) for the kinds the server
//! serves and the workload kinds that embed a pod template. Lists not listed are atomic
//! (replaced whole); maps not listed are granular (merged key by key). A custom resource's
//! come from its CRD's schema: `x-kubernetes-list-type` (`map` with
//! `x-kubernetes-list-map-keys`, `set`, else atomic) and `x-kubernetes-map-type: atomic`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// One field of an associative list's key, with the value the API server would default it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyField {
    /// The field name, e.g. `containerPort`.
    pub name: &'static str,
    /// The default the server applies when the field is omitted, e.g. `TCP` for `protocol`.
    pub default: Option<&'static str>,
}

const fn key(name: &'static str) -> KeyField {
    KeyField {
        name,
        default: None,
    }
}

const PROTOCOL: KeyField = KeyField {
    name: "protocol",
    default: Some("TCP"),
};

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Replaced whole by a patch; owned as one field by server-side apply.
    Atomic,
    /// A set of scalars (`patchStrategy: merge` without key, `listType: set`).
    Set,
    /// A list of objects identified by key fields (`patchMergeKey`, `listMapKey`).
    Map {
        /// The strategic merge patch key (`x-kubernetes-patch-merge-key`).
        merge_key: &'static str,
        /// The server-side apply keys (`x-kubernetes-list-map-keys`).
        keys: &'static [KeyField],
    },
}

const NAME: ListType = ListType::Map {
    merge_key: "name",
    keys: &[key("name")],
};
const TYPE: ListType = ListType::Map {
    merge_key: "type",
    keys: &[key("type")],
};
const IP: ListType = ListType::Map {
    merge_key: "ip",
    keys: &[key("ip")],
};
const OWNER_REFERENCES: ListType = ListType::Map {
    merge_key: "uid",
    keys: &[key("uid")],
};
const TOPOLOGY_SPREAD_CONSTRAINTS: ListType = ListType::Map {
    merge_key: "topologyKey",
    keys: &[key("topologyKey"), key("whenUnsatisfiable")],
};
const CONTAINER_PORTS: ListType = ListType::Map {
    merge_key: "containerPort",
    keys: &[key("containerPort"), PROTOCOL],
};
const VOLUME_MOUNTS: ListType = ListType::Map {
    merge_key: "mountPath",
    keys: &[key("mountPath")],
};
const SERVICE_PORTS: ListType = ListType::Map {
    merge_key: "port",
    keys: &[key("port"), PROTOCOL],
};
const VOLUME_DEVICES: ListType = ListType::Map {
    merge_key: "devicePath",
    keys: &[key("devicePath")],
};

/// The schema facts of one resource kind.
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    /// Where the kind embeds a `PodSpec`, e.g. `spec.template.spec`.
    pod_spec: Option<&'static [&'static str]>,
    /// Lists of this kind outside `metadata` and the pod spec, by dotted path.
    lists: &'static [(&'static str, ListType)],
    /// Atomic maps (`structType: atomic`) of this kind, by dotted path.
    atomic_maps: &'static [&'static str],
    /// A custom resource's `openAPIV3Schema`, whose extensions say how its lists merge.
    custom: Option<Arc<Value>>,
}

const WORKLOAD_TEMPLATE: &[&str] = &["spec", "template", "spec"];
const CRON_JOB_TEMPLATE: &[&str] = &["spec", "jobTemplate", "spec", "template", "spec"];
const CONDITIONS: &[(&str, ListType)] = &[("status.conditions", TYPE)];
const POD_LISTS: &[(&str, ListType)] = &[
    ("status.conditions", TYPE),
    ("status.podIPs", IP),
    ("status.hostIPs", IP),
];
const SERVICE_LISTS: &[(&str, ListType)] =
    &[("spec.ports", SERVICE_PORTS), ("status.conditions", TYPE)];
const SELECTOR: &[&str] = &["spec.selector"];
const CRON_JOB_SELECTOR: &[&str] = &["spec.jobTemplate.spec.selector"];

/// Built-in kinds by (API group, kind).
#[rustfmt::skip]
const BUILTIN: &[(&str, &str, Schema)] = &[
    ("", "Pod", Schema::new(Some(&["spec"]), POD_LISTS, &[])),
    ("", "Service", Schema::new(None, SERVICE_LISTS, SELECTOR)),
    ("", "ServiceAccount", Schema::new(None, &[("secrets", NAME)], &[])),
    ("", "Namespace", Schema::new(None, CONDITIONS, &[])),
    ("", "ConfigMap", Schema::new(None, &[], &[])),
    ("", "Secret", Schema::new(None, &[], &[])),
    ("", "Event", Schema::new(None, &[], &[])),
    ("", "Endpoints", Schema::new(None, &[], &[])),
    ("", "Node", Schema::new(None, CONDITIONS, &[])),
    ("", "PersistentVolumeClaim", Schema::new(None, CONDITIONS, &[])),
    ("events.k8s.io", "Event", Schema::new(None, &[], &[])),
    ("coordination.k8s.io", "Lease", Schema::new(None, &[], &[])),
    ("apiextensions.k8s.io", "CustomResourceDefinition", Schema::new(None, CONDITIONS, &[])),
    ("apps", "Deployment", Schema::new(Some(WORKLOAD_TEMPLATE), CONDITIONS, SELECTOR)),
    ("apps", "ReplicaSet", Schema::new(Some(WORKLOAD_TEMPLATE), CONDITIONS, SELECTOR)),
    ("apps", "StatefulSet", Schema::new(Some(WORKLOAD_TEMPLATE), CONDITIONS, SELECTOR)),
    ("apps", "DaemonSet", Schema::new(Some(WORKLOAD_TEMPLATE), CONDITIONS, SELECTOR)),
    ("batch", "Job", Schema::new(Some(WORKLOAD_TEMPLATE), CONDITIONS, SELECTOR)),
    ("batch", "CronJob", Schema::new(Some(CRON_JOB_TEMPLATE), &[], CRON_JOB_SELECTOR)),
];

impl Schema {
    const fn new(
        pod_spec: Option<&'static [&'static str]>,
        lists: &'static [(&'static str, ListType)],
        atomic_maps: &'static [&'static str],
    ) -> Self {
        Schema {
            pod_spec,
            lists,
            atomic_maps,
            custom: None,
        }
    }

    /// The schema of a custom resource: its CRD version's `openAPIV3Schema` says how its lists
    /// and maps merge (`metadata` as every object's).
    pub fn custom(openapi: Arc<Value>) -> Self {
        Schema {
            custom: Some(openapi),
            ..Schema::new(None, &[], &[])
        }
    }

    /// [`Schema::custom`] when `custom` is given, else [`Schema::for_kind`].
    pub fn for_resource(api_version: &str, kind: &str, custom: Option<Arc<Value>>) -> Self {
        match custom {
            Some(openapi) => Self::custom(openapi),
            None => Self::for_kind(api_version, kind),
        }
    }

    /// The schema of a built-in kind, `None` for anything else (custom resources).
    pub fn builtin(api_version: &str, kind: &str) -> Option<Self> {
        let group = match api_version.split_once('/') {
            Some((group, _version)) => group,
            None => "",
        };
        BUILTIN
            .iter()
            .find(|(g, k, _)| *g == group && *k == kind)
            .map(|(_, _, schema)| schema.clone())
    }

    /// The schema of any kind: built-in kinds get their table, other kinds only the `metadata`
    /// rules every object shares.
    pub fn for_kind(api_version: &str, kind: &str) -> Self {
        Self::builtin(api_version, kind).unwrap_or(Schema::new(None, &[], &[]))
    }

    /// How the list at `path` (field names from the object root, list positions skipped) merges.
    pub fn list_type(&self, path: &[&str]) -> ListType {
        if let ["metadata", rest @ ..] = path {
            return object_meta_list(rest);
        }
        if let Some(openapi) = &self.custom {
            return custom_node(openapi, path).map_or(ListType::Atomic, custom_list);
        }
        if let Some(prefix) = self.pod_spec {
            if let Some(rest) = path.strip_prefix(prefix) {
                return pod_spec_list(rest);
            }
            // The pod template's own metadata: `spec.template.metadata`.
            let template = &prefix[..prefix.len() - 1];
            if let Some(["metadata", rest @ ..]) = path.strip_prefix(template) {
                return object_meta_list(rest);
            }
        }
        self.lists
            .iter()
            .find(|(dotted, _)| dotted_eq(dotted, path))
            .map_or(ListType::Atomic, |(_, list)| *list)
    }

    /// Whether the map at `path` is atomic (replaced and owned whole, like a scalar).
    pub fn is_atomic_map(&self, path: &[&str]) -> bool {
        if let Some(openapi) = &self.custom
            && !matches!(path.first(), Some(&"metadata"))
        {
            return custom_node(openapi, path).is_some_and(|node| {
                node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
            });
        }
        self.atomic_maps
            .iter()
            .any(|dotted| dotted_eq(dotted, path))
    }
}

/// The schema node at `path` (field names; list positions skipped, so a list's `items` are
/// entered on the way).
fn custom_node<'a>(schema: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut node = schema;
    for key in path {
        while node.get("type").and_then(Value::as_str) == Some("array") {
            node = node.get("items")?;
        }
        node = node
            .get("properties")
            .and_then(|p| p.get(*key))
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?;
    }
    Some(node)
}

/// How a custom resource's list at `node` merges.
fn custom_list(node: &Value) -> ListType {
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => {
            let keys: Vec<String> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            match interned_keys(&keys) {
                Some(keys) => ListType::Map {
                    merge_key: keys[0].name,
                    keys,
                },
                None => ListType::Atomic,
            }
        }
        _ => ListType::Atomic,
    }
}

/// The key fields of a map list, kept for the life of the process: each distinct list of key
/// names is allocated once (the table's lists are `'static`, and CRDs name few).
fn interned_keys(names: &[String]) -> Option<&'static [KeyField]> {
    if names.is_empty() {
        return None;
    }
    static KEYS: OnceLock<Mutex<HashMap<Vec<String>, &'static [KeyField]>>> = OnceLock::new();
    let mut keys = KEYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(keys.entry(names.to_vec()).or_insert_with(|| {
        let fields: Vec<KeyField> = names
            .iter()
            .map(|n| KeyField {
                name: Box::leak(n.clone().into_boxed_str()),
                default: None,
            })
            .collect();
        Box::leak(fields.into_boxed_slice())
    }))
}

fn dotted_eq(dotted: &str, path: &[&str]) -> bool {
    dotted.split('.').eq(path.iter().copied())
}

/// Lists of `ObjectMeta`, relative to `metadata`.
fn object_meta_list(path: &[&str]) -> ListType {
    match path {
        ["finalizers"] => ListType::Set,
        ["ownerReferences"] => OWNER_REFERENCES,
        _ => ListType::Atomic,
    }
}

/// Lists of `PodSpec`, relative to the pod spec.
fn pod_spec_list(path: &[&str]) -> ListType {
    match path {
        ["containers" | "initContainers" | "ephemeralContainers"] => NAME,
        [
            "containers" | "initContainers" | "ephemeralContainers",
            rest @ ..,
        ] => container_list(rest),
        ["volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims"] => NAME,
        ["hostAliases"] => IP,
        ["topologySpreadConstraints"] => TOPOLOGY_SPREAD_CONSTRAINTS,
        _ => ListType::Atomic,
    }
}

/// Lists of `Container`, relative to one container.
fn container_list(path: &[&str]) -> ListType {
    match path {
        ["ports"] => CONTAINER_PORTS,
        ["env"] => NAME,
        ["volumeMounts"] => VOLUME_MOUNTS,
        ["volumeDevices"] => VOLUME_DEVICES,
        _ => ListType::Atomic,
    }
}

/// The server-side apply key of a list element: the key fields in `keys` order, each taken from
/// the element or its default. `None` when a key field without default is missing or the
/// element is not an object.
pub(crate) fn element_key(
    element: &Value,
    keys: &[KeyField],
) -> Option<Vec<(&'static str, Value)>> {
    let object = element.as_object()?;
    keys.iter()
        .map(|field| match (object.get(field.name), field.default) {
            (Some(value), _) if !value.is_null() => Some((field.name, value.clone())),
            (_, Some(default)) => Some((field.name, Value::from(default))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_containers_merge_by_name_and_their_ports_by_container_port() {
        let schema = Schema::for_kind("apps/v1", "Deployment");
        assert_eq!(
            schema.list_type(&["spec", "template", "spec", "containers"]),
            NAME
        );
        assert!(matches!(
            schema.list_type(&["spec", "template", "spec", "containers", "ports"]),
            ListType::Map {
                merge_key: "containerPort",
                ..
            }
        ));
        assert!(schema.is_atomic_map(&["spec", "selector"]));
        assert_eq!(
            schema.list_type(&["spec", "template", "metadata", "finalizers"]),
            ListType::Set
        );
    }

    #[test]
    fn service_selector_is_an_atomic_map_and_ports_merge_by_port() {
        let schema = Schema::for_kind("v1", "Service");
        assert!(schema.is_atomic_map(&["spec", "selector"]));
        assert_eq!(schema.list_type(&["spec", "ports"]), SERVICE_PORTS);
    }

    #[test]
    fn custom_resources_have_only_metadata_rules() {
        assert!(Schema::builtin("example.com/v1", "Pod").is_none());
        let schema = Schema::for_kind("example.com/v1", "Pod");
        assert_eq!(schema.list_type(&["spec", "containers"]), ListType::Atomic);
        assert_eq!(schema.list_type(&["metadata", "finalizers"]), ListType::Set);
    }

    #[test]
    fn a_custom_resource_lists_merge_as_its_schema_says() {
        let schema = Schema::custom(Arc::new(serde_json::json!({"properties": {"spec": {
        "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port", "protocol"],
                      "items": {"properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set"}}}},
            "plain": {"type": "array"},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
        }}}})));
        assert!(matches!(
            schema.list_type(&["spec", "ports"]),
            ListType::Map { merge_key: "port", keys } if keys.len() == 2
        ));
        assert_eq!(schema.list_type(&["spec", "ports", "tags"]), ListType::Set);
        assert_eq!(schema.list_type(&["spec", "plain"]), ListType::Atomic);
        assert!(schema.is_atomic_map(&["spec", "selector"]));
        assert_eq!(schema.list_type(&["metadata", "finalizers"]), ListType::Set);
    }

    #[test]
    fn element_key_fills_in_the_default_protocol() {
        let keys = [key("containerPort"), PROTOCOL];
        assert_eq!(
            element_key(&serde_json::json!({"containerPort": 80}), &keys),
            Some(vec![
                ("containerPort", Value::from(80)),
                ("protocol", Value::from("TCP"))
            ])
        );
        assert_eq!(element_key(&serde_json::json!({"name": "x"}), &keys), None);
    }
}
