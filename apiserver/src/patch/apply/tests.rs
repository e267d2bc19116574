//! Tests of server-side apply: ownership, conflicts, forcing, managedFields bookkeeping.

use super::*;
use proptest::prelude::*;
use serde_json::json;

const T1: &str = "2024-01-01T00:00:00Z";
const T2: &str = "2024-01-02T00:00:00Z";

fn request(manager: &str) -> ApplyRequest {
    ApplyRequest::new(manager, "apps/v1", "Deployment", T1)
}

fn deployment(spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec
    })
}

fn config_map(metadata_extra: Value, data: Value) -> Value {
    let mut metadata = json!({"name": "cm", "namespace": "default"});
    merge_patch_into(&mut metadata, &metadata_extra);
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
}

fn merge_patch_into(target: &mut Value, patch: &Value) {
    super::super::merge_patch(target, patch);
}

fn cm_request(manager: &str) -> ApplyRequest {
    ApplyRequest::new(manager, "v1", "ConfigMap", T1)
}

/// The `fieldsV1` of `manager`'s entry with `operation`.
fn fields_of(object: &Value, manager: &str, operation: &str) -> Option<Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .map(|e| e["fieldsV1"].clone())
}

fn conflicts(error: ApplyError) -> Vec<(String, String)> {
    match error {
        ApplyError::Conflict { conflicts } => conflicts
            .into_iter()
            .map(|c| (c.manager, c.field))
            .collect(),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn applying_to_an_absent_object_creates_it_with_an_apply_entry() {
    let config = config_map(json!({"labels": {"app": "web"}}), json!({"a": "1"}));
    let created = apply(None, &config, &cm_request("kubectl")).unwrap();
    assert_eq!(created["data"], json!({"a": "1"}));
    assert_eq!(created["metadata"]["name"], "cm");
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
        }])
    );
}

#[test]
fn managed_fields_use_the_kubernetes_fields_v1_encoding() {
    let config = deployment(json!({
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "web",
                "image": "nginx",
                "ports": [{"containerPort": 80}]
            }]}
        }
    }));
    let created = apply(None, &config, &request("kubectl")).unwrap();
    assert_eq!(
        fields_of(&created, "kubectl", "Apply").unwrap(),
        json!({
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {},
                            "f:containerPort": {}
                        }}
                    }}}
                }
            }
        })
    );
}

#[test]
fn second_manager_changing_an_owned_field_conflicts() {
    let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
    let error = apply(
        Some(&live),
        &deployment(json!({"replicas": 2})),
        &request("b"),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
    );
    assert_eq!(
        conflicts(error),
        vec![("a".into(), ".spec.replicas".into())]
    );
}

#[test]
fn conflicts_are_409_and_other_apply_errors_400() {
    let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
    let conflict = apply(
        Some(&live),
        &deployment(json!({"replicas": 2})),
        &request("b"),
    );
    assert_eq!(conflict.unwrap_err().status_code(), 409);
    assert_eq!(ApplyError::MissingFieldManager.status_code(), 400);
}

#[test]
fn force_takes_ownership_from_the_other_manager() {
    let live = apply(
        None,
        &deployment(json!({"replicas": 1, "paused": false})),
        &request("a"),
    )
    .unwrap();
    let forced = apply(
        Some(&live),
        &deployment(json!({"replicas": 2})),
        &request("b").force(true),
    )
    .unwrap();
    assert_eq!(forced["spec"], json!({"replicas": 2, "paused": false}));
    assert_eq!(
        fields_of(&forced, "a", "Apply").unwrap(),
        json!({"f:spec": {"f:paused": {}}})
    );
    assert_eq!(
        fields_of(&forced, "b", "Apply").unwrap(),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // `a` no longer owns replicas: dropping it from its config leaves b's value alone.
    let again = apply(
        Some(&forced),
        &deployment(json!({"paused": false})),
        &request("a"),
    )
    .unwrap();
    assert_eq!(again["spec"]["replicas"], 2);
}

#[test]
fn omitted_field_is_removed_when_no_one_else_owns_it() {
    let first = config_map(json!({"labels": {"x": "1", "y": "2"}}), json!({"a": "1"}));
    let live = apply(None, &first, &cm_request("m")).unwrap();
    let second = config_map(json!({"labels": {"x": "1"}}), json!({}));
    let next = apply(Some(&live), &second, &cm_request("m")).unwrap();
    assert_eq!(next["metadata"]["labels"], json!({"x": "1"}));
    // `data: {}` owns nothing, and the map emptied by removing `a` goes.
    assert_eq!(next.get("data"), None);
    assert_eq!(
        fields_of(&next, "m", "Apply").unwrap(),
        json!({"f:metadata": {"f:labels": {"f:x": {}}}})
    );
}

#[test]
fn a_field_applied_as_a_scalar_then_as_a_map_keeps_its_new_fields() {
    let widget = |spec: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w"}, "spec": spec})
    };
    let request = ApplyRequest::new("m", "example.com/v1", "Widget", T1);
    let live = apply(None, &widget(json!({"size": "small"})), &request).unwrap();
    let next = apply(Some(&live), &widget(json!({"size": {"cpu": 2}})), &request).unwrap();
    assert_eq!(next["spec"], json!({"size": {"cpu": 2}}));
    assert_eq!(
        fields_of(&next, "m", "Apply").unwrap(),
        json!({"f:spec": {"f:size": {"f:cpu": {}}}})
    );
}

