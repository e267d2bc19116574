//! The status a `ReconcilerPlugin` object should have: its generation, resolved digest, the
//! conditions `Fetched`, `Compiled`, `GrantsValid`, `Ready` and `Degraded` with their transition
//! times kept while unchanged, and the merge patch that writes it.

use k8s_openapi::jiff::{Timestamp, Unit};
use serde_json::json;

use super::fetched::Fetched;
use crate::delivery::supervisor::{FailureStage, SourceState};
use crate::manifest::{PluginCondition, ReconcilerPluginStatus};

/// The status an object should have, keeping each condition's transition time while its
/// status stays the same.
pub(super) fn status(
    fetch: &Fetched,
    state: &SourceState,
    old: &ReconcilerPluginStatus,
    identity: &str,
) -> ReconcilerPluginStatus {
    let mut conditions = Vec::new();
    let mut condition = |type_: &str, status: &str, reason: &str, message: String| {
        conditions.push((
            type_.to_owned(),
            status.to_owned(),
            reason.to_owned(),
            message,
        ));
    };
    let failure = state.failure.as_ref();
    let failed = |stage: FailureStage| failure.filter(|f| f.stage == stage);
    let module = fetch.result.as_ref().ok();
    // This spec's module and manifest both serve (a spec change alone is not served until the
    // supervisor has applied the new manifest).
    let serving_this = module.is_some_and(|m| {
        state.serving.as_deref() == Some(&m.content)
            && state.serving_manifest.as_deref() == Some(&m.manifest)
    });
    match &fetch.result {
        Ok(module) => condition(
            "Fetched",
            "True",
            "Fetched",
            format!("module {}", module.resolved),
        ),
        Err(error) => condition("Fetched", "False", error.reason(), error.to_string()),
    }
    if let Some(f) = failed(FailureStage::Manifest) {
        condition("GrantsValid", "False", "InvalidManifest", f.message.clone());
    } else if module.is_some() {
        condition("GrantsValid", "True", "Valid", String::new());
    } else {
        condition("GrantsValid", "Unknown", "NotFetched", String::new());
    }
    if let Some(f) = failed(FailureStage::Module) {
        condition("Compiled", "False", "ModuleRefused", f.message.clone());
    } else if serving_this {
        condition("Compiled", "True", "Compiled", String::new());
    } else {
        condition("Compiled", "Unknown", "Pending", String::new());
    }
    let (ready, reason, message) = match (serving_this, failure, &fetch.result) {
        (true, None, _) => ("True", "Serving", "the plugin's module serves".to_owned()),
        (_, Some(f), _) => ("False", "LoadFailed", f.message.clone()),
        (_, None, Err(error)) => ("False", error.reason(), error.to_string()),
        (false, None, Ok(_)) => ("False", "Loading", "the module is being loaded".to_owned()),
    };
    condition("Ready", ready, reason, message);
    let other_serves = state.serving.is_some() && !serving_this;
    if other_serves && (failure.is_some() || fetch.result.is_err()) {
        let message = format!(
            "module sha256:{} keeps serving",
            state.serving.as_deref().unwrap_or_default()
        );
        condition("Degraded", "True", "PreviousVersionServes", message);
    } else {
        condition("Degraded", "False", "AsDeclared", String::new());
    }
    let now = Timestamp::now()
        .round(Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string());
    let conditions = conditions
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let kept = (old.conditions.iter())
                .find(|c| c.type_ == type_ && c.status == status)
                .map(|c| c.last_transition_time.clone());
            PluginCondition {
                type_,
                status,
                reason,
                message: bounded(message),
                last_transition_time: kept.unwrap_or_else(|| now.clone()),
                observed_generation: fetch.generation,
            }
        })
        .collect();
    ReconcilerPluginStatus {
        observed_generation: fetch.generation,
        resolved_digest: module.map(|m| m.resolved.clone()),
        conditions,
        replicas: if state.serving.is_some() {
            vec![identity.to_owned()]
        } else {
            Vec::new()
        },
    }
}

/// The merge patch that makes an object's status `status`: a field `status` leaves empty is
/// written as null (or an empty list), so what an earlier status said there (a digest resolved
/// for an earlier spec, replicas that served) does not stay behind.
pub(super) fn status_patch(status: &ReconcilerPluginStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        fields
            .entry("observedGeneration")
            .or_insert(serde_json::Value::Null);
        fields
            .entry("resolvedDigest")
            .or_insert(serde_json::Value::Null);
        fields.entry("conditions").or_insert(json!([]));
        fields.entry("replicas").or_insert(json!([]));
    }
    json!({ "status": value })
}

/// The longest condition message written (an error chain can be long; the log has it whole).
const MESSAGE_MAX: usize = 2048;

/// `message` cut to [`MESSAGE_MAX`] bytes at a character boundary, marked when cut.
pub(super) fn bounded(mut message: String) -> String {
    if message.len() > MESSAGE_MAX {
        let mut end = MESSAGE_MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" …");
    }
    message
}
