//! `events`: Kubernetes Events (`events.k8s.io/v1`) about objects, reported by the plugin.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::kind_ref;
use crate::controller::ObjectKey;
use crate::manifest::Verb;
use crate::runtime::KindRef;
use crate::wasm::api::{ApiCall, Target};
use crate::wasm::bindings::kube::reconcile::events::{EventType, Host};
use crate::wasm::bindings::{CallError, ObjectRef};
use crate::wasm::context::PluginContext;
use crate::wasm::cost::Import;
use crate::wasm::guest_log::{guest_text, prefix};
use crate::wasm::record;
use crate::wasm::reference;
use crate::wasm::state::GuestState;

/// The kind Events are written as.
fn event_kind() -> KindRef {
    KindRef::new("events.k8s.io/v1", "Event")
}

impl GuestState {
    /// Whether the plugin may record an Event (in `event_namespace`) about an object of `kind`
    /// in `namespace`: the object is of a kind it reads (`for`, `owns`, `cache`) in a namespace
    /// its grants cover (without grants: its manifest's `namespace`, or any), or of a kind and
    /// namespace a grant names; or a grant of its own allows creating Events there.
    fn may_report_on(
        &self,
        kind: &KindRef,
        namespace: Option<&str>,
        event_namespace: &str,
    ) -> Result<(), CallError> {
        let manifest = &self.plugin.manifest;
        let in_scope = manifest.namespace.is_none() || manifest.namespace.as_deref() == namespace;
        // The namespaces its grants cover (a plugin without grants: its manifest's scope).
        let covered = in_scope
            && (manifest.grants.is_empty()
                || manifest.grants.iter().any(|grant| {
                    grant.namespaces.as_ref().is_none_or(|listed| {
                        namespace.is_some_and(|wanted| listed.iter().any(|n| n == wanted))
                    })
                }));
        let reads = manifest.reads(kind) && covered;
        let granted = || {
            Verb::ALL
                .into_iter()
                .any(|verb| manifest.allows(kind, verb, namespace, None).is_ok())
        };
        let own_grant = || {
            manifest
                .allows(&event_kind(), Verb::Create, Some(event_namespace), None)
                .is_ok()
        };
        if reads || granted() || own_grant() {
            return Ok(());
        }
        let place = namespace.map_or_else(
            || "cluster-wide".to_owned(),
            |namespace| format!("in namespace `{namespace}`"),
        );
        Err(CallError::Denied(format!(
            "plugin `{}` may record Events only about objects it reads (`for`, `owns`, `cache`)              or holds a grant for; {kind} {place} is neither. List the kind in its manifest, or              grant `create` on events.k8s.io/v1 Event in namespace `{event_namespace}`",
            self.plugin.name
        )))
    }
}

/// The longest note kept (the API server's limit is 1 KB).
const MAX_NOTE: usize = 1024;

/// The longest reason the API server keeps.
const MAX_REASON: usize = 128;

/// Refuses a reason that is not 1 to [`MAX_REASON`] ASCII letters and digits: a reason is a
/// machine-readable word (`NamespaceNotFound`), and anything else (newlines, bidirectional
/// overrides) would reach `kubectl describe` and event consumers as the guest wrote it.
fn check_reason(reason: &str) -> Result<(), CallError> {
    let word = !reason.is_empty()
        && reason.len() <= MAX_REASON
        && reason.bytes().all(|b| b.is_ascii_alphanumeric());
    if word {
        return Ok(());
    }
    Err(CallError::Invalid(format!(
        "the event reason `{}` is not a reason: use 1 to {MAX_REASON} ASCII letters and digits \
         in UpperCamelCase, e.g. `NamespaceNotFound`",
        guest_text(reason, 64)
    )))
}

impl GuestState {
    // What each import does when no replay answers it.
    async fn live_events_record_event(
        &mut self,
        regarding: ObjectRef,
        event_type: EventType,
        reason: String,
        note: String,
    ) -> Result<(), CallError> {
        let kind = kind_ref(&regarding.kind);
        reference::check(&kind, regarding.namespace.as_deref(), &regarding.name, None)?;
        check_reason(&reason)?;
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        self.may_report_on(&kind, regarding.namespace.as_deref(), &namespace)?;
        let event_type = match event_type {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let started = Instant::now();
        let identity = identity_of(Arc::clone(&self.plugin), &kind, &regarding).await;
        let call = event_call(
            &self.plugin.name,
            &regarding,
            identity.as_ref(),
            event_type,
            &reason,
            &note,
        );
        let api = Arc::clone(&self.plugin.api);
        let target = call.target().clone();
        let request = crate::wasm::tape::perform(api, self.tape.clone(), call);
        let result =
            crate::wasm::call_trace::api_request(self.trace.as_ref(), "create", &target, request)
                .await;
        self.cost.api_wait(Import::EventsRecordEvent, started);
        result.map(drop)
    }
}

/// The uid and resourceVersion an Event names its object by: `kubectl describe` lists the
/// Events whose `regarding.uid` is the object's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub uid: String,
    pub resource_version: String,
}

impl Identity {
    /// The identity written in an object's JSON text; `None` without a uid.
    fn of_json(json: &str) -> Option<Self> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            uid: Option<String>,
            resource_version: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct Object {
            metadata: Meta,
        }
        let object: Object = serde_json::from_str(json).ok()?;
        Some(Self {
            uid: object.metadata.uid?,
            resource_version: object.metadata.resource_version.unwrap_or_default(),
        })
    }
}

