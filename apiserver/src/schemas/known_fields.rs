//! The fields a write carries that its kind's schema does not declare ("unknown fields"). A real
//! API server drops them: from built-in kinds while decoding into their Go types, from custom
//! resources by pruning with the CRD's structural schema. `fieldValidation` says what the writer
//! hears of them: nothing (`Ignore`), a warning each (`Warn`, the default), or a refusal
//! (`Strict`).
//!
//! The rules differ in one place: an object whose schema declares neither `properties` nor
//! `additionalProperties` keeps every field in a built-in kind (a `RawExtension`, `FieldsV1`)
//! and none in a custom resource (unless `x-kubernetes-preserve-unknown-fields`). At a custom
//! resource's root, and in an `x-kubernetes-embedded-resource`, `apiVersion`, `kind` and
//! `metadata` are known, and `metadata` is held to ObjectMeta's fields.

use serde_json::{Map, Value};

use super::refs::ref_name;
use crate::resources::Resource;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const CORE_EVENT: &str = "io.k8s.api.core.v1.Event";

/// Removes the fields of `obj` (a whole object of kind `res`, in its stored form: an
/// `events.k8s.io` Event is stored as a core Event) its schema does not declare, and names them
/// (`spec.foo`, `spec.containers[0].bar`), in document order.
pub(crate) fn prune(res: &Resource, obj: &mut Value) -> Vec<String> {
    let mut walk = Walk::new(res, true);
    let schema = if res.is_events_v1() {
        super::builtin().get(CORE_EVENT).cloned()
    } else {
        walk.root_schema(res)
    };
    if let Some(schema) = schema {
        walk.object_root(&schema, obj, res.crd.is_some());
    }
    walk.found
}

/// Names the fields of `body` its kind's schema does not declare, without changing it; with
/// `patch`, `body` is a merge, strategic merge or apply patch, whose `$`-directives are known.
pub(crate) fn find(res: &Resource, body: &Value, patch: bool) -> Vec<String> {
    let mut copy = body.clone();
    let mut walk = Walk::new(res, false);
    walk.patch = patch;
    if let Some(schema) = walk.root_schema(res) {
        walk.object_root(&schema, &mut copy, res.crd.is_some());
    }
    walk.found
}

struct Walk {
    /// Custom resource rules (an undeclared object keeps nothing).
    structural: bool,
    remove: bool,
    patch: bool,
    path: String,
    found: Vec<String>,
}

impl Walk {
    fn new(res: &Resource, remove: bool) -> Self {
        Walk {
            structural: res.crd.is_some(),
            remove,
            patch: false,
            path: String::new(),
            found: Vec::new(),
        }
    }

    fn root_schema(&self, res: &Resource) -> Option<Value> {
        if res.crd.is_some() {
            return res.schema.as_deref().cloned();
        }
        let name = super::name_of(res)?;
        super::builtin().get(&name).cloned()
    }

    /// An object with `apiVersion`, `kind` and `metadata` (a custom resource's root or an
    /// embedded resource): those are known whatever the schema says.
    fn object_root(&mut self, schema: &Value, value: &mut Value, object_fields: bool) {
        if !object_fields {
            self.value(schema, value);
            return;
        }
        let Some(fields) = value.as_object_mut() else {
            return;
        };
        // metadata first, as upstream names its unknown fields first; by ObjectMeta's type,
        // whose free-form fields (a managed field entry's fieldsV1) keep their keys.
        if let Some(metadata) = fields.get_mut("metadata")
            && let Some(meta_schema) = super::builtin().get(OBJECT_META)
        {
            let structural = std::mem::replace(&mut self.structural, false);
            let mark = self.enter("metadata");
            self.value(meta_schema, metadata);
            self.path.truncate(mark);
            self.structural = structural;
        }
        if !flag(schema, "x-kubernetes-preserve-unknown-fields") {
            self.fields(schema, fields, true);
        }
    }

    fn enter(&mut self, key: &str) -> usize {
        let mark = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        mark
    }

    fn value(&mut self, schema: &Value, value: &mut Value) {
        let resolved;
        let schema = match ref_name(schema).and_then(|n| super::builtin().get(&n)) {
            Some(target) => {
                resolved = target;
                resolved
            }
            None => schema,
        };
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
            return;
        }
        match value {
            Value::Object(fields) => {
                if self.structural && flag(schema, "x-kubernetes-embedded-resource") {
                    self.object_root(schema, value, true);
                    return;
                }
                self.fields(schema, fields, false);
            }
            Value::Array(elements) => {
                let Some(items) = schema.get("items").filter(|i| i.is_object()) else {
                    return;
                };
                for (i, element) in elements.iter_mut().enumerate() {
                    let mark = self.path.len();
                    self.path.push_str(&format!("[{i}]"));
                    self.value(items, element);
                    self.path.truncate(mark);
                }
            }
            _ => {}
        }
    }

    /// The fields of an object; with `object_fields`, `apiVersion`, `kind` and `metadata` are
    /// known (and `metadata` already walked).
    fn fields(&mut self, schema: &Value, fields: &mut Map<String, Value>, object_fields: bool) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let open = additional == Some(&Value::Bool(true))
            || (!self.structural && properties.is_none() && additional.is_none());
        if open {
            return;
        }
        let mut unknown = Vec::new();
        for (key, field) in fields.iter_mut() {
            if (self.patch && key.starts_with('$'))
                || (object_fields && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
            {
                continue;
            }
            let declared = properties
                .and_then(|p| p.get(key))
                .or(additional.filter(|a| a.is_object()));
            let mark = self.enter(key);
            match declared {
                Some(property) => self.value(property, field),
                None => {
                    self.found.push(self.path.clone());
                    unknown.push(key.clone());
                }
            }
            self.path.truncate(mark);
        }
        if self.remove {
            for key in unknown {
                fields.remove(&key);
            }
        }
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

#[cfg(test)]
#[path = "known_fields_tests.rs"]
mod tests;