#[test]
fn two_managers_applying_the_same_value_share_the_field() {
    let live = apply(None, &deployment(json!({"replicas": 3})), &request("a")).unwrap();
    let shared = apply(
        Some(&live),
        &deployment(json!({"replicas": 3})),
        &request("b"),
    )
    .expect("an equal value is no conflict");
    let owns_replicas = json!({"f:spec": {"f:replicas": {}}});
    assert_eq!(fields_of(&shared, "a", "Apply").unwrap(), owns_replicas);
    assert_eq!(fields_of(&shared, "b", "Apply").unwrap(), owns_replicas);
    // A changing the shared field conflicts with b.
    let error = apply(
        Some(&shared),
        &deployment(json!({"replicas": 4})),
        &request("a"),
    )
    .unwrap_err();
    assert_eq!(
        conflicts(error),
        vec![("b".into(), ".spec.replicas".into())]
    );
    // `a` dropping it keeps it, since b still owns it; then b alone may change it.
    let dropped = apply(Some(&shared), &deployment(json!({})), &request("a")).unwrap();
    assert_eq!(dropped["spec"]["replicas"], 3);
    let changed = apply(
        Some(&dropped),
        &deployment(json!({"replicas": 5})),
        &request("b"),
    )
    .expect("b is the only owner now");
    assert_eq!(changed["spec"]["replicas"], 5);
}

#[test]
fn containers_from_two_managers_merge_by_name_and_leave_with_their_owner() {
    let web = deployment(json!({"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx"}
    ]}}}));
    let sidecar = deployment(json!({"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy"}
    ]}}}));
    let live = apply(None, &web, &request("a")).unwrap();
    let both = apply(Some(&live), &sidecar, &request("b")).unwrap();
    assert_eq!(
        both["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}])
    );
    let without_web = deployment(json!({"template": {"spec": {"containers": []}}}));
    let after = apply(Some(&both), &without_web, &request("a")).unwrap();
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"],
        json!([{"name": "sidecar", "image": "envoy"}])
    );
}

#[test]
fn element_dropped_by_its_applier_keeps_the_fields_another_manager_owns() {
    let config = deployment(json!({"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:1", "args": ["-v"]}
    ]}}}));
    let applied = apply(None, &config, &request("a")).unwrap();
    let mut edited = applied.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    record_update(Some(&applied), &mut edited, "kubectl-edit", T2);
    let after = apply(Some(&edited), &deployment(json!({})), &request("a")).unwrap();
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"],
        json!([{"name": "web", "image": "nginx:2"}])
    );
}

#[test]
fn update_takes_ownership_and_a_later_apply_conflicts_with_it() {
    let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    record_update(Some(&live), &mut scaled, "kubectl-scale", T2);
    assert_eq!(
        fields_of(&scaled, "kubectl-scale", "Update").unwrap(),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        fields_of(&scaled, "a", "Apply"),
        None,
        "an entry left without fields is dropped"
    );
    let error = apply(
        Some(&scaled),
        &deployment(json!({"replicas": 1})),
        &request("a"),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: \
             .spec.replicas"
    );
}

#[test]
fn conflict_status_cause_is_a_field_manager_conflict_without_the_entry_time() {
    let conflict = FieldConflict {
        manager: "kubectl-edit".into(),
        operation: "Update".into(),
        api_version: "v1".into(),
        time: Some(T1.into()),
        field: ".data.a".into(),
    };
    assert_eq!(
        conflict.status_cause(),
        json!({
            "reason": "FieldManagerConflict",
            "message": "conflict with \"kubectl-edit\" using v1",
            "field": ".data.a"
        })
    );
}

