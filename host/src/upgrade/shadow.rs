//! Shadow runs: after a sampled reconcile, a plugin's shadow module runs on the same key and
//! the same object snapshot, its writes answered without changing anything
//! ([`crate::wasm::tape`]), and what it wanted to write is compared with what the primary wrote.
//!
//! Writes are compared as normalised intents, one per verb and object (and subresource):
//! - server-side apply: the applied configuration (the fields set and their values);
//! - merge and JSON patches: the object that results from applying the call's patches, in
//!   order, to the object as the cache holds it when the two are compared (one base for both,
//!   so concurrent changes by others do not show as differences); strategic merge patches,
//!   which need the kind's schema, are compared as documents;
//! - create and update: the object sent, without `metadata.resourceVersion`;
//! - delete: that it happened.
//!
//! Events are not compared (their names carry the time). The two answers (`done`, `requeue`,
//! `requeue-after`, an error) are compared too.
//!
//! # Guarantees
//! - The shadow never changes the primary's outcome, queue or metrics: it runs after the
//!   primary's call returned, in a task of its own, on a context of its own (limits, pool-less
//!   instances, guest log labelled `<plugin>/shadow`).
//! - Its cost is bounded: only a `sample` fraction of reconciles is shadowed, at most the
//!   plugin's `concurrency` shadows run at once (a reconcile finding every slot busy is not
//!   shadowed), and each runs under the shadow's own limits.
//! - Differences are counted every time; they are logged, and recorded as an Event on the
//!   reconciled object, the first time per key only (for at most [`MAX_KEYS_REPORTED`] keys),
//!   as text cut at [`MAX_REPORT`] bytes with control characters escaped.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::runtime::KindRef;
use crate::telemetry::ShadowMetrics;
use crate::wasm::api::{ApiCall, PatchDoc, Target};
use crate::wasm::bindings::{self, ObjectRef};
use crate::wasm::context::PluginContext;
use crate::wasm::guest_log::guest_text;
use crate::wasm::invoke::{self, GuestFailure, RequestView};
use crate::wasm::module::Module;
use crate::wasm::tape::{Tape, Write};

/// Keys whose differences are logged and recorded as Events; later keys are only counted.
pub const MAX_KEYS_REPORTED: usize = 10_000;
/// The longest difference report logged (an Event's note is cut at 1 KiB).
pub const MAX_REPORT: usize = 4 << 10;
/// The most field changes listed per object.
const MAX_CHANGES: usize = 20;

/// What a call answered, as compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `done`.
    Done,
    /// `requeue`.
    Requeue,
    /// `requeue-after` this many milliseconds.
    RequeueAfter(u32),
    /// The guest returned an error.
    Error,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done => f.write_str("done"),
            Self::Requeue => f.write_str("requeue"),
            Self::RequeueAfter(ms) => write!(f, "requeue-after {ms}ms"),
            Self::Error => f.write_str("an error"),
        }
    }
}

impl Answer {
    /// The answer of a call that returned; `None` for one that trapped or overran a limit.
    #[must_use]
    pub fn of(result: &Result<bindings::Action, GuestFailure>) -> Option<Self> {
        match result {
            Ok(bindings::Action::Done) => Some(Self::Done),
            Ok(bindings::Action::Requeue) => Some(Self::Requeue),
            Ok(bindings::Action::RequeueAfter(ms)) => Some(Self::RequeueAfter(*ms)),
            Err(GuestFailure::Returned(_)) => Some(Self::Error),
            Err(_) => None,
        }
    }
}

/// One difference between the primary and the shadow.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The kind of the object written (the `for` kind for a differing answer).
    pub kind: String,
    /// `apply`, `patch`, `create`, `update`, `delete`, or `action`.
    pub verb: &'static str,
    /// What differs, readable.
    pub text: String,
}

/// One intent: a verb on an object (and subresource).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct IntentKey {
    verb: &'static str,
    kind: KindRef,
    namespace: Option<String>,
    name: String,
    subresource: Option<String>,
}

impl std::fmt::Display for IntentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}/{} ",
            self.verb, self.kind.api_version, self.kind.kind
        )?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)?;
        if let Some(subresource) = &self.subresource {
            write!(f, " ({subresource})")?;
        }
        Ok(())
    }
}

fn is_event(kind: &KindRef) -> bool {
    kind.kind == "Event" && matches!(kind.api_version.as_str(), "v1" | "events.k8s.io/v1")
}

fn key(verb: &'static str, target: &Target, subresource: Option<&String>) -> IntentKey {
    IntentKey {
        verb,
        kind: target.kind.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        subresource: subresource.cloned(),
    }
}

/// `object` without what the API server sets: resourceVersion, managedFields, uid,
/// creationTimestamp, generation.
fn without_server_fields(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "resourceVersion",
            "managedFields",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            metadata.remove(field);
        }
    }
    object
}

