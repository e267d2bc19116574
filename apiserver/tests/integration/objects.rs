//! Object semantics over HTTP: create, update, status subresource, patches, apply, delete with
//! finalizers, garbage collection, namespaces, errors, CRDs and discovery.

use crate::common::{Http, configmap, eventually, rv, server};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1"},
                                                      {"name": "side", "image": "busybox:1"}]}}},
    })
}

#[tokio::test]
async fn create_returns_201_with_uid_timestamp_and_a_fresh_version() {
    let s = server().await;
    let h = Http::new(&s);
    let before = s.resource_version();
    let (code, obj) = h.post(CMS, &configmap("a", json!({}))).await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(
        obj["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(rv(&obj) > before);
}

#[tokio::test]
async fn generate_name_gets_a_random_suffix() {
    let s = server().await;
    let h = Http::new(&s);
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "job-"}});
    let (code, a) = h.post(CMS, &body).await;
    let (_, b) = h.post(CMS, &body).await;
    assert_eq!(code, 201);
    let (a, b) = (
        a["metadata"]["name"].as_str().unwrap(),
        b["metadata"]["name"].as_str().unwrap(),
    );
    assert!(a.starts_with("job-") && a.len() == 9, "{a}");
    assert_ne!(a, b);
}

#[tokio::test]
async fn creating_a_taken_name_is_409_already_exists() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("a", json!({}))).await;
    let (code, status) = h.post(CMS, &configmap("a", json!({}))).await;
    assert_eq!(code, 409);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "AlreadyExists");
    assert_eq!(status["code"], 409);
}

#[tokio::test]
async fn every_write_gets_a_strictly_greater_resource_version_and_list_reports_the_latest() {
    let s = server().await;
    let h = Http::new(&s);
    let mut last = 0;
    for i in 0..5 {
        let (_, obj) = h.post(CMS, &configmap(&format!("c{i}"), json!({}))).await;
        assert!(rv(&obj) > last);
        last = rv(&obj);
    }
    let (_, lease) = h
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
        )
        .await;
    assert!(rv(&lease) > last, "versions are global across kinds");
    let (_, list) = h.get(CMS).await;
    assert_eq!(rv(&list), rv(&lease));
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_409_conflict() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, mut obj) = h.post(CMS, &configmap("a", json!({}))).await;
    let stale = obj.clone();
    obj["data"]["k"] = json!("v2");
    let (code, _) = h.put(&format!("{CMS}/a"), &obj).await;
    assert_eq!(code, 200);
    let (code, status) = h.put(&format!("{CMS}/a"), &stale).await;
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
}

fn cm_with_data(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn configmaps_secrets_and_leases_get_no_generation_like_a_real_server() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, cm) = h.post(CMS, &cm_with_data("a", json!({"k": "1"}))).await;
    assert_eq!(code, 201, "{cm}");
    assert!(cm["metadata"].get("generation").is_none(), "{cm}");
    let mut changed = cm.clone();
    changed["data"]["k"] = json!("2");
    let (code, cm) = h.put(&format!("{CMS}/a"), &changed).await;
    assert_eq!(code, 200, "{cm}");
    assert!(cm["metadata"].get("generation").is_none(), "{cm}");
    let (code, secret) = h
        .post(
            "/api/v1/namespaces/default/secrets",
            &json!({"metadata": {"name": "s"}, "data": {"k": "MQ=="}}),
        )
        .await;
    assert_eq!(code, 201, "{secret}");
    assert!(secret["metadata"].get("generation").is_none(), "{secret}");
    let (code, lease) = h
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}),
        )
        .await;
    assert_eq!(code, 201, "{lease}");
    assert!(lease["metadata"].get("generation").is_none(), "{lease}");
    let (code, deploy) = h.post(DEPLOYS, &deployment("web")).await;
    assert_eq!(code, 201, "{deploy}");
    assert_eq!(
        deploy["metadata"]["generation"], 1,
        "Deployments keep theirs"
    );
}