#[test]
fn several_conflicts_are_grouped_by_manager_in_the_message() {
    let live = apply(
        None,
        &config_map(json!({}), json!({"a": "1", "b": "1"})),
        &cm_request("one"),
    )
    .unwrap();
    let live = apply(
        Some(&live),
        &config_map(json!({}), json!({"c": "1"})),
        &cm_request("two"),
    )
    .unwrap();
    let error = apply(
        Some(&live),
        &config_map(json!({}), json!({"a": "2", "b": "2", "c": "2"})),
        &cm_request("three"),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Apply failed with 3 conflicts: conflicts with \"one\":\n- .data.a\n- .data.b\n\
             conflicts with \"two\":\n- .data.c"
    );
}

#[test]
fn applying_the_same_configuration_twice_changes_only_the_time() {
    let config = deployment(json!({"replicas": 1, "template": {"spec": {"containers": [
        {"name": "web", "image": "nginx"}
    ]}}}));
    let first = apply(None, &config, &request("a")).unwrap();
    let mut later = request("a");
    later.now = T2.into();
    let second = apply(Some(&first), &config, &later).unwrap();
    let mut expected = first.clone();
    expected["metadata"]["managedFields"][0]["time"] = json!(T2);
    assert_eq!(second, expected);
}

#[test]
fn finalizers_apply_as_a_set_owned_value_by_value() {
    let config = config_map(json!({"finalizers": ["example.com/a"]}), json!({}));
    let live = apply(None, &config, &cm_request("a")).unwrap();
    let other = config_map(json!({"finalizers": ["example.com/b"]}), json!({}));
    let both = apply(Some(&live), &other, &cm_request("b")).unwrap();
    assert_eq!(
        both["metadata"]["finalizers"],
        json!(["example.com/a", "example.com/b"])
    );
    assert_eq!(
        fields_of(&both, "b", "Apply").unwrap(),
        json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
    );
    let dropped = apply(
        Some(&both),
        &config_map(json!({}), json!({})),
        &cm_request("a"),
    )
    .unwrap();
    assert_eq!(dropped["metadata"]["finalizers"], json!(["example.com/b"]));
}

#[test]
fn custom_resource_lists_are_atomic() {
    let widget = |items: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w"}, "spec": {"items": items}})
    };
    let request = |m: &str| ApplyRequest::new(m, "example.com/v1", "Widget", T1);
    let live = apply(None, &widget(json!([{"name": "a"}])), &request("a")).unwrap();
    assert_eq!(
        fields_of(&live, "a", "Apply").unwrap(),
        json!({"f:spec": {"f:items": {}}})
    );
    let error = apply(Some(&live), &widget(json!([{"name": "b"}])), &request("b")).unwrap_err();
    assert_eq!(conflicts(error), vec![("a".into(), ".spec.items".into())]);
}

#[test]
fn server_owned_metadata_and_nulls_in_the_configuration_are_ignored() {
    let live = apply(
        None,
        &config_map(json!({}), json!({"a": "1"})),
        &cm_request("a"),
    )
    .unwrap();
    let mut live = live;
    live["metadata"]["uid"] = json!("u-1");
    live["metadata"]["resourceVersion"] = json!("7");
    let config = config_map(
        json!({"uid": "other", "resourceVersion": "1", "managedFields": [{"manager": "x"}]}),
        json!({"a": "1", "b": null}),
    );
    let next = apply(Some(&live), &config, &cm_request("a")).unwrap();
    assert_eq!(next["metadata"]["uid"], "u-1");
    assert_eq!(next["metadata"]["resourceVersion"], "7");
    assert_eq!(next["data"], json!({"a": "1"}));
    assert_eq!(
        next["metadata"]["managedFields"].as_array().unwrap().len(),
        1
    );
}

#[test]
fn bad_requests_are_rejected_before_anything_is_merged() {
    let config = deployment(json!({}));
    assert_eq!(
        apply(None, &config, &request("")),
        Err(ApplyError::MissingFieldManager)
    );
    assert_eq!(
        apply(None, &json!([1]), &request("a")),
        Err(ApplyError::NotAnObject)
    );
    assert!(matches!(
        apply(None, &config, &cm_request("a")),
        Err(ApplyError::TypeMismatch { found_kind, .. }) if found_kind == "Deployment"
    ));
    let duplicate = deployment(json!({"template": {"spec": {"containers": [
        {"name": "web"}, {"name": "web", "image": "x"}
    ]}}}));
    assert!(matches!(
        apply(None, &duplicate, &request("a")),
        Err(ApplyError::InvalidList { path, .. }) if path == "spec.template.spec.containers"
    ));
    let keyless = deployment(json!({"template": {"spec": {"containers": [{"image": "x"}]}}}));
    assert!(matches!(
        apply(None, &keyless, &request("a")),
        Err(ApplyError::InvalidList { .. })
    ));
}

