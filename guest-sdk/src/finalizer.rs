//! Cleanup before an object goes away, modelled on kube-runtime's `finalizer`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::bindings::kube::reconcile::types::{Action, ObjectRef};
use crate::client;
use crate::error::{Context, Error};

/// Runs `cleanup` before `object` is deleted, by keeping the finalizer `finalizer_name` on it,
/// and `apply` the rest of the time.
///
/// `object` is the request's object: a `serde_json::Value`, a k8s-openapi type or a struct of
/// your own that serializes `apiVersion`, `kind` and `metadata` (`name`, `namespace`,
/// `resourceVersion`, `finalizers`, `deletionTimestamp`). A finalizer name is a qualified name
/// owned by your reconciler: `replicator.example.com/cleanup`.
///
/// ```no_run
/// # use reconcile_guest::prelude::*;
/// # fn reconcile(request: Request) -> Result<Action, Error> {
/// let Some(object) = request.object::<serde_json::Value>()? else {
///     return Ok(Action::done()); // gone: the finalizer already ran
/// };
/// finalizer(&object, "example.com/cleanup",
///     |object| { /* create or update what the object asks for */ Ok(Action::done()) },
///     |object| { /* delete what `apply` created outside the object */ Ok(Action::done()) },
/// )
/// # }
/// ```
///
/// # Flow
///
/// [`plan`] decides from the object's metadata alone:
///
/// 1. Not being deleted, finalizer present: `apply(object)`; its result is returned.
/// 2. Not being deleted, finalizer missing: the finalizer is added with a JSON patch and
///    `Action::done()` is returned; the update brings the next reconcile, which applies.
///    `apply` is never called on an object that lacks the finalizer, so nothing is created
///    that cleanup would not see.
/// 3. Being deleted (`metadata.deletionTimestamp` set), finalizer present: `cleanup(object)`;
///    if it succeeds, the finalizer is removed with a JSON patch and cleanup's action is
///    returned. The API server deletes the object once no finalizers remain.
/// 4. Being deleted, finalizer already removed: nothing to do; `Action::done()`.
///
/// # Guarantees
///
/// - Cleanup runs before the object is deleted, and at least once: an object carrying the
///   finalizer is not removed by the API server until cleanup has succeeded. Cleanup may run
///   more than once (the finalizer removal can fail after it succeeded), so it must be
///   idempotent: deleting something already deleted is success (see [`client::delete`]).
/// - Both patches are optimistic: they start with a `test` of the finalizers list as it was
///   read (or, when the object has no list, of its `metadata.resourceVersion`), so finalizers
///   other controllers added or removed meanwhile are never overwritten. Because the cached
///   object may be a moment behind, a failed test is expected now and then; the retry reads a
///   newer object.
/// - An object that is gone (`request.object()` is `None`) has nothing left to clean up:
///   deletion waited for cleanup.
///
/// # Errors
///
/// - The error of `apply` or `cleanup`, unchanged or with context naming the finalizer; the key
///   is retried with backoff and the finalizer stays until cleanup succeeds.
/// - A failed patch (a failed `test` answers 422, a missing grant is denied): adding the
///   finalizer needs verb `patch` on the kind, and so does removing it. Removing it from an
///   object that is already gone (404) is success.
/// - An object that does not serialize, or lacks `apiVersion`, `kind` or `metadata.name`.
pub fn finalizer<K: Serialize>(
    object: &K,
    finalizer_name: &str,
    apply: impl FnOnce(&K) -> Result<Action, Error>,
    cleanup: impl FnOnce(&K) -> Result<Action, Error>,
) -> Result<Action, Error> {
    let value = serde_json::to_value(object)
        .context("failed to serialize the object to read its finalizers")?;
    match plan(&value, finalizer_name) {
        Step::Apply => apply(object),
        Step::AddFinalizer { patch } => {
            let target = ObjectRef::from_value(&value)?;
            client::json_patch(&target, &patch)
                .with_context(|| format!("failed to add finalizer `{finalizer_name}`"))?;
            Ok(Action::done())
        }
        Step::Cleanup { patch } => {
            let target = ObjectRef::from_value(&value)?;
            let action = cleanup(object)
                .with_context(|| format!("cleanup for finalizer `{finalizer_name}` failed"))?;
            match client::json_patch(&target, &patch) {
                Ok(_) => Ok(action),
                Err(error) if error.is_not_found() => Ok(action),
                Err(error) => {
                    Err(error.context(format!("failed to remove finalizer `{finalizer_name}`")))
                }
            }
        }
        Step::Nothing => Ok(Action::done()),
    }
}

/// What [`finalizer()`] does with an object, as decided by [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Not being deleted and carries the finalizer: run `apply`.
    Apply,
    /// Not being deleted and lacks the finalizer: add it with this JSON patch, and wait for the
    /// update.
    AddFinalizer {
        /// The JSON patch (RFC 6902) that adds the finalizer, guarded by a `test`.
        patch: Value,
    },
    /// Being deleted and carries the finalizer: run `cleanup`, then remove the finalizer with
    /// this JSON patch.
    Cleanup {
        /// The JSON patch (RFC 6902) that removes the finalizer, guarded by a `test`.
        patch: Value,
    },
    /// Being deleted and the finalizer is gone already: nothing to do.
    Nothing,
}

