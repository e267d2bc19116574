//! Writes to, and live reads from, the API server through the host.
//!
//! Every call is checked against the grants of the plugin's manifest (kind × verb × namespace)
//! before it reaches the API server; a call outside them fails with
//! [`CallError::Denied`] ([`Error::is_denied`]). Server-side apply
//! uses the plugin's name as field manager.
//!
//! Objects are any `Serialize` value with `apiVersion`, `kind` and `metadata` (`name`, and
//! `namespace` for namespaced kinds): a k8s-openapi type, a struct of your own or a
//! `serde_json::json!` value.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::kube::reconcile::client::PatchBody;
use crate::bindings::kube::reconcile::types::{CallError, ObjectRef};
use crate::error::{Context, Error};
use crate::host::client as host;

/// Server-side applies `object` with `force` (taking over fields other managers own, as
/// controllers usually do) and returns the object as stored, parsed as the same type.
///
/// Needs verb `patch` on the object's kind in the grants.
///
/// # Errors
///
/// When `object` does not serialize, the call is denied or fails, or the stored object does not
/// parse as `T`.
pub fn apply<T: Serialize + DeserializeOwned>(object: &T) -> Result<T, Error> {
    apply_to(object, None)
}

/// Server-side applies the status of `object` (its `status` subresource) and returns the object
/// as stored.
///
/// Needs verb `patch` with `subresources: [status]` in the grants.
///
/// # Errors
///
/// As [`apply`].
pub fn apply_status<T: Serialize + DeserializeOwned>(object: &T) -> Result<T, Error> {
    apply_to(object, Some("status"))
}

/// Server-side applies `object` as [`apply`] does, only if the object is still at
/// `resource_version`: the API server refuses the write with code 409 ([`Error::is_conflict`])
/// when anyone wrote the object since. Pass the version the reconcile read it at (the cached
/// object's `metadata.resourceVersion`), so a write made from a stale read, or one that left a
/// replica after another had taken its work over, changes nothing.
///
/// Needs verb `patch` on the object's kind in the grants.
///
/// # Errors
///
/// As [`apply`]; 409 when the object changed since `resource_version`.
pub fn apply_at_version<T: Serialize + DeserializeOwned>(
    object: &T,
    resource_version: &str,
) -> Result<T, Error> {
    let mut value =
        serde_json::to_value(object).context("failed to serialize the object to apply")?;
    at_version(&mut value, resource_version)?;
    apply_to(&value, None)
}

/// Applies a JSON merge patch as [`merge_patch`] does, only if the object is still at
/// `resource_version` (409 otherwise, see [`apply_at_version`]).
///
/// # Errors
///
/// When `patch` is not a JSON object, the call is denied or fails; 409 when the object changed
/// since `resource_version`.
pub fn merge_patch_at_version(
    target: &ObjectRef,
    patch: &Value,
    resource_version: &str,
) -> Result<Value, Error> {
    let mut patch = patch.clone();
    at_version(&mut patch, resource_version)?;
    patch_with(target, PatchBody::Merge(patch.to_string()), None)
}

/// Sets `metadata.resourceVersion` of `document` (an object to apply or a merge patch): the API
/// server takes it as a precondition.
fn at_version(document: &mut Value, resource_version: &str) -> Result<(), Error> {
    if resource_version.is_empty() {
        return Err(Error::msg(
            "an empty resourceVersion is no precondition; pass the metadata.resourceVersion of \
             the object as the reconcile read it",
        ));
    }
    let Some(fields) = document.as_object_mut() else {
        return Err(Error::msg(
            "a write with a resourceVersion precondition needs a JSON object (an object to apply \
             or a merge patch), not an array or a scalar",
        ));
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(Error::msg("metadata must be a JSON object"));
    };
    metadata.insert(
        "resourceVersion".to_owned(),
        Value::String(resource_version.to_owned()),
    );
    Ok(())
}

fn apply_to<T: Serialize, U: DeserializeOwned>(
    object: &T,
    subresource: Option<&str>,
) -> Result<U, Error> {
    let json = serde_json::to_string(object).context("failed to serialize the object to apply")?;
    let stored = host::apply(&json, true, subresource).map_err(|error| {
        let what = if subresource.is_some() {
            "apply the status of"
        } else {
            "apply"
        };
        in_context(error, what, &json)
    })?;
    parse(&stored)
}

/// Applies a JSON merge patch (RFC 7386) to the object `target`; returns the object as stored.
///
/// # Errors
///
/// When the call is denied or fails.
pub fn merge_patch(target: &ObjectRef, patch: &Value) -> Result<Value, Error> {
    patch_with(target, PatchBody::Merge(patch.to_string()), None)
}