#[tokio::test]
async fn generation_increments_only_when_something_outside_metadata_and_status_changes() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, obj) = h.post(DEPLOYS, &deployment("web")).await;
    let path = format!("{DEPLOYS}/web");
    let mut labeled = obj.clone();
    labeled["metadata"]["labels"] = json!({"x": "y"});
    let (_, after_label) = h.put(&path, &labeled).await;
    assert_eq!(
        after_label["metadata"]["generation"], 1,
        "metadata change keeps generation"
    );
    let mut scaled = after_label.clone();
    scaled["spec"]["replicas"] = json!(3);
    let (_, after_scale) = h.put(&path, &scaled).await;
    assert_eq!(
        after_scale["metadata"]["generation"], 2,
        "spec change bumps generation"
    );
}

#[tokio::test]
async fn main_endpoint_ignores_status_and_status_endpoint_changes_only_status() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, obj) = h.post(DEPLOYS, &deployment("web")).await;
    let path = format!("{DEPLOYS}/web");
    let mut with_status = obj.clone();
    with_status["status"] = json!({"replicas": 7});
    let (_, after) = h.put(&path, &with_status).await;
    assert!(
        after
            .get("status")
            .is_none_or(|s| s.get("replicas").is_none()),
        "{after}"
    );
    let mut status_write = after.clone();
    status_write["status"] = json!({"replicas": 3});
    status_write["spec"]["replicas"] = json!(9);
    let (code, after) = h.put(&format!("{path}/status"), &status_write).await;
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["status"]["replicas"], 3);
    assert_eq!(after["spec"]["replicas"], 1, "status endpoint ignores spec");
    assert_eq!(after["metadata"]["generation"], 1);
    let (_, merged) = h
        .patch(
            &format!("{path}/status"),
            "application/merge-patch+json",
            &json!({"status": {"readyReplicas": 1}}),
        )
        .await;
    assert_eq!(merged["status"], json!({"replicas": 3, "readyReplicas": 1}));
}

#[tokio::test]
async fn merge_json_and_strategic_patches_change_the_object() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(DEPLOYS, &deployment("web")).await;
    let path = format!("{DEPLOYS}/web");
    let (code, merged) = h
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(code, 200, "{merged}");
    assert_eq!(merged["metadata"]["labels"]["a"], "b");
    let (code, jp) = h
        .patch(
            &path,
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/spec/replicas", "value": 4}]),
        )
        .await;
    assert_eq!(code, 200, "{jp}");
    assert_eq!(jp["spec"]["replicas"], 4);
    let (code, smp) = h
        .patch(
            &path,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}}),
        )
        .await;
    assert_eq!(code, 200, "{smp}");
    let containers = &smp["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers.as_array().unwrap().len(),
        2,
        "merged by name: {containers}"
    );
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(containers[1]["name"], "side");
    let (code, failed) = h
        .patch(
            &path,
            "application/json-patch+json",
            &json!([{"op": "test", "path": "/spec/replicas", "value": 99}]),
        )
        .await;
    assert_eq!(code, 422, "{failed}");
    let (code, malformed) = h
        .patch(
            &path,
            "application/json-patch+json",
            &json!({"op": "test", "path": "/spec/replicas", "value": 99}),
        )
        .await;
    assert_eq!(code, 400, "a JSON patch must be an array: {malformed}");
    assert_eq!(malformed["reason"], "BadRequest");
}

#[tokio::test]
async fn a_second_manager_applying_an_equal_value_becomes_a_co_owner() {
    let s = server().await;
    let h = Http::new(&s);
    let ct = "application/apply-patch+yaml";
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"k": "same"}});
    let (code, _) = h
        .patch(&format!("{CMS}/shared?fieldManager=alice"), ct, &applied)
        .await;
    assert_eq!(code, 201);
    let (code, shared) = h
        .patch(&format!("{CMS}/shared?fieldManager=bob"), ct, &applied)
        .await;
    assert_eq!(code, 200, "{shared}");
    let (_, stored) = h.get(&format!("{CMS}/shared")).await;
    let managers: Vec<&str> = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["alice", "bob"], "{stored}");
    // alice drops the field; bob still owns it, so it stays.
    let without = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}});
    h.patch(&format!("{CMS}/shared?fieldManager=alice"), ct, &without)
        .await;
    let (_, stored) = h.get(&format!("{CMS}/shared")).await;
    assert_eq!(stored["data"]["k"], "same", "{stored}");
}

