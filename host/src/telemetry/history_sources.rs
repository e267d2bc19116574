//! The plugins whose reconcile histories the telemetry port serves, by name, and what it needs
//! of each (see [`super::reconciles`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

/// What the telemetry port needs of one plugin's reconcile history.
pub trait HistorySource: Send + Sync {
    /// `apiVersion/Kind` of the plugin's `for` kind.
    fn for_kind(&self) -> String;
    /// The plugin's counts: `{"reconciles", "errors", "busySeconds", "queueDepth"}`.
    fn totals(&self) -> Value;
    /// The last reconciles of `namespace`/`name`, newest first, as JSON objects.
    fn of_key(&self, namespace: Option<&str>, name: &str) -> Vec<Value>;
}

/// The plugins whose histories the telemetry port serves, by name, and this replica's name.
#[derive(Clone, Default)]
pub struct Histories {
    sources: Arc<RwLock<BTreeMap<String, Arc<dyn HistorySource>>>>,
    replica: Arc<RwLock<Option<Arc<str>>>>,
}

impl std::fmt::Debug for Histories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histories")
            .field("plugins", &self.sources.read().keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Histories {
    /// Serves `source` as plugin `plugin`'s (replacing an earlier one).
    pub fn register(&self, plugin: &str, source: Arc<dyn HistorySource>) {
        self.sources.write().insert(plugin.to_owned(), source);
    }

    /// Stops serving plugin `plugin`'s history.
    pub fn remove(&self, plugin: &str) {
        self.sources.write().remove(plugin);
    }

    /// Names this replica in every answer (its Lease identity, which is unique per process).
    pub fn set_replica(&self, replica: &str) {
        *self.replica.write() = Some(replica.into());
    }

    pub(super) fn replica(&self) -> Arc<str> {
        self.replica
            .read()
            .clone()
            .unwrap_or_else(|| Arc::from("unnamed"))
    }

    /// The summary `GET /debug/reconciles` answers.
    #[must_use]
    pub fn summary(&self) -> Value {
        let plugins: Vec<Value> = self
            .sources
            .read()
            .iter()
            .map(|(name, source)| {
                let mut totals = source.totals();
                if let Value::Object(fields) = &mut totals {
                    fields.insert("plugin".into(), json!(name));
                    fields.insert("kind".into(), json!(source.for_kind()));
                }
                totals
            })
            .collect();
        json!({"replica": &*self.replica(), "plugins": plugins})
    }

    /// What `GET /debug/reconciles/{namespace}/{name}?kind=K` answers.
    #[must_use]
    pub fn of_key(&self, kind: &str, namespace: Option<&str>, name: &str) -> Value {
        let mut reconciles = Vec::new();
        for (plugin, source) in self.sources.read().iter() {
            if !kind_matches(&source.for_kind(), kind) {
                continue;
            }
            for mut entry in source.of_key(namespace, name) {
                if let Value::Object(fields) = &mut entry {
                    fields.insert("plugin".into(), json!(plugin));
                }
                reconciles.push(entry);
            }
        }
        json!({"replica": &*self.replica(), "reconciles": reconciles})
    }
}

/// Whether `asked` (`Kind`, `Kind.group`, or `apiVersion/Kind`; any case for the kind) names
/// `for_kind` (`apiVersion/Kind`).
fn kind_matches(for_kind: &str, asked: &str) -> bool {
    let (api_version, kind) = for_kind.rsplit_once('/').unwrap_or(("v1", for_kind));
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    if let Some((asked_version, asked_kind)) = asked.rsplit_once('/') {
        return asked_version == api_version && asked_kind == kind;
    }
    match asked.split_once('.') {
        Some((asked_kind, asked_group)) => {
            asked_kind.eq_ignore_ascii_case(kind) && asked_group == group
        }
        None => asked.eq_ignore_ascii_case(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::kind_matches;

    #[test]
    fn a_kind_is_named_by_kind_group_or_api_version() {
        assert!(kind_matches("v1/ConfigMap", "ConfigMap"));
        assert!(kind_matches("v1/ConfigMap", "configmap"));
        assert!(kind_matches("v1/ConfigMap", "v1/ConfigMap"));
        assert!(!kind_matches("v1/ConfigMap", "Secret"));
        assert!(kind_matches("apps/v1/Deployment", "deployment.apps"));
        assert!(kind_matches("apps/v1/Deployment", "apps/v1/Deployment"));
        assert!(!kind_matches("apps/v1/Deployment", "deployment.batch"));
        assert!(!kind_matches("apps/v1/Deployment", "v1/Deployment"));
    }
}