/// The intents of `writes`; `base` gives an object's cached JSON, the base of its patches.
fn intents(
    writes: &[Write],
    base: &dyn Fn(&Target) -> Option<Value>,
) -> BTreeMap<IntentKey, Value> {
    let mut intents = BTreeMap::new();
    for write in writes {
        let target = write.call.target();
        if is_event(&target.kind) {
            continue;
        }
        let (key, value) = match &write.call {
            ApiCall::Apply {
                object,
                subresource,
                ..
            } => (key("apply", target, subresource.as_ref()), object.clone()),
            ApiCall::Patch {
                body, subresource, ..
            } => {
                let key = key("patch", target, subresource.as_ref());
                let mut object = intents
                    .get(&key)
                    .cloned()
                    .or_else(|| base(target).map(without_server_fields))
                    .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
                let value = match body {
                    PatchDoc::Merge(patch) => {
                        json_patch::merge(&mut object, patch);
                        object
                    }
                    PatchDoc::Json(patch) => {
                        match serde_json::from_value::<json_patch::Patch>(patch.clone()) {
                            Ok(patch) => match json_patch::patch(&mut object, &patch) {
                                Ok(()) => object,
                                Err(error) => {
                                    serde_json::json!({"jsonPatchFails": error.to_string()})
                                }
                            },
                            Err(_) => serde_json::json!({"invalidJsonPatch": patch}),
                        }
                    }
                    PatchDoc::Strategic(patch) => {
                        serde_json::json!({"strategicMergePatch": patch})
                    }
                };
                (key, value)
            }
            ApiCall::Create { object, .. } => (
                key("create", target, None),
                without_server_fields(object.clone()),
            ),
            ApiCall::Replace { object, .. } => (
                key("update", target, None),
                without_server_fields(object.clone()),
            ),
            ApiCall::Delete { .. } => (key("delete", target, None), Value::Null),
            ApiCall::Get { .. } => continue,
        };
        intents.insert(key, value);
    }
    intents
}

/// A JSON pointer's segment for `key` (`~` and `/` escaped).
fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The paths (JSON pointers) where `primary` and `shadow` differ, with both values; objects are
/// compared field by field, everything else as a whole.
fn changes(path: &str, primary: Option<&Value>, shadow: Option<&Value>, out: &mut Vec<String>) {
    if out.len() > MAX_CHANGES {
        return;
    }
    match (primary, shadow) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                changes(
                    &format!("{path}/{}", pointer_segment(k)),
                    a.get(k),
                    b.get(k),
                    out,
                );
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            let shown =
                |v: Option<&Value>| v.map_or_else(|| "(absent)".to_owned(), Value::to_string);
            out.push(format!(
                "{}: primary {}, shadow {}",
                if path.is_empty() { "/" } else { path },
                shown(a),
                shown(b)
            ));
        }
    }
}

/// The differences between the primary's writes and answer and the shadow's.
#[must_use]
pub fn compare(
    for_kind: &str,
    primary: (&[Write], &Answer),
    shadow: (&[Write], &Answer),
    base: &dyn Fn(&Target) -> Option<Value>,
) -> Vec<Difference> {
    let mut differences = Vec::new();
    if primary.1 != shadow.1 {
        differences.push(Difference {
            kind: for_kind.to_owned(),
            verb: "action",
            text: format!("answer: primary {}, shadow {}", primary.1, shadow.1),
        });
    }
    let (a, b) = (intents(primary.0, base), intents(shadow.0, base));
    let keys: std::collections::BTreeSet<&IntentKey> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let text = match (a.get(key), b.get(key)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), None) => format!("{key}: only the primary"),
            (None, Some(_)) => format!("{key}: only the shadow"),
            (x, y) => {
                let mut list = Vec::new();
                changes("", x, y, &mut list);
                let more = list.len() > MAX_CHANGES;
                list.truncate(MAX_CHANGES);
                let mut text = format!("{key}: {}", list.join("; "));
                if more {
                    text.push_str("; …");
                }
                text
            }
        };
        differences.push(Difference {
            kind: key.kind.kind.clone(),
            verb: key.verb,
            text,
        });
    }
    differences
}

/// A plugin's shadow: its module, context and bounds.
pub struct ShadowRunner {
    module: Arc<Module>,
    context: Arc<PluginContext>,
    sample: f64,
    slots: Arc<tokio::sync::Semaphore>,
    reported: Mutex<HashSet<String>>,
    metrics: Option<ShadowMetrics>,
}

impl std::fmt::Debug for ShadowRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowRunner")
            .field("module", &self.module.digest())
            .field("sample", &self.sample)
            .finish_non_exhaustive()
    }
}

