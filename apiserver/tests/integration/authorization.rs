//! `Config::authorization`: ServiceAccount tokens from the TokenRequest subresource, RBAC read
//! from the server's own Roles and bindings at request time, impersonation, the
//! SubjectAccessReview APIs and upstream's 401 and 403 answers (`tests/fidelity` holds the same
//! requests to a real kube-apiserver).

use embedded_apiserver::{ApiServer, Config};
use serde_json::{Value, json};

use crate::common::start;

pub(crate) const NS: &str = "team";
pub(crate) const SA_USER: &str = "system:serviceaccount:team:bot";
pub(crate) const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// One request with `token` (none: anonymous) and extra headers; the code and the JSON body.
pub(crate) async fn send(
    server: &ApiServer,
    token: Option<&str>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_namespace = "default".into();
    let client = kube::Client::try_from(config).expect("client");
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let resp = client
        .send(req.body(kube::client::Body::from(bytes)).expect("request"))
        .await
        .expect("response");
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(axum::body::Body::new(resp.into_body()), 1 << 20)
        .await
        .expect("body");
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// A server that authorizes, namespace `team` and ServiceAccount `team/bot`, and a token for it.
pub(crate) async fn with_service_account() -> (ApiServer, String) {
    let server = start(Config::default().authorization(true)).await;
    let admin = Some("embedded-apiserver");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    assert_eq!(
        send(&server, admin, "POST", "/api/v1/namespaces", &[], Some(ns))
            .await
            .0,
        201
    );
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}});
    let path = format!("/api/v1/namespaces/{NS}/serviceaccounts");
    assert_eq!(
        send(&server, admin, "POST", &path, &[], Some(sa)).await.0,
        201
    );
    let (code, tr) = send(
        &server,
        admin,
        "POST",
        &format!("{path}/bot/token"),
        &[],
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
    )
    .await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    let token = tr["status"]["token"].as_str().expect("a token").to_string();
    (server, token)
}

pub(crate) fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name}, "rules": rules})
}

pub(crate) fn binding(name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": [subject]})
}

pub(crate) fn bot() -> Value {
    json!({"kind": "ServiceAccount", "name": "bot", "namespace": NS})
}

#[tokio::test]
async fn service_account_is_refused_until_a_binding_grants_and_again_once_it_is_removed() {
    let (server, token) = with_service_account().await;
    let admin = Some("embedded-apiserver");
    let cms = format!("/api/v1/namespaces/{NS}/configmaps");
    let (code, status) = send(&server, Some(&token), "GET", &cms, &[], None).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "configmaps is forbidden: User \"{SA_USER}\" cannot list resource \"configmaps\" in \
             API group \"\" in the namespace \"{NS}\""
        )
    );
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["details"], json!({"kind": "configmaps"}));

    let roles = format!("{RBAC}/namespaces/{NS}/roles");
    let bindings = format!("{RBAC}/namespaces/{NS}/rolebindings");
    let reader = role(
        "cm-reader",
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]),
    );
    assert_eq!(
        send(&server, admin, "POST", &roles, &[], Some(reader))
            .await
            .0,
        201
    );
    let b = binding("bot-reads", "Role", "cm-reader", bot());
    assert_eq!(
        send(&server, admin, "POST", &bindings, &[], Some(b))
            .await
            .0,
        201
    );
    assert_eq!(
        send(&server, Some(&token), "GET", &cms, &[], None).await.0,
        200
    );
    // Reading is not writing, and the binding is only in `team`.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (code, status) = send(&server, Some(&token), "POST", &cms, &[], Some(cm)).await;
    assert_eq!(code, 403, "{status}");
    let (code, status) = send(
        &server,
        Some(&token),
        "GET",
        "/api/v1/namespaces/default/configmaps/x",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            "configmaps \"x\" is forbidden: User \"{SA_USER}\" cannot get resource \
             \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    assert_eq!(
        status["details"],
        json!({"kind": "configmaps", "name": "x"})
    );

    let (code, _) = send(
        &server,
        admin,
        "DELETE",
        &format!("{bindings}/bot-reads"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        send(&server, Some(&token), "GET", &cms, &[], None).await.0,
        403
    );
}

#[tokio::test]
async fn a_binding_to_a_missing_role_is_named_in_the_denial() {
    let (server, token) = with_service_account().await;
    let bindings = format!("{RBAC}/namespaces/{NS}/rolebindings");
    let b = binding("dangling", "Role", "nothing", bot());
    let admin = Some("embedded-apiserver");
    assert_eq!(
        send(&server, admin, "POST", &bindings, &[], Some(b))
            .await
            .0,
        201
    );
    let path = "/apis/apps/v1/namespaces/team/deployments/web/status";
    let (code, status) = send(&server, Some(&token), "PUT", path, &[], Some(json!({}))).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            "deployments.apps \"web\" is forbidden: User \"{SA_USER}\" cannot update resource \
             \"deployments/status\" in API group \"apps\" in the namespace \"team\": RBAC: \
             role.rbac.authorization.k8s.io \"nothing\" not found"
        )
    );
    assert_eq!(
        status["details"],
        json!({"group": "apps", "kind": "deployments", "name": "web"})
    );
}

