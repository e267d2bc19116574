//! Tests of a custom resource's CEL rules.

use serde_json::json;

use super::*;

fn widget(rules: serde_json::Value) -> Resource {
    let crd = json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": rules,
                    "properties": {
                        "replicas": {"type": "integer"}, "max": {"type": "integer"},
                        "name": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('t')"}]}},
                    },
                }},
            }}}],
        },
    });
    crate::resources::crd_resources(&crd)
        .expect("a valid CRD")
        .remove(0)
}

#[test]
fn false_rules_are_causes_with_their_message_reason_and_field_path() {
    let res = widget(json!([
        {"rule": "self.replicas <= self.max"},
        {"rule": "self.replicas < 100", "message": "at most 99 replicas", "fieldPath": ".replicas"},
        {"rule": "self.name.matches('^[a-z]+$')", "messageExpression": "'bad name ' + self.name", "reason": "FieldValueForbidden"},
    ]));
    let obj = json!({"spec": {"replicas": 120, "max": 10, "name": "X", "tags": ["ta", "b"]}});
    assert_eq!(
        problems(&res, &obj, None),
        [
            "spec: Invalid value: failed rule: self.replicas <= self.max",
            "spec.replicas: Invalid value: at most 99 replicas",
            "spec: Forbidden: bad name X",
            "spec.tags[1]: Invalid value: \"b\": failed rule: self.startsWith('t')",
        ]
    );
    let fine = json!({"spec": {"replicas": 2, "max": 10, "name": "x", "tags": ["ta"]}});
    assert!(problems(&res, &fine, None).is_empty());
}

#[test]
fn transition_rules_run_on_updates_only_and_unknown_functions_are_not_judged() {
    let res = widget(json!([
        {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
        {"rule": "isQuantity(self.name)"},
    ]));
    let first = json!({"spec": {"name": "a"}});
    assert!(
        problems(&res, &first, None).is_empty(),
        "no oldSelf on create"
    );
    let renamed = json!({"spec": {"name": "b"}});
    assert_eq!(
        problems(&res, &renamed, Some(&first)),
        ["spec: Invalid value: name is immutable"]
    );
}
