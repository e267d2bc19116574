//! The patch algorithms of the API server: JSON merge patch, JSON patch, strategic merge patch and
//! server-side apply, as pure functions over `serde_json::Value`.
//!
//! | request `Content-Type`                   | function                    |
//! |------------------------------------------|-----------------------------|
//! | `application/merge-patch+json`           | [`merge_patch()`]           |
//! | `application/json-patch+json`            | [`json_patch()`]            |
//! | `application/strategic-merge-patch+json` | [`strategic_merge_patch()`] |
//! | `application/apply-patch+yaml`           | [`apply()`]                 |
//!
//! PUT and the three non-apply patch types record the fields they changed with
//! [`record_update`], so that a later [`apply()`] by another manager conflicts with them as it
//! would on a real API server.
//!
//! Nothing here touches storage, versions or HTTP: the caller decodes the body, loads the live
//! object, calls one of these functions and validates and stores the result.
//!
//! # Errors
//!
//! The three patch functions fail with [`PatchError`], whose [`PatchError::status_code`] is the
//! HTTP status a real API server answers: `400 BadRequest` for a malformed patch document,
//! `422 Invalid` for a well-formed one that cannot be applied (a failing JSON patch operation, a
//! list element without its merge key), `415 UnsupportedMediaType` for
//! [`PatchError::UnsupportedForKind`]. [`apply()`] fails with [`ApplyError`]:
//! [`ApplyError::Conflict`] is `409 Conflict` with `FieldManagerConflict` causes (see
//! [`FieldConflict::status_cause`]), everything else `400 BadRequest`
//! ([`ApplyError::status_code`]).

mod apply;
mod fields;
mod json;
mod merge;
mod ownership;
mod schema;
mod strategic;

pub use apply::{ApplyError, ApplyRequest, FieldConflict, apply, record_update};
pub use fields::FieldSet;
pub use json::json_patch;
pub use merge::{create_merge_patch, merge_patch};
pub use strategic::strategic_merge_patch;

/// Why a JSON patch, merge patch or strategic merge patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The JSON patch document is not an array of operations.
    #[error("a JSON patch must be an array of operations, got {found}")]
    JsonPatchNotAnArray {
        /// The JSON type found instead (`object`, `string`, ...).
        found: &'static str,
    },
    /// One JSON patch operation is malformed (unknown `op`, missing `path`, `value` or `from`,
    /// a pointer without a leading `/`).
    #[error("JSON patch operation {index} is malformed: {reason}")]
    InvalidJsonPatchOperation {
        /// Index of the operation in the patch array, from 0.
        index: usize,
        /// What is wrong with it, as the decoder reported it.
        reason: String,
    },
    /// A well-formed JSON patch operation could not be applied (a `test` that did not match, a
    /// path that does not exist, an array index out of bounds, ...). The target is unchanged.
    #[error("JSON patch operation {index} ({op} at path `{path}`) failed: {reason}")]
    JsonPatchFailed {
        /// Index of the failing operation in the patch array, from 0.
        index: usize,
        /// The operation name: `add`, `remove`, `replace`, `move`, `copy` or `test`.
        op: &'static str,
        /// The operation's `path`, a JSON pointer.
        path: String,
        /// Why it failed (`value did not match`, `path is invalid`, ...).
        reason: String,
    },
    /// A strategic merge patch must be a JSON object.
    #[error("a strategic merge patch must be a JSON object, got {found}")]
    PatchNotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// Strategic merge patch is only defined for kinds whose schema carries patch strategies,
    /// which custom resources lack; a real API server answers `415 UnsupportedMediaType`.
    /// Use a JSON merge patch or server-side apply for this kind instead.
    #[error(
        "strategic merge patch is not supported for {kind}.{api_version}: \
         use a JSON merge patch (application/merge-patch+json) or server-side apply instead"
    )]
    UnsupportedForKind {
        /// The `apiVersion` of the patched resource.
        api_version: String,
        /// The `kind` of the patched resource.
        kind: String,
    },
    /// An element of a list merged by key lacks that key.
    #[error("element of list `{path}` does not contain its merge key `{key}`")]
    MissingMergeKey {
        /// Dotted path of the list, e.g. `spec.containers`.
        path: String,
        /// The merge key, e.g. `name`.
        key: String,
    },
    /// A `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/…` or `$setElementOrder/…` directive
    /// has a value it cannot have, or is used where it is not allowed.
    #[error("invalid strategic merge patch directive `{directive}` at `{path}`: {reason}")]
    InvalidDirective {
        /// Dotted path of the map holding the directive (empty for the top level).
        path: String,
        /// The directive key, e.g. `$patch`.
        directive: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl PatchError {
    /// The HTTP status code a Kubernetes API server answers this error with: 400 for malformed
    /// patch documents, 422 (`reason: Invalid`) for patches that cannot be applied, 415 for
    /// [`PatchError::UnsupportedForKind`].
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::JsonPatchNotAnArray { .. }
            | PatchError::InvalidJsonPatchOperation { .. }
            | PatchError::PatchNotAnObject { .. }
            | PatchError::InvalidDirective { .. } => 400,
            PatchError::JsonPatchFailed { .. } | PatchError::MissingMergeKey { .. } => 422,
            PatchError::UnsupportedForKind { .. } => 415,
        }
    }
}

/// The JSON type name of a value, for error messages.
pub(crate) fn type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_errors_carry_the_status_code_kubernetes_answers() {
        let mut target = json!({"a": 1});
        let failed = json_patch(
            &mut target,
            &json!([{"op": "test", "path": "/a", "value": 2}]),
        );
        assert_eq!(failed.unwrap_err().status_code(), 422);
        let malformed = json_patch(&mut target, &json!({"op": "add"}));
        assert_eq!(malformed.unwrap_err().status_code(), 400);
        let custom = strategic_merge_patch(&mut target, &json!({}), "example.com/v1", "Widget");
        assert_eq!(custom.unwrap_err().status_code(), 415);
        let keyless = strategic_merge_patch(
            &mut target,
            &json!({"spec": {"containers": [{"image": "x"}]}}),
            "v1",
            "Pod",
        );
        assert_eq!(keyless.unwrap_err().status_code(), 422);
    }
}