#[tokio::test]
async fn server_side_apply_needs_a_field_manager_and_conflicts_unless_forced() {
    let s = server().await;
    let h = Http::new(&s);
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "one"}});
    let ct = "application/apply-patch+yaml";
    // As a real server: 422 on the PatchOptions, the field named in the cause.
    let (code, status) = h.patch(&format!("{CMS}/ssa"), ct, &applied).await;
    assert_eq!(code, 422, "fieldManager is required: {status}");
    assert_eq!(
        status["details"],
        json!({"kind": "PatchOptions", "group": "meta.k8s.io", "causes": [{
            "reason": "FieldValueRequired", "field": "fieldManager",
            "message": "Required value: is required for apply patch"}]})
    );
    let (code, created) = h
        .patch(&format!("{CMS}/ssa?fieldManager=alice"), ct, &applied)
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "two"}});
    let (code, status) = h
        .patch(&format!("{CMS}/ssa?fieldManager=bob"), ct, &other)
        .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["details"],
        json!({"causes": [{"reason": "FieldManagerConflict", "field": ".data.k",
                           "message": "conflict with \"alice\""}]}),
        "as a real server: causes only, each with a reason"
    );
    let (code, forced) = h
        .patch(
            &format!("{CMS}/ssa?fieldManager=bob&force=true"),
            ct,
            &other,
        )
        .await;
    assert_eq!(code, 200, "{forced}");
    assert_eq!(forced["data"]["k"], "two");
}

#[tokio::test]
async fn finalizers_keep_a_deleted_object_until_they_are_removed() {
    let s = server().await;
    let h = Http::new(&s);
    let mut cm = configmap("f", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
    h.post(CMS, &cm).await;
    let (code, marked) = h.delete(&format!("{CMS}/f")).await;
    assert_eq!(code, 200, "{marked}");
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let (code, still) = h.get(&format!("{CMS}/f")).await;
    assert_eq!(code, 200, "object stays while finalizers remain");
    let cascade = json!({"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": false});
    let (code, _) = h
        .call(
            "DELETE",
            &format!("{CMS}/f"),
            Some(&cascade),
            "application/json",
        )
        .await;
    assert_eq!(
        code, 202,
        "a pending deletion with orphanDependents=false answers 202"
    );
    let mut released = still.clone();
    released["metadata"]["finalizers"] = json!([]);
    h.put(&format!("{CMS}/f"), &released).await;
    let (code, _) = h.get(&format!("{CMS}/f")).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_dependents_in_the_background() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, owner) = h.post(CMS, &configmap("owner", json!({}))).await;
    let owner_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                            "uid": owner["metadata"]["uid"], "controller": true}]);
    for name in ["child-1", "child-2"] {
        let mut child = configmap(name, json!({}));
        child["metadata"]["ownerReferences"] = owner_ref.clone();
        h.post(CMS, &child).await;
    }
    let (_, other) = h.post(CMS, &configmap("unrelated", json!({}))).await;
    assert_eq!(other["metadata"]["name"], "unrelated");
    h.delete(&format!("{CMS}/owner")).await;
    eventually("dependents to be collected", || async {
        let a = h.get(&format!("{CMS}/child-1")).await.0 == 404;
        let b = h.get(&format!("{CMS}/child-2")).await.0 == 404;
        (a && b).then_some(())
    })
    .await;
    assert_eq!(h.get(&format!("{CMS}/unrelated")).await.0, 200);
}

