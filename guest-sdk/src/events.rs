//! Kubernetes Events about objects, as `kubectl describe` shows them: about objects of kinds the
//! plugin reads or has grants for, in namespaces its grants cover (or with a grant to create
//! `events.k8s.io/v1` Events).

use crate::bindings::kube::reconcile::types::ObjectRef;
use crate::error::{Context, Error};
use crate::host::events as host;

pub use crate::bindings::kube::reconcile::events::EventType;

/// Records an event about `regarding`. `reason` is a short UpperCamelCase word (`"Synced"`);
/// `note` a human-readable sentence (at most 1 KB is kept). The host sets the reporting
/// controller to the plugin's name and aggregates repeats.
///
/// # Errors
///
/// When the host cannot record the event.
pub fn record(
    regarding: &ObjectRef,
    event_type: EventType,
    reason: &str,
    note: &str,
) -> Result<(), Error> {
    host::record_event(regarding, event_type, reason, note)
        .with_context(|| format!("failed to record event {reason} about {regarding}"))
}
