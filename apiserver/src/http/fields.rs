//! Kind-specific selectable fields (`involvedObject.name` for Events, `status.phase` for Pods,
//! …) on top of the `metadata.*` fields the selector module handles.

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::Resource;

/// One `field=value` / `field!=value` term on a kind-specific field.
#[derive(Debug, Clone)]
pub(crate) struct KindField {
    /// JSON pointer to the field.
    pointer: String,
    value: String,
    equal: bool,
}

impl KindField {
    /// Whether the object satisfies the term; a missing field reads as "".
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let actual = match obj.pointer(&self.pointer) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        (actual == self.value) == self.equal
    }
}

/// The fields a kind can be selected on besides `metadata.name` and `metadata.namespace`, with
/// the JSON path each reads.
fn selectable(res: &Resource) -> &'static [(&'static str, &'static str)] {
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Event") => &[
            ("involvedObject.kind", "/involvedObject/kind"),
            ("involvedObject.namespace", "/involvedObject/namespace"),
            ("involvedObject.name", "/involvedObject/name"),
            ("involvedObject.uid", "/involvedObject/uid"),
            ("involvedObject.apiVersion", "/involvedObject/apiVersion"),
            (
                "involvedObject.resourceVersion",
                "/involvedObject/resourceVersion",
            ),
            ("involvedObject.fieldPath", "/involvedObject/fieldPath"),
            ("reason", "/reason"),
            ("reportingComponent", "/reportingComponent"),
            ("source", "/source/component"),
            ("type", "/type"),
        ],
        // Read on the stored core form (see `crate::events`), as upstream maps these labels.
        ("events.k8s.io", "Event") => &[
            ("regarding.kind", "/involvedObject/kind"),
            ("regarding.namespace", "/involvedObject/namespace"),
            ("regarding.name", "/involvedObject/name"),
            ("regarding.uid", "/involvedObject/uid"),
            ("regarding.apiVersion", "/involvedObject/apiVersion"),
            (
                "regarding.resourceVersion",
                "/involvedObject/resourceVersion",
            ),
            ("regarding.fieldPath", "/involvedObject/fieldPath"),
            ("reason", "/reason"),
            ("reportingController", "/reportingComponent"),
            ("type", "/type"),
        ],
        ("", "Pod") => &[
            ("spec.nodeName", "/spec/nodeName"),
            ("spec.restartPolicy", "/spec/restartPolicy"),
            ("spec.schedulerName", "/spec/schedulerName"),
            ("spec.serviceAccountName", "/spec/serviceAccountName"),
            ("spec.hostNetwork", "/spec/hostNetwork"),
            ("status.phase", "/status/phase"),
            ("status.podIP", "/status/podIP"),
            ("status.nominatedNodeName", "/status/nominatedNodeName"),
        ],
        ("", "Secret") => &[("type", "/type")],
        ("", "Namespace") => &[("status.phase", "/status/phase")],
        _ => &[],
    }
}

/// Splits a field selector into the `metadata.*` part (for the selector module) and the
/// kind-specific terms.
pub(crate) fn split(res: &Resource, selector: &str) -> Result<(String, Vec<KindField>), ApiError> {
    let mut generic = Vec::new();
    let mut specific = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (key, value, equal) = if let Some((k, v)) = term.split_once("!=") {
            (k, v, false)
        } else if let Some((k, v)) = term.split_once("==") {
            (k, v, true)
        } else if let Some((k, v)) = term.split_once('=') {
            (k, v, true)
        } else {
            generic.push(term);
            continue;
        };
        let key = key.trim();
        if key.starts_with("metadata.") {
            generic.push(term);
            continue;
        }
        let Some((_, pointer)) = selectable(res).iter().find(|(name, _)| *name == key) else {
            return Err(ApiError::BadRequest(format!(
                "field label not supported: {key} (selectable fields of {}: metadata.name, \
                 metadata.namespace{})",
                res.kind,
                selectable(res)
                    .iter()
                    .map(|(n, _)| format!(", {n}"))
                    .collect::<String>()
            )));
        };
        specific.push(KindField {
            pointer: (*pointer).to_string(),
            value: value.trim().to_string(),
            equal,
        });
    }
    Ok((generic.join(","), specific))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;
    use serde_json::json;

    fn events() -> Resource {
        builtins()
            .into_iter()
            .find(|r| r.kind == "Event" && r.group.is_empty())
            .unwrap()
    }

    #[test]
    fn event_selectors_split_into_metadata_and_involved_object_terms() {
        let (generic, specific) = split(
            &events(),
            "metadata.name=e,involvedObject.name=demo,type!=Warning",
        )
        .unwrap();
        assert_eq!(generic, "metadata.name=e");
        let ev = json!({"involvedObject": {"name": "demo"}, "type": "Normal"});
        assert!(specific.iter().all(|f| f.matches(&ev)));
        let other = json!({"involvedObject": {"name": "x"}, "type": "Normal"});
        assert!(!specific.iter().all(|f| f.matches(&other)));
    }

    #[test]
    fn unknown_fields_are_refused_with_the_selectable_list() {
        let err = split(&events(), "spec.foo=1").unwrap_err();
        assert!(err.to_string().contains("involvedObject.name"), "{err}");
    }
}
