//! What `reconcile` reports: the action, the error, and the calls recorded or refused.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::wasm::GuestAction;
use crate::wasm::api::{ApiCall, PatchDoc};

/// What `reconcile --output json` prints (the module documentation shows an example).
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// What the guest returned; `None` when it failed.
    pub action: Option<ActionRecord>,
    /// Why the guest failed, with the cause chain; `None` when it succeeded.
    pub error: Option<String>,
    /// The calls the grants allowed, in order (recorded, not applied).
    pub calls: Vec<CallRecord>,
    /// The `client` calls the grants refused, in order.
    pub denied: Vec<DeniedRecord>,
}

/// The action a guest returned: `{"type": "done"}`, `{"type": "requeue"}` or
/// `{"type": "requeue-after", "afterMs": 60000}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ActionRecord {
    /// Nothing until something changes.
    Done,
    /// Again after the key's backoff.
    Requeue,
    /// Again after a delay.
    RequeueAfter {
        /// The delay in milliseconds.
        #[serde(rename = "afterMs")]
        after_ms: u32,
    },
}

impl From<GuestAction> for ActionRecord {
    fn from(action: GuestAction) -> Self {
        match action {
            GuestAction::Done => Self::Done,
            GuestAction::Requeue => Self::Requeue,
            GuestAction::RequeueAfter(after_ms) => Self::RequeueAfter { after_ms },
        }
    }
}

/// One call a guest made. Every field is always present (`null` when it does not apply).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// The `client` function: `apply`, `patch`, `create`, `replace`, `delete` or `get` (an
    /// `events.record-event` is a `create` of an `events.k8s.io/v1` Event).
    pub verb: &'static str,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// Its namespace; `null` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// `status` (or another subresource) for apply and patch calls to one.
    pub subresource: Option<String>,
    /// Whether an `apply` takes over conflicting fields; `null` for other calls.
    pub force: Option<bool>,
    /// The format of a `patch`: `merge`, `json` or `strategic`; `null` for other calls.
    pub patch_type: Option<&'static str>,
    /// The object sent (apply, create, replace) or the patch; `null` for get and delete.
    pub body: Option<Value>,
}

impl From<&ApiCall> for CallRecord {
    fn from(call: &ApiCall) -> Self {
        let target = call.target();
        let mut record = Self {
            verb: "",
            api_version: target.kind.api_version.clone(),
            kind: target.kind.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
            subresource: None,
            force: None,
            patch_type: None,
            body: None,
        };
        match call {
            ApiCall::Apply {
                object,
                force,
                subresource,
                ..
            } => {
                record.verb = "apply";
                record.force = Some(*force);
                record.subresource.clone_from(subresource);
                record.body = Some(object.clone());
            }
            ApiCall::Patch {
                body, subresource, ..
            } => {
                let (patch_type, patch) = match body {
                    PatchDoc::Merge(patch) => ("merge", patch),
                    PatchDoc::Json(patch) => ("json", patch),
                    PatchDoc::Strategic(patch) => ("strategic", patch),
                };
                record.verb = "patch";
                record.patch_type = Some(patch_type);
                record.subresource.clone_from(subresource);
                record.body = Some(patch.clone());
            }
            ApiCall::Create { object, .. } => {
                record.verb = "create";
                record.body = Some(object.clone());
            }
            ApiCall::Replace { object, .. } => {
                record.verb = "replace";
                record.body = Some(object.clone());
            }
            ApiCall::Delete { .. } => record.verb = "delete",
            ApiCall::Get { .. } => record.verb = "get",
        }
        record
    }
}

impl CallRecord {
    /// `apply apps/v1 Deployment default/web (force)`,
    /// `patch v1 ConfigMap default/a (status subresource, merge patch)`.
    pub(super) fn headline(&self) -> String {
        let key = match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        };
        let mut text = format!("{} {} {} {key}", self.verb, self.api_version, self.kind);
        let mut notes = Vec::new();
        if let Some(subresource) = &self.subresource {
            notes.push(format!("{subresource} subresource"));
        }
        if let Some(patch_type) = self.patch_type {
            notes.push(format!("{patch_type} patch"));
        }
        if self.force == Some(true) {
            notes.push("force".to_owned());
        }
        if !notes.is_empty() {
            let _ = write!(text, " ({})", notes.join(", "));
        }
        text
    }
}

/// A call the grants refused.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeniedRecord {
    /// The call, as in `calls`.
    #[serde(flatten)]
    pub call: CallRecord,
    /// The `call-error::denied` message the guest got: the missing grant and how to add it.
    pub message: String,
}

impl Outcome {
    /// The human-readable report; `subject` says what was reconciled with what (see
    /// [`Run::subject`](super::run::Run::subject)).
    pub(super) fn text(&self, subject: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "reconciled {subject}");
        match (&self.action, &self.error) {
            (Some(action), _) => {
                let action = match action {
                    ActionRecord::Done => "done".to_owned(),
                    ActionRecord::Requeue => "requeue".to_owned(),
                    ActionRecord::RequeueAfter { after_ms } => {
                        format!("requeue-after {after_ms} ms")
                    }
                };
                let _ = writeln!(out, "action: {action}");
            }
            (None, error) => {
                let error = readable(error.as_deref().unwrap_or_default(), "        ");
                let _ = writeln!(out, "failed: {}", error.trim_start());
            }
        }
        let _ = writeln!(out, "calls: {} (recorded, not applied)", self.calls.len());
        for (i, call) in self.calls.iter().enumerate() {
            let _ = writeln!(out, "  {}. {}", i + 1, call.headline());
            if let Some(body) = &call.body {
                let pretty = serde_json::to_string_pretty(body).unwrap_or_default();
                for line in pretty.lines() {
                    let _ = writeln!(out, "       {line}");
                }
            }
        }
        let _ = writeln!(out, "denied: {}", self.denied.len());
        for (i, denied) in self.denied.iter().enumerate() {
            let _ = writeln!(out, "  {}. {}", i + 1, denied.call.headline());
            let _ = writeln!(out, "       {}", denied.message);
        }
        out
    }
}

/// Guest text as escaped for the host's log (one line, `\n` and `\t` written out) shown line
/// by line for a person: each escaped newline starts a new line indented by `indent`, and so
/// does the text's start. Other escapes stay as they are, so nothing the guest wrote reaches the
/// terminal unescaped.
#[must_use]
pub fn readable(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len() + indent.len());
    out.push_str(indent);
    for (i, line) in text.split("\\n").enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        out.push_str(&line.replace("\\t", "    "));
    }
    out
}
