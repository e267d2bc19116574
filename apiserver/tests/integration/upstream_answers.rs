//! Answers a real kube-apiserver v1.36 gives where this server once answered otherwise: status
//! code, reason and, for 422s, each cause's `field` and `reason` (the differential fidelity
//! suite, `tests/fidelity.rs` at the top level, compares the same requests with a real server).

use crate::common::{Http, configmap, server};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const APPLY: &str = "application/apply-patch+yaml";

/// The code, the reason and each cause's (field, reason) of an answer.
fn causes(status: &Value) -> Vec<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (text("field"), text("reason"))
        })
        .collect()
}

fn pair(field: &str, reason: &str) -> (String, String) {
    (field.to_string(), reason.to_string())
}

#[tokio::test]
async fn create_carrying_a_resource_version_is_500_without_a_reason() {
    let s = server().await;
    let h = Http::new(&s);
    let mut cm = configmap("rv", json!({}));
    cm["metadata"]["resourceVersion"] = json!("5");
    let (code, status) = h.post(CMS, &cm).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["status"], "Failure");
    assert!(status.get("reason").is_none(), "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("resourceVersion should not be set on objects to be created"),
        "{status}"
    );
    // Nothing was stored; a dry run does not reach the storage check.
    assert_eq!(h.get(&format!("{CMS}/rv")).await.0, 404);
    assert_eq!(h.post(&format!("{CMS}?dryRun=All"), &cm).await.0, 201);
}

#[tokio::test]
async fn default_kube_system_and_kube_public_may_not_be_deleted() {
    let s = server().await;
    let h = Http::new(&s);
    for path in [
        "/api/v1/namespaces/default",
        "/api/v1/namespaces/kube-system?dryRun=All",
        "/api/v1/namespaces/kube-public",
    ] {
        let (code, status) = h.delete(path).await;
        assert_eq!(
            (code, &status["reason"]),
            (403, &json!("Forbidden")),
            "{status}"
        );
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .ends_with("is forbidden: this namespace may not be deleted"),
            "{status}"
        );
        assert_eq!(status["details"]["kind"], "namespaces");
    }
    let (_, ns) = h.get("/api/v1/namespaces/default").await;
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
}

