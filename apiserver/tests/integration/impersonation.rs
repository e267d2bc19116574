//! `Config::authorization`: impersonation as a v1.36 kube-apiserver checks it, and the
//! SubjectAccessReview APIs answered with the RBAC rules that guard requests.

use serde_json::json;

use crate::authorization::{NS, RBAC, SA_USER, binding, bot, role, send, with_service_account};

#[tokio::test]
async fn impersonation_needs_the_rights_upstream_checks() {
    let (server, token) = with_service_account().await;
    let admin = Some("embedded-apiserver");
    let cms = format!("/api/v1/namespaces/{NS}/configmaps");
    // The admin acting as the ServiceAccount is refused what the ServiceAccount may not do.
    let (code, status) = send(
        &server,
        admin,
        "GET",
        &cms,
        &[("Impersonate-User", SA_USER)],
        None,
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(SA_USER),
        "{status}"
    );
    // The ServiceAccount may not impersonate; the first (user-info) mode's 403 is the answer.
    let as_alice = [("Impersonate-User", "alice")];
    let (code, status) = send(&server, Some(&token), "GET", &cms, &as_alice, None).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            "configmaps is forbidden: User \"{SA_USER}\" cannot impersonate-on:user-info:list \
             resource \"configmaps\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    // Legacy impersonation of users named alice, and alice may list ConfigMaps.
    let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "be-alice"},
        "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"],
                   "resourceNames": ["alice"]}]});
    assert_eq!(
        send(
            &server,
            admin,
            "POST",
            &format!("{RBAC}/clusterroles"),
            &[],
            Some(cr)
        )
        .await
        .0,
        201
    );
    let mut crb = binding("bot-is-alice", "ClusterRole", "be-alice", bot());
    crb["kind"] = json!("ClusterRoleBinding");
    let path = format!("{RBAC}/clusterrolebindings");
    assert_eq!(
        send(&server, admin, "POST", &path, &[], Some(crb)).await.0,
        201
    );
    let (code, status) = send(&server, Some(&token), "GET", &cms, &as_alice, None).await;
    assert_eq!(code, 403, "alice herself may not list yet: {status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("configmaps is forbidden: User \"alice\"")
    );
    let reader = role(
        "cm-reader",
        json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]),
    );
    let roles = format!("{RBAC}/namespaces/{NS}/roles");
    assert_eq!(
        send(&server, admin, "POST", &roles, &[], Some(reader))
            .await
            .0,
        201
    );
    let b = binding(
        "alice-reads",
        "Role",
        "cm-reader",
        json!({"kind": "User", "name": "alice"}),
    );
    let bindings = format!("{RBAC}/namespaces/{NS}/rolebindings");
    assert_eq!(
        send(&server, admin, "POST", &bindings, &[], Some(b))
            .await
            .0,
        201
    );
    assert_eq!(
        send(&server, Some(&token), "GET", &cms, &as_alice, None)
            .await
            .0,
        200
    );
    // Not bob, and no groups (impersonate on groups is not granted).
    let (code, _) = send(
        &server,
        Some(&token),
        "GET",
        &cms,
        &[("Impersonate-User", "bob")],
        None,
    )
    .await;
    assert_eq!(code, 403);
    let with_group = [("Impersonate-User", "alice"), ("Impersonate-Group", "devs")];
    assert_eq!(
        send(&server, Some(&token), "GET", &cms, &with_group, None)
            .await
            .0,
        403
    );
    // A group without a user is a 400.
    let (code, status) = send(
        &server,
        admin,
        "GET",
        &cms,
        &[("Impersonate-Group", "devs")],
        None,
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("without impersonating a user name")
    );
    // whoami as the impersonated user: system:authenticated is added.
    let ssr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, review) = send(
        &server,
        admin,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[("Impersonate-User", "carol"), ("Impersonate-Group", "devs")],
        Some(ssr),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "carol", "groups": ["devs", "system:authenticated"]})
    );
}

#[tokio::test]
async fn access_reviews_answer_with_the_same_rules() {
    let (server, token) = with_service_account().await;
    let admin = Some("embedded-apiserver");
    let sar = |user: &str, verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "groups": ["system:serviceaccounts"],
                        "resourceAttributes": {"namespace": NS, "verb": verb, "resource": "configmaps"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, review) = send(
        &server,
        admin,
        "POST",
        path,
        &[],
        Some(sar(SA_USER, "list")),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"], json!({"allowed": false}));
    let roles = format!("{RBAC}/namespaces/{NS}/roles");
    let reader = role(
        "cm-reader",
        json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]),
    );
    assert_eq!(
        send(&server, admin, "POST", &roles, &[], Some(reader))
            .await
            .0,
        201
    );
    let bindings = format!("{RBAC}/namespaces/{NS}/rolebindings");
    let b = binding("bot-reads", "Role", "cm-reader", bot());
    assert_eq!(
        send(&server, admin, "POST", &bindings, &[], Some(b))
            .await
            .0,
        201
    );
    let (_, review) = send(
        &server,
        admin,
        "POST",
        path,
        &[],
        Some(sar(SA_USER, "list")),
    )
    .await;
    assert_eq!(
        review["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"bot-reads/team\" of Role \"cm-reader\" to ServiceAccount \"bot/team\""})
    );
    assert_eq!(review["spec"]["resourceAttributes"]["verb"], "list");
    // The ServiceAccount may not ask about others, but may ask about itself.
    let (code, status) = send(
        &server,
        Some(&token),
        "POST",
        path,
        &[],
        Some(sar(SA_USER, "get")),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{SA_USER}\" cannot \
             create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at \
             the cluster scope"
        )
    );
    let self_review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": NS, "verb": "delete", "resource": "configmaps"}}});
    let (code, review) = send(
        &server,
        Some(&token),
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &[],
        Some(self_review),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"]["allowed"], false);
    // A review naming nobody is invalid.
    let mut nobody = sar("", "get");
    nobody["spec"]["groups"] = json!([]);
    let (code, status) = send(&server, admin, "POST", path, &[], Some(nobody)).await;
    assert_eq!(code, 422, "{status}");
    // Other methods than create are not served.
    assert_eq!(send(&server, admin, "GET", path, &[], None).await.0, 405);
}
