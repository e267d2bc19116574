//! A finished recording made a [`Bundle`]: the plugin, its module and manifest, the request
//! (redacted unless Secrets are kept), what the guest read, and how the call ended.

use serde_json::Value;

use super::bundle::hex;
use super::{
    Bundle, FORMAT, RecordedManifest, RecordedOutcome, RecordedRequest, Recording, redacted,
};
use crate::wasm::call::{CallSession, RequestView};
use crate::wasm::context::PluginContext;
use crate::wasm::module::Module;

/// A finished recording as a bundle: the call of `plugin`'s module `module` (loaded from
/// `module_path`) on `request`, started at `started_at`, that ended with `outcome`.
#[allow(clippy::too_many_arguments)]
#[must_use]
pub(crate) fn bundle(
    plugin: &PluginContext,
    module: &Module,
    module_path: &std::path::Path,
    request: &RequestView<'_>,
    call: &CallSession,
    recording: Recording,
    started_at: std::time::SystemTime,
    outcome: RecordedOutcome,
) -> Bundle {
    let manifest = &plugin.manifest;
    let object = request.object.map(|text| {
        if recording.redact {
            match redacted(Value::String(text.to_owned())) {
                Value::String(text) => text,
                _ => String::new(),
            }
        } else {
            text.to_owned()
        }
    });
    let since_epoch = started_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let micros = i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX);
    let recorded_at = k8s_openapi::jiff::Timestamp::from_microsecond(micros).unwrap_or_default();
    Bundle {
        format: FORMAT.to_owned(),
        plugin: plugin.name.to_string(),
        module_digest: module.digest().to_owned(),
        module_path: module_path.display().to_string(),
        manifest: RecordedManifest {
            api_version: manifest.for_kind.api_version.clone(),
            kind: manifest.for_kind.kind.clone(),
            deadline_ms: u64::try_from(manifest.limits.deadline.as_millis()).unwrap_or(u64::MAX),
            memory: manifest.limits.memory,
            env: manifest.env.clone(),
        },
        recorded_at: format!("{recorded_at:.6}"),
        fresh_instance: call.fresh,
        request: RecordedRequest {
            target: request.target_owned(),
            object,
            requeues: request.requeues,
        },
        calls: recording.calls,
        wall_clock: recording.wall,
        monotonic_clock: recording.monotonic,
        random: hex(&recording.random),
        insecure_random: hex(&recording.insecure_random),
        insecure_seed: call.fresh.then(|| call.seed.to_string()),
        outcome,
        truncated: recording.truncated,
        redacted: recording.redact,
    }
}
