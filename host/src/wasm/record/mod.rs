//! Recorded reconciles: everything a guest read during one call — the request, every host
//! import's arguments and answer, the clocks and the random bytes — and how the call ended, as
//! a [`Bundle`] that `reconcile-host replay` re-runs without a cluster ([`replay`]).
//!
//! A store holds a [`SessionSlot`]; its WASI clocks and random sources ([`wasi`]) and its host
//! imports ([`GuestState::recorded`]) consult it: with no session they behave as usual, in a
//! [`Session::Record`] they also keep what they answered, in a [`Session::Replay`] they answer
//! from a bundle.
//!
//! # Guarantees
//! - A recording is bounded: at most [`MAX_CALLS`] host calls and [`MAX_BYTES`] bytes of
//!   answers and random bytes; past either it stops keeping and marks the bundle `truncated`.
//!   A plugin's kept bundles hold at most [`ring::MAX_KEPT_BYTES`] bytes (the oldest go first).
//! - Unless the host is configured to keep them, the values of a Secret's `data` and
//!   `stringData` are replaced by `redacted` wherever they appear: in the request's object and in
//!   every answer.
//! - `log` calls and the guest's stdout and stderr are not recorded (they are in the host's log
//!   and answer nothing).

mod bundle;
mod finish;
pub mod replay;
mod wasi;

pub use bundle::{Bundle, FORMAT, HostCall, RecordedManifest, RecordedOutcome, RecordedRequest};
pub use wasi::install;

pub(crate) use finish::bundle;

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most host calls a recording keeps.
pub const MAX_CALLS: usize = 4096;
/// The most bytes of answers and random bytes a recording keeps.
pub const MAX_BYTES: usize = 4 << 20;

/// What a store's clocks, random sources and imports are doing for the current call.
#[derive(Debug)]
pub enum Session {
    /// Keeping what they answer.
    Record(Recording),
    /// Answering from a bundle (boxed: a plain call moves sessions around, and should not move
    /// a replay's state).
    Replay(Box<replay::Replaying>),
}

/// The session of one store, shared with its WASI clocks and random sources.
pub type SessionSlot = Arc<Mutex<Option<Session>>>;

/// What one call read, as it is kept.
#[derive(Debug, Default)]
pub struct Recording {
    pub(crate) calls: Vec<HostCall>,
    pub(crate) wall: Vec<u64>,
    pub(crate) monotonic: Vec<u64>,
    pub(crate) random: Vec<u8>,
    pub(crate) insecure_random: Vec<u8>,
    pub(crate) bytes: usize,
    pub(crate) truncated: bool,
    pub(crate) redact: bool,
}

impl Recording {
    /// An empty recording; Secret values redacted if `redact`.
    #[must_use]
    pub fn new(redact: bool) -> Self {
        Self {
            redact,
            ..Self::default()
        }
    }

    /// Whether `more` bytes still fit; marks the recording truncated if not.
    fn room(&mut self, more: usize) -> bool {
        if self.truncated || self.bytes + more > MAX_BYTES {
            self.truncated = true;
            return false;
        }
        self.bytes += more;
        true
    }

    fn call(&mut self, import: &'static str, args: Value, result: Value) {
        if self.calls.len() >= MAX_CALLS {
            self.truncated = true;
            return;
        }
        let (args, result) = if self.redact {
            (redacted(args), redacted(result))
        } else {
            (args, result)
        };
        let size = approximate_size(&args) + approximate_size(&result);
        if self.room(size) {
            self.calls.push(HostCall {
                import: import.to_owned(),
                args,
                result,
            });
        }
    }

    pub(crate) fn bytes_read(&mut self, insecure: bool, bytes: &[u8]) {
        if self.room(bytes.len()) {
            if insecure {
                self.insecure_random.extend_from_slice(bytes);
            } else {
                self.random.extend_from_slice(bytes);
            }
        }
    }
}

/// About how many bytes `value` takes as JSON text.
pub(crate) fn approximate_size(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(approximate_size).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 3 + approximate_size(v))
                .sum::<usize>()
                + 2
        }
        _ => 8,
    }
}

/// What replaces a Secret's values.
pub const REDACTED: &str = "redacted";

