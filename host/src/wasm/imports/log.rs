//! `log`: guest messages into the host's log, attributed to the plugin (and, through the
//! reconcile span, to the key), bounded and escaped by the call's [`CallLog`](crate::wasm::guest_log::CallLog).

use std::time::Instant;

use crate::wasm::bindings::kube::reconcile::log::{Host, Level};
use crate::wasm::cost::Import;
use crate::wasm::state::GuestState;

impl Host for GuestState {
    async fn log(&mut self, level: Level, message: String) {
        let started = Instant::now();
        let level = match level {
            Level::Trace => tracing::Level::TRACE,
            Level::Debug => tracing::Level::DEBUG,
            Level::Info => tracing::Level::INFO,
            Level::Warn => tracing::Level::WARN,
            Level::Error => tracing::Level::ERROR,
        };
        self.call_log.lock().message(level, &message);
        if let Some(trace) = &self.trace {
            crate::wasm::call_trace::log_event(trace, level.as_str(), &message);
        }
        self.imported(Import::Log, started);
    }
}
