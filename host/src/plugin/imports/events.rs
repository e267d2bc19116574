//! `events`: Kubernetes Events (`events.k8s.io/v1`) about objects, reported by the plugin.

use std::time::{SystemTime, UNIX_EPOCH};

use super::super::api::{ApiCall, Target};
use super::super::bindings::kube::reconcile::events::{EventType, Host};
use super::super::bindings::{CallError, ObjectRef};
use super::super::state::GuestState;
use crate::runtime::KindRef;

/// The longest note kept (the API server's limit is 1 KB).
const MAX_NOTE: usize = 1024;

impl Host for GuestState {
    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        event_type: EventType,
        reason: String,
        note: String,
    ) -> Result<(), CallError> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let name = format!("{}.{:x}", regarding.name, now.as_nanos());
        let mut note = note;
        if note.len() > MAX_NOTE {
            let mut end = MAX_NOTE;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        let event = serde_json::json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": { "name": name, "namespace": namespace },
            "eventTime": micro_time(now),
            "reportingController": format!("reconcile-host/{}", self.plugin.name),
            "reportingInstance": format!("reconcile-host/{}", self.plugin.name),
            "action": "Reconcile",
            "reason": reason,
            "note": note,
            "type": match event_type { EventType::Normal => "Normal", EventType::Warning => "Warning" },
            "regarding": {
                "apiVersion": regarding.kind.api_version,
                "kind": regarding.kind.kind,
                "namespace": regarding.namespace,
                "name": regarding.name,
            },
        });
        let call = ApiCall::Create {
            target: Target {
                kind: KindRef::new("events.k8s.io/v1", "Event"),
                namespace: Some(namespace),
                name,
            },
            object: event,
            field_manager: self.plugin.name.to_string(),
        };
        let plugin = std::sync::Arc::clone(&self.plugin);
        plugin.api.call(call).await.map(drop)
    }
}

/// RFC 3339 with microseconds, UTC (a `metav1.MicroTime`).
fn micro_time(since_epoch: std::time::Duration) -> String {
    let micros = i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX);
    let time = k8s_openapi::jiff::Timestamp::from_microsecond(micros).unwrap_or_default();
    format!("{time:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_is_rfc3339_utc_with_microseconds() {
        let t = std::time::Duration::new(1_700_000_000, 123_456_000);
        assert_eq!(micro_time(t), "2023-11-14T22:13:20.123456Z");
        assert_eq!(
            micro_time(std::time::Duration::ZERO),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
