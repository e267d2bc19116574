//! The `meta.k8s.io/v1` Table form that `kubectl get` asks for: a Name and an Age column, or for
//! a custom resource whose CRD declares `additionalPrinterColumns`, Name and those columns (their
//! `jsonPath`s evaluated as a real server does for the paths CRDs use: fields, indexes and
//! `[?(@.field=="value")]` filters).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::resources::Resource;

/// What each row carries as its `object`, from the `includeObject` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    /// `includeObject=None`: a null object.
    None,
    /// The default: the object's `PartialObjectMetadata`.
    Metadata,
    /// `includeObject=Object`: the whole object.
    Object,
}

impl Include {
    /// The form `includeObject` asks for (`Metadata` when absent or unknown, as upstream).
    pub(crate) fn from_query(query: &super::request::Query) -> Self {
        match query.get("includeObject").map(String::as_str) {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// A Table of `items` (serialized objects); `columns` includes the column definitions (watch
/// events after the first omit them, as a real server does); each row's object as `include`
/// says.
pub(crate) fn table(
    res: &Resource,
    items: &[Bytes],
    rv: u64,
    cont: Option<String>,
    columns: bool,
    include: Include,
) -> Bytes {
    let rows: Vec<Value> = items
        .iter()
        .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
        .map(|obj| {
            let mut row = if res.columns.is_empty() {
                builtin_row(res, &obj)
            } else {
                custom_row(&res.columns, obj)
            };
            if let Some(fields) = row.as_object_mut() {
                match include {
                    Include::Object => {}
                    Include::None => {
                        fields.insert("object".into(), Value::Null);
                    }
                    Include::Metadata => {
                        let metadata = fields
                            .get("object")
                            .and_then(|o| o.get("metadata"))
                            .cloned()
                            .unwrap_or_default();
                        fields.insert(
                            "object".into(),
                            json!({"kind": "PartialObjectMetadata",
                                   "apiVersion": "meta.k8s.io/v1", "metadata": metadata}),
                        );
                    }
                }
            }
            row
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = c.into();
    }
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "rows": rows,
    });
    if columns && !res.columns.is_empty() {
        let mut definitions = vec![json!({"name": "Name", "type": "string", "format": "name",
            "priority": 0, "description": format!("Name of the {}", res.kind)})];
        definitions.extend(res.columns.iter().map(|c| {
            json!({
                "name": c.get("name").cloned().unwrap_or(json!("")),
                "type": c.get("type").cloned().unwrap_or(json!("string")),
                "format": c.get("format").cloned().unwrap_or(json!("")),
                "description": c.get("description").cloned().unwrap_or(json!("")),
                "priority": c.get("priority").cloned().unwrap_or(json!(0)),
            })
        }));
        t["columnDefinitions"] = Value::Array(definitions);
    } else if columns {
        let mut definitions = vec![json!({"name": "Name", "type": "string", "format": "name",
            "priority": 0, "description": format!("Name of the {}", res.kind)})];
        for column in builtin_columns(res) {
            definitions.push(
                json!({"name": column.name, "type": column.kind, "format": "",
                "priority": column.priority, "description": column.description}),
            );
        }
        definitions.push(
            json!({"name": "Age", "type": "string", "format": "", "priority": 0,
            "description": "Time since creation"}),
        );
        t["columnDefinitions"] = Value::Array(definitions);
    } else {
        t["columnDefinitions"] = json!([]);
    }
    Bytes::from(t.to_string())
}

/// One row: the name and age cells, and the whole object.
pub(crate) fn row(obj: &Value) -> Value {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(json!(""));
    let age = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339)
        .map(|created| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            human_duration(now.saturating_sub(created))
        })
        .unwrap_or_else(|| "<unknown>".into());
    json!({"cells": [name, age], "object": obj})
}

/// A built-in kind's printer column between Name and Age, as upstream prints it.
struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
    description: &'static str,
    cell: fn(&Value) -> Value,
}

