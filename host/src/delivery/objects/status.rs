//! The status a `ReconcilerPlugin` object should have: its generation, resolved digests (the
//! module's, a shadow's, a canary's), the conditions `Fetched`, `Compiled`, `GrantsValid`,
//! `Ready` and `Degraded` with their transition times kept while unchanged (a first fetch still
//! running shows as `Fetched` `Unknown`: `Fetching`, then slow; `Degraded` is `True` while a
//! previous version serves, or while the plugin's reconciles keep failing), and the merge patch
//! that writes it.

use std::time::Duration;

use k8s_openapi::jiff::{Timestamp, Unit};
use serde_json::json;

use super::fetch::{Source, Step};
use super::fetched::{FETCH_TIMEOUT, Fetched, Module, SLOW_AFTER};
use crate::delivery::supervisor::{FailureStage, SourceState};
use crate::manifest::{PluginCondition, ReconcilerPluginStatus};

/// The `Degraded` reason of a plugin whose reconciles keep failing (see
/// [`crate::delivery::health`]).
pub(super) const REASON_RECONCILES_FAILING: &str = "ReconcilesFailing";

/// What is known of an object's module for its current generation.
pub(super) enum Fetch<'a> {
    /// The last fetch's answer.
    Answered(&'a Fetched),
    /// No answer yet: the generation's first fetch has run for `waited`, on `step`.
    Running {
        generation: Option<i64>,
        waited: Duration,
        step: Step,
    },
}

/// Why there is no module for this generation: a failed fetch, or one still running.
struct Pending {
    /// `False` (failed) or `Unknown` (running).
    status: &'static str,
    reason: &'static str,
    message: String,
    /// A failure, or a fetch running longer than [`SLOW_AFTER`].
    degrades: bool,
}

/// Why a first fetch has no answer yet, in the `Fetched` condition's words.
fn running(waited: Duration, step: &Step) -> Pending {
    let source = step.source.as_ref();
    let what = &step.what;
    if waited < SLOW_AFTER {
        let message = match source {
            Some(source) => format!("fetching {what} from {source}"),
            None => "fetching the module".to_owned(),
        };
        return Pending {
            status: "Unknown",
            reason: "Fetching",
            message,
            degrades: false,
        };
    }
    let reason = match source {
        Some(Source::ApiServer) => "ApiServerSlow",
        _ => "RegistrySlow",
    };
    let source = source.map_or_else(|| "the module's source".to_owned(), ToString::to_string);
    Pending {
        status: "Unknown",
        reason,
        message: format!(
            "{source} has not answered the fetch of {what} for {} s; fetches from other sources \
             are not held up, what serves keeps serving, and this fetch gives up after {} s \
             (then it is tried again); check that {source} answers",
            waited.as_secs(),
            FETCH_TIMEOUT.as_secs()
        ),
        degrades: true,
    }
}

/// The status an object should have, keeping each condition's transition time while its
/// status stays the same.
pub(super) fn status(
    fetch: &Fetch<'_>,
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
    let (generation, module, pending): (_, Option<&Module>, _) = match fetch {
        Fetch::Answered(fetched) => match &fetched.result {
            Ok(module) => (fetched.generation, Some(module), None),
            Err(error) => (
                fetched.generation,
                None,
                Some(Pending {
                    status: "False",
                    reason: error.reason(),
                    message: error.to_string(),
                    degrades: true,
                }),
            ),
        },
        Fetch::Running {
            generation,
            waited,
            step,
        } => (*generation, None, Some(running(*waited, step))),
    };
    // This spec's module and manifest both serve (a spec change alone is not served until the
    // supervisor has applied the new manifest).
    let serving_this = module.is_some_and(|m| {
        state.serving.as_deref() == Some(&m.content)
            && state.serving_manifest.as_deref() == Some(&m.manifest)
    });
    match (module, &pending) {
        (Some(module), _) => condition(
            "Fetched",
            "True",
            "Fetched",
            format!("module {}", module.resolved),
        ),
        (None, Some(p)) => condition("Fetched", p.status, p.reason, p.message.clone()),
        (None, None) => {}
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
    let (ready, reason, message) = match (serving_this, failure, &pending) {
        (true, None, _) => ("True", "Serving", "the plugin's module serves".to_owned()),
        (_, Some(f), _) => ("False", "LoadFailed", f.message.clone()),
        (_, None, Some(p)) => ("False", p.reason, p.message.clone()),
        (false, None, None) => ("False", "Loading", "the module is being loaded".to_owned()),
    };
    condition("Ready", ready, reason, message);
    let other_serves = state.serving.is_some() && !serving_this;
    // A fetch of a few seconds is no degradation; a slow or failed one is.
    let fetch_degrades = pending.as_ref().is_some_and(|p| p.degrades);
    let failing = state.reconciles.as_ref();
    if other_serves && (failure.is_some() || fetch_degrades) {
        let mut message = format!(
            "module sha256:{} keeps serving",
            state.serving.as_deref().unwrap_or_default()
        );
        if let Some(failing) = failing {
            message.push_str("; and its reconciles keep failing: ");
            message.push_str(&failing.message);
        }
        condition("Degraded", "True", "PreviousVersionServes", message);
    } else if let Some(failing) = failing {
        condition(
            "Degraded",
            "True",
            REASON_RECONCILES_FAILING,
            failing.message.clone(),
        );
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
                observed_generation: generation,
            }
        })
        .collect();
    ReconcilerPluginStatus {
        observed_generation: generation,
        resolved_digest: module.map(|m| m.resolved.clone()),
        shadow_digest: module.and_then(|m| m.shadow.clone()),
        canary_digest: module.and_then(|m| m.canary.clone()),
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
        for field in ["resolvedDigest", "shadowDigest", "canaryDigest"] {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
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