/// Decides what [`finalizer()`] does with `object` (in JSON form) and builds the patch it sends,
/// without calling the host.
#[must_use]
pub fn plan(object: &Value, finalizer_name: &str) -> Step {
    let metadata = object.get("metadata");
    let deleting = metadata
        .and_then(|metadata| metadata.get("deletionTimestamp"))
        .is_some_and(|timestamp| !timestamp.is_null());
    let finalizers = metadata
        .and_then(|metadata| metadata.get("finalizers"))
        .filter(|finalizers| !finalizers.is_null());
    let position = finalizers
        .and_then(Value::as_array)
        .and_then(|list| list.iter().position(|f| f.as_str() == Some(finalizer_name)));

    match (deleting, position) {
        (false, Some(_)) => Step::Apply,
        (true, None) => Step::Nothing,
        (true, Some(index)) => Step::Cleanup {
            patch: json!([
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
            ]),
        },
        (false, None) => {
            let patch = if let Some(finalizers) = finalizers {
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer_name},
                ])
            } else {
                // RFC 6902 cannot test that a member is absent (Kubernetes' null-equals-missing
                // leniency is not universal), so the guard is the version the object was read at.
                let add = json!({
                    "op": "add", "path": "/metadata/finalizers", "value": [finalizer_name]
                });
                match metadata.and_then(|metadata| metadata.get("resourceVersion")) {
                    Some(version) => json!([
                        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                        add,
                    ]),
                    None => json!([add]),
                }
            };
            Step::AddFinalizer { patch }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "example.com/cleanup";

    fn object(metadata: Value) -> Value {
        let mut metadata = metadata;
        metadata["name"] = json!("web");
        metadata["namespace"] = json!("default");
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    }

    #[test]
    fn live_object_with_the_finalizer_is_applied() {
        let step = plan(&object(json!({"finalizers": ["other", NAME]})), NAME);
        assert_eq!(step, Step::Apply);
    }

    #[test]
    fn live_object_without_finalizers_gets_one_guarded_by_its_version() {
        let step = plan(&object(json!({"resourceVersion": "42"})), NAME);
        assert_eq!(
            step,
            Step::AddFinalizer {
                patch: json!([
                    {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                    {"op": "add", "path": "/metadata/finalizers", "value": [NAME]},
                ])
            }
        );
    }

    #[test]
    fn live_object_with_other_finalizers_gets_ours_appended_guarded_by_the_list() {
        let step = plan(
            &object(json!({"resourceVersion": "42", "finalizers": ["other"]})),
            NAME,
        );
        assert_eq!(
            step,
            Step::AddFinalizer {
                patch: json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": NAME},
                ])
            }
        );
    }

    #[test]
    fn object_without_a_version_gets_the_finalizer_unguarded() {
        let step = plan(&object(json!({"finalizers": null})), NAME);
        assert_eq!(
            step,
            Step::AddFinalizer {
                patch: json!([{"op": "add", "path": "/metadata/finalizers", "value": [NAME]}])
            }
        );
    }

    #[test]
    fn deleting_object_with_the_finalizer_is_cleaned_up_then_the_finalizer_removed() {
        let step = plan(
            &object(json!({
                "deletionTimestamp": "2025-01-01T00:00:00Z",
                "finalizers": ["first", NAME, "last"],
            })),
            NAME,
        );
        assert_eq!(
            step,
            Step::Cleanup {
                patch: json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": ["first", NAME, "last"]},
                    {"op": "remove", "path": "/metadata/finalizers/1"},
                ])
            }
        );
    }

    #[test]
    fn deleting_object_without_the_finalizer_needs_nothing() {
        let deleting =
            json!({"deletionTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["other"]});
        assert_eq!(plan(&object(deleting), NAME), Step::Nothing);
        let deleting = json!({"deletionTimestamp": "2025-01-01T00:00:00Z"});
        assert_eq!(plan(&object(deleting), NAME), Step::Nothing);
    }

    #[test]
    fn null_deletion_timestamp_is_not_deleting() {
        let step = plan(
            &object(json!({"deletionTimestamp": null, "finalizers": [NAME]})),
            NAME,
        );
        assert_eq!(step, Step::Apply);
    }

    #[test]
    fn apply_runs_without_calling_the_host_when_the_finalizer_is_present() {
        let object = object(json!({"finalizers": [NAME]}));
        let action = finalizer(
            &object,
            NAME,
            |_| Ok(Action::requeue()),
            |_| Err(Error::msg("cleanup must not run")),
        )
        .unwrap();
        assert_eq!(action, Action::Requeue);
    }

    #[test]
    fn deleted_object_without_the_finalizer_runs_neither_closure() {
        let object = object(json!({"deletionTimestamp": "2025-01-01T00:00:00Z"}));
        let action = finalizer(
            &object,
            NAME,
            |_| Err(Error::msg("apply must not run")),
            |_| Err(Error::msg("cleanup must not run")),
        )
        .unwrap();
        assert_eq!(action, Action::Done);
    }

    #[test]
    fn failed_cleanup_keeps_the_finalizer_and_names_it() {
        let object = object(json!({
            "deletionTimestamp": "2025-01-01T00:00:00Z",
            "finalizers": [NAME],
        }));
        let error = finalizer(
            &object,
            NAME,
            |_| Ok(Action::done()),
            |_| Err(Error::msg("copies remain")),
        )
        .unwrap_err();
        assert_eq!(
            format!("{error:#}"),
            "cleanup for finalizer `example.com/cleanup` failed: copies remain"
        );
    }
}
