//! {{name}}: marks each ConfigMap labelled `{{name}}=true` as reconciled and says so in an Event.

use reconcile_guest::prelude::*;
use serde_json::{Value, json};

/// The annotation written on each object reconciled.
pub const MARK: &str = "{{name}}.reconcile-host.dev/reconciled";

/// The reconciler.
pub struct Marker;

impl Reconciler for Marker {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(object) = request.object::<Value>()? else {
            return Ok(Action::done()); // deleted: nothing to clean up
        };
        if object["metadata"]["annotations"][MARK] == "true" {
            return Ok(Action::done()); // marked already: writing again would only wake it again
        }
        let target = request.target().clone();
        client::merge_patch(&target, &json!({"metadata": {"annotations": {MARK: "true"}}}))?;
        events::record(&target, EventType::Normal, "Reconciled", "marked by {{name}}")?;
        info!("marked {target}");
        Ok(Action::done())
    }
}

reconcile_guest::export_reconciler!(Marker);

#[cfg(test)]
mod tests {
    use super::*;
    use reconcile_guest::testing::FakeHost;

    fn config_map() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "default",
                            "labels": {"{{name}}": "true"}},
               "data": {"a": "1"}})
    }

    #[test]
    fn an_unmarked_config_map_is_marked_once_with_an_event() {
        let host = FakeHost::install();
        let action = Marker::reconcile(host.request(config_map())).unwrap();
        assert_eq!(action, Action::done());
        let stored = host.find(&request_kind(), Some("default"), "settings").unwrap();
        assert_eq!(stored["metadata"]["annotations"][MARK], "true");
        assert_eq!(host.calls().len(), 1);
        assert_eq!(host.events()[0].1, "Reconciled");
        // Reconciled again (the patch wakes it): nothing more to do.
        Marker::reconcile(host.request(stored)).unwrap();
        assert_eq!(host.calls().len(), 1);
    }

    #[test]
    fn a_deleted_object_needs_nothing() {
        let host = FakeHost::install();
        let action = Marker::reconcile(host.deleted(&config_map())).unwrap();
        assert_eq!(action, Action::done());
        assert!(host.calls().is_empty());
    }

    #[test]
    fn a_refused_patch_fails_the_reconcile() {
        let host = FakeHost::install();
        host.deny("patch");
        let error = Marker::reconcile(host.request(config_map())).unwrap_err();
        assert!(format!("{error:#}").contains("has no grant to `patch`"), "{error:#}");
    }

    fn request_kind() -> Kind {
        Kind { api_version: "v1".into(), kind: "ConfigMap".into() }
    }
}
