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

pub(crate) use events::{cached_identity, event_call};

use crate::runtime::KindRef;
use crate::wasm::api::Target;
use crate::wasm::bindings::{CallError, Kind, ObjectRef};
use crate::wasm::state::GuestState;

impl crate::wasm::bindings::kube::reconcile::types::Host for GuestState {}

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
