//! The `meta.k8s.io` Table form (`v1`, or `v1beta1` when asked for) that `kubectl get` asks for:
//! a Name and an Age column, or for
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

/// The Table a client asked for: what each row carries, and the Table's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Form {
    /// Each row's object.
    pub(crate) include: Include,
    /// `meta.k8s.io/v1`, or `meta.k8s.io/v1beta1` when the accepted Table form names it.
    pub(crate) api_version: &'static str,
}

impl Form {
    /// The form `includeObject` and the first Table form of `Accept` ask for.
    pub(crate) fn of(query: &super::request::Query, headers: &axum::http::HeaderMap) -> Self {
        let table = headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .and_then(|accept| accept.split(',').find(|a| a.contains("as=Table")));
        let beta = table.is_some_and(|form| form.split(';').any(|p| p.trim() == "v=v1beta1"));
        Self {
            include: Include::from_query(query),
            api_version: if beta {
                "meta.k8s.io/v1beta1"
            } else {
                "meta.k8s.io/v1"
            },
        }
    }
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
    form: Form,
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
                match form.include {
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
                                   "apiVersion": form.api_version, "metadata": metadata}),
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
        "apiVersion": form.api_version,
        "metadata": meta,
        "rows": rows,
    });
    if columns && !res.columns.is_empty() {
        let mut definitions = vec![json!({"name": "Name", "type": "string", "format": "name",
            "priority": 0, "description": OBJECT_META_NAME})];
        definitions.extend(res.columns.iter().map(|c| {
            let path = c
                .get("jsonPath")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let description = c.get("description").cloned().unwrap_or_else(|| {
                json!(format!(
                    "Custom resource definition column (in JSONPath format): {path}"
                ))
            });
            json!({
                "name": c.get("name").cloned().unwrap_or(json!("")),
                "type": c.get("type").cloned().unwrap_or(json!("string")),
                "format": c.get("format").cloned().unwrap_or(json!("")),
                "description": description,
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

/// The API documentation of `metadata.name`, which upstream gives a custom resource's Name
/// column.
const OBJECT_META_NAME: &str = "Name must be unique within a namespace. Is required when \
    creating resources, although some resources may allow a client to request the generation of \
    an appropriate name automatically. Name is primarily intended for creation idempotence and \
    configuration definition. Cannot be updated. More info: \
    https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// One row: the name and age cells, and the whole object.
pub(crate) fn row(obj: &Value) -> Value {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(json!(""));
    let age = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map_or_else(|| "<unknown>".into(), age);
    json!({"cells": [name, age], "object": obj})
}

/// How long ago `timestamp` (RFC 3339) was, as upstream prints a date cell; `<invalid>` when it
/// does not parse.
fn age(timestamp: &str) -> String {
    let Some(then) = parse_rfc3339(timestamp) else {
        return "<invalid>".into();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    human_duration(now.saturating_sub(then))
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

/// One row of a custom resource with printer columns: the name, then each column's value as
/// upstream's table converter types it (a `date` column shows an age, a value of the wrong type
/// is empty).
fn custom_row(columns: &[Value], obj: Value) -> Value {
    let mut cells = vec![obj.pointer("/metadata/name").cloned().unwrap_or(json!(""))];
    for column in columns {
        let path = column.get("jsonPath").and_then(Value::as_str).unwrap_or("");
        let kind = column
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        cells.push(json_path(&obj, path).map_or(Value::Null, |value| cell(kind, value)));
    }
    json!({"cells": cells, "object": obj})
}

/// A printer column's cell of type `kind` for `value`.
fn cell(kind: &str, value: &Value) -> Value {
    match (kind, value) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(text)) => json!(text),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(text)) => json!(age(text)),
        _ => Value::Null,
    }
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

/// An age as upstream's `HumanDuration` prints it: `42s`, `2m5s`, `10m`, `5h30m`, `20h`,
/// `3d4h`, `30d`, `2y10d`.
fn human_duration(secs: u64) -> String {
    let (minutes, hours) = (secs / 60, secs / 3600);
    let (days, years) = (hours / 24, hours / 24 / 365);
    let with = |big: u64, unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if minutes < 10 => with(minutes, "m", secs % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => with(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => with(days, "d", hours % 24, "h"),
        _ if hours < 24 * 365 * 2 => format!("{days}d"),
        _ if hours < 24 * 365 * 8 => with(years, "y", days % 365, "d"),
        _ => format!("{years}y"),
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
    fn ages_use_upstream_units() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (600, "10m"),
            (3 * 3600 + 1800, "3h30m"),
            (8 * 3600 + 60, "8h"),
            (86_400 * 3, "3d"),
            (86_400 * 3 + 3600 * 4, "3d4h"),
            (86_400 * 30, "30d"),
            (86_400 * 740, "2y10d"),
            (86_400 * 365 * 9, "9y"),
        ];
        for (secs, age) in cases {
            assert_eq!(human_duration(secs), age, "{secs} s");
        }
    }

    #[test]
    fn printer_column_cells_are_typed_as_upstream_types_them() {
        assert_eq!(
            cell("date", &json!("1970-01-01T00:00:00Z")),
            json!(human_duration(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .expect("after 1970")
                    .as_secs()
            ))
        );
        assert_eq!(cell("date", &json!("yesterday")), json!("<invalid>"));
        assert_eq!(cell("date", &json!(5)), Value::Null);
        assert_eq!(cell("integer", &json!(2.9)), json!(2));
        assert_eq!(cell("integer", &json!("2")), Value::Null);
        assert_eq!(cell("number", &json!(2)), json!(2.0));
        assert_eq!(cell("boolean", &json!(true)), json!(true));
        assert_eq!(cell("string", &json!(3)), json!("3"));
        assert_eq!(cell("string", &json!("True")), json!("True"));
    }
}
