//! `log`: guest messages into the host's log, attributed to the plugin (and, through the
//! reconcile span, to the key).

use super::super::bindings::kube::reconcile::log::{Host, Level};
use super::super::state::GuestState;

impl Host for GuestState {
    async fn log(&mut self, level: Level, message: String) {
        let plugin = &*self.plugin.name;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}
