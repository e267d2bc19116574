//! Tests of strategic merge patch: directives, list types, element order, and properties.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn smp(target: Value, patch: Value, api_version: &str, kind: &str) -> Value {
    let mut target = target;
    strategic_merge_patch(&mut target, &patch, api_version, kind).expect("patch applies");
    target
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn containers_merge_by_name_in_a_pod() {
    let live = pod(json!([
        {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
        {"name": "log", "image": "busybox"}
    ]));
    let patch = json!({"spec": {"containers": [
        {"name": "web", "image": "nginx:2"},
        {"name": "sidecar", "image": "envoy"}
    ]}});
    assert_eq!(
        smp(live, patch, "v1", "Pod")["spec"]["containers"],
        // Upstream's order: a new element goes before the server-only ones after it.
        json!([
            {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "envoy"},
            {"name": "log", "image": "busybox"}
        ])
    );
}

#[test]
fn merged_lists_take_upstreams_order() {
    // As kube-apiserver v1.36.3 answers (fidelity sequence `upstream-strategic-order`).
    let live = json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"template": {"spec": {
        "containers": [{"name": "app", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "D", "value": "4"}
        ], "ports": [{"containerPort": 80}, {"containerPort": 81}]}]
    }}}});
    let patch = json!({"metadata": {"finalizers": ["c", "a"]}, "spec": {"template": {"spec": {
        "containers": [{"name": "app", "env": [
            {"name": "C", "value": "3"}, {"name": "B", "value": "22"}
        ], "ports": [{"containerPort": 82}]}]
    }}}});
    let patched = smp(live, patch, "apps/v1", "Deployment");
    assert_eq!(patched["metadata"]["finalizers"], json!(["c", "b", "a"]));
    let container = &patched["spec"]["template"]["spec"]["containers"][0];
    let names: Vec<&str> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["C", "A", "B", "D"]);
    assert_eq!(
        container["ports"],
        json!([{"containerPort": 82}, {"containerPort": 80}, {"containerPort": 81}])
    );
}

#[test]
fn deployment_template_env_merges_by_name_and_ports_by_container_port() {
    let live = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{
        "name": "web",
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "ports": [{"containerPort": 80, "name": "http"}]
    }]}}}});
    let patch = json!({"spec": {"template": {"spec": {"containers": [{
        "name": "web",
        "env": [{"name": "B", "value": "3"}],
        "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]
    }]}}}});
    let patched = smp(live, patch, "apps/v1", "Deployment");
    let container = &patched["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
    );
    assert_eq!(
        container["ports"],
        json!([
            {"containerPort": 80, "name": "http", "protocol": "TCP"},
            {"containerPort": 443}
        ])
    );
    assert_eq!(patched["spec"]["replicas"], json!(1));
}

#[test]
fn patch_delete_directive_removes_a_container_by_name() {
    let live = pod(json!([{"name": "web", "image": "a"}, {"name": "log", "image": "b"}]));
    let patch = json!({"spec": {"containers": [{"name": "log", "$patch": "delete"}]}});
    assert_eq!(
        smp(live, patch, "v1", "Pod")["spec"]["containers"],
        json!([{"name": "web", "image": "a"}])
    );
}

#[test]
fn patch_delete_directive_on_a_map_removes_the_map() {
    let live = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}});
    let patch = json!({"data": {"$patch": "delete"}});
    assert_eq!(
        smp(live, patch, "v1", "ConfigMap"),
        json!({"metadata": {"name": "c", "labels": {"a": "1"}}})
    );
}

#[test]
fn patch_replace_directive_on_a_map_replaces_it_whole() {
    let live = json!({"data": {"a": "1", "b": "2"}});
    let patch = json!({"data": {"$patch": "replace", "c": "3"}});
    assert_eq!(
        smp(live, patch, "v1", "ConfigMap"),
        json!({"data": {"c": "3"}})
    );
}

#[test]
fn patch_replace_element_replaces_a_keyed_list() {
    let live = pod(json!([{"name": "web", "image": "a"}, {"name": "log", "image": "b"}]));
    let patch = json!({"spec": {"containers": [
        {"$patch": "replace"},
        {"name": "only", "image": "c"}
    ]}});
    assert_eq!(
        smp(live, patch, "v1", "Pod")["spec"]["containers"],
        json!([{"name": "only", "image": "c"}])
    );
}

#[test]
fn finalizers_merge_as_a_set_in_strategic_merge() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let patch = json!({"metadata": {"finalizers": ["b", "c"]}});
    assert_eq!(
        smp(live, patch, "v1", "ConfigMap"),
        json!({"metadata": {"finalizers": ["a", "b", "c"]}})
    );
}

#[test]
fn delete_from_primitive_list_removes_finalizers() {
    let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c"]}});
    assert_eq!(
        smp(live, patch, "v1", "ConfigMap"),
        json!({"metadata": {"finalizers": ["b"]}})
    );
}

