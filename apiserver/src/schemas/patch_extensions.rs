//! The list and map extensions of the published schemas, from the table the server's own
//! patching follows ([`crate::patch::schema`]): an associative list gets
//! `x-kubernetes-patch-strategy: merge`, its `x-kubernetes-patch-merge-key`,
//! `x-kubernetes-list-type: map` and `x-kubernetes-list-map-keys`; a set of scalars
//! `merge` and `set`; an atomic map `x-kubernetes-map-type: atomic`. kubectl computes the
//! strategic merge patches of `apply` from these, so it and the server agree on what merges.

use serde_json::{Map, Value, json};

use super::refs::ref_name;
use crate::patch::schema::{ListType, Schema};

/// How deep a kind's fields are followed (a pod template's container ports are 7 deep).
const MAX_DEPTH: usize = 12;

/// Writes the extensions of the kind `api_version`/`kind`, whose schema is `root`, into the
/// schemas of `definitions` its fields reach.
pub(crate) fn annotate(
    definitions: &mut Map<String, Value>,
    root: &str,
    api_version: &str,
    kind: &str,
) {
    let table = Schema::for_kind(api_version, kind);
    let mut marks = Vec::new();
    let mut path = Vec::new();
    let mut visiting = vec![root.to_string()];
    walk(
        definitions,
        &table,
        root,
        &mut path,
        &mut visiting,
        &mut marks,
    );
    for (definition, property, extensions) in marks {
        let target = definitions
            .get_mut(&definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(&property))
            .and_then(Value::as_object_mut);
        if let Some(target) = target {
            target.extend(extensions);
        }
    }
}

/// One property to mark: (schema name, property name, extensions).
type Mark = (String, String, Map<String, Value>);

fn walk(
    definitions: &Map<String, Value>,
    table: &Schema,
    name: &str,
    path: &mut Vec<String>,
    visiting: &mut Vec<String>,
    marks: &mut Vec<Mark>,
) {
    if path.len() >= MAX_DEPTH {
        return;
    }
    let Some(properties) = definitions
        .get(name)
        .and_then(|d| d.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    for (field, schema) in properties {
        path.push(field.clone());
        let fields: Vec<&str> = path.iter().map(String::as_str).collect();
        let next = if schema.get("type").and_then(Value::as_str) == Some("array") {
            if let Some(extensions) = list_extensions(table.list_type(&fields)) {
                marks.push((name.to_string(), field.clone(), extensions));
            }
            schema.get("items").and_then(ref_name)
        } else {
            let next = ref_name(schema);
            if next.is_some() && table.is_atomic_map(&fields) {
                let atomic = json!({"x-kubernetes-map-type": "atomic"});
                if let Value::Object(extensions) = atomic {
                    marks.push((name.to_string(), field.clone(), extensions));
                }
            }
            next
        };
        if let Some(next) = next.filter(|n| !visiting.contains(n)) {
            visiting.push(next.clone());
            walk(definitions, table, &next, path, visiting, marks);
            visiting.pop();
        }
        path.pop();
    }
}

fn list_extensions(list: ListType) -> Option<Map<String, Value>> {
    let extensions = match list {
        ListType::Atomic => return None,
        ListType::Set => json!({
            "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-list-type": "set",
        }),
        ListType::Map { merge_key, keys } => json!({
            "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": merge_key,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": keys.iter().map(|k| k.name).collect::<Vec<_>>(),
        }),
    };
    match extensions {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::definitions::builtin;

    #[test]
    fn containers_merge_by_name_and_their_ports_by_port_and_protocol() {
        let defs = builtin();
        let pod_spec = &defs["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(
            pod_spec["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert_eq!(
            pod_spec["containers"]["x-kubernetes-patch-strategy"],
            "merge"
        );
        let ports = &defs["io.k8s.api.core.v1.Container"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            serde_json::json!(["containerPort", "protocol"])
        );
        let meta = &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
        assert_eq!(meta["finalizers"]["x-kubernetes-list-type"], "set");
        assert_eq!(
            defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["selector"]["x-kubernetes-map-type"],
            "atomic"
        );
        assert!(
            pod_spec["tolerations"]
                .get("x-kubernetes-patch-strategy")
                .is_none(),
            "a list the server replaces whole is published without a merge strategy"
        );
    }
}
