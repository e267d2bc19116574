//! The `meta.k8s.io/v1` Table form that `kubectl get` asks for: a Name and an Age column.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::resources::Resource;

/// A Table of `items` (serialized objects); `columns` includes the column definitions (watch
/// events after the first omit them, as a real server does).
pub(crate) fn table(
    res: &Resource,
    items: &[Bytes],
    rv: u64,
    cont: Option<String>,
    columns: bool,
) -> Bytes {
    let rows: Vec<Value> = items
        .iter()
        .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
        .map(|obj| row(&obj))
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
    if columns {
        t["columnDefinitions"] = json!([
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": format!("Name of the {}", res.kind)},
            {"name": "Age", "type": "string", "format": "", "priority": 0,
             "description": "Time since creation"},
        ]);
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
    fn ages_use_kubectl_units() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(86_400 * 3), "3d");
    }
}