/// Applies a JSON merge patch to the status subresource of `target`:
/// `patch_status(&target, &json!({"status": {"ready": true}}))`. Returns the object as stored.
///
/// Needs verb `patch` with `subresources: [status]` in the grants.
///
/// # Errors
///
/// When the call is denied or fails.
pub fn patch_status(target: &ObjectRef, patch: &Value) -> Result<Value, Error> {
    patch_with(target, PatchBody::Merge(patch.to_string()), Some("status"))
}

/// Applies a JSON patch (RFC 6902, an array of operations) to the object `target`; returns the
/// object as stored. A failed `test` operation makes the whole patch fail (code 422), which is
/// how optimistic updates are written.
///
/// # Errors
///
/// When the call is denied or fails.
pub fn json_patch(target: &ObjectRef, patch: &Value) -> Result<Value, Error> {
    patch_with(target, PatchBody::Json(patch.to_string()), None)
}

/// Applies a strategic merge patch (built-in kinds only) to the object `target`; returns the
/// object as stored.
///
/// # Errors
///
/// When the call is denied or fails.
pub fn strategic_patch(target: &ObjectRef, patch: &Value) -> Result<Value, Error> {
    patch_with(target, PatchBody::Strategic(patch.to_string()), None)
}

fn patch_with(
    target: &ObjectRef,
    body: PatchBody,
    subresource: Option<&str>,
) -> Result<Value, Error> {
    let stored = host::patch(target, &body, subresource).map_err(|error| {
        let what = if subresource.is_some() {
            "patch the status of"
        } else {
            "patch"
        };
        Error::from(error).context(format!("failed to {what} {target}"))
    })?;
    parse(&stored)
}

/// Creates `object`; returns it as stored. An object that exists already fails with code 409
/// ([`Error::is_conflict`]).
///
/// # Errors
///
/// When the call is denied or fails.
pub fn create<T: Serialize + DeserializeOwned>(object: &T) -> Result<T, Error> {
    let json = serde_json::to_string(object).context("failed to serialize the object to create")?;
    let stored = host::create(&json).map_err(|error| in_context(error, "create", &json))?;
    parse(&stored)
}

/// Replaces the object with `object`, which must carry the `metadata.resourceVersion` it was
/// read at (optimistic concurrency: code 409 if it changed since). Returns it as stored.
///
/// # Errors
///
/// When the call is denied or fails.
pub fn replace<T: Serialize + DeserializeOwned>(object: &T) -> Result<T, Error> {
    let json =
        serde_json::to_string(object).context("failed to serialize the object to replace")?;
    let stored = host::replace(&json).map_err(|error| in_context(error, "replace", &json))?;
    parse(&stored)
}

/// Deletes the object `target` (owned objects are garbage collected). Returns `true` if this
/// call deleted it (or started its deletion), `false` if it was already gone.
///
/// # Errors
///
/// When the call is denied or fails for another reason than 404.
pub fn delete(target: &ObjectRef) -> Result<bool, Error> {
    match host::delete(target) {
        Ok(()) => Ok(true),
        Err(CallError::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(Error::from(error).context(format!("failed to delete {target}"))),
    }
}

/// Reads the object `target` from the API server (not the cache); `None` if it does not exist.
///
/// # Errors
///
/// When the call is denied or fails, or the object does not parse as `T`.
pub fn get<T: DeserializeOwned>(target: &ObjectRef) -> Result<Option<T>, Error> {
    let json = host::get(target).with_context(|| format!("failed to get {target}"))?;
    json.as_deref()
        .map(serde_json::from_str)
        .transpose()
        .with_context(|| format!("{target} does not parse as {}", std::any::type_name::<T>()))
}

/// Parses an object the host returned.
fn parse<T: DeserializeOwned>(stored: &str) -> Result<T, Error> {
    serde_json::from_str(stored).with_context(|| {
        format!(
            "the object the API server stored does not parse as {}",
            std::any::type_name::<T>()
        )
    })
}

/// Wraps a failed call about the object in `json` in context naming the object.
fn in_context(error: CallError, what: &str, json: &str) -> Error {
    let error = Error::from(error);
    match ObjectRef::from_json(json) {
        Ok(target) => error.context(format!("failed to {what} {target}")),
        Err(_) => error.context(format!("failed to {what} an object")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_precondition_sets_the_resource_version_of_an_object_or_a_merge_patch() {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "v"}});
        at_version(&mut object, "42").expect("an object");
        assert_eq!(object["metadata"]["resourceVersion"], "42");
        assert_eq!(object["data"]["k"], "v");
        let mut patch = json!({"data": {"k": "w"}});
        at_version(&mut patch, "7").expect("a merge patch");
        assert_eq!(
            patch,
            json!({"data": {"k": "w"}, "metadata": {"resourceVersion": "7"}})
        );
        for mut refused in [
            json!([{"op": "add"}]),
            json!("text"),
            json!({"metadata": 3}),
        ] {
            assert!(at_version(&mut refused, "7").is_err(), "{refused}");
        }
        assert!(at_version(&mut json!({}), "").is_err(), "an empty version");
    }
}