#[test]
fn lists_without_a_merge_key_are_replaced() {
    let live = pod(json!([{"name": "web", "args": ["a", "b"]}]));
    let patch = json!({"spec": {"containers": [{"name": "web", "args": ["c"]}],
            "tolerations": [{"key": "x"}]}});
    let patched = smp(live, patch, "v1", "Pod");
    assert_eq!(patched["spec"]["containers"][0]["args"], json!(["c"]));
    assert_eq!(patched["spec"]["tolerations"], json!([{"key": "x"}]));
}

#[test]
fn service_ports_merge_by_port() {
    let live = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
    assert_eq!(
        smp(live, patch, "v1", "Service")["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9090}, {"port": 443}])
    );
}

#[test]
fn owner_references_merge_by_uid_and_conditions_by_type() {
    let live = json!({
        "metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Progressing", "status": "True"}]}
    });
    let patch = json!({
        "metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let patched = smp(live, patch, "apps/v1", "Deployment");
    assert_eq!(
        patched["metadata"]["ownerReferences"],
        json!([{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}])
    );
    assert_eq!(
        patched["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "Progressing", "status": "True"}])
    );
}

#[test]
fn null_deletes_a_key_as_in_merge_patch() {
    let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
    let patch = json!({"metadata": {"labels": {"a": null}}});
    assert_eq!(
        smp(live, patch, "v1", "Secret"),
        json!({"metadata": {"labels": {"b": "2"}}})
    );
}

#[test]
fn retain_keys_drops_unlisted_live_keys() {
    let live =
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
    assert_eq!(
        smp(live, patch, "apps/v1", "Deployment"),
        json!({"spec": {"strategy": {"type": "Recreate"}}})
    );
}

#[test]
fn retain_keys_rejects_a_patch_setting_an_unlisted_key() {
    let error = strategic_merge_patch(
        &mut json!({}),
        &json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
        "apps/v1",
        "Deployment",
    )
    .unwrap_err();
    assert!(
        matches!(&error, PatchError::InvalidDirective { path, directive, .. }
                if path == "spec.strategy" && directive == "$retainKeys"),
        "{error:?}"
    );
}

#[test]
fn set_element_order_reorders_the_merged_list() {
    let live = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
        "containers": [{"name": "a", "image": "x"}]
    }});
    assert_eq!(
        smp(live, patch, "v1", "Pod")["spec"]["containers"],
        json!([{"name": "c"}, {"name": "a", "image": "x"}, {"name": "b"}])
    );
}

#[test]
fn directives_in_new_elements_are_not_stored() {
    let live = pod(json!([]));
    let patch = json!({"spec": {"containers": [
        {"name": "web", "env": [{"name": "gone", "$patch": "delete"}, {"name": "kept"}]}
    ]}});
    assert_eq!(
        smp(live, patch, "v1", "Pod")["spec"]["containers"],
        json!([{"name": "web", "env": [{"name": "kept"}]}])
    );
}

#[test]
fn element_without_its_merge_key_is_an_error_and_leaves_the_target_alone() {
    let mut live = pod(json!([{"name": "web"}]));
    let before = live.clone();
    let error = strategic_merge_patch(
        &mut live,
        &json!({"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"image": "x"}]}}),
        "v1",
        "Pod",
    )
    .unwrap_err();
    assert_eq!(
        error,
        PatchError::MissingMergeKey {
            path: "spec.containers".into(),
            key: "name".into()
        }
    );
    assert_eq!(live, before);
}

#[test]
fn unknown_patch_directive_value_is_rejected() {
    let error = strategic_merge_patch(
        &mut json!({}),
        &json!({"data": {"$patch": "explode"}}),
        "v1",
        "ConfigMap",
    )
    .unwrap_err();
    assert!(
        matches!(&error, PatchError::InvalidDirective { path, directive, .. } if path == "data" && directive == "$patch"),
        "{error:?}"
    );
}

#[test]
fn custom_resources_are_unsupported_for_strategic_merge() {
    let error = strategic_merge_patch(
        &mut json!({}),
        &json!({"spec": {"x": 1}}),
        "example.com/v1",
        "Widget",
    )
    .unwrap_err();
    assert_eq!(
        error,
        PatchError::UnsupportedForKind {
            api_version: "example.com/v1".into(),
            kind: "Widget".into()
        }
    );
}

#[test]
fn non_object_strategic_patch_is_rejected() {
    assert_eq!(
        strategic_merge_patch(&mut json!({}), &json!([1]), "v1", "Pod"),
        Err(PatchError::PatchNotAnObject { found: "array" })
    );
}

/// JSON values with lists, nested objects and nulls, but no directive keys.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i16>().prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-d]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn strategic_merge_without_keyed_lists_agrees_with_merge_patch(
        target in prop::collection::btree_map("[a-d]", json_value(), 0..4),
        patch in prop::collection::btree_map("[a-d]", json_value(), 0..4),
    ) {
        let target = Value::Object(target.into_iter().collect());
        let patch = Value::Object(patch.into_iter().collect());
        let mut expected = target.clone();
        crate::patch::merge_patch(&mut expected, &patch);
        prop_assert_eq!(smp(target, patch, "v1", "ConfigMap"), expected);
    }
}
