//! Tests of the unknown fields of built-in kinds, custom resources and patches.

use serde_json::{Value, json};

use super::*;
use crate::resources::{builtins, crd_resources};

fn builtin(group: &str, kind: &str) -> Resource {
    builtins()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind)
        .expect("a built-in kind")
}

fn widget() -> Resource {
    let crd = json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "closed": {"type": "object"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    }},
                },
            }}}],
        },
    });
    crd_resources(&crd).expect("a valid CRD").remove(0)
}

fn sorted(mut paths: Vec<String>) -> Vec<String> {
    paths.sort();
    paths
}

#[test]
fn a_deployment_loses_the_fields_its_types_do_not_declare_and_names_them() {
    let res = builtin("apps", "Deployment");
    let mut obj = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "bogus": 1, "labels": {"app": "web"}},
        "spec": {
            "foo": true,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "x", "bar": 1, "ports": [{"containerPort": 80, "baz": 2}]}]}},
        },
        "extra": "x",
    });
    assert_eq!(
        sorted(prune(&res, &mut obj)),
        [
            "extra",
            "metadata.bogus",
            "spec.foo",
            "spec.template.spec.containers[0].bar",
            "spec.template.spec.containers[0].ports[0].baz",
        ]
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "web", "labels": {"app": "web"}})
    );
    assert_eq!(
        obj["spec"]["template"]["spec"]["containers"][0],
        json!({"name": "c", "image": "x", "ports": [{"containerPort": 80}]})
    );
    assert!(obj.get("extra").is_none());
}

#[test]
fn maps_and_free_form_fields_of_built_in_kinds_keep_their_keys() {
    let config_map = builtin("", "ConfigMap");
    let mut obj = json!({"metadata": {"name": "c"}, "data": {"any-key": "v"}});
    assert!(prune(&config_map, &mut obj).is_empty());
    assert_eq!(obj["data"], json!({"any-key": "v"}));
    // A ControllerRevision's data is a RawExtension: anything goes.
    let revision = builtin("apps", "ControllerRevision");
    let mut obj = json!({"metadata": {"name": "r"}, "revision": 1, "data": {"whatever": {"x": 1}}});
    assert!(prune(&revision, &mut obj).is_empty());
    assert_eq!(obj["data"], json!({"whatever": {"x": 1}}));
}

#[test]
fn a_custom_resource_is_pruned_by_its_structural_schema_and_metadata_by_object_meta() {
    let res = widget();
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "bogus": 1, "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:size": {}}}}]},
        "spec": {
            "size": 1, "color": "red",
            "extra": {"anything": {"goes": true}},
            "closed": {"dropped": 1},
            "labels": {"a": "b"},
        },
        "status": {"ready": true},
    });
    assert_eq!(
        sorted(prune(&res, &mut obj)),
        [
            "metadata.bogus",
            "spec.closed.dropped",
            "spec.color",
            "status"
        ]
    );
    assert_eq!(
        obj,
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:size": {}}}}]},
            "spec": {"size": 1, "extra": {"anything": {"goes": true}}, "closed": {}, "labels": {"a": "b"}},
        })
    );
}

#[test]
fn a_patch_is_checked_without_its_directives_and_left_unchanged() {
    let res = builtin("apps", "Deployment");
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}],
        "containers": [{"name": "c", "$patch": "replace", "nope": 1}],
    }}}});
    let before: Value = patch.clone();
    assert_eq!(
        find(&res, &patch, true),
        ["spec.template.spec.containers[0].nope"]
    );
    assert_eq!(patch, before);
}

#[test]
fn a_custom_resource_whose_root_preserves_unknown_fields_keeps_them_but_not_in_metadata() {
    let crd = json!({
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
            }}}],
        },
    });
    let res = crd_resources(&crd).expect("a valid CRD").remove(0);
    let mut obj = json!({"metadata": {"name": "t", "bogus": 1}, "spec": {"size": 3}, "other": [1]});
    assert_eq!(prune(&res, &mut obj), ["metadata.bogus"]);
    assert_eq!(
        obj,
        json!({"metadata": {"name": "t"}, "spec": {"size": 3}, "other": [1]})
    );
}