#[tokio::test]
async fn cluster_roles_grant_cluster_scope_and_non_resource_urls() {
    let (server, token) = with_service_account().await;
    let admin = Some("embedded-apiserver");
    let (code, status) = send(
        &server,
        Some(&token),
        "GET",
        "/api/v1/namespaces",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!(
            "namespaces is forbidden: User \"{SA_USER}\" cannot list resource \"namespaces\" in \
             API group \"\" at the cluster scope"
        )
    );
    let (code, status) = send(&server, Some(&token), "GET", "/logs/", &[], None).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        format!("forbidden: User \"{SA_USER}\" cannot get path \"/logs/\"")
    );
    // Discovery and version are every authenticated user's (system:discovery).
    assert_eq!(
        send(&server, Some(&token), "GET", "/apis", &[], None)
            .await
            .0,
        200
    );
    assert_eq!(
        send(&server, Some(&token), "GET", "/version", &[], None)
            .await
            .0,
        200
    );
    let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "ns-reader"},
        "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["namespaces"]},
                  {"verbs": ["get"], "nonResourceURLs": ["/logs/*"]}]});
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
    let mut crb = binding("bot-ns", "ClusterRole", "ns-reader", bot());
    crb["kind"] = json!("ClusterRoleBinding");
    let path = format!("{RBAC}/clusterrolebindings");
    assert_eq!(
        send(&server, admin, "POST", &path, &[], Some(crb)).await.0,
        201
    );
    assert_eq!(
        send(
            &server,
            Some(&token),
            "GET",
            "/api/v1/namespaces",
            &[],
            None
        )
        .await
        .0,
        200
    );
    // Allowed, then not found: authorization comes first.
    assert_eq!(
        send(&server, Some(&token), "GET", "/logs/", &[], None)
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn unknown_tokens_are_401_and_anonymous_sees_only_public_info() {
    let (server, _) = with_service_account().await;
    let (code, status) = send(
        &server,
        Some("nobody-issued-this"),
        "GET",
        "/api",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(status["reason"], "Unauthorized");
    assert_eq!(
        send(&server, None, "GET", "/version", &[], None).await.0,
        200
    );
    let (code, status) = send(
        &server,
        None,
        "GET",
        "/api/v1/namespaces/team/pods",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("User \"system:anonymous\""),
        "{status}"
    );
    let admin = Some("embedded-apiserver");
    let missing = "/api/v1/namespaces/team/serviceaccounts/ghost/token";
    let (code, status) = send(&server, admin, "POST", missing, &[], Some(json!({}))).await;
    assert_eq!(code, 404);
    assert_eq!(status["message"], "serviceaccounts \"ghost\" not found");
}

#[tokio::test]
async fn deleting_the_service_account_revokes_its_tokens() {
    let (server, token) = with_service_account().await;
    let admin = Some("embedded-apiserver");
    assert_eq!(
        send(&server, Some(&token), "GET", "/api", &[], None)
            .await
            .0,
        200
    );
    let path = format!("/api/v1/namespaces/{NS}/serviceaccounts/bot");
    assert_eq!(
        send(&server, admin, "DELETE", &path, &[], None).await.0,
        200
    );
    assert_eq!(
        send(&server, Some(&token), "GET", "/api", &[], None)
            .await
            .0,
        401
    );
}

#[tokio::test]
async fn static_users_and_the_admin_token_authenticate_as_configured() {
    let config = Config::default()
        .authorization(true)
        .require_token("root-token")
        .user("dev-token", "dev", ["devs"]);
    let server = start(config).await;
    let whoami = |token: &'static str| {
        let server = &server;
        async move {
            let ssr =
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
            send(
                server,
                Some(token),
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                &[],
                Some(ssr),
            )
            .await
        }
    };
    let (_, review) = whoami("dev-token").await;
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "dev", "groups": ["devs", "system:authenticated"]})
    );
    let (_, review) = whoami("root-token").await;
    assert_eq!(review["status"]["userInfo"]["username"], "admin");
    assert_eq!(
        whoami("embedded-apiserver").await.0,
        401,
        "only the configured admin token"
    );
    // The server's own client carries the admin token.
    let client = server.kube_client().expect("client");
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    assert!(api.list(&Default::default()).await.is_ok());
}

#[tokio::test]
async fn without_authorization_every_request_is_allowed_and_reviews_say_so() {
    let server = start(Config::default()).await;
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "anyone", "resourceAttributes": {"verb": "delete", "resource": "nodes"}}});
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, review) = send(&server, None, "POST", path, &[], Some(sar)).await;
    assert_eq!(code, 201);
    assert_eq!(review["status"], json!({"allowed": true}));
    let (code, _) = send(
        &server,
        Some("anything"),
        "GET",
        "/api/v1/namespaces",
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
}
