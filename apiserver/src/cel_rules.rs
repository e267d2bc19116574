//! A custom resource's CEL validation rules (`x-kubernetes-validations`), evaluated with the
//! `cel` crate (cel-rust): at each node of the object whose schema carries rules, `self` is the
//! node's value (JSON integers as CEL `int`, as upstream's schema types say) and, on an update
//! where the node existed before, `oldSelf` its old value; a rule naming `oldSelf` (a transition
//! rule) is evaluated only then, as upstream. A rule that is false is one cause of the 422:
//! `<path>[<fieldPath>]: <reason>: [<a scalar's value>: ]<message>`, the message being the
//! rule's `messageExpression` (when it yields a string), its `message`, or
//! `failed rule: <rule>`.
//!
//! Not evaluated: a rule that uses what the `cel` crate does not have, which is Kubernetes' own
//! CEL libraries (quantities, URLs, IPs and CIDRs, `format`, the string and list extensions
//! such as `lowerAscii`, `indexOf` or `sum`) — such a rule passes here; and no cost limits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::objects::{Key, Map as CelMap};
use cel::{Context, ExecutionError, Program};
use serde_json::Value;

use crate::resources::Resource;

/// The problems of `obj` (replacing `current`, if any) by the rules of `res`'s schema.
pub fn problems(res: &Resource, obj: &Value, current: Option<&Value>) -> Vec<String> {
    let Some(schema) = res.schema.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk(schema, obj, current, "", &mut out);
    out
}

fn walk(schema: &Value, value: &Value, old: Option<&Value>, path: &str, out: &mut Vec<String>) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            if let Some(problem) = check(rule, value, old, path) {
                out.push(problem);
            }
        }
    }
    let child = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, field) in fields {
                // The root's apiVersion, kind and metadata are not the schema's.
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let Some(field_schema) = properties.and_then(|p| p.get(key)).or(additional) else {
                    continue;
                };
                let old_field = old.and_then(|o| o.get(key));
                walk(field_schema, field, old_field, &child(key), out);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                return;
            };
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for (i, item) in items.iter().enumerate() {
                // Old elements are found by their keys, in map lists only (as upstream).
                let old_item = old.and_then(Value::as_array).and_then(|olds| {
                    (!keys.is_empty())
                        .then(|| {
                            olds.iter()
                                .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
                        })
                        .flatten()
                });
                walk(item_schema, item, old_item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The problem of one rule at a node, if it fails.
fn check(rule: &Value, value: &Value, old: Option<&Value>, path: &str) -> Option<String> {
    let source = rule.get("rule").and_then(Value::as_str)?;
    let program = compiled(source)?;
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut context = Context::default();
    context.add_variable_from_value("self", to_cel(value));
    if let Some(old) = old {
        context.add_variable_from_value("oldSelf", to_cel(old));
    }
    match program.execute(&context) {
        Ok(cel::Value::Bool(true)) => None,
        Ok(cel::Value::Bool(false)) => Some(failure(rule, source, value, path, &context)),
        // A field the rule reads is missing: upstream's evaluation error.
        Err(ExecutionError::NoSuchKey(key)) => Some(format!(
            "{path}: Invalid value: \"{}\": no such key: {key} evaluating rule: {source}",
            type_of(value)
        )),
        // What the cel crate lacks (Kubernetes' libraries, some overloads) is not judged here.
        Ok(_) | Err(_) => None,
    }
}

fn failure(rule: &Value, source: &str, value: &Value, path: &str, context: &Context) -> String {
    let text = |key: &str| {
        rule.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let from_expression =
        text("messageExpression")
            .and_then(compiled)
            .and_then(|p| match p.execute(context) {
                Ok(cel::Value::String(s)) if !s.is_empty() => Some(s.to_string()),
                _ => None,
            });
    let message = from_expression
        .or_else(|| text("message").map(str::to_string))
        .unwrap_or_else(|| format!("failed rule: {source}"));
    let mut field = path.to_string();
    if let Some(extra) = text("fieldPath") {
        field.push_str(extra);
        field = field.trim_start_matches('.').to_string();
    }
    match text("reason") {
        Some("FieldValueForbidden") => format!("{field}: Forbidden: {message}"),
        Some("FieldValueRequired") => format!("{field}: Required value: {message}"),
        Some("FieldValueDuplicate") => format!("{field}: Duplicate value: {message}"),
        // Upstream shows a scalar's value, and nothing for an object or a list.
        _ if value.is_object() || value.is_array() => format!("{field}: Invalid value: {message}"),
        _ => format!("{field}: Invalid value: {value}: {message}"),
    }
}

/// The schema type name of a value, as upstream's causes show it.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// A rule's program, compiled once; `None` when it does not parse (upstream refuses such a CRD).
fn compiled(source: &str) -> Option<Arc<Program>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Arc<Program>>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(source.to_string())
        .or_insert_with(|| Program::compile(source).ok().map(Arc::new))
        .clone()
}

/// A JSON value as CEL sees a custom resource's: integers are `int`, objects maps.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => cel::Value::Map(CelMap {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

#[cfg(test)]
#[path = "cel_rules_tests.rs"]
mod tests;
