//! Why a JSON patch, merge patch or strategic merge patch could not be applied, with the HTTP
//! status a real API server answers.

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
