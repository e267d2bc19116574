//! A primary's and a shadow's calls compared: their writes as normalised intents, one per verb
//! and object (and subresource), and their answers.
//!
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

use std::collections::BTreeMap;

use serde_json::Value;

use crate::runtime::KindRef;
use crate::wasm::api::{ApiCall, PatchDoc, Target};
use crate::wasm::bindings;
use crate::wasm::invoke::GuestFailure;
use crate::wasm::tape::Write;

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