#[tokio::test]
async fn an_object_written_with_an_owner_that_is_already_gone_is_collected() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, owner) = h.post(CMS, &configmap("gone-owner", json!({}))).await;
    let (_, alive) = h.post(CMS, &configmap("live-owner", json!({}))).await;
    h.delete(&format!("{CMS}/gone-owner")).await;
    let reference = |o: &serde_json::Value, name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name,
               "uid": o["metadata"]["uid"], "controller": true})
    };
    let mut late = configmap("late-child", json!({}));
    late["metadata"]["ownerReferences"] = json!([reference(&owner, "gone-owner")]);
    assert_eq!(h.post(CMS, &late).await.0, 201);
    let mut kept = configmap("kept-child", json!({}));
    kept["metadata"]["ownerReferences"] = json!([reference(&alive, "live-owner")]);
    h.post(CMS, &kept).await;
    eventually("the child of a deleted owner to be collected", || async {
        (h.get(&format!("{CMS}/late-child")).await.0 == 404).then_some(())
    })
    .await;
    assert_eq!(h.get(&format!("{CMS}/kept-child")).await.0, 200);
}

#[tokio::test]
async fn foreground_deletion_removes_dependents_before_the_owner() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, owner) = h.post(CMS, &configmap("owner", json!({}))).await;
    let mut child = configmap("child", json!({}));
    child["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]);
    child["metadata"]["finalizers"] = json!(["example.com/hold"]);
    h.post(CMS, &child).await;
    let (code, marked) = h
        .delete(&format!("{CMS}/owner?propagationPolicy=Foreground"))
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    let (_, child) = eventually("the dependent to be marked", || async {
        let got = h.get(&format!("{CMS}/child")).await;
        got.1["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(got)
    })
    .await;
    assert_eq!(
        h.get(&format!("{CMS}/owner")).await.0,
        200,
        "the owner waits for its dependent"
    );
    let mut released = child.clone();
    released["metadata"]["finalizers"] = json!([]);
    h.put(&format!("{CMS}/child"), &released).await;
    eventually("the owner to go after its dependent", || async {
        (h.get(&format!("{CMS}/owner")).await.0 == 404).then_some(())
    })
    .await;
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents_and_drops_their_owner_reference() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, owner) = h.post(CMS, &configmap("owner", json!({}))).await;
    let mut child = configmap("child", json!({}));
    child["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner["metadata"]["uid"]}]);
    h.post(CMS, &child).await;
    h.delete(&format!("{CMS}/owner?propagationPolicy=Orphan"))
        .await;
    let (code, child) = h.get(&format!("{CMS}/child")).await;
    assert_eq!(code, 200);
    assert_eq!(child["metadata"]["ownerReferences"], json!([]));
}

#[tokio::test]
async fn namespaced_writes_need_an_existing_namespace() {
    let s = server().await;
    let h = Http::new(&s);
    for ns in ["default", "kube-system"] {
        assert_eq!(h.get(&format!("/api/v1/namespaces/{ns}")).await.0, 200);
    }
    let (code, status) = h
        .post(
            "/api/v1/namespaces/nope/configmaps",
            &configmap("a", json!({})),
        )
        .await;
    assert_eq!(code, 404);
    assert_eq!(status["details"]["kind"], "namespaces");
    h.post("/api/v1/namespaces", &json!({"metadata": {"name": "team"}}))
        .await;
    let (code, _) = h
        .post(
            "/api/v1/namespaces/team/configmaps",
            &configmap("a", json!({})),
        )
        .await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn a_terminating_namespace_refuses_new_objects() {
    let s = server().await;
    let h = Http::new(&s);
    h.post("/api/v1/namespaces", &json!({"metadata": {"name": "held"}}))
        .await;
    let mut cm = configmap("pinned", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
    h.post("/api/v1/namespaces/held/configmaps", &cm).await;
    h.delete("/api/v1/namespaces/held").await;
    let (code, st) = h
        .post(
            "/api/v1/namespaces/held/configmaps",
            &configmap("new", json!({})),
        )
        .await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (403, Some("Forbidden")),
        "{st}"
    );
    let (_, ns) = h.get("/api/v1/namespaces/held").await;
    assert_eq!(
        ns["status"]["phase"], "Terminating",
        "kept while a finalizer holds content"
    );
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_contents_then_the_namespace() {
    let s = server().await;
    let h = Http::new(&s);
    h.post("/api/v1/namespaces", &json!({"metadata": {"name": "tmp"}}))
        .await;
    h.post(
        "/api/v1/namespaces/tmp/configmaps",
        &configmap("a", json!({})),
    )
    .await;
    let (code, ns) = h.delete("/api/v1/namespaces/tmp").await;
    assert_eq!(code, 200, "{ns}");
    eventually("the namespace to disappear", || async {
        (h.get("/api/v1/namespaces/tmp").await.0 == 404).then_some(())
    })
    .await;
    assert_eq!(h.get("/api/v1/namespaces/tmp/configmaps/a").await.0, 404);
}

#[tokio::test]
async fn errors_are_status_bodies_with_reason_and_code() {
    let s = server().await;
    let h = Http::new(&s);
    let (code, st) = h.get(&format!("{CMS}/missing")).await;
    assert_eq!((code, st["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(st["details"]["name"], "missing");
    let (code, st) = h.put(CMS, &configmap("x", json!({}))).await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, st) = h.post(CMS, &configmap("Bad_Name", json!({}))).await;
    assert_eq!((code, st["reason"].as_str()), (422, Some("Invalid")));
    let (code, st) = h.get("/apis/nothing.example.com/v1/things").await;
    assert_eq!((code, st["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(st["kind"], "Status");
}

#[tokio::test]
async fn a_crd_serves_its_kind_with_discovery_until_it_is_deleted() {
    let s = server().await;
    let h = Http::new(&s);
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(h.get(widgets).await.0, 404);
    let (code, created) = h
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (_, groups) = h.get("/apis").await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com")
    );
    let (_, resources) = h.get("/apis/example.com/v1").await;
    assert_eq!(resources["resources"][0]["name"], "widgets");
    let (code, w) = h
        .post(widgets, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}))
        .await;
    assert_eq!(code, 201, "{w}");
    let (code, _) = h
        .patch(
            &format!("{widgets}/w"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"size": 2}}),
        )
        .await;
    assert_eq!(code, 415, "custom resources take no strategic merge patch");
    h.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
        .await;
    eventually("the kind to stop being served", || async {
        (h.get(widgets).await.0 == 404).then_some(())
    })
    .await;
    let (_, groups) = h.get("/apis").await;
    assert!(
        !groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com")
    );
}

#[tokio::test]
async fn a_custom_resource_reads_back_in_the_version_asked_for() {
    let s = server().await;
    let h = Http::new(&s);
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object"}}})
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [version("v2", true), version("v1", false)]},
    });
    assert_eq!(
        h.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd
        )
        .await
        .0,
        201
    );
    let (code, _) = h
        .post(
            "/apis/example.com/v1/gadgets",
            &json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}),
        )
        .await;
    assert_eq!(code, 201);
    let (_, g) = h.get("/apis/example.com/v2/gadgets/g").await;
    assert_eq!(g["apiVersion"], "example.com/v2");
    let (_, list) = h.get("/apis/example.com/v1/gadgets").await;
    assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
    let (_, group) = h.get("/apis/example.com").await;
    assert_eq!(group["preferredVersion"]["version"], "v2");
}

