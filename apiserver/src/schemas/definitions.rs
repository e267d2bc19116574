//! The schemas the OpenAPI documents carry, by upstream's names
//! (`io.k8s.api.apps.v1.Deployment`): every built-in kind's from k8s-openapi's types (with the
//! types they refer to), and each custom resource's from its CRD version.
//!
//! A kind's own schema carries `x-kubernetes-group-version-kind`, which is how kubectl finds
//! it (`explain`, and the patch computation of `apply`), and the list and map extensions the
//! server's patching follows ([`super::patch_extensions`]), so that kubectl builds the patches
//! the server merges.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::refs::{V3_PREFIX, ref_name};
use crate::resources::Resource;

type Names = HashMap<(&'static str, &'static str, &'static str), String>;

/// The built-in kinds' schemas and the name of each kind's.
struct Builtin {
    definitions: Map<String, Value>,
    names: Names,
}

fn built() -> &'static Builtin {
    static BUILTIN: OnceLock<Builtin> = OnceLock::new();
    BUILTIN.get_or_init(build_builtin)
}

/// Every built-in kind's schema and the schemas they refer to, with `$ref`s in v3's form.
pub(crate) fn builtin() -> &'static Map<String, Value> {
    &built().definitions
}

fn build_builtin() -> Builtin {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let kinds = crate::builtins::all();
    let names: Names = kinds
        .iter()
        .filter_map(|k| {
            let reference = (k.schema)(&mut generator);
            Some((
                (k.group, k.version, k.kind),
                ref_name(reference.as_value())?,
            ))
        })
        .collect();
    let mut definitions = generator.take_definitions(true);
    for k in &kinds {
        let Some(name) = names.get(&(k.group, k.version, k.kind)) else {
            continue;
        };
        if let Some(schema) = definitions.get_mut(name) {
            mark_kind(schema, k.group, k.version, k.kind);
        }
        let api_version = if k.group.is_empty() {
            k.version.to_string()
        } else {
            format!("{}/{}", k.group, k.version)
        };
        super::patch_extensions::annotate(&mut definitions, name, &api_version, k.kind);
    }
    Builtin { definitions, names }
}

/// Names the kind a kind's own schema stands for, and leaves `metadata` and `spec` optional as
/// upstream's schemas do (k8s-openapi's types hold them without `Option`, and its schemas list
/// them as required).
fn mark_kind(schema: &mut Value, group: &str, version: &str, kind: &str) {
    let gvk = json!({"group": group, "version": version, "kind": kind});
    match schema.get_mut("x-kubernetes-group-version-kind") {
        Some(Value::Array(kinds)) => kinds.push(gvk),
        _ => schema["x-kubernetes-group-version-kind"] = json!([gvk]),
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| r != "metadata" && r != "spec");
        if required.is_empty() {
            schema.as_object_mut().map(|o| o.remove("required"));
        }
    }
}

/// The name of `res`'s schema: upstream's for a built-in kind, the reversed group, version and
/// kind for a custom resource (`com.example.v1.Website`).
pub(crate) fn name_of(res: &Resource) -> Option<String> {
    if res.crd.is_none() {
        return built()
            .names
            .get(&(res.group.as_str(), res.version.as_str(), res.kind.as_str()))
            .cloned();
    }
    res.schema.as_ref()?;
    let reversed: Vec<&str> = res.group.split('.').rev().collect();
    Some(format!(
        "{}.{}.{}",
        reversed.join("."),
        res.version,
        res.kind
    ))
}

/// A custom resource's schema: its CRD version's, with `apiVersion`, `kind` and `metadata`
/// declared as upstream publishes them, and its kind named.
fn custom(res: &Resource) -> Option<Value> {
    let mut schema = res.schema.as_deref()?.clone();
    let properties = schema
        .as_object_mut()?
        .entry("properties")
        .or_insert_with(|| json!({}));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
        );
        properties.insert(
            "kind".into(),
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
        );
        properties.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("{V3_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")}], "description": "Standard object's metadata."}),
        );
    }
    mark_kind(&mut schema, &res.group, &res.version, &res.kind);
    Some(schema)
}

/// The schemas of `resources` and every schema they refer to, by name.
pub(crate) fn for_resources(resources: &[std::sync::Arc<Resource>]) -> Map<String, Value> {
    let pool = builtin();
    let mut out = Map::new();
    let mut pending: Vec<String> = Vec::new();
    for res in resources {
        let Some(name) = name_of(res) else { continue };
        if res.crd.is_some() {
            if let Some(schema) = custom(res) {
                collect_refs(&schema, &mut pending);
                out.insert(name, schema);
            }
        } else {
            pending.push(name);
        }
    }
    let mut seen: BTreeSet<String> = out.keys().cloned().collect();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(schema) = pool.get(&name) {
            collect_refs(schema, &mut pending);
            out.insert(name, schema.clone());
        }
    }
    out
}

/// Pushes the names of the schemas `value` refers to.
fn collect_refs(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, v) in object {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(V3_PREFIX) {
                            into.push(name.to_string());
                        }
                    }
                    _ => collect_refs(v, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_schema_names_its_kind_and_reaches_the_container_type() {
        let defs = builtin();
        let deployment = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        assert!(
            deployment.get("required").is_none(),
            "metadata and spec are optional: {deployment}"
        );
        assert!(defs.contains_key("io.k8s.api.core.v1.Container"));
        assert_eq!(
            ref_name(&defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"]),
            Some("io.k8s.api.core.v1.PodTemplateSpec".into())
        );
    }
}