#[tokio::test]
async fn a_body_naming_another_object_than_the_url_is_400() {
    let s = server().await;
    let h = Http::new(&s);
    assert_eq!(h.post(CMS, &configmap("a", json!({}))).await.0, 201);
    // PUT naming another namespace, or another name.
    let mut other_ns = configmap("a", json!({}));
    other_ns["metadata"]["namespace"] = json!("kube-system");
    let (code, status) = h.put(&format!("{CMS}/a"), &other_ns).await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    let (code, status) = h.put(&format!("{CMS}/a"), &configmap("b", json!({}))).await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    let (_, live) = h.get(&format!("{CMS}/a")).await;
    assert_eq!(live["metadata"]["namespace"], "default");
    // Apply without a kind, or naming another object.
    let apply = format!("{CMS}/a?fieldManager=t");
    let no_kind = json!({"apiVersion": "v1", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let (code, status) = h.patch(&apply, APPLY, &no_kind).await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid object type: /v1, Kind="),
        "{status}"
    );
    let renamed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
    let (code, status) = h.patch(&apply, APPLY, &renamed).await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    let (code, status) = h
        .patch(&format!("{CMS}/new?fieldManager=t"), APPLY, &renamed)
        .await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    // A JSON patch that renames the object.
    let rename = json!([{"op": "replace", "path": "/metadata/name", "value": "b"}]);
    let (code, status) = h
        .patch(&format!("{CMS}/a"), "application/json-patch+json", &rename)
        .await;
    assert_eq!(
        (code, &status["reason"]),
        (400, &json!("BadRequest")),
        "{status}"
    );
    assert_eq!(h.get(&format!("{CMS}/b")).await.0, 404);
}

#[tokio::test]
async fn a_put_with_another_uid_is_409_conflict() {
    let s = server().await;
    let h = Http::new(&s);
    let (_, created) = h.post(CMS, &configmap("u", json!({}))).await;
    let mut changed = created.clone();
    changed["metadata"]["uid"] = json!("00000000-0000-4000-8000-000000000000");
    let (code, status) = h.put(&format!("{CMS}/u"), &changed).await;
    assert_eq!(
        (code, &status["reason"]),
        (409, &json!("Conflict")),
        "{status}"
    );
    assert_eq!(status["details"]["kind"], "configmaps");
    // The live uid is a precondition that holds.
    let (code, updated) = h.put(&format!("{CMS}/u"), &created).await;
    assert_eq!(code, 200, "{updated}");
}

#[tokio::test]
async fn annotations_owner_references_and_finalizers_are_validated_as_upstream() {
    let s = server().await;
    let h = Http::new(&s);
    let with_meta = |meta: Value| {
        let mut cm = configmap("m", json!({}));
        for (k, v) in meta.as_object().unwrap() {
            cm["metadata"][k] = v.clone();
        }
        cm
    };
    let owner = |name: &str, controller: bool| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": format!("uid-{name}"),
               "controller": controller})
    };
    let no_uid = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o"});
    for (meta, expected) in [
        (
            json!({"annotations": {"k": "x".repeat(262_144)}}),
            vec![pair("metadata.annotations", "FieldValueTooLong")],
        ),
        (
            json!({"annotations": {"bad key!": "x"}}),
            vec![pair("metadata.annotations", "FieldValueInvalid")],
        ),
        (
            json!({"finalizers": ["hold"]}),
            vec![pair("metadata.finalizers[0]", "FieldValueInvalid")],
        ),
        (
            json!({"ownerReferences": [no_uid]}),
            vec![pair("metadata.ownerReferences.uid", "FieldValueInvalid")],
        ),
        (
            json!({"ownerReferences": [owner("a", true), owner("b", true)]}),
            vec![pair("metadata.ownerReferences", "FieldValueInvalid")],
        ),
    ] {
        let (code, status) = h.post(CMS, &with_meta(meta.clone())).await;
        assert_eq!(
            (code, &status["reason"]),
            (422, &json!("Invalid")),
            "{meta}: {status}"
        );
        assert_eq!(causes(&status), expected, "{meta}: {status}");
    }
    let (code, status) = h
        .post(
            CMS,
            &with_meta(json!({"annotations": {"k": "x".repeat(262_143)},
                              "finalizers": ["example.com/hold", "orphan"],
                              "ownerReferences": [owner("a", true), owner("b", false)]})),
        )
        .await;
    assert_eq!(code, 201, "{status}");
}

#[tokio::test]
async fn immutable_config_maps_and_secrets_keep_their_data_and_the_flag() {
    let s = server().await;
    let h = Http::new(&s);
    let mut cm = configmap("i", json!({}));
    cm["immutable"] = json!(true);
    cm["data"] = json!({"k": "v"});
    assert_eq!(h.post(CMS, &cm).await.0, 201);
    let merge = "application/merge-patch+json";
    let (code, status) = h
        .patch(&format!("{CMS}/i"), merge, &json!({"data": {"k": "w"}}))
        .await;
    assert_eq!(
        (code, &status["reason"]),
        (422, &json!("Invalid")),
        "{status}"
    );
    assert_eq!(causes(&status), [pair("data", "FieldValueForbidden")]);
    let (code, status) = h
        .patch(&format!("{CMS}/i"), merge, &json!({"immutable": false}))
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), [pair("immutable", "FieldValueForbidden")]);
    // Labels may still change.
    let (code, status) = h
        .patch(
            &format!("{CMS}/i"),
            merge,
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(code, 200, "{status}");
    let secrets = "/api/v1/namespaces/default/secrets";
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "immutable": true, "data": {"k": "eA=="}});
    assert_eq!(h.post(secrets, &secret).await.0, 201);
    let (code, status) = h
        .patch(
            &format!("{secrets}/s"),
            merge,
            &json!({"stringData": {"k": "y"}}),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), [pair("data", "FieldValueForbidden")]);
}

