//! What a plugin's host imports answer from: its manifest (grants), its informer caches and the
//! API backend its calls go to.

use std::collections::HashMap;
use std::sync::Arc;

use super::api::SharedApi;
use super::manifest::Manifest;
use crate::informer::Store;
use crate::runtime::KindRef;

/// One plugin's view of the host, shared by all its instances.
pub struct PluginContext {
    /// The plugin's name (logs, metrics, field manager, event reporter).
    pub name: Arc<str>,
    /// Its manifest.
    pub manifest: Arc<Manifest>,
    /// The caches its `cache` import reads, by kind (the `for`, `owns` and `cache` kinds).
    pub caches: HashMap<KindRef, Arc<Store>>,
    /// Where its `client` and `events` calls go.
    pub api: SharedApi,
}

impl std::fmt::Debug for PluginContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginContext")
            .field("name", &self.name)
            .field("caches", &self.caches.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PluginContext {
    /// A context for `manifest` with these caches and API backend.
    #[must_use]
    pub fn new(
        manifest: Arc<Manifest>,
        caches: HashMap<KindRef, Arc<Store>>,
        api: SharedApi,
    ) -> Self {
        Self {
            name: manifest.name.as_str().into(),
            manifest,
            caches,
            api,
        }
    }
}