/// The identity of `regarding` in the plugin's cache of `kind`, if it caches the object.
pub(crate) fn cached_identity(
    plugin: &PluginContext,
    kind: &KindRef,
    regarding: &ObjectRef,
) -> Option<Identity> {
    let store = plugin.caches.get(kind)?;
    let key = ObjectKey::in_namespace(regarding.namespace.as_deref(), &regarding.name);
    Identity::of_json(store.get(&key)?.json())
}

/// The identity of `regarding`: from the plugin's cache of its kind, else read from the API
/// server as the plugin (when it may `get` the kind there); `None` when neither has it (the
/// object is gone, or the plugin may not read it), and the Event is written without it.
async fn identity_of(
    plugin: Arc<PluginContext>,
    kind: &KindRef,
    regarding: &ObjectRef,
) -> Option<Identity> {
    if let Some(cached) = cached_identity(&plugin, kind, regarding) {
        return Some(cached);
    }
    let manifest = &plugin.manifest;
    let may_get = manifest.service_account.is_some()
        || (manifest)
            .allows(kind, Verb::Get, regarding.namespace.as_deref(), None)
            .is_ok();
    if !may_get {
        return None;
    }
    let call = ApiCall::Get {
        target: Target {
            kind: kind.clone(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
        },
    };
    let json = Arc::clone(&plugin.api).call(call).await.ok()??;
    Identity::of_json(&json)
}

impl Host for GuestState {
    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        event_type: EventType,
        reason: String,
        note: String,
    ) -> Result<(), CallError> {
        let started = Instant::now();
        let args = record::args(
            &self.session,
            || serde_json::json!({"regarding": &regarding, "event_type": &event_type, "reason": &reason, "note": &note}),
        );
        if let Some(answer) = record::replayed(&self.session, "events.record-event", args.as_ref())
        {
            self.imported(Import::EventsRecordEvent, started);
            return answer;
        }
        let result = self
            .live_events_record_event(regarding, event_type, reason, note)
            .await;
        record::keep(&self.session, "events.record-event", args, &result);
        self.imported(Import::EventsRecordEvent, started);
        result
    }
}

/// The create of an Event (`events.k8s.io/v1`) reported by plugin `plugin` about `regarding`
/// (naming its uid and resourceVersion when `identity` knows them), in its namespace (`default`
/// for a cluster-scoped object), the note's control and bidirectional characters escaped, cut
/// at 1 KiB.
pub(crate) fn event_call(
    plugin: &str,
    regarding: &ObjectRef,
    identity: Option<&Identity>,
    event_type: &str,
    reason: &str,
    note: &str,
) -> ApiCall {
    let namespace = regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let name = format!("{}.{:x}", regarding.name, now.as_nanos());
    // Escaping only lengthens text: the first MAX_NOTE bytes are all that can be kept.
    let note = guest_text(prefix(note, MAX_NOTE), MAX_NOTE);
    let note = prefix(&note, MAX_NOTE);
    let mut event = serde_json::json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": { "name": name, "namespace": namespace },
        "eventTime": micro_time(now),
        "reportingController": format!("reconcile-host/{plugin}"),
        "reportingInstance": format!("reconcile-host/{plugin}"),
        "action": "Reconcile",
        "reason": reason,
        "note": note,
        "type": event_type,
        "regarding": {
            "apiVersion": regarding.kind.api_version,
            "kind": regarding.kind.kind,
            "namespace": regarding.namespace,
            "name": regarding.name,
        },
    });
    if let (Some(identity), Some(about)) = (identity, event["regarding"].as_object_mut()) {
        about.insert("uid".to_owned(), identity.uid.clone().into());
        if !identity.resource_version.is_empty() {
            about.insert(
                "resourceVersion".to_owned(),
                identity.resource_version.clone().into(),
            );
        }
    }
    ApiCall::Create {
        target: Target {
            kind: event_kind(),
            namespace: Some(namespace),
            name,
        },
        object: event,
        field_manager: plugin.to_owned(),
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

    fn config_map(name: &str) -> ObjectRef {
        ObjectRef {
            kind: crate::wasm::bindings::Kind {
                api_version: "v1".to_owned(),
                kind: "ConfigMap".to_owned(),
            },
            namespace: Some("demo".to_owned()),
            name: name.to_owned(),
        }
    }

    fn created(call: ApiCall) -> serde_json::Value {
        match call {
            ApiCall::Create { object, .. } => object,
            other => panic!("not a create: {other:?}"),
        }
    }

    #[test]
    fn an_event_names_its_objects_uid_and_resource_version_when_known() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"demo","uid":"u-1","resourceVersion":"42"},"data":{"uid":"not this"}}"#;
        let identity = Identity::of_json(json).expect("the object has a uid");
        assert_eq!(identity.uid, "u-1");
        assert_eq!(identity.resource_version, "42");
        let event = created(event_call(
            "p",
            &config_map("a"),
            Some(&identity),
            "Normal",
            "Synced",
            "note",
        ));
        assert_eq!(event["regarding"]["uid"], "u-1");
        assert_eq!(event["regarding"]["resourceVersion"], "42");
        assert_eq!(event["regarding"]["name"], "a");

        // Unknown: the fields are absent, not null.
        let event = created(event_call(
            "p",
            &config_map("a"),
            None,
            "Normal",
            "Synced",
            "note",
        ));
        let regarding = event["regarding"].as_object().expect("an object");
        assert!(!regarding.contains_key("uid"), "{regarding:?}");
        assert!(!regarding.contains_key("resourceVersion"), "{regarding:?}");
        assert_eq!(Identity::of_json(r#"{"metadata":{"name":"a"}}"#), None);
        assert_eq!(Identity::of_json("not json"), None);
    }
}