/// The columns upstream's printers add for the kinds `kubectl get` shows most (ConfigMap,
/// Secret, Namespace, Deployment); other kinds get Name and Age only.
fn builtin_columns(res: &Resource) -> Vec<Column> {
    if res.crd.is_some() {
        return Vec::new();
    }
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "ConfigMap") => vec![Column {
            name: "Data",
            kind: "string",
            priority: 0,
            description: "Number of entries in data and binaryData",
            cell: |o| {
                let n = |k: &str| o.get(k).and_then(Value::as_object).map_or(0, |m| m.len());
                json!(n("data") + n("binaryData"))
            },
        }],
        ("", "Secret") => vec![
            Column {
                name: "Type",
                kind: "string",
                priority: 0,
                description: "The type of the secret",
                cell: |o| o.get("type").cloned().unwrap_or(json!("")),
            },
            Column {
                name: "Data",
                kind: "string",
                priority: 0,
                description: "Number of entries in data",
                cell: |o| {
                    json!(
                        o.get("data")
                            .and_then(Value::as_object)
                            .map_or(0, |m| m.len())
                    )
                },
            },
        ],
        ("", "Namespace") => vec![Column {
            name: "Status",
            kind: "string",
            priority: 0,
            description: "The status of the namespace",
            cell: |o| o.pointer("/status/phase").cloned().unwrap_or(json!("")),
        }],
        ("apps", "Deployment") => vec![
            Column {
                name: "Ready",
                kind: "string",
                priority: 0,
                description: "Number of the pod with ready state",
                cell: |o| {
                    let n = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
                    json!(format!(
                        "{}/{}",
                        n("/status/readyReplicas"),
                        n("/spec/replicas")
                    ))
                },
            },
            Column {
                name: "Up-to-date",
                kind: "string",
                priority: 0,
                description: "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                cell: |o| {
                    json!(
                        o.pointer("/status/updatedReplicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    )
                },
            },
            Column {
                name: "Available",
                kind: "string",
                priority: 0,
                description: "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                cell: |o| {
                    json!(
                        o.pointer("/status/availableReplicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    )
                },
            },
        ],
        _ => Vec::new(),
    }
}

/// A built-in object's row: name, the kind's columns ([`builtin_columns`]), age.
fn builtin_row(res: &Resource, obj: &Value) -> Value {
    let mut row = row(obj);
    let extra: Vec<Value> = builtin_columns(res).iter().map(|c| (c.cell)(obj)).collect();
    if !extra.is_empty()
        && let Some(cells) = row.get_mut("cells").and_then(Value::as_array_mut)
    {
        let age = cells.pop().unwrap_or(Value::Null);
        cells.extend(extra);
        cells.push(age);
    }
    row
}

/// One row of a custom resource with printer columns: the name, then each column's value.
fn custom_row(columns: &[Value], obj: Value) -> Value {
    let mut cells = vec![obj.pointer("/metadata/name").cloned().unwrap_or(json!(""))];
    for column in columns {
        let path = column.get("jsonPath").and_then(Value::as_str).unwrap_or("");
        cells.push(json_path(&obj, path).cloned().unwrap_or(Value::Null));
    }
    json!({"cells": cells, "object": obj})
}

/// The value at a CRD printer column's JSONPath: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`; the
/// first match of a filter (as a real server prints one value per cell).
fn json_path<'a>(mut value: &'a Value, path: &str) -> Option<&'a Value> {
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            value = value.get(&after[..end])?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("[?(@.") {
            let end = after.find(")]")?;
            let (field, wanted) = after[..end].split_once("==")?;
            let wanted = wanted.trim().trim_matches(|c| c == '"' || c == '\'');
            value = value
                .as_array()?
                .iter()
                .find(|item| item.get(field.trim()).and_then(Value::as_str) == Some(wanted))?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            value = value.get(after[..end].trim().parse::<usize>().ok()?)?;
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(value)
}

/// kubectl's short duration format: `42s`, `5m`, `3h`, `2d`.
fn human_duration(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86_400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SSZ` to seconds since the epoch.
fn parse_rfc3339(s: &str) -> Option<u64> {
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_back_to_epoch_seconds() {
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(crate::util::rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn printer_column_paths_read_fields_indexes_and_filters() {
        let obj = json!({"status": {"digest": "sha256:1", "conditions": [
            {"type": "Fetched", "status": "True"}, {"type": "Ready", "status": "False"}]}});
        let ready = json_path(&obj, r#".status.conditions[?(@.type=="Ready")].status"#);
        assert_eq!(ready, Some(&json!("False")));
        assert_eq!(json_path(&obj, ".status.digest"), Some(&json!("sha256:1")));
        assert_eq!(
            json_path(&obj, ".status.conditions[0].type"),
            Some(&json!("Fetched"))
        );
        assert_eq!(json_path(&obj, ".status.missing"), None);
        assert_eq!(
            json_path(&obj, r#".status.conditions[?(@.type=="Gone")].status"#),
            None
        );
    }

    #[test]
    fn ages_use_kubectl_units() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(86_400 * 3), "3d");
    }
}