#[tokio::test]
async fn names_lists_and_generated_names_follow_upstream_rules() {
    let s = server().await;
    let h = Http::new(&s);
    // Namespace and Service names are DNS-1123 labels (a Service may start with a digit).
    let (code, status) = h
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [pair("metadata.name", "FieldValueInvalid")]
    );
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a.b"},
                         "spec": {"ports": [{"port": 80}]}});
    let (code, status) = h
        .post("/api/v1/namespaces/default/services", &service)
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [pair("metadata.name", "FieldValueInvalid")]
    );
    let mut digit = service.clone();
    digit["metadata"]["name"] = json!("1web");
    let (code, created) = h.post("/api/v1/namespaces/default/services", &digit).await;
    assert_eq!(code, 201, "{created}");
    // A generated name is at most 63 characters: the prefix is cut to 58.
    let mut generated = configmap("", json!({}));
    generated["metadata"] = json!({"generateName": "g".repeat(70)});
    let (code, created) = h.post(CMS, &generated).await;
    assert_eq!(code, 201, "{created}");
    let name = created["metadata"]["name"].as_str().unwrap();
    assert_eq!(name.len(), 63, "{name}");
    assert!(name.starts_with(&"g".repeat(58)), "{name}");
    // limit=-1 is no limit.
    let (code, list) = h.get(&format!("{CMS}?limit=-1")).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn metadata_forms_of_the_wrong_shape_quota_status_and_bracketed_fields_are_upstreams() {
    let s = server().await;
    let h = Http::new(&s);
    h.post(CMS, &configmap("shape", json!({}))).await;
    let client = s.kube_client().expect("kube client");
    let accepting = |path: &str, accept: &str| {
        axum::http::Request::builder()
            .uri(path)
            .header("accept", accept)
            .body(kube::client::Body::from(Vec::new()))
            .expect("request")
    };
    for (path, accept, says) in [
        (
            CMS.to_string(),
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)",
        ),
        (
            format!("{CMS}/shape"),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)",
        ),
    ] {
        let response = client
            .send(accepting(&path, accept))
            .await
            .expect("response");
        assert_eq!(response.status().as_u16(), 406, "{path} as {accept}");
        let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 1 << 20)
            .await
            .expect("body");
        let status: Value = serde_json::from_slice(&bytes).expect("a Status");
        assert_eq!(
            (status["reason"].as_str(), status["message"].as_str()),
            (Some("NotAcceptable"), Some(says))
        );
    }
    let fallback = client
        .send(accepting(
            CMS,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
        ))
        .await
        .expect("response");
    assert_eq!(fallback.status().as_u16(), 200, "another form accepted");

    let mut bad = configmap("bad-key", json!({}));
    bad["data"] = json!({"a b": "1"});
    let (code, status) = h.post(CMS, &bad).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), [pair("data[a b]", "FieldValueInvalid")]);

    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                       "spec": {"hard": {"pods": "2"}}, "status": {"used": {"pods": "9"}}});
    let (code, created) = h
        .post("/api/v1/namespaces/default/resourcequotas", &quota)
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["status"],
        json!({}),
        "a new quota's status is emptied"
    );
}

#[tokio::test]
async fn metrics_count_the_stored_objects_per_resource() {
    let s = server().await;
    let h = Http::new(&s);
    let (before, _) = h.get("/metrics").await;
    assert_eq!(before, 200);
    for name in ["m1", "m2"] {
        h.post(CMS, &configmap(name, json!({}))).await;
    }
    let request = axum::http::Request::builder()
        .uri("/metrics")
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = s
        .kube_client()
        .expect("kube client")
        .send(request)
        .await
        .expect("response");
    let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 1 << 20)
        .await
        .expect("body");
    let text = String::from_utf8(bytes.to_vec()).expect("UTF-8");
    let configmaps = text
        .lines()
        .find_map(|line| line.strip_prefix("apiserver_storage_objects{resource=\"configmaps\"} "))
        .and_then(|count| count.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no ConfigMap count in:\n{text}"));
    assert!(configmaps >= 2, "{text}");
    assert!(
        text.contains("apiserver_storage_objects{resource=\"deployments.apps\"} 0"),
        "{text}"
    );
}

#[tokio::test]
async fn an_apply_through_status_owns_its_fields_conflicts_and_removes_what_it_drops() {
    let s = server().await;
    let h = Http::new(&s);
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(h.post(deployments, &deployment).await.0, 201);
    let status = |manager: &str| format!("{deployments}/d/status?fieldManager={manager}");
    let applied = |status: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "status": status});
    let (code, body) = h
        .patch(
            &status("a"),
            APPLY,
            &applied(json!({"replicas": 2, "updatedReplicas": 1})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = h
        .patch(&status("b"), APPLY, &applied(json!({"replicas": 3})))
        .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    assert_eq!(
        causes(&body),
        [pair(".status.replicas", "FieldManagerConflict")]
    );
    let (code, body) = h
        .patch(&status("a"), APPLY, &applied(json!({"replicas": 2})))
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["status"],
        json!({"replicas": 2}),
        "the dropped field is removed"
    );
}