/// A reconcile's request, owned, for the shadow's run after the primary's.
#[derive(Debug)]
pub struct OwnedRequest {
    /// The key's object reference.
    pub target: ObjectRef,
    /// The object snapshot the primary got.
    pub object: Option<String>,
    /// The key's retry count.
    pub requeues: u32,
}

/// A shadow run the primary's reconcile was admitted to: its slot, and the tape the primary's
/// writes go to.
#[derive(Debug)]
pub struct Admitted {
    slot: tokio::sync::OwnedSemaphorePermit,
    /// The primary's tape.
    pub tape: crate::wasm::tape::SharedTape,
}

impl ShadowRunner {
    /// A shadow running `module` with `context` (the shadow's limits and environment), for a
    /// `sample` fraction of reconciles, at most `concurrency` at once.
    #[must_use]
    pub fn new(
        module: Arc<Module>,
        context: Arc<PluginContext>,
        sample: f64,
        concurrency: usize,
        metrics: Option<ShadowMetrics>,
    ) -> Self {
        Self {
            module,
            context,
            sample,
            slots: Arc::new(tokio::sync::Semaphore::new(concurrency)),
            reported: Mutex::default(),
            metrics,
        }
    }

    /// The shadow's module.
    #[must_use]
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    fn ran(&self, outcome: &str) {
        if let Some(metrics) = &self.metrics {
            metrics.ran(outcome);
        }
    }

    /// Whether this reconcile is shadowed: sampled in, and a slot free.
    pub fn admit(&self) -> Option<Admitted> {
        let sampled = self.sample >= 1.0 || rand::random::<f64>() < self.sample;
        let slot = sampled
            .then(|| Arc::clone(&self.slots).try_acquire_owned().ok())
            .flatten();
        if slot.is_none() {
            self.ran("skipped");
        }
        slot.map(|slot| Admitted {
            slot,
            tape: Tape::primary(),
        })
    }

    /// Runs the shadow on `request` after the primary answered `primary`, and reports the
    /// differences.
    pub async fn run(
        self: Arc<Self>,
        admitted: Admitted,
        request: OwnedRequest,
        primary: Option<Answer>,
    ) {
        let _slot = admitted.slot;
        let Some(primary_writes) = admitted.tape.lock().take() else {
            tracing::debug!(plugin = %self.context.name, "the primary made too many writes to compare");
            self.ran("failed");
            return;
        };
        let Some(primary) = primary else {
            // The primary trapped or overran a limit: nothing to compare with.
            self.ran("failed");
            return;
        };
        let primary_writes: Arc<[Write]> = primary_writes.into();
        let tape = Tape::shadow(Arc::clone(&primary_writes));
        let view = RequestView::of(&request.target, request.object.as_deref(), request.requeues);
        let result = invoke::reconcile(
            &self.module,
            &self.context,
            None,
            view,
            Some(Arc::clone(&tape)),
            &mut invoke::CallSession::default(),
        )
        .await;
        let key = match &request.target.namespace {
            Some(namespace) => format!("{namespace}/{}", request.target.name),
            None => request.target.name.clone(),
        };
        let (shadow, shadow_writes) = match (Answer::of(&result), tape.lock().take()) {
            (Some(answer), Some(writes)) => (answer, writes),
            (answer, _) => {
                let why = match &result {
                    Err(failure) if answer.is_none() => failure.to_string(),
                    _ => "it made more writes than are compared".to_owned(),
                };
                tracing::debug!(plugin = %self.context.name, %key, "shadow failed: {why}");
                self.ran("failed");
                return;
            }
        };
        let base = |target: &Target| self.cached(target);
        let differences = compare(
            &self.context.manifest.for_kind.kind,
            (&primary_writes, &primary),
            (&shadow_writes, &shadow),
            &base,
        );
        if differences.is_empty() {
            self.ran("same");
            return;
        }
        self.ran("different");
        if let Some(metrics) = &self.metrics {
            for difference in &differences {
                metrics.differs(&difference.kind, difference.verb);
            }
        }
        self.report(&key, &request.target, &differences).await;
    }

    /// The cached JSON of `target`, if the plugin caches its kind.
    fn cached(&self, target: &Target) -> Option<Value> {
        let store = self.context.caches.get(&target.kind)?;
        let key =
            crate::controller::ObjectKey::in_namespace(target.namespace.as_deref(), &target.name);
        let object = store.get(&key)?;
        serde_json::from_str(object.json()).ok()
    }

