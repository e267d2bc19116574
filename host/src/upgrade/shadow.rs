//! Shadow runs: after a sampled reconcile, a plugin's shadow module runs on the same key and
//! the same object snapshot, its writes answered without changing anything
//! ([`crate::wasm::tape`]), and what it wanted to write is compared with what the primary wrote.
//! How the two are compared is [`compare`](super::compare)'s.
//!
//! # Guarantees
//! - The shadow never changes the primary's outcome, queue or metrics: it runs after the
//!   primary's call returned, in a task of its own, on a context of its own (limits, pool-less
//!   instances, guest log labelled `<plugin>/shadow`).
//! - Its cost is bounded: only a `sample` fraction of reconciles is shadowed, at most the
//!   plugin's `concurrency` shadows run at once (a reconcile finding every slot busy is not
//!   shadowed), and each runs under the shadow's own limits.
//! - Differences are counted every time; they are logged, and recorded as an Event on the
//!   reconciled object, the first time per key only (for at most [`MAX_KEYS_REPORTED`] keys),
//!   as text cut at [`MAX_REPORT`] bytes with control characters escaped.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::telemetry::ShadowMetrics;
use crate::wasm::api::Target;
use crate::wasm::bindings::ObjectRef;
use crate::wasm::context::PluginContext;
use crate::wasm::guest_log::guest_text;
use crate::wasm::invoke::{self, RequestView};
use crate::wasm::module::Module;
use crate::wasm::tape::{Tape, Write};

pub use super::compare::{Answer, Difference, compare};

/// Keys whose differences are logged and recorded as Events; later keys are only counted.
pub const MAX_KEYS_REPORTED: usize = 10_000;
/// The longest difference report logged (an Event's note is cut at 1 KiB).
pub const MAX_REPORT: usize = 4 << 10;
/// A plugin's shadow: its module, context and bounds.
pub struct ShadowRunner {
    module: Arc<Module>,
    context: Arc<PluginContext>,
    sample: f64,
    slots: Arc<tokio::sync::Semaphore>,
    reported: Mutex<HashSet<String>>,
    metrics: Option<ShadowMetrics>,
}

impl std::fmt::Debug for ShadowRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowRunner")
            .field("module", &self.module.digest())
            .field("sample", &self.sample)
            .finish_non_exhaustive()
    }
}

/// A reconcile's request, owned, for the shadow's run after the primary's.
#[derive(Debug)]
pub struct OwnedRequest {
    /// The key's object reference.
    pub target: ObjectRef,
    /// The object snapshot the primary got.
    pub object: Option<String>,
    /// The key's retry count.
    pub requeues: u32,
}

/// A shadow run the primary's reconcile was admitted to: its slot, and the tape the primary's
/// writes go to.
#[derive(Debug)]
pub struct Admitted {
    slot: tokio::sync::OwnedSemaphorePermit,
    /// The primary's tape.
    pub tape: crate::wasm::tape::SharedTape,
}

impl ShadowRunner {
    /// A shadow running `module` with `context` (the shadow's limits and environment), for a
    /// `sample` fraction of reconciles, at most `concurrency` at once.
    #[must_use]
    pub fn new(
        module: Arc<Module>,
        context: Arc<PluginContext>,
        sample: f64,
        concurrency: usize,
        metrics: Option<ShadowMetrics>,
    ) -> Self {
        Self {
            module,
            context,
            sample,
            slots: Arc::new(tokio::sync::Semaphore::new(concurrency)),
            reported: Mutex::default(),
            metrics,
        }
    }

    /// The shadow's module.
    #[must_use]
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    fn ran(&self, outcome: &str) {
        if let Some(metrics) = &self.metrics {
            metrics.ran(outcome);
        }
    }

    /// Whether this reconcile is shadowed: sampled in, and a slot free.
    pub fn admit(&self) -> Option<Admitted> {
        let sampled = self.sample >= 1.0 || rand::random::<f64>() < self.sample;
        let slot = sampled
            .then(|| Arc::clone(&self.slots).try_acquire_owned().ok())
            .flatten();
        if slot.is_none() {
            self.ran("skipped");
        }
        slot.map(|slot| Admitted {
            slot,
            tape: Tape::primary(),
        })
    }

