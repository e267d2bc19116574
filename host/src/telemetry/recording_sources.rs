//! The plugins whose recorded reconciles the telemetry port serves, by name, and what it needs
//! of each.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

/// What the telemetry port needs of one plugin's recordings.
pub trait RecordingSource: Send + Sync {
    /// The bundles held, oldest first, as a JSON array.
    fn bundles_json(&self) -> String;
    /// How many bundles are held.
    fn held(&self) -> usize;
    /// Records the next reconcile of `namespace`/`name` and queues it; false when recording
    /// is off or too many keys wait.
    fn request(&self, namespace: Option<&str>, name: &str) -> bool;
    /// Whether the bundles may be served and keys requested on the telemetry port
    /// (`recording.serve`).
    fn served(&self) -> bool;
}

/// The plugins that record, by name.
#[derive(Clone, Default)]
pub struct Recordings {
    sources: Arc<RwLock<BTreeMap<String, Arc<dyn RecordingSource>>>>,
}

impl std::fmt::Debug for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recordings")
            .field("plugins", &self.sources.read().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Recordings {
    /// Serves `source` as plugin `plugin`'s (replacing an earlier one).
    pub fn register(&self, plugin: &str, source: Arc<dyn RecordingSource>) {
        self.sources.write().insert(plugin.to_owned(), source);
    }

    /// Stops serving plugin `plugin`'s recordings.
    pub fn remove(&self, plugin: &str) {
        self.sources.write().remove(plugin);
    }

    /// Plugin `plugin`'s source.
    #[must_use]
    pub fn get(&self, plugin: &str) -> Option<Arc<dyn RecordingSource>> {
        self.sources.read().get(plugin).cloned()
    }

    /// `{"<plugin>": <bundles held>, …}`.
    #[must_use]
    pub fn summary(&self) -> String {
        let sources = self.sources.read();
        let held: BTreeMap<&String, usize> = sources
            .iter()
            .map(|(name, source)| (name, source.held()))
            .collect();
        serde_json::to_string(&held).unwrap_or_default()
    }
}