#[test]
fn record_update_on_create_owns_added_maps_with_dot_markers() {
    let mut created = config_map(json!({"labels": {"app": "web"}}), json!({"a": "1"}));
    record_update(None, &mut created, "kubectl-create", T1);
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:a": {}},
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}}
            }
        }])
    );
}

#[test]
fn record_update_moves_changed_fields_and_drops_removed_ones() {
    let mut created = config_map(json!({}), json!({"a": "1", "b": "1"}));
    record_update(None, &mut created, "one", T1);
    let mut updated = created.clone();
    updated["data"] = json!({"a": "2"});
    record_update(Some(&created), &mut updated, "two", T2);
    assert_eq!(
        fields_of(&updated, "one", "Update").unwrap(),
        json!({"f:data": {}})
    );
    assert_eq!(
        fields_of(&updated, "two", "Update").unwrap(),
        json!({"f:data": {"f:a": {}}})
    );
    // An update that changes nothing records nothing.
    let mut same = updated.clone();
    record_update(Some(&updated), &mut same, "three", T2);
    assert_eq!(same, updated);
}

#[test]
fn managed_fields_entries_are_sorted_like_kubernetes() {
    let mut object = config_map(json!({}), json!({"a": "1"}));
    record_update(None, &mut object, "creator", T2);
    let applied = apply(
        Some(&object),
        &config_map(json!({"labels": {"x": "y"}}), json!({})),
        &cm_request("zeta"),
    )
    .unwrap();
    // Applied after `zeta`: time orders before the manager name does.
    let mut after_zeta = cm_request("alpha");
    after_zeta.now = "2025-01-01T00:00:00Z".into();
    let both = apply(
        Some(&applied),
        &config_map(json!({"annotations": {"n": "1"}}), json!({})),
        &after_zeta,
    )
    .unwrap();
    let order: Vec<(&str, &str)> = both["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["operation"].as_str().unwrap(),
                e["manager"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        vec![("Apply", "zeta"), ("Apply", "alpha"), ("Update", "creator")]
    );
}

#[test]
fn record_update_honours_managed_fields_reset_by_the_client() {
    let mut created = config_map(json!({}), json!({"a": "1"}));
    record_update(None, &mut created, "one", T1);
    let mut reset = created.clone();
    reset["metadata"]["managedFields"] = json!([]);
    record_update(Some(&created), &mut reset, "two", T2);
    assert!(reset["metadata"].get("managedFields").is_none());
}

proptest! {
    #[test]
    fn a_sole_applier_ends_with_exactly_its_last_labels(
        label_sets in prop::collection::vec(
            prop::collection::btree_map("[a-e]", "[x-z]", 0..4), 1..5)
    ) {
        let mut live: Option<Value> = None;
        for labels in &label_sets {
            let labels: Map<String, Value> =
                labels.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
            let config = config_map(json!({"labels": labels}), json!({}));
            live = Some(apply(live.as_ref(), &config, &cm_request("m")).unwrap());
        }
        let last: Map<String, Value> = label_sets.last().unwrap()
            .iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
        let live = live.unwrap();
        let labels = live["metadata"].get("labels").cloned().unwrap_or(json!({}));
        prop_assert_eq!(labels, Value::Object(last));
    }

    #[test]
    fn a_forced_apply_always_leaves_its_whole_configuration_in_place(
        steps in prop::collection::vec(
            ("[a-c]", prop::collection::btree_map("[d-g]", "[x-z]", 0..4)), 1..8)
    ) {
        let mut live: Option<Value> = None;
        let mut ever_applied = std::collections::BTreeSet::new();
        for (manager, labels) in &steps {
            let labels: Map<String, Value> =
                labels.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
            ever_applied.extend(labels.keys().cloned());
            let config = config_map(json!({"labels": labels.clone()}), json!({}));
            let next = apply(live.as_ref(), &config, &cm_request(manager).force(true))
                .unwrap();
            let now = next["metadata"].get("labels").cloned().unwrap_or(json!({}));
            for (key, value) in &labels {
                prop_assert_eq!(&now[key], value);
            }
            let now = now.as_object().unwrap();
            prop_assert!(now.keys().all(|k| ever_applied.contains(k)));
            live = Some(next);
        }
    }
}