/// `value` with the values of every Secret in it redacted: a Secret object itself, the items of
/// a `SecretList` (which a real API server sends without `kind`), a JSON text of either (how
/// objects cross the guest boundary), or any array or object holding those. In a Secret, the
/// values of `data` and `stringData` are replaced, and so are those of every annotation that
/// holds a JSON object with them (`kubectl.kubernetes.io/last-applied-configuration`, which a
/// client-side `kubectl apply` fills with the whole Secret, and any tool's alike).
/// `managedFields` hold the keys of `data`, never its values, and stay.
#[must_use]
pub fn redacted(value: Value) -> Value {
    match value {
        Value::String(text) if text.contains("Secret") => {
            match serde_json::from_str::<Value>(&text) {
                Ok(parsed @ Value::Object(_)) => {
                    let cleaned = redacted(parsed);
                    Value::String(cleaned.to_string())
                }
                _ => Value::String(text),
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(redacted).collect()),
        Value::Object(mut map) => {
            let core = map.get("apiVersion").and_then(Value::as_str) == Some("v1");
            match map.get("kind").and_then(Value::as_str) {
                Some("Secret") if core => {
                    redact_secret(&mut map);
                    Value::Object(map)
                }
                Some("SecretList") if core => {
                    if let Some(Value::Array(items)) = map.get_mut("items") {
                        for item in items {
                            if let Value::Object(secret) = item {
                                redact_secret(secret);
                            }
                        }
                    }
                    Value::Object(map)
                }
                _ => Value::Object(
                    map.into_iter()
                        .map(|(key, value)| (key, redacted(value)))
                        .collect(),
                ),
            }
        }
        other => other,
    }
}

/// Redacts one Secret's values: `data`, `stringData`, and the same fields of any annotation
/// holding a JSON object (a copy of the Secret).
fn redact_secret(secret: &mut serde_json::Map<String, Value>) {
    for field in ["data", "stringData"] {
        if let Some(Value::Object(values)) = secret.get_mut(field) {
            for value in values.values_mut() {
                *value = Value::String(REDACTED.to_owned());
            }
        }
    }
    let annotations = secret
        .get_mut("metadata")
        .and_then(|metadata| metadata.get_mut("annotations"))
        .and_then(Value::as_object_mut);
    for value in annotations.into_iter().flat_map(|map| map.values_mut()) {
        let Value::String(text) = value else { continue };
        if let Ok(Value::Object(mut copy)) = serde_json::from_str::<Value>(text) {
            redact_secret(&mut copy);
            *text = Value::Object(copy).to_string();
        }
    }
}

/// The arguments of a host import call as a recording or replay keeps them; `None` (and
/// `args` never called) when no session runs.
pub(crate) fn args(session: &SessionSlot, args: impl FnOnce() -> Value) -> Option<Value> {
    session.lock().is_some().then(args)
}

/// In a replay, the recorded answer to `import` with `args` (see [`replay`]); `None` otherwise.
pub(crate) fn replayed<T: DeserializeOwned>(
    session: &SessionSlot,
    import: &'static str,
    args: Option<&Value>,
) -> Option<T> {
    match (&mut *session.lock(), args) {
        (Some(Session::Replay(replaying)), Some(args)) => {
            Some(replaying.answer(import, args.clone()))
        }
        _ => None,
    }
}

/// In a recording, keeps the call of `import` with `args` and its `result`.
pub(crate) fn keep<T: Serialize>(
    session: &SessionSlot,
    import: &'static str,
    args: Option<Value>,
    result: &T,
) {
    if let (Some(Session::Record(recording)), Some(args)) = (&mut *session.lock(), args) {
        let value = serde_json::to_value(result).unwrap_or(Value::Null);
        recording.call(import, args, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_redacted_in_objects_texts_and_lists() {
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="},
            "stringData": {"token": "t"}});
        let text = Value::String(secret.to_string());
        let answer = serde_json::json!({"Ok": [secret.to_string(), "{\"kind\":\"ConfigMap\",\"data\":{\"a\":\"b\"}}"]});
        for value in [secret.clone(), text, answer] {
            let out = redacted(value).to_string();
            assert!(!out.contains("aHVudGVyMg=="), "{out}");
            assert!(
                !out.contains("\"t\"") && !out.contains("\\\"t\\\""),
                "{out}"
            );
            assert!(out.contains(REDACTED), "{out}");
        }
        // Other kinds are kept as they are.
        let config_map =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}});
        assert_eq!(redacted(config_map.clone()), config_map);
    }

    /// A Secret as a real API server sends it after a client-side `kubectl apply`: its value also
    /// in the last-applied annotation; and a list of Secrets, whose items carry no `kind`.
    #[test]
    fn secret_values_in_annotations_and_list_items_are_redacted() {
        let applied = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "a"}, "data": {"password": "aHVudGVyMg=="},
            "stringData": {"token": "hunter2"}})
        .to_string();
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "a", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": applied,
                "note": "kept as written"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:password": {}}}}]},
            "data": {"password": "aHVudGVyMg=="}});
        let item = {
            let mut item = secret.clone();
            let map = item.as_object_mut().expect("an object");
            map.remove("kind");
            map.remove("apiVersion");
            item
        };
        let list = serde_json::json!({"apiVersion": "v1", "kind": "SecretList",
            "metadata": {"resourceVersion": "7"}, "items": [item]});
        for value in [
            secret.clone(),
            Value::String(secret.to_string()),
            list.clone(),
            Value::String(list.to_string()),
        ] {
            let out = redacted(value).to_string();
            assert!(!out.contains("aHVudGVyMg=="), "{out}");
            assert!(!out.contains("hunter2"), "{out}");
            assert!(out.contains("kept as written"), "{out}");
            assert!(
                out.contains("f:password"),
                "managed fields keep the keys: {out}"
            );
        }
    }

    #[test]
    fn a_recording_stops_keeping_at_its_bounds_and_says_so() {
        let mut recording = Recording::new(false);
        for i in 0..=MAX_CALLS {
            recording.call("cache.get", serde_json::json!({"i": i}), Value::Null);
        }
        assert_eq!(recording.calls.len(), MAX_CALLS);
        assert!(recording.truncated);
        let mut big = Recording::new(false);
        big.bytes_read(false, &vec![0; MAX_BYTES + 1]);
        assert!(big.truncated && big.random.is_empty());
    }
}
