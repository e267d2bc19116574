//! The API writes of one guest call, kept to compare a primary module with its shadow
//! ([`crate::upgrade::shadow`]): the primary's calls go to the API server and its writes are kept; the
//! shadow's writes change nothing and are kept with the answers they got.
//!
//! # Guarantees
//! - A shadow's write never changes the cluster: it is answered by a server-side dry run, or,
//!   for a create, update or delete of an object the primary created, updated or deleted in the
//!   same reconcile, by the answer the primary got (a dry run would only report that the primary
//!   got there first). Its reads go to the API server as usual.
//! - At most [`MAX_WRITES`] writes and [`MAX_BYTES`] bytes of bodies and answers are kept per
//!   call; a call making more marks the tape overflowed, and the comparison reports that instead
//!   of comparing a partial list.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::wasm::api::{ApiCall, ApiResult, SharedApi};

/// The most writes kept per call.
pub const MAX_WRITES: usize = 64;
/// The most bytes of write bodies and answers kept per call (about: as JSON text).
pub const MAX_BYTES: usize = 8 << 20;

/// A write a guest made and what it was answered.
#[derive(Clone, Debug)]
pub struct Write {
    /// The call, validated and granted.
    pub call: ApiCall,
    /// The answer the guest got.
    pub result: ApiResult,
}

/// How a call's writes are carried out and kept.
#[derive(Debug)]
enum Mode {
    /// The primary: writes go to the API server.
    Primary,
    /// A shadow: writes change nothing (see the module's Guarantees).
    Shadow(Arc<[Write]>),
}

/// The writes of one guest call.
#[derive(Debug)]
pub struct Tape {
    mode: Mode,
    writes: Vec<Write>,
    bytes: usize,
    overflowed: bool,
}

/// A tape shared by the call's host imports.
pub type SharedTape = Arc<Mutex<Tape>>;

impl Tape {
    /// A tape for the primary's call.
    #[must_use]
    pub fn primary() -> SharedTape {
        Arc::new(Mutex::new(Self {
            mode: Mode::Primary,
            writes: Vec::new(),
            bytes: 0,
            overflowed: false,
        }))
    }

    /// A tape for a shadow's call, answering as described in the module's Guarantees given the
    /// primary's `writes`.
    #[must_use]
    pub fn shadow(primary: Arc<[Write]>) -> SharedTape {
        Arc::new(Mutex::new(Self {
            mode: Mode::Shadow(primary),
            writes: Vec::new(),
            bytes: 0,
            overflowed: false,
        }))
    }

    /// The writes kept, or `None` when the call made more than [`MAX_WRITES`].
    #[must_use]
    pub fn writes(&self) -> Option<&[Write]> {
        (!self.overflowed).then_some(self.writes.as_slice())
    }

    /// Takes the writes kept (see [`writes`](Self::writes)).
    #[must_use]
    pub fn take(&mut self) -> Option<Vec<Write>> {
        (!self.overflowed).then(|| std::mem::take(&mut self.writes))
    }

    fn keep(&mut self, call: ApiCall, result: &ApiResult) {
        if self.overflowed {
            return;
        }
        let body = match &call {
            ApiCall::Apply { object, .. }
            | ApiCall::Create { object, .. }
            | ApiCall::Replace { object, .. } => crate::wasm::record::approximate_size(object),
            ApiCall::Patch { body, .. } => match body {
                crate::wasm::api::PatchDoc::Merge(patch)
                | crate::wasm::api::PatchDoc::Json(patch)
                | crate::wasm::api::PatchDoc::Strategic(patch) => {
                    crate::wasm::record::approximate_size(patch)
                }
            },
            ApiCall::Delete { .. } | ApiCall::Get { .. } => 0,
        };
        let answer = result
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map_or(0, String::len);
        self.bytes = self.bytes.saturating_add(body + answer);
        if self.writes.len() >= MAX_WRITES || self.bytes > MAX_BYTES {
            self.overflowed = true;
            self.writes = Vec::new();
        } else {
            self.writes.push(Write {
                call,
                result: result.clone(),
            });
        }
    }

