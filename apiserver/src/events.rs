//! One storage for Events, two APIs: core `v1` Events and `events.k8s.io/v1` Events are the
//! same objects, stored in the core form and converted field by field as upstream's
//! `pkg/apis/events/v1/conversion.go` does (`regarding` ↔ `involvedObject`, `note` ↔ `message`,
//! `reportingController` ↔ `reportingComponent`, `deprecatedSource` ↔ `source`,
//! `deprecatedCount` ↔ `count`, `deprecatedFirstTimestamp`/`deprecatedLastTimestamp` ↔
//! `firstTimestamp`/`lastTimestamp`; the other fields keep their names).

use serde_json::{Map, Value, json};

/// `(events.k8s.io/v1 name, core v1 name)` of the renamed fields.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
];

fn rename(obj: Value, api_version: &str, from_events: bool) -> Value {
    let Value::Object(fields) = obj else {
        return obj;
    };
    let mut out = Map::with_capacity(fields.len());
    for (key, value) in fields {
        let renamed = RENAMED.iter().find_map(|&(events, core)| {
            if from_events {
                (key == events).then_some(core)
            } else {
                (key == core).then_some(events)
            }
        });
        out.insert(renamed.map_or(key, str::to_string), value);
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event in the core `v1` form it is stored in.
pub fn to_core(event: Value) -> Value {
    rename(event, "v1", true)
}

/// A stored (core `v1`) Event as `events.k8s.io/v1` serves it.
pub fn to_events_v1(event: Value) -> Value {
    if event.get("kind").and_then(Value::as_str) != Some("Event") {
        return event;
    }
    rename(event, "events.k8s.io/v1", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_map_both_ways_like_upstream_conversion() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"},
            "note": "pulled", "reportingController": "kubelet", "reportingInstance": "n1",
            "deprecatedCount": 3, "deprecatedSource": {"component": "kubelet"},
            "reason": "Pulled", "type": "Normal", "action": "Pull",
            "eventTime": "2026-01-01T00:00:00.000000Z"});
        let core = to_core(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "pulled");
        assert_eq!(core["reportingComponent"], "kubelet");
        assert_eq!(core["count"], 3);
        assert_eq!(core["source"]["component"], "kubelet");
        assert_eq!(core["reason"], "Pulled");
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        assert_eq!(to_events_v1(core), v1, "the round trip is lossless");
    }
}
