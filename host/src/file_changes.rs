//! File changes, debounced: a watcher over some paths whose events count as one change once the
//! files have been quiet for a settle time. Reads are not changes (whoever handles a change
//! reads the files, and counting that would make a change of every handling).

use std::path::Path;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Changes under the watched paths.
pub struct FileChanges {
    watcher: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<()>,
    settle: Duration,
}

impl FileChanges {
    /// Nothing watched yet; a change is over once no event came for `settle`.
    ///
    /// # Errors
    /// When the system's file watcher cannot be set up.
    pub fn new(settle: Duration) -> Result<Self, notify::Error> {
        let (tx, events) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event
                && !matches!(event.kind, notify::EventKind::Access(_))
            {
                let _ = tx.send(());
            }
        })?;
        Ok(Self {
            watcher,
            events,
            settle,
        })
    }

    /// Watches `path` too (with what is under it when `mode` is recursive).
    ///
    /// # Errors
    /// When `path` cannot be watched (it does not exist, or the system's watch limit is hit).
    pub fn watch(&mut self, path: &Path, mode: RecursiveMode) -> Result<(), notify::Error> {
        self.watcher.watch(path, mode)
    }

    /// Waits for the next change and for the files to settle after it; `false` once `stop` is
    /// cancelled.
    pub async fn next(&mut self, stop: &CancellationToken) -> bool {
        tokio::select! {
            biased;
            () = stop.cancelled() => return false,
            event = self.events.recv() => if event.is_none() { return false },
        }
        loop {
            tokio::select! {
                () = stop.cancelled() => return false,
                more = tokio::time::timeout(self.settle, self.events.recv()) => match more {
                    Ok(Some(())) => {}
                    Ok(None) => return false,
                    Err(_quiet) => return true,
                },
            }
        }
    }
}
