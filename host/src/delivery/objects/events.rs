//! Events on a plugin's object when its reconciles start or stop failing for good
//! (`ReconcilesFailing`, Warning; `ReconcilesRecovered`, Normal), as `kubectl describe
//! reconcilerplugin <name>` shows them. Each change is reported once by the replica that writes
//! status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use super::status::REASON_RECONCILES_FAILING;
use crate::manifest::namespaced;
use crate::manifest::{ReconcilerPlugin, ReconcilerPluginStatus};

/// Whether `status` says the plugin's reconciles keep failing, and the condition's message.
fn failing(status: &ReconcilerPluginStatus) -> Option<&str> {
    (status.conditions.iter())
        .find(|c| c.type_ == "Degraded" && c.status == "True")
        .filter(|c| c.reason == REASON_RECONCILES_FAILING)
        .map(|c| c.message.as_str())
}

/// What has been reported of each object: whether its reconciles keep failing.
#[derive(Debug, Default)]
pub(super) struct Reported {
    failing: parking_lot::Mutex<BTreeMap<String, bool>>,
}

impl Reported {
    /// The Event that `new` (the status just written over `old`) calls for, if it changes what
    /// was reported of object `name` (at first sight, what `old` says).
    pub(super) fn change(
        &self,
        name: &str,
        object: &ReconcilerPlugin,
        old: &ReconcilerPluginStatus,
        new: &ReconcilerPluginStatus,
        identity: &str,
    ) -> Option<Event> {
        let now_failing = failing(new);
        let mut reported = self.failing.lock();
        let was = reported
            .entry(name.to_owned())
            .or_insert_with(|| failing(old).is_some());
        if *was == now_failing.is_some() {
            return None;
        }
        *was = now_failing.is_some();
        let (type_, reason, note) = match now_failing {
            Some(message) => ("Warning", REASON_RECONCILES_FAILING, message.to_owned()),
            None => (
                "Normal",
                "ReconcilesRecovered",
                "no object's reconciles keep failing".to_owned(),
            ),
        };
        Some(event(name, object, type_, reason, note, identity))
    }

    /// Forgets objects no longer known.
    pub(super) fn retain(&self, known: &BTreeMap<String, ReconcilerPlugin>) {
        self.failing
            .lock()
            .retain(|name, _| known.contains_key(name));
    }
}

/// An Event about plugin object `name` (a namespaced object's cluster form, see
/// [`namespaced`]), in its namespace (`default` for a ReconcilerPlugin).
fn event(
    name: &str,
    object: &ReconcilerPlugin,
    type_: &str,
    reason: &str,
    note: String,
    identity: &str,
) -> Event {
    let (namespace, own, kind) = match namespaced::object_of(name) {
        Some((namespace, own)) => (namespace, own, namespaced::KIND),
        None => ("default", name, "ReconcilerPlugin"),
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            // As client-go names Events: the object's name and the time in hex.
            name: Some(format!("{own}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Reconcile".to_owned()),
        reason: Some(reason.to_owned()),
        note: Some(note),
        type_: Some(type_.to_owned()),
        reporting_controller: Some("reconcile-host".to_owned()),
        reporting_instance: Some(identity.chars().take(128).collect()),
        regarding: Some(ObjectReference {
            api_version: Some("reconcile-host.dev/v1alpha1".to_owned()),
            kind: Some(kind.to_owned()),
            namespace: (kind == namespaced::KIND).then(|| namespace.to_owned()),
            name: Some(own.to_owned()),
            uid: object.metadata.uid.clone(),
            resource_version: object.metadata.resource_version.clone(),
            ..ObjectReference::default()
        }),
        ..Event::default()
    }
}

/// Creates `event`; a failure is logged (the status says the same).
pub(super) async fn record(client: &kube::Client, event: &Event) {
    let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    if let Err(error) = api.create(&PostParams::default(), event).await {
        tracing::warn!(error = %crate::error_chain(&error), reason = ?event.reason,
            "cannot record an Event on a plugin object; grant the host create on \
             events.k8s.io events");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::PluginCondition;

    fn status(degraded: Option<(&str, &str)>) -> ReconcilerPluginStatus {
        let (status, reason) = degraded.unwrap_or(("False", "AsDeclared"));
        ReconcilerPluginStatus {
            conditions: vec![PluginCondition {
                type_: "Degraded".to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: "the last 3 or more reconciles of 1 object failed".to_owned(),
                last_transition_time: String::new(),
                observed_generation: None,
            }],
            ..ReconcilerPluginStatus::default()
        }
    }

    fn object(uid: &str) -> ReconcilerPlugin {
        let mut object: ReconcilerPlugin = serde_json::from_value(serde_json::json!({
            "apiVersion": "reconcile-host.dev/v1alpha1", "kind": "ReconcilerPlugin",
            "metadata": {"name": "x", "uid": uid},
            "spec": {"for": {"apiVersion": "v1", "kind": "ConfigMap"}, "oci": "r/x:1"},
        }))
        .expect("an object");
        object.metadata.resource_version = Some("7".to_owned());
        object
    }

    #[test]
    fn a_change_of_failing_is_reported_once_each_way() {
        let reported = Reported::default();
        let (fine, failing) = (
            status(None),
            status(Some(("True", REASON_RECONCILES_FAILING))),
        );
        let x = object("u-1");
        assert!(reported.change("x", &x, &fine, &fine, "h").is_none());
        let warning = reported
            .change("x", &x, &fine, &failing, "h")
            .expect("an Event");
        assert_eq!(warning.type_.as_deref(), Some("Warning"));
        assert_eq!(warning.reason.as_deref(), Some("ReconcilesFailing"));
        assert_eq!(
            warning.note.as_deref(),
            Some("the last 3 or more reconciles of 1 object failed")
        );
        let about = warning.regarding.as_ref().expect("regarding");
        assert_eq!(about.uid.as_deref(), Some("u-1"));
        assert_eq!(about.kind.as_deref(), Some("ReconcilerPlugin"));
        assert_eq!(warning.metadata.namespace.as_deref(), Some("default"));
        // Written again (the watch has not brought the new status yet): not reported again.
        assert!(reported.change("x", &x, &fine, &failing, "h").is_none());
        let recovered = reported
            .change("x", &x, &failing, &fine, "h")
            .expect("an Event");
        assert_eq!(recovered.reason.as_deref(), Some("ReconcilesRecovered"));
        assert_eq!(recovered.type_.as_deref(), Some("Normal"));
    }

    #[test]
    fn a_namespaced_objects_event_is_in_its_namespace_and_a_host_restart_does_not_repeat_it() {
        let reported = Reported::default();
        let failing = status(Some(("True", REASON_RECONCILES_FAILING)));
        // The object already said so before this host started: nothing new to report.
        assert!(
            reported
                .change("team.x", &object("u"), &failing, &failing, "h")
                .is_none()
        );
        let recovered = reported
            .change("team.x", &object("u"), &failing, &status(None), "h")
            .expect("an Event");
        assert_eq!(recovered.metadata.namespace.as_deref(), Some("team"));
        let about = recovered.regarding.expect("regarding");
        assert_eq!(about.kind.as_deref(), Some("NamespacedReconcilerPlugin"));
        assert_eq!(
            (about.namespace.as_deref(), about.name.as_deref()),
            (Some("team"), Some("x"))
        );
    }
}