#[tokio::test]
async fn discovery_lists_the_built_ins_with_their_scope() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, core) = h.get("/api/v1").await;
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(find(&core, "namespaces")["namespaced"], false);
    assert_eq!(find(&core, "pods")["namespaced"], true);
    assert_eq!(find(&core, "pods/status")["kind"], "Pod");
    let (_, coord) = h.get("/apis/coordination.k8s.io/v1").await;
    assert_eq!(find(&coord, "leases")["namespaced"], true);
    let (_, version) = h.get("/version").await;
    assert_eq!(version["major"], "1");
    let (_, api) = h.get("/api").await;
    assert_eq!(api["versions"], json!(["v1"]));
}

#[tokio::test]
async fn configmap_or_secret_data_over_one_mebibyte_is_422_invalid() {
    let s = server().await;
    let h = Http::new(&s);
    let big = "x".repeat(1024 * 1024 + 1);
    let (code, status) = h.post(CMS, &cm_with_data("big", json!({"k": big}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("Too long: may not be more than 1048576 bytes"),
        "{message}"
    );
    let (code, _) = h.get(&format!("{CMS}/big")).await;
    assert_eq!(code, 404, "nothing was stored");

    let (code, cm) = h.post(CMS, &cm_with_data("small", json!({"k": "v"}))).await;
    assert_eq!(code, 201, "{cm}");
    let (code, status) = h
        .patch(
            &format!("{CMS}/small"),
            "application/merge-patch+json",
            &json!({"data": {"k": "y".repeat(1024 * 1024 + 1)}}),
        )
        .await;
    assert_eq!(
        code, 422,
        "an update over the limit is refused too: {status}"
    );

    let secret_bytes = 1024 * 1024 + 3;
    let encoded = "QUJD".repeat(secret_bytes / 3);
    let (code, status) = h
        .post(
            "/api/v1/namespaces/default/secrets",
            &json!({"metadata": {"name": "big"}, "data": {"k": encoded}}),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("data: Too long"),
        "{status}"
    );
}

#[tokio::test]
async fn request_body_over_three_mebibytes_is_413_request_entity_too_large() {
    let s = server().await;
    let h = Http::new(&s);
    let huge = "x".repeat(3 * 1024 * 1024 + 1);
    let (code, status) = h.post(CMS, &cm_with_data("huge", json!({"k": huge}))).await;
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(
        status["message"],
        "Request entity too large: limit is 3145728"
    );
}

#[tokio::test]
async fn secret_string_data_is_folded_into_base64_data_on_create_and_update() {
    let s = server().await;
    let h = Http::new(&s);
    let path = "/api/v1/namespaces/default/secrets";
    let (code, secret) = h
        .post(
            path,
            &json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eA=="},
                    "stringData": {"b": "hello", "c": "world"}}),
        )
        .await;
    assert_eq!(code, 201, "{secret}");
    assert_eq!(
        secret["data"],
        json!({"a": "eA==", "b": "aGVsbG8=", "c": "d29ybGQ="}),
        "stringData wins over data and is stored base64"
    );
    assert!(secret.get("stringData").is_none(), "{secret}");
    let (code, patched) = h
        .patch(
            &format!("{path}/s"),
            "application/merge-patch+json",
            &json!({"stringData": {"a": "hi"}}),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["data"]["a"], "aGk=");
    assert!(patched.get("stringData").is_none(), "{patched}");
    let (_, stored) = h.get(&format!("{path}/s")).await;
    assert_eq!(stored["data"]["c"], "d29ybGQ=");
    assert!(stored.get("stringData").is_none(), "{stored}");
}

