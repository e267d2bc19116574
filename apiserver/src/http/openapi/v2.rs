//! `/openapi/v2`: one Swagger 2.0 document of every kind the server serves, as JSON or as the
//! gnostic protobuf (`openapi_v2.Document`) that kubectl 1.27 and 1.28 ask for before `apply`
//! (to see whether the server validates fields) and `explain`.
//!
//! The schemas are [`crate::schemas`]'s, with `$ref`s pointing at `#/definitions/` and a
//! reference with siblings written as a plain `$ref` (v3's `allOf` wrapper is not read by v2
//! clients).

use serde_json::{Map, Value, json};

use super::paths::item_paths;
use super::proto::Message;
use crate::resources::Resource;
use crate::schemas::V3_PREFIX;
use crate::schemas::for_resources;

/// The media type of the protobuf form, as upstream answers it.
pub(crate) const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header's first media type this document comes in is the protobuf form
/// (either of upstream's names for it; JSON for `*/*`).
pub(crate) fn protobuf_first(accept: &str) -> bool {
    accept
        .split(',')
        .map(|clause| clause.split(';').next().unwrap_or_default().trim())
        .find_map(|media| match media {
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            | "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" => Some(true),
            "application/json" | "application/*" | "*/*" => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

const V2_PREFIX: &str = "#/definitions/";

/// The document, as JSON.
pub(crate) fn document(resources: &[std::sync::Arc<Resource>], version: &str) -> Value {
    let paths = item_paths(
        resources,
        |name| json!({"name": name, "in": "query", "type": "string", "uniqueItems": true}),
    );
    let definitions: Map<String, Value> = for_resources(resources)
        .into_iter()
        .map(|(name, schema)| (name, to_v2(schema)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (embedded)", "version": version},
        "paths": paths,
        "definitions": definitions,
    })
}

/// A v3 schema in v2's form.
fn to_v2(schema: Value) -> Value {
    match schema {
        Value::Object(mut object) => {
            if let Some(Value::Array(all)) = object.get("allOf")
                && all.len() == 1
                && let Some(reference) = all[0].get("$ref").cloned()
            {
                object.remove("allOf");
                object.insert("$ref".into(), reference);
            }
            object.remove("nullable");
            Value::Object(
                object
                    .into_iter()
                    .map(|(key, value)| match (key.as_str(), value) {
                        ("$ref", Value::String(r)) => {
                            let name = r.strip_prefix(V3_PREFIX).unwrap_or(&r);
                            (key, Value::String(format!("{V2_PREFIX}{name}")))
                        }
                        (_, value) => (key, to_v2(value)),
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(to_v2).collect()),
        other => other,
    }
}

/// The document in gnostic's protobuf form (`openapiv2/OpenAPIv2.proto` of
/// github.com/google/gnostic-models); field numbers are that file's.
pub(crate) fn protobuf(document: &Value) -> Vec<u8> {
    let mut doc = Message::default();
    doc.string(1, document["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Message::default();
    info.string(1, document["info"]["title"].as_str().unwrap_or_default())
        .string(2, document["info"]["version"].as_str().unwrap_or_default());
    doc.message(2, &info);
    let mut paths = Message::default();
    for (path, item) in document["paths"].as_object().into_iter().flatten() {
        let mut named = Message::default();
        named.string(1, path).message(2, &path_item(item));
        paths.message(2, &named);
    }
    doc.message(8, &paths);
    let mut definitions = Message::default();
    for (name, schema) in document["definitions"].as_object().into_iter().flatten() {
        definitions.message(1, &named_schema(name, schema));
    }
    doc.message(9, &definitions);
    doc.into_bytes()
}

fn path_item(item: &Value) -> Message {
    let mut message = Message::default();
    for (field, verb) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (8, "patch"),
    ] {
        if let Some(op) = item.get(verb) {
            message.message(field, &operation(op));
        }
    }
    message
}

fn operation(op: &Value) -> Message {
    let mut message = Message::default();
    if let Some(id) = op["operationId"].as_str() {
        message.string(5, id);
    }
    for parameter in op["parameters"].as_array().into_iter().flatten() {
        // ParametersItem.parameter > Parameter.non_body_parameter > query_parameter_sub_schema
        let mut query = Message::default();
        query
            .string(2, "query")
            .string(4, parameter["name"].as_str().unwrap_or_default())
            .string(6, "string")
            .bool(20, true);
        let mut non_body = Message::default();
        non_body.message(3, &query);
        let mut param = Message::default();
        param.message(2, &non_body);
        let mut item = Message::default();
        item.message(1, &param);
        message.message(8, &item);
    }
    let mut responses = Message::default();
    let mut response = Message::default();
    response.string(1, "OK");
    let mut value = Message::default();
    value.message(1, &response);
    let mut named = Message::default();
    named.string(1, "200").message(2, &value);
    responses.message(1, &named);
    message.message(9, &responses);
    for (key, value) in op.as_object().into_iter().flatten() {
        if key.starts_with("x-") {
            message.message(13, &named_any(key, value));
        }
    }
    message
}

fn named_schema(name: &str, schema: &Value) -> Message {
    let mut message = Message::default();
    message.string(1, name).message(2, &schema_message(schema));
    message
}

/// `NamedAny`: a vendor extension, its value as YAML (JSON is YAML), as gnostic keeps it.
fn named_any(name: &str, value: &Value) -> Message {
    let mut message = Message::default();
    message.string(1, name).message(2, &any(value));
    message
}

fn any(value: &Value) -> Message {
    let mut message = Message::default();
    message.string(2, &value.to_string());
    message
}

fn schema_message(schema: &Value) -> Message {
    let mut m = Message::default();
    let Some(object) = schema.as_object() else {
        return m;
    };
    for (key, value) in object {
        match (key.as_str(), value) {
            ("$ref", Value::String(s)) => _ = m.string(1, s),
            ("format", Value::String(s)) => _ = m.string(2, s),
            ("title", Value::String(s)) => _ = m.string(3, s),
            ("description", Value::String(s)) => _ = m.string(4, s),
            ("default", v) => _ = m.message(5, &any(v)),
            ("multipleOf", Value::Number(n)) => _ = m.double(6, n.as_f64().unwrap_or_default()),
            ("maximum", Value::Number(n)) => _ = m.double(7, n.as_f64().unwrap_or_default()),
            ("exclusiveMaximum", Value::Bool(b)) => _ = m.bool(8, *b),
            ("minimum", Value::Number(n)) => _ = m.double(9, n.as_f64().unwrap_or_default()),
            ("exclusiveMinimum", Value::Bool(b)) => _ = m.bool(10, *b),
            ("maxLength", Value::Number(n)) => _ = m.int64(11, n.as_i64().unwrap_or_default()),
            ("minLength", Value::Number(n)) => _ = m.int64(12, n.as_i64().unwrap_or_default()),
            ("pattern", Value::String(s)) => _ = m.string(13, s),
            ("maxItems", Value::Number(n)) => _ = m.int64(14, n.as_i64().unwrap_or_default()),
            ("minItems", Value::Number(n)) => _ = m.int64(15, n.as_i64().unwrap_or_default()),
            ("uniqueItems", Value::Bool(b)) => _ = m.bool(16, *b),
            ("maxProperties", Value::Number(n)) => _ = m.int64(17, n.as_i64().unwrap_or_default()),
            ("minProperties", Value::Number(n)) => _ = m.int64(18, n.as_i64().unwrap_or_default()),
            ("required", Value::Array(names)) => {
                for name in names.iter().filter_map(Value::as_str) {
                    m.string(19, name);
                }
            }
            ("enum", Value::Array(values)) => {
                for v in values {
                    m.message(20, &any(v));
                }
            }
            ("additionalProperties", v) => {
                let mut item = Message::default();
                match v {
                    Value::Bool(b) => _ = item.bool(2, *b),
                    v => _ = item.message(1, &schema_message(v)),
                }
                m.message(21, &item);
            }
            ("type", v) => {
                let mut item = Message::default();
                match v {
                    Value::Array(types) => types.iter().filter_map(Value::as_str).for_each(|t| {
                        item.string(1, t);
                    }),
                    v => _ = item.string(1, v.as_str().unwrap_or_default()),
                }
                m.message(22, &item);
            }
            ("items", v) => {
                let mut item = Message::default();
                match v {
                    Value::Array(schemas) => schemas.iter().for_each(|s| {
                        item.message(1, &schema_message(s));
                    }),
                    v => _ = item.message(1, &schema_message(v)),
                }
                m.message(23, &item);
            }
            ("allOf", Value::Array(schemas)) => {
                for s in schemas {
                    m.message(24, &schema_message(s));
                }
            }
            ("properties", Value::Object(properties)) => {
                let mut item = Message::default();
                for (name, s) in properties {
                    item.message(1, &named_schema(name, s));
                }
                m.message(25, &item);
            }
            ("readOnly", Value::Bool(b)) => _ = m.bool(27, *b),
            ("example", v) => _ = m.message(30, &any(v)),
            (key, v) if key.starts_with("x-") => _ = m.message(31, &named_any(key, v)),
            _ => {}
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_acceptable_media_type_chooses_the_form() {
        assert!(protobuf_first(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(protobuf_first(
            "text/html, application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"
        ));
        assert!(!protobuf_first(
            "application/json, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        ));
        assert!(!protobuf_first("*/*"));
    }

    #[test]
    fn a_reference_with_siblings_becomes_a_plain_v2_reference() {
        let v3 = json!({"properties": {"metadata": {
            "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
            "description": "Standard object's metadata.",
        }}});
        assert_eq!(
            to_v2(v3),
            json!({"properties": {"metadata": {
                "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "description": "Standard object's metadata.",
            }}})
        );
    }

    #[test]
    fn a_schema_is_written_with_gnostics_field_numbers() {
        let bytes = schema_message(&json!({"type": "string", "description": "d"})).into_bytes();
        // description = 4 ("d"), type = 22 (TypeItem.value = 1 "string"); keys in map order.
        let description = [0x22, 1, b'd'];
        let type_item = [0xb2, 0x01, 8, 0x0a, 6, b's', b't', b'r', b'i', b'n', b'g'];
        assert_eq!(bytes, [&description[..], &type_item[..]].concat());
    }
}
