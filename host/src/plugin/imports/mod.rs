//! The host side of the reconcile imports: `cache`, `client`, `events` and `log`, answered from
//! the plugin's context. Grants are checked here, before anything reaches the API server.

mod cache;
mod client;
mod events;
#[cfg(test)]
mod injection;
mod log;
#[cfg(test)]
mod tests;

use super::api::Target;
use super::bindings::{CallError, Kind, ObjectRef};
use super::state::GuestState;
use crate::runtime::KindRef;

impl super::bindings::kube::reconcile::types::Host for GuestState {}

fn kind_ref(kind: &Kind) -> KindRef {
    KindRef::new(&kind.api_version, &kind.kind)
}

fn target(object: &ObjectRef) -> Target {
    Target {
        kind: kind_ref(&object.kind),
        namespace: object.namespace.clone(),
        name: object.name.clone(),
    }
}

/// The kind, namespace and name written in an object's JSON.
///
/// # Errors
/// `invalid` when a field is missing or not a string.
pub(crate) fn target_of(object: &serde_json::Value) -> Result<Target, CallError> {
    let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
    let api_version = text("/apiVersion")
        .ok_or_else(|| CallError::Invalid("the object has no `apiVersion`".to_owned()))?;
    let kind =
        text("/kind").ok_or_else(|| CallError::Invalid("the object has no `kind`".to_owned()))?;
    let name = text("/metadata/name").unwrap_or_default();
    if name.is_empty() && text("/metadata/generateName").is_none() {
        return Err(CallError::Invalid(format!(
            "the {api_version}/{kind} has no `metadata.name`"
        )));
    }
    Ok(Target {
        kind: KindRef::new(api_version, kind),
        namespace: text("/metadata/namespace").map(str::to_owned),
        name: name.to_owned(),
    })
}

/// Parses an object the guest sent.
fn parse_object(text: &str) -> Result<serde_json::Value, CallError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| CallError::Invalid(format!("the object is not valid JSON: {error}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(CallError::Invalid(
            "the object must be a JSON object".to_owned(),
        ))
    }
}