#[tokio::test]
async fn answers_match_a_real_server_where_the_fidelity_suite_found_them_apart() {
    let s = server().await;
    let h = Http::new(&s);
    // Invalid labels are 422 with the field apart from the message.
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "l", "labels": {"bad key!": "x"}}});
    let (code, status) = h.post(CMS, &bad).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.labels");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    // An unknown dryRun value is 422 on the CreateOptions.
    let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}});
    let (code, status) = h.post(&format!("{CMS}?dryRun=Some"), &ok).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["kind"], "CreateOptions");
    // Built-in list items carry no apiVersion or kind; the list does.
    assert_eq!(h.post(CMS, &ok).await.0, 201);
    let (_, list) = h.get(CMS).await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert!(list["items"][0].get("kind").is_none(), "{list}");
    assert!(list["items"][0].get("apiVersion").is_none(), "{list}");
    // A dry-run patch answers at the current resourceVersion.
    let rv = list["items"][0]["metadata"]["resourceVersion"].clone();
    let (code, dry) = h
        .patch(
            &format!("{CMS}/d?dryRun=All"),
            "application/merge-patch+json",
            &json!({"data": {"a": "b"}}),
        )
        .await;
    assert_eq!(
        (code, &dry["metadata"]["resourceVersion"]),
        (200, &rv),
        "{dry}"
    );
    // Discovery as a 1.36 server: /api names the address with its port, /api/v1 has no
    // apiVersion, a v2beta1-only client gets plain JSON.
    let (_, api) = h.get("/api").await;
    let address = api["serverAddressByClientCIDRs"][0]["serverAddress"].as_str();
    assert!(address.is_some_and(|a| a.contains(':')), "{api}");
    let (_, core) = h.get("/api/v1").await;
    assert!(core.get("apiVersion").is_none(), "{core}");
    // A namespace's server-set spec and status are not owned by its creator.
    let (code, ns) = h
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "owned"}}),
        )
        .await;
    assert_eq!(code, 201, "{ns}");
    assert_eq!(ns["status"]["phase"], "Active");
    let owned = &ns["metadata"]["managedFields"][0]["fieldsV1"];
    assert!(
        owned.get("f:spec").is_none() && owned.get("f:status").is_none(),
        "{ns}"
    );
    // Table rows carry PartialObjectMetadata by default, null with includeObject=None.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let rows = get_accepting(&h, CMS, table).await;
    let columns: Vec<&str> = rows["columnDefinitions"]
        .as_array()
        .expect("column definitions")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Data", "Age"],
        "a ConfigMap's columns, as kubectl shows them"
    );
    assert_eq!(
        rows["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "{rows}"
    );
    let rows = get_accepting(&h, &format!("{CMS}?includeObject=None"), table).await;
    assert!(rows["rows"][0]["object"].is_null(), "{rows}");
    let rows = get_accepting(&h, &format!("{CMS}?includeObject=Object"), table).await;
    assert_eq!(rows["rows"][0]["object"]["kind"], "ConfigMap", "{rows}");
    // A NotFound of a core kind names no group.
    let (code, status) = h.get(&format!("{CMS}/missing")).await;
    assert_eq!(code, 404);
    assert!(status["details"].get("group").is_none(), "{status}");
    // No finalizer may be added to an object being deleted.
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "f", "finalizers": ["a.example.com/x"]}});
    assert_eq!(h.post(CMS, &held).await.0, 201);
    assert_eq!(h.delete(&format!("{CMS}/f")).await.0, 200);
    let (code, status) = h
        .patch(
            &format!("{CMS}/f"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": ["a.example.com/x", "b.example.com/y"]}}),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    // A dry-run delete that would remove the object answers the Success Status; it stays.
    let (code, status) = h.delete(&format!("{CMS}/d?dryRun=All")).await;
    assert_eq!((code, &status["kind"]), (200, &json!("Status")), "{status}");
    assert_eq!(h.get(&format!("{CMS}/d")).await.0, 200);
    // deletecollection lists the deleted objects themselves.
    let (code, list) = h.delete(CMS).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"d") && names.contains(&"f"), "{list}");
}

/// GET `path` with `Accept: accept`; the JSON body.
async fn get_accepting(h: &Http, path: &str, accept: &str) -> Value {
    let request = axum::http::Request::get(path)
        .header("accept", accept)
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = h.client.send(request).await.expect("response");
    let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 16 << 20)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("a JSON body")
}

#[tokio::test]
async fn a_put_without_a_resource_version_overwrites_a_config_map_but_not_a_lease() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("free", json!({"a": "1"}))).await;
    let (code, obj) = h
        .put(
            &format!("{CMS}/free"),
            &configmap("free", json!({"a": "2"})),
        )
        .await;
    assert_eq!(code, 200, "{obj}");
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}});
    h.post(leases, &lease).await;
    let (code, status) = h.put(&format!("{leases}/leader"), &lease).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "leases.coordination.k8s.io \"leader\" is invalid: metadata.resourceVersion: Invalid \
         value: 0: must be specified for an update"
    );
    assert_eq!(
        status["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );
}