    /// Runs the shadow on `request` after the primary answered `primary`, and reports the
    /// differences.
    pub async fn run(
        self: Arc<Self>,
        admitted: Admitted,
        request: OwnedRequest,
        primary: Option<Answer>,
    ) {
        let _slot = admitted.slot;
        let Some(primary_writes) = admitted.tape.lock().take() else {
            tracing::debug!(plugin = %self.context.name, "the primary made too many writes to compare");
            self.ran("failed");
            return;
        };
        let Some(primary) = primary else {
            // The primary trapped or overran a limit: nothing to compare with.
            self.ran("failed");
            return;
        };
        let primary_writes: Arc<[Write]> = primary_writes.into();
        let tape = Tape::shadow(Arc::clone(&primary_writes));
        let view = RequestView::of(&request.target, request.object.as_deref(), request.requeues);
        let result = invoke::reconcile(
            &self.module,
            &self.context,
            None,
            view,
            Some(Arc::clone(&tape)),
            &mut invoke::CallSession::default(),
        )
        .await;
        let key = match &request.target.namespace {
            Some(namespace) => format!("{namespace}/{}", request.target.name),
            None => request.target.name.clone(),
        };
        let (shadow, shadow_writes) = match (Answer::of(&result), tape.lock().take()) {
            (Some(answer), Some(writes)) => (answer, writes),
            (answer, _) => {
                let why = match &result {
                    Err(failure) if answer.is_none() => failure.to_string(),
                    _ => "it made more writes than are compared".to_owned(),
                };
                tracing::debug!(plugin = %self.context.name, %key, "shadow failed: {why}");
                self.ran("failed");
                return;
            }
        };
        let base = |target: &Target| self.cached(target);
        let differences = compare(
            &self.context.manifest.for_kind.kind,
            (&primary_writes, &primary),
            (&shadow_writes, &shadow),
            &base,
        );
        if differences.is_empty() {
            self.ran("same");
            return;
        }
        self.ran("different");
        if let Some(metrics) = &self.metrics {
            for difference in &differences {
                metrics.differs(&difference.kind, difference.verb);
            }
        }
        self.report(&key, &request.target, &differences).await;
    }

    /// The cached JSON of `target`, if the plugin caches its kind.
    fn cached(&self, target: &Target) -> Option<Value> {
        let store = self.context.caches.get(&target.kind)?;
        let key =
            crate::controller::ObjectKey::in_namespace(target.namespace.as_deref(), &target.name);
        let object = store.get(&key)?;
        serde_json::from_str(object.json()).ok()
    }

    /// Logs the differences and records them as an Event, the first time for `key`.
    async fn report(&self, key: &str, target: &ObjectRef, differences: &[Difference]) {
        {
            let mut reported = self.reported.lock();
            if reported.len() >= MAX_KEYS_REPORTED || !reported.insert(key.to_owned()) {
                return;
            }
        }
        let mut text = String::new();
        for (i, difference) in differences.iter().enumerate() {
            if i > 0 {
                text.push_str(" | ");
            }
            let _ = write!(text, "{}", difference.text);
        }
        let text = guest_text(&text, MAX_REPORT);
        tracing::warn!(plugin = %self.context.name, %key, shadow = %format_args!("{:.12}", self.module.digest()),
            differences = differences.len(), "the shadow differs from the primary: {text}");
        let kind = crate::runtime::KindRef::new(&target.kind.api_version, &target.kind.kind);
        let identity = crate::wasm::imports::cached_identity(&self.context, &kind, target);
        let event = crate::wasm::imports::event_call(
            &self.context.name,
            target,
            identity.as_ref(),
            "Warning",
            "ShadowDiffers",
            &format!(
                "shadow module {:.12} differs from the primary: {text}",
                self.module.digest()
            ),
        );
        if let Err(error) = self.context.api.call(event).await {
            tracing::debug!(plugin = %self.context.name, %key, ?error, "cannot record the shadow's differences as an Event");
        }
    }
}
