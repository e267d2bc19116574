//! A custom resource is validated against its CRD version's `openAPIV3Schema` after it is
//! pruned and defaulted ([`crate::structural`]), as upstream's apiextensions validation does:
//! each problem is one cause of a 422 Invalid, with upstream's field paths
//! (`spec.ports[0].port`):
//! - `type` (`string`, `integer`, `number`, `boolean`, `object`, `array`; `nullable`;
//!   `x-kubernetes-int-or-string`);
//! - `required` properties;
//! - `enum`;
//! - `minimum`/`maximum` (with `exclusiveMinimum`/`exclusiveMaximum`), `minLength`/`maxLength`,
//!   `minItems`/`maxItems`, `minProperties`/`maxProperties`;
//! - `pattern`, `format`, `multipleOf`, `uniqueItems` and list types ([`crate::schema_rules`]).
//!
//! Not checked: CEL rules (`x-kubernetes-validations`).

use serde_json::{Map, Value};

use crate::resources::Resource;

/// The problems of `obj` against `res`'s schema (custom resources with one), in field order.
pub fn problems(res: &Resource, obj: &Value) -> Vec<String> {
    let Some(schema) = res.schema.as_deref() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    if let (Some(fields), Some(properties)) = (
        obj.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        // The root's apiVersion, kind and metadata are checked elsewhere.
        for (key, property) in properties {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(value) = fields.get(key) {
                check(value, property, key, &mut problems);
            }
        }
        required(fields, schema, "", &mut problems);
    }
    problems
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Upstream's rendering of a value in a cause: strings quoted, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        Value::Array(_) => "[]interface {}".to_owned(),
        Value::Object(_) => "map[string]interface {}".to_owned(),
    }
}

fn check(value: &Value, schema: &Value, path: &str, problems: &mut Vec<String>) {
    let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
    if value.is_null() && nullable {
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    if int_or_string {
        if !matches!(type_name(value), "integer" | "string") {
            problems.push(format!(
                "{path}: Invalid value: \"{}\": {path} in body must be of type integer,string: {}",
                type_name(value),
                shown(value)
            ));
            return;
        }
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let fits = actual == expected || (expected == "number" && actual == "integer");
        if !fits {
            problems.push(format!(
                "{path}: Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        problems.push(format!(
            "{path}: Unsupported value: {}: supported values: {}",
            value,
            listed.join(", ")
        ));
    }
    let before = problems.len();
    bounds(value, schema, path, problems);
    // A string's length and pattern are one check upstream: the first that fails is said.
    let length_failed = value.is_string() && problems.len() > before;
    problems.extend(crate::schema_rules::problems(
        value,
        schema,
        path,
        length_failed,
    ));
    match value {
        Value::Object(fields) => object(fields, schema, path, problems),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    check(item, item_schema, &format!("{path}[{i}]"), problems);
                }
            }
        }
        _ => {}
    }
}

fn object(fields: &Map<String, Value>, schema: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (key, property) in properties {
            if let Some(value) = fields.get(key) {
                check(value, property, &format!("{path}.{key}"), problems);
            }
        }
    } else if let Some(items) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        for (key, value) in fields {
            check(value, items, &format!("{path}.{key}"), problems);
        }
    }
    required(fields, schema, path, problems);
}

fn required(fields: &Map<String, Value>, schema: &Value, path: &str, problems: &mut Vec<String>) {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !fields.contains_key(name) {
            let field = if path.is_empty() {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            };
            problems.push(format!("{field}: Required value"));
        }
    }
}

fn bounds(value: &Value, schema: &Value, path: &str, problems: &mut Vec<String>) {
    let limit = |key: &str| schema.get(key).and_then(Value::as_f64);
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    if let Some(number) = value.as_f64() {
        if let Some(min) = limit("minimum") {
            let exclusive = flag("exclusiveMinimum");
            if number < min || (exclusive && number == min) {
                let relation = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                problems.push(format!(
                    "{path}: Invalid value: {value}: {path} in body should be {relation} {}",
                    schema["minimum"]
                ));
            }
        }
        if let Some(max) = limit("maximum") {
            let exclusive = flag("exclusiveMaximum");
            if number > max || (exclusive && number == max) {
                let relation = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                problems.push(format!(
                    "{path}: Invalid value: {value}: {path} in body should be {relation} {}",
                    schema["maximum"]
                ));
            }
        }
    }
    let count = match value {
        Value::String(text) => Some(("Length", text.chars().count())),
        Value::Array(items) => Some(("Items", items.len())),
        Value::Object(fields) => Some(("Properties", fields.len())),
        _ => None,
    };
    if let Some((what, count)) = count {
        if let Some(max) = schema.get(format!("max{what}")).and_then(Value::as_u64)
            && count as u64 > max
        {
            problems.push(if what == "Length" {
                format!("{path}: Too long: may not be more than {max} bytes")
            } else {
                let items = if max == 1 { "item" } else { "items" };
                format!("{path}: Too many: {count}: must have at most {max} {items}")
            });
        }
        if let Some(min) = schema.get(format!("min{what}")).and_then(Value::as_u64)
            && (count as u64) < min
        {
            problems.push(format!(
                "{path}: Invalid value: {}: {path} in body should have at least {min} {}",
                shown(value),
                what.to_lowercase()
            ));
        }
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
        res.crd = Some("gadgets.example.com".into());
        res.schema = Some(std::sync::Arc::new(schema));
        res
    }

    #[test]
    fn types_required_enums_and_bounds_are_causes_with_upstreams_paths() {
        let res = resource(json!({"type": "object", "properties": {"spec": {
            "type": "object", "required": ["image"], "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "image": {"type": "string", "maxLength": 5},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "port": {"x-kubernetes-int-or-string": true},
                "ratio": {"type": "number"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "port": {"type": "integer"}}}}}}}}));
        let found = problems(
            &res,
            &json!({"spec": {
            "replicas": "two", "color": "pink", "port": "http", "ratio": 1,
            "ports": [{"port": 80}, {"port": "x"}]}}),
        );
        assert_eq!(
            found,
            [
                "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"",
                "spec.ports[1].port: Invalid value: \"string\": spec.ports[1].port in body must be of type integer: \"string\"",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "spec.image: Required value",
            ]
        );
        let fine = problems(
            &res,
            &json!({"spec": {"image": "x", "replicas": 0, "port": 8080}}),
        );
        assert!(fine.is_empty(), "{fine:?}");
        let bounded = problems(&res, &json!({"spec": {"image": "toolong", "replicas": -1}}));
        assert_eq!(bounded.len(), 2, "{bounded:?}");
        assert!(
            bounded.contains(&"spec.image: Too long: may not be more than 5 bytes".to_string()),
            "{bounded:?}"
        );
    }
}
