//! The bundle format (`reconcile-host.dev/recording/v1`), documented in `docs/recording.md`.
//! A bundle is one JSON document; readers refuse a `format` they do not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wasm::bindings::ObjectRef;

/// The format this host writes and reads.
pub const FORMAT: &str = "reconcile-host.dev/recording/v1";

/// One recorded reconcile.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bundle {
    /// [`FORMAT`].
    pub format: String,
    /// The plugin's name.
    pub plugin: String,
    /// The SHA-256 (hex) of the module that ran.
    pub module_digest: String,
    /// Where the host loaded that module from (a hint for `replay`; `--module` overrides it).
    pub module_path: String,
    /// What of the manifest a replay needs.
    pub manifest: RecordedManifest,
    /// When the call started (RFC 3339, UTC).
    pub recorded_at: String,
    /// Whether the call ran on a fresh instance. A reused instance carried state from earlier
    /// calls that the bundle does not hold, and its start-up reads are not recorded.
    pub fresh_instance: bool,
    /// The request.
    pub request: RecordedRequest,
    /// Every host import the guest called but `log`, in order.
    pub calls: Vec<HostCall>,
    /// `wasi:clocks/wall-clock.now` answers, nanoseconds since the Unix epoch, in order.
    pub wall_clock: Vec<u64>,
    /// `wasi:clocks/monotonic-clock.now` answers, nanoseconds, in order.
    pub monotonic_clock: Vec<u64>,
    /// The bytes `wasi:random/random` gave, in order, hex.
    pub random: String,
    /// The bytes `wasi:random/insecure` gave, in order, hex.
    pub insecure_random: String,
    /// The `wasi:random/insecure-seed` value (decimal), when the instance was fresh.
    pub insecure_seed: Option<String>,
    /// How the call ended.
    pub outcome: RecordedOutcome,
    /// Whether a bound stopped the recording before the call ended.
    pub truncated: bool,
    /// Whether Secret values were replaced by `redacted`.
    pub redacted: bool,
}

/// The manifest fields that shape a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedManifest {
    /// The `for` kind's apiVersion.
    pub api_version: String,
    /// The `for` kind.
    pub kind: String,
    /// `limits.deadline`, milliseconds.
    pub deadline_ms: u64,
    /// `limits.memory`, bytes.
    pub memory: u64,
    /// The guest's environment.
    pub env: Vec<(String, String)>,
}

/// The request of the call.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedRequest {
    /// The key's object reference.
    pub target: ObjectRef,
    /// The cached object, as the guest got it.
    pub object: Option<String>,
    /// The key's retry count.
    pub requeues: u32,
}

/// One host import call: `cache.get`, `cache.list`, `client.apply`, `client.patch`,
/// `client.create`, `client.replace`, `client.delete`, `client.get` or `events.record-event`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCall {
    /// `<interface>.<function>`.
    pub import: String,
    /// The arguments, by name.
    pub args: Value,
    /// The answer: `{"Ok": …}` or `{"Err": {"<Kind>": …}}`.
    pub result: Value,
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum RecordedOutcome {
    /// `done`.
    Done,
    /// `requeue`.
    Requeue,
    /// `requeue-after`.
    RequeueAfter {
        /// The delay asked for, milliseconds.
        #[serde(rename = "afterMs")]
        after_ms: u32,
    },
    /// The guest returned an error.
    Error {
        /// Its message (cut and escaped as the host logs it).
        message: String,
    },
    /// The guest trapped, overran its deadline or memory, or could not be instantiated.
    Failure {
        /// `trap`, `deadline`, `memory` or `instantiate`.
        reason: String,
    },
}

impl std::fmt::Display for RecordedOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done => f.write_str("done"),
            Self::Requeue => f.write_str("requeue"),
            Self::RequeueAfter { after_ms } => write!(f, "requeue-after {after_ms}ms"),
            Self::Error { message } => write!(f, "error {message:?}"),
            Self::Failure { reason } => write!(f, "failure ({reason})"),
        }
    }
}

impl RecordedOutcome {
    /// The outcome of a guest call's `result`.
    #[must_use]
    pub fn of(
        result: &Result<crate::wasm::GuestAction, crate::wasm::invoke::GuestFailure>,
    ) -> Self {
        use crate::wasm::GuestAction;
        use crate::wasm::invoke::GuestFailure;
        match result {
            Ok(GuestAction::Done) => Self::Done,
            Ok(GuestAction::Requeue) => Self::Requeue,
            Ok(GuestAction::RequeueAfter(after_ms)) => Self::RequeueAfter {
                after_ms: *after_ms,
            },
            Err(GuestFailure::Returned(message)) => Self::Error {
                message: message.clone(),
            },
            Err(failure) => Self::Failure {
                reason: failure.reason().to_owned(),
            },
        }
    }

    /// Whether the call failed (an error or a failure).
    #[must_use]
    pub fn failed(&self) -> bool {
        matches!(self, Self::Error { .. } | Self::Failure { .. })
    }
}

/// Lowercase hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        use std::fmt::Write as _;
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The bytes of lowercase or uppercase hex `text`; `None` if it is not hex.
#[must_use]
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