    /// Logs the differences and records them as an Event, the first time for `key`.
    async fn report(&self, key: &str, target: &ObjectRef, differences: &[Difference]) {
        {
            let mut reported = self.reported.lock();
            if reported.len() >= MAX_KEYS_REPORTED || !reported.insert(key.to_owned()) {
                return;
            }
        }
        let mut text = String::new();
        for (i, difference) in differences.iter().enumerate() {
            if i > 0 {
                text.push_str(" | ");
            }
            let _ = write!(text, "{}", difference.text);
        }
        let text = guest_text(&text, MAX_REPORT);
        tracing::warn!(plugin = %self.context.name, %key, shadow = %format_args!("{:.12}", self.module.digest()),
            differences = differences.len(), "the shadow differs from the primary: {text}");
        let event = crate::wasm::imports::event_call(
            &self.context.name,
            target,
            "Warning",
            "ShadowDiffers",
            &format!(
                "shadow module {:.12} differs from the primary: {text}",
                self.module.digest()
            ),
        );
        if let Err(error) = self.context.api.call(event).await {
            tracing::debug!(plugin = %self.context.name, %key, ?error, "cannot record the shadow's differences as an Event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> Target {
        Target {
            kind: KindRef::new("v1", "ConfigMap"),
            namespace: Some("default".to_owned()),
            name: name.to_owned(),
        }
    }

    fn merge(name: &str, patch: Value) -> Write {
        Write {
            call: ApiCall::Patch {
                target: target(name),
                body: PatchDoc::Merge(patch),
                subresource: None,
                field_manager: "p".to_owned(),
            },
            result: Ok(Some("{}".to_owned())),
        }
    }

    fn base(_: &Target) -> Option<Value> {
        Some(
            serde_json::json!({"metadata": {"name": "a", "resourceVersion": "7",
            "annotations": {"keep": "1"}}, "data": {"v": "1"}}),
        )
    }

    const DONE: Answer = Answer::Done;

    #[test]
    fn the_same_writes_and_answer_make_no_difference() {
        let writes = [merge(
            "a",
            serde_json::json!({"metadata": {"annotations": {"x": "1"}}}),
        )];
        assert!(compare("ConfigMap", (&writes, &DONE), (&writes, &DONE), &base).is_empty());
    }

    #[test]
    fn a_patch_changing_one_field_differently_names_exactly_that_field() {
        let primary = [merge(
            "a",
            serde_json::json!({"metadata": {"annotations": {"by": "a"}}}),
        )];
        let shadow = [merge(
            "a",
            serde_json::json!({"metadata": {"annotations": {"by": "b"}}}),
        )];
        let found = compare("ConfigMap", (&primary, &DONE), (&shadow, &DONE), &base);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].kind.as_str(), found[0].verb),
            ("ConfigMap", "patch")
        );
        assert_eq!(
            found[0].text,
            "patch v1/ConfigMap default/a: /metadata/annotations/by: primary \"a\", shadow \"b\""
        );
    }

    #[test]
    fn patches_compare_by_their_result_not_their_text() {
        // Two documents, one result: setting a field to what the object already holds.
        let primary = [merge("a", serde_json::json!({"data": {"v": "1"}}))];
        let shadow = [Write {
            call: ApiCall::Patch {
                target: target("a"),
                body: PatchDoc::Json(serde_json::json!([
                    {"op": "replace", "path": "/data/v", "value": "1"}
                ])),
                subresource: None,
                field_manager: "p".to_owned(),
            },
            result: Ok(None),
        }];
        assert!(compare("ConfigMap", (&primary, &DONE), (&shadow, &DONE), &base).is_empty());
    }

    #[test]
    fn a_write_on_one_side_only_and_a_differing_answer_are_differences() {
        let primary = [merge("a", serde_json::json!({"data": {"v": "2"}}))];
        let requeue = Answer::RequeueAfter(5000);
        let found = compare("ConfigMap", (&primary, &DONE), (&[], &requeue), &base);
        let verbs: Vec<_> = found.iter().map(|d| d.verb).collect();
        assert_eq!(verbs, ["action", "patch"]);
        assert_eq!(
            found[0].text,
            "answer: primary done, shadow requeue-after 5000ms"
        );
        assert!(
            found[1].text.ends_with("only the primary"),
            "{}",
            found[1].text
        );
    }

    #[test]
    fn events_and_server_set_fields_are_not_compared() {
        let create = |rv: &str, event: &str| {
            vec![
                Write {
                    call: ApiCall::Create {
                        target: target("c"),
                        object: serde_json::json!({"metadata": {"name": "c", "resourceVersion": rv}}),
                        field_manager: "p".to_owned(),
                    },
                    result: Ok(None),
                },
                Write {
                    call: ApiCall::Create {
                        target: Target {
                            kind: KindRef::new("events.k8s.io/v1", "Event"),
                            namespace: Some("default".to_owned()),
                            name: event.to_owned(),
                        },
                        object: serde_json::json!({}),
                        field_manager: "p".to_owned(),
                    },
                    result: Ok(None),
                },
            ]
        };
        let (a, b) = (create("1", "e.1"), create("2", "e.2"));
        assert!(compare("ConfigMap", (&a, &DONE), (&b, &DONE), &base).is_empty());
    }
}
