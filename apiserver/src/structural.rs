//! A custom resource is pruned and defaulted by its CRD version's structural schema
//! (`schema.openAPIV3Schema`), as a real API server does to every write (apiextensions'
//! `structural/pruning` and `structural/defaulting`):
//! - **pruning**: a field the schema does not declare is dropped: an object's keys outside its
//!   `properties`, every key of an object with neither `properties` nor `additionalProperties`
//!   (unless `x-kubernetes-preserve-unknown-fields: true`), checked down through `properties`,
//!   `additionalProperties` and `items`; at the root `apiVersion`, `kind` and `metadata` stay,
//!   and so they do in an `x-kubernetes-embedded-resource`;
//! - **defaulting**: a missing property whose schema has a `default` gets it, at every depth the
//!   object has (a default is not applied under an absent parent).
//!
//! Pruning is [`crate::schemas::known_fields`]'s (which holds `metadata` to ObjectMeta's
//! fields). Validation against the schema follows, with the kind's validation
//! ([`crate::schema_check`]).

use serde_json::Value;

use crate::resources::Resource;

/// Prunes, then defaults, `obj` by `res`'s schema (custom resources with one).
pub fn apply(res: &Resource, obj: &mut Value) {
    let Some(schema) = res.schema.as_deref() else {
        return;
    };
    crate::schemas::known_fields::prune(res, obj);
    default(obj, schema);
}

/// Fills in the `default` of every missing property of `value`, at every depth it has.
fn default(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, property) in properties {
                    if !fields.contains_key(key)
                        && let Some(default) = property.get("default")
                    {
                        fields.insert(key.clone(), default.clone());
                    }
                    if let Some(field) = fields.get_mut(key) {
                        default_within(field, property);
                    }
                }
            } else if let Some(items) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for item in fields.values_mut() {
                    default_within(item, items);
                }
            }
        }
        Value::Array(elements) => {
            if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
                for element in elements {
                    default_within(element, items);
                }
            }
        }
        _ => {}
    }
}

/// [`default`] below `field`: a `null` is left alone (upstream does not default under it).
fn default_within(field: &mut Value, schema: &Value) {
    if !field.is_null() {
        default(field, schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(schema: Value) -> Resource {
        let mut res = crate::resources::builtins()
            .into_iter()
            .next()
            .expect("a resource");
        res.crd = Some("widgets.example.com".into());
        res.schema = Some(std::sync::Arc::new(schema));
        res
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1},
                "image": {"type": "string"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "port": {"type": "integer"},
                    "protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "strategy": {"type": "object", "default": {}, "properties": {
                    "kind": {"type": "string", "default": "Rolling"}}}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}})
    }

    #[test]
    fn undeclared_fields_are_pruned_at_every_depth_and_defaults_filled_in() {
        let res = resource(schema());
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"image": "x", "bogus": 1,
                     "ports": [{"port": 80, "extra": true}],
                     "labels": {"a": "b"},
                     "free": {"anything": {"goes": 1}}},
            "status": {"ready": true, "noise": 2},
            "topLevel": "dropped"});
        apply(&res, &mut obj);
        assert_eq!(
            obj,
            json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"image": "x", "replicas": 1,
                     "ports": [{"port": 80, "protocol": "TCP"}],
                     "labels": {"a": "b"},
                     "free": {"anything": {"goes": 1}},
                     "strategy": {"kind": "Rolling"}},
            "status": {"ready": true}})
        );
    }

    #[test]
    fn defaults_need_their_parent_and_keep_what_is_written() {
        let res = resource(schema());
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                             "metadata": {"name": "w"}});
        apply(&res, &mut obj);
        assert!(
            obj.get("spec").is_none(),
            "no spec, no defaults under it: {obj}"
        );
        let mut obj = json!({"spec": {"replicas": 3, "strategy": null}});
        apply(&res, &mut obj);
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(obj["spec"]["strategy"], Value::Null);
    }

    #[test]
    fn kinds_without_a_schema_are_left_alone() {
        let mut res = resource(json!({}));
        res.schema = None;
        let mut obj = json!({"spec": {"anything": 1}});
        apply(&res, &mut obj);
        assert_eq!(obj, json!({"spec": {"anything": 1}}));
    }
}
