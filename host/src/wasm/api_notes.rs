//! The API calls a guest made in one reconcile, as `kubectl reconcile why` shows them: verb,
//! object and result, never bodies.

use crate::manifest::Verb;
use crate::wasm::api::{ApiResult, Target};
use crate::wasm::bindings::CallError;

/// How many calls one reconcile notes; the rest are counted.
pub const MAX_NOTED: usize = 32;

/// One API call a guest made.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiNote {
    /// `get`, `create`, `update`, `patch`, `delete`.
    pub verb: &'static str,
    /// `apiVersion/kind` of the object.
    pub kind: String,
    /// Its namespace; absent when cluster-scoped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name (empty for a create by `generateName`).
    pub name: String,
    /// `status`, when the call was on that subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// `ok`, `not found` (a get of nothing), the API server's `<code> <reason>`, or `denied`,
    /// `invalid`, `unavailable`.
    pub result: String,
}

/// The calls of one reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiNotes {
    /// The first [`MAX_NOTED`] calls, in order.
    pub calls: Vec<ApiNote>,
    /// How many more were made.
    pub more: u32,
}

impl ApiNotes {
    /// Notes a call of `verb` on `target` that ended with `result`.
    pub fn note(
        &mut self,
        verb: Verb,
        target: &Target,
        subresource: Option<&str>,
        result: &ApiResult,
    ) {
        if self.calls.len() >= MAX_NOTED {
            self.more = self.more.saturating_add(1);
            return;
        }
        let result = match result {
            Ok(None) if verb == Verb::Get => "not found".to_owned(),
            Ok(_) => "ok".to_owned(),
            Err(CallError::Api(status)) => format!("{} {}", status.code, status.reason),
            Err(CallError::Denied(_)) => "denied".to_owned(),
            Err(CallError::Invalid(_)) => "invalid".to_owned(),
            Err(CallError::Unavailable(_)) => "unavailable".to_owned(),
        };
        self.calls.push(ApiNote {
            verb: verb.as_str(),
            kind: target.kind.to_string(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
            subresource: subresource.map(str::to_owned),
            result,
        });
    }

    /// Whether any call was noted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.more == 0
    }
}
