//! What one guest call of a plugin ran — its module, the API calls it made — and the span it
//! was traced under: what the reconcile's span and history entry are made of.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::trace::TraceContextExt as _;

use super::history::{Ended, Entry};
use crate::controller::Request;
use crate::informer::CachedObject;
use crate::wasm::api_notes::ApiNotes;
use crate::wasm::module::Module;

/// What a call ran: its module and the API calls it made; going in, the span to trace it under.
#[derive(Debug, Default)]
pub(super) struct Ran {
    pub(super) trace: Option<opentelemetry::Context>,
    pub(super) module: Option<Arc<Module>>,
    pub(super) calls: ApiNotes,
}

impl Ran {
    /// Names the plugin, the module and whether it was the canary's on the reconcile's span.
    pub(super) fn annotate(&self, plugin: &str, canary: bool) {
        let Some(trace) = &self.trace else {
            return;
        };
        let span = trace.span();
        span.set_attribute(KeyValue::new("reconcile.plugin", plugin.to_owned()));
        if let Some(module) = &self.module {
            span.set_attribute(KeyValue::new(
                "reconcile.module",
                module.digest().to_owned(),
            ));
        }
        span.set_attribute(KeyValue::new("reconcile.canary", canary));
    }

    /// The history's entry of a reconcile of `request` that started at `started` (`clock`).
    pub(super) fn entry(
        self,
        request: &Request<CachedObject>,
        canary: bool,
        started: SystemTime,
        clock: Instant,
        ended: Ended,
    ) -> Entry {
        Entry {
            started,
            took: clock.elapsed(),
            module: self.module,
            canary,
            retries: request.requeues,
            causes: Arc::clone(&request.causes),
            ended,
            calls: self.calls,
            trace_id: self
                .trace
                .as_ref()
                .map(|trace| trace.span().span_context().trace_id().to_string()),
        }
    }
}
