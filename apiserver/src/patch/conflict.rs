//! Why a server-side apply is refused: field conflicts with other managers and bad requests.

use serde_json::{Value, json};

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The owning manager's name.
    pub manager: String,
    /// The owning entry's operation, `Apply` or `Update`.
    pub operation: String,
    /// The owning entry's `apiVersion`.
    pub api_version: String,
    /// The owning entry's `time`, if it has one.
    pub time: Option<String>,
    /// The field, as Kubernetes prints it: `.spec.replicas`,
    /// `.spec.containers[name="web"].image`.
    pub field: String,
}

impl FieldConflict {
    /// The manager as Kubernetes describes it in conflict messages: `"kubectl"` for an `Apply`
    /// entry, `"kubectl-edit" using apps/v1` for an `Update` entry.
    pub fn manager_description(&self) -> String {
        let name = format!("{:?}", self.manager);
        if self.operation != "Update" {
            return name;
        }
        // A real 1.36 server names the apiVersion but not the time of the entry.
        format!("{name} using {}", self.api_version)
    }

    /// The `metav1.StatusCause` for this conflict, for the 409 Status's `details.causes`:
    /// `{"reason": "FieldManagerConflict", "message": "conflict with \"m\"", "field": ".spec.x"}`.
    pub fn status_cause(&self) -> Value {
        json!({
            "reason": "FieldManagerConflict",
            "message": format!("conflict with {}", self.manager_description()),
            "field": self.field,
        })
    }
}

/// The Status message Kubernetes gives an apply conflict.
pub(super) fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description(),
            only.field
        );
    }
    let mut managers: Vec<String> = conflicts.iter().map(|c| c.manager_description()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in &managers {
        lines.push(format!("conflicts with {manager}:"));
        for conflict in conflicts
            .iter()
            .filter(|c| &c.manager_description() == manager)
        {
            lines.push(format!("- {}", conflict.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Why a server-side apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The `fieldManager` query parameter is missing or empty; apply requires it.
    #[error("fieldManager is required for apply requests: pass ?fieldManager=<name>")]
    MissingFieldManager,
    /// The applied configuration is not a JSON object.
    #[error("the applied configuration must be an object")]
    NotAnObject,
    /// The applied configuration lacks `apiVersion` or `kind`, or they differ from the endpoint.
    #[error(
        "the applied configuration has apiVersion {found_api_version:?} and kind {found_kind:?}, \
         but this endpoint serves {api_version} {kind}"
    )]
    TypeMismatch {
        /// The endpoint's `apiVersion`.
        api_version: String,
        /// The endpoint's `kind`.
        kind: String,
        /// The configuration's `apiVersion` (empty when missing).
        found_api_version: String,
        /// The configuration's `kind` (empty when missing).
        found_kind: String,
    },
    /// An element of a keyed list lacks a key field, or two elements have the same key.
    #[error("invalid applied configuration at `{path}`: {reason}")]
    InvalidList {
        /// Dotted path of the list, e.g. `spec.containers`.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Fields the apply would change are owned by other managers and `force` is not set.
    /// Answer `409 Conflict` with one `FieldManagerConflict` cause per entry.
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Each conflicting field with its owner: entry by entry, each in path order.
        conflicts: Vec<FieldConflict>,
    },
}

impl ApplyError {
    /// The HTTP status code a Kubernetes API server answers this error with: 409 for
    /// [`ApplyError::Conflict`], 400 otherwise.
    pub fn status_code(&self) -> u16 {
        match self {
            ApplyError::Conflict { .. } => 409,
            _ => 400,
        }
    }
}