    /// The primary's answer to a create, update or delete of the object `call` creates,
    /// updates or deletes, when this is a shadow's tape.
    fn primary_answer(&self, call: &ApiCall) -> Option<ApiResult> {
        let Mode::Shadow(primary) = &self.mode else {
            return None;
        };
        let same_kind = |a: &ApiCall, b: &ApiCall| {
            matches!(
                (a, b),
                (ApiCall::Create { .. }, ApiCall::Create { .. })
                    | (ApiCall::Replace { .. }, ApiCall::Replace { .. })
                    | (ApiCall::Delete { .. }, ApiCall::Delete { .. })
            )
        };
        primary
            .iter()
            .rev()
            .find(|write| {
                same_kind(&write.call, call)
                    && write.call.target() == call.target()
                    && !call.target().name.is_empty()
            })
            .map(|write| write.result.clone())
    }
}

impl ApiCall {
    /// Whether the call changes an object (everything but a get).
    #[must_use]
    pub fn is_write(&self) -> bool {
        !matches!(self, Self::Get { .. })
    }
}

/// Carries out `call` through `api` as `tape` says (without a tape: as asked), keeping the
/// write on the tape.
pub async fn perform(api: SharedApi, tape: Option<SharedTape>, call: ApiCall) -> ApiResult {
    let Some(tape) = tape.filter(|_| call.is_write()) else {
        return api.call(call).await;
    };
    let (shadow, answered) = {
        let tape = tape.lock();
        (
            matches!(tape.mode, Mode::Shadow(_)),
            tape.primary_answer(&call),
        )
    };
    let result = match (shadow, answered) {
        (true, Some(answer)) => answer,
        (true, None) => api.dry_run(call.clone()).await,
        (false, _) => api.call(call.clone()).await,
    };
    tape.lock().keep(call, &result);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::KindRef;
    use crate::wasm::api::{Recorder, Target};

    fn create(name: &str) -> ApiCall {
        ApiCall::Create {
            target: Target {
                kind: KindRef::new("v1", "ConfigMap"),
                namespace: Some("default".to_owned()),
                name: name.to_owned(),
            },
            object: serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}}),
            field_manager: "p".to_owned(),
        }
    }

    #[tokio::test]
    async fn a_shadow_changes_nothing_and_gets_the_primary_answer_for_the_same_create() {
        let recorder = Arc::new(Recorder::default());
        let api: SharedApi = recorder.clone();
        let primary = Tape::primary();
        let answer = perform(Arc::clone(&api), Some(Arc::clone(&primary)), create("a")).await;
        assert!(answer.is_ok());
        assert_eq!(recorder.calls().len(), 1, "the primary's write is sent");
        let writes: Arc<[Write]> = primary.lock().take().expect("kept").into();
        let shadow = Tape::shadow(writes);
        perform(Arc::clone(&api), Some(Arc::clone(&shadow)), create("a"))
            .await
            .expect("answered like the primary");
        perform(Arc::clone(&api), Some(Arc::clone(&shadow)), create("b"))
            .await
            .expect("answered by a dry run");
        assert_eq!(recorder.calls().len(), 1, "no shadow write is sent");
        let kept = shadow.lock().take().expect("kept");
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1].call, create("b"));
    }

    #[tokio::test]
    async fn a_call_making_too_many_writes_overflows_its_tape() {
        let api: SharedApi = Arc::new(Recorder::default());
        let tape = Tape::primary();
        for i in 0..=MAX_WRITES {
            let _ = perform(
                Arc::clone(&api),
                Some(Arc::clone(&tape)),
                create(&format!("c{i}")),
            )
            .await;
        }
        assert!(tape.lock().writes().is_none());
        assert!(tape.lock().take().is_none());
    }

    #[tokio::test]
    async fn a_call_writing_too_many_bytes_overflows_its_tape() {
        let api: SharedApi = Arc::new(Recorder::default());
        let tape = Tape::primary();
        let mut big = create("big");
        if let ApiCall::Create { object, .. } = &mut big {
            object["data"] = serde_json::json!({"x": "y".repeat(MAX_BYTES)});
        }
        let _ = perform(Arc::clone(&api), Some(Arc::clone(&tape)), create("small")).await;
        assert_eq!(tape.lock().writes().map(<[Write]>::len), Some(1));
        let _ = perform(Arc::clone(&api), Some(Arc::clone(&tape)), big).await;
        assert!(tape.lock().take().is_none(), "kept past its byte bound");
    }
}
