//! Plugins acting as their own ServiceAccounts, on the real kube-apiserver with an audit log:
//! the host (bound only to what `reconcile-host rbac --include-host` gives it) impersonates the
//! account a plugin names on every request the plugin causes; with the host's grant check
//! switched off (a test-only setting), the API server alone refuses what the account may not do;
//! the plugin's cached reads follow the account's RBAC; the host may impersonate no other
//! account. On both servers (the embedded one with its authorization on); the audit log is the
//! real server's only.

use std::path::Path;
use std::process::Command;

use crate::common::backend::{Backend, Cluster};
use crate::common::control_plane::ControlPlane;
use crate::common::host::{HOST_BINARY, Host, component, scratch};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use serde::Deserialize;
use serde_json::Value;

/// The host's ServiceAccount.
const HOST: (&str, &str) = ("reconcile-system", "reconcile-host");
/// The tenant's namespace and the plugin's account there (audited).
const TENANT: &str = "audited-a";
const ACCOUNT: &str = "site";
/// Another team's namespace (audited).
const OTHER: &str = "audited-b";

/// Whether `user` may `verb` the `resource` (`name` of it, in `namespace` if given): what the API
/// server answers `user` itself (a SelfSubjectAccessReview sent impersonating it, as
/// `kubectl auth can-i --as` does, in JSON).
async fn can(
    backend: &Backend,
    user: &str,
    verb: &str,
    (group, resource): (&str, &str),
    name: &str,
    namespace: Option<&str>,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let reviews: kube::Api<SelfSubjectAccessReview> = kube::Api::all(backend.kube_client_as(user));
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                name: Some(name.to_owned()),
                namespace: namespace.map(ToOwned::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .expect("the API server reviews the access");
    answer.status.is_some_and(|status| status.allowed)
}

/// A token of the ServiceAccount `namespace/name` from the TokenRequest API, creating the account
/// if needed.
async fn account_token(backend: &Backend, dir: &Path, (namespace, name): (&str, &str)) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let _ = backend
        .kubectl(dir)
        .args(["create", "serviceaccount", name, "-n", namespace])
        .output();
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(backend.client(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a token for the account");
    answer
        .status
        .and_then(|status| status.token)
        .expect("a token")
}

/// Writes to `path` the admin kubeconfig of `backend` with its user's credentials replaced by
/// `token`.
fn as_token(backend: &Backend, path: &Path, token: &str) {
    backend.write_kubeconfig(path).expect("kubeconfig written");
    let text = std::fs::read_to_string(path).expect("kubeconfig readable");
    let mut config: Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
    for user in config["users"].as_array_mut().expect("users") {
        user["user"] = serde_json::json!({ "token": token });
    }
    std::fs::write(path, serde_yaml_ng::to_string(&config).expect("YAML")).expect("written");
}

fn user((namespace, name): (&str, &str)) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The group and verb that let the host act as a ServiceAccount: plain impersonation, or
/// constrained impersonation's (Kubernetes 1.36).
fn impersonation(constrained: bool) -> (&'static str, &'static str) {
    if constrained {
        ("authentication.k8s.io", "impersonate:serviceaccount")
    } else {
        ("", "impersonate")
    }
}

/// The documents of `reconcile-host rbac --include-host <manifest>` bound to the host's account
/// (the plugin account's own rules are the tenant's to write, below).
fn host_rbac(manifest: &Path, constrained: bool) -> Vec<Value> {
    let output = Command::new(HOST_BINARY)
        .args(["rbac", "--include-host"])
        .args(constrained.then_some("--constrained-impersonation"))
        .arg(manifest)
        .output()
        .expect("reconcile-host runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("YAML document"))
        .filter(|document| !document.is_null())
        .collect();
    let bound_to_host = |document: &Value| {
        let subjects = document["subjects"].as_array().cloned().unwrap_or_default();
        subjects.iter().any(|s| s["name"] == HOST.1)
    };
    let mut kept: Vec<Value> = Vec::new();
    for document in &documents {
        if document["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("Binding"))
        {
            if bound_to_host(document) {
                kept.push(document.clone());
            }
        } else {
            kept.push(document.clone());
        }
    }
    let verb = impersonation(constrained).1;
    assert!(
        kept.iter()
            .any(|d| d["rules"][0]["verbs"] == serde_json::json!([verb])
                && d["rules"][0]["resourceNames"] == serde_json::json!([ACCOUNT])),
        "rbac gives the host impersonate on exactly the plugin's account: {text}"
    );
    kept
}

fn labelled(namespace: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([("hostile".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_acts_as_its_service_account_and_the_api_server_holds_it_there() {
    acts_as_its_account(false).await;
}

/// The same with the host bound through constrained impersonation only
/// (`--constrained-impersonation`): it may act as the account, for what the account's plugin
/// does, and holds no plain `impersonate` at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_impersonation_is_enough_for_the_host_to_act_as_a_plugins_account() {
    acts_as_its_account(true).await;
}

async fn acts_as_its_account(constrained: bool) {
    let backend = Backend::start(Config::default().authorization(true))
        .await
        .expect("API server starts");
    let dir = scratch(if constrained {
        "tenancy-constrained"
    } else {
        "tenancy"
    });
    for name in [HOST.0, TENANT, OTHER] {
        let args = ["get", "namespace", name, "--ignore-not-found", "-o", "name"];
        if backend.kubectl_ok(&dir, &args).is_empty() {
            namespace(&backend, name, &[]).await;
        }
    }
    // Grants reach every namespace: the host's check would refuse nothing of what follows, the
    // API server must.
    let plugin = dir.join("plugin.yaml");
    std::fs::write(
        &plugin,
        format!(
            "name: tenant-site\nmodule: {}\nfor: {{apiVersion: v1, kind: ConfigMap}}\n\
             labelSelector: hostile=true\nserviceAccountName: {ACCOUNT}\n\
             serviceAccountNamespace: {TENANT}\ngrants:\n  - apiVersion: v1\n    kind: ConfigMap\n    \
             verbs: [get, patch, delete]\n",
            component("hostile").display()
        ),
    )
    .expect("manifest written");

    // The tenant's own rules: ConfigMaps in its namespace only.
    let rbac = dir.join("rbac.json");
    let mut items = host_rbac(&plugin, constrained);
    items.push(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "site", "namespace": TENANT},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "patch", "delete"]}]
    }));
    items.push(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "site", "namespace": TENANT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "site"},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": TENANT}]
    }));
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&rbac, list.to_string()).expect("rbac written");
    let rbac = rbac.display().to_string();
    backend.kubectl_ok(&dir, &["apply", "--validate=false", "-f", &rbac]);
    let host_user = user(HOST);
    let (group, verb) = impersonation(constrained);
    let account = |name| {
        can(
            &backend,
            &host_user,
            verb,
            (group, "serviceaccounts"),
            name,
            Some(TENANT),
        )
    };
    assert!(
        account(ACCOUNT).await,
        "the host may impersonate the account its plugin names"
    );
    assert!(
        !account("other").await,
        "the host may impersonate only the accounts its plugins name"
    );
    let legacy = |resource, name, namespace| {
        can(
            &backend,
            &host_user,
            "impersonate",
            ("", resource),
            name,
            namespace,
        )
    };
    assert!(
        !legacy("users", "admin", None).await,
        "the host may impersonate no user"
    );
    if constrained {
        assert!(
            !legacy("serviceaccounts", ACCOUNT, Some(TENANT)).await,
            "constrained: the host holds no plain impersonate"
        );
    }

    // The host runs on its account's token, with the grant check off for accounts.
    let token = account_token(&backend, &dir, HOST).await;
    let _ = account_token(&backend, &dir, (TENANT, ACCOUNT)).await;
    let kubeconfig = dir.join("kubeconfig");
    as_token(&backend, &kubeconfig, &token);
    let mut command = Host::command();
    command
        .env("RECONCILE_HOST_TEST_ONLY_SKIP_GRANT_CHECK", "true")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--leader-elect", "false", "--plugin"])
        .arg(&plugin);
    let host = Host::spawn(command);

    let post = PostParams::default();
    let tenant = config_maps(&backend, TENANT);
    let other = config_maps(&backend, OTHER);
    let victim = {
        let mut victim = labelled(OTHER, "victim", &[("keep", "me")]);
        victim.metadata.labels = None;
        victim
    };
    let _ = other.delete("victim", &Default::default()).await;
    other.create(&post, &victim).await.expect("victim created");
    let mine = {
        let mut mine = labelled(TENANT, "mine", &[("keep", "me")]);
        mine.metadata.labels = None;
        mine
    };
    let _ = tenant.delete("mine", &Default::default()).await;
    tenant.create(&post, &mine).await.expect("mine created");

    // Cached reads: its own namespace answered, the other refused, everything = its own.
    tenant
        .create(
            &post,
            &labelled(
                TENANT,
                "peek-other",
                &[("attack", "peek"), ("namespace", OTHER), ("name", "victim")],
            ),
        )
        .await
        .expect("created");
    let line = host.wait_log(&["hostile: peek", "get="]).await;
    let everywhere = line.split("everywhere=").nth(1).unwrap_or_default();
    assert!(
        line.contains("get=refused(")
            && line.contains("list=refused(")
            && everywhere.trim_end_matches('"') == TENANT,
        "the account's cache reads in {OTHER} are refused, and a list of every namespace holds \
         only {TENANT}'s objects: {line}"
    );
    assert!(
        line.contains("which may not get"),
        "the refusal names the account's lack: {line}"
    );
    tenant
        .create(
            &post,
            &labelled(
                TENANT,
                "peek-own",
                &[
                    ("attack", "peek"),
                    ("namespace", TENANT),
                    ("name", "peek-own"),
                ],
            ),
        )
        .await
        .expect("created");
    let own = host.wait_log(&["hostile: peek get=found"]).await;
    assert!(
        !own.contains("refused"),
        "its own namespace is readable: {own}"
    );

    // Writes: into the other namespace refused by the API server (the grant check is off),
    // into its own namespace done.
    tenant
        .create(
            &post,
            &labelled(
                TENANT,
                "inject-other",
                &[
                    ("attack", "inject"),
                    ("namespace", OTHER),
                    ("name", "victim"),
                ],
            ),
        )
        .await
        .expect("created");
    tenant
        .create(
            &post,
            &labelled(
                TENANT,
                "inject-own",
                &[
                    ("attack", "inject"),
                    ("namespace", TENANT),
                    ("name", "mine"),
                ],
            ),
        )
        .await
        .expect("created");
    eventually_async(
        "the plugin deleted its own ConfigMap as its account",
        || async { tenant.get_opt("mine").await.ok()?.is_none().then_some(()) },
    )
    .await;
    // The refused get, patch and delete of the other namespace's ConfigMap: the guest saw the
    // server's refusal, and nothing changed.
    host.wait_log(&[
        "hostile: get refused",
        "the API server refused ServiceAccount",
    ])
    .await;
    host.wait_log(&[&format!("key={TENANT}/inject-other"), "reconciled"])
        .await;
    let kept = other
        .get("victim")
        .await
        .expect("the victim is still there");
    assert_eq!(
        kept.data.and_then(|d| d.get("keep").cloned()).as_deref(),
        Some("me"),
        "the refused patch changed nothing"
    );
    if let Some(plane) = backend.control_plane() {
        audited(plane, &host_user).await;
    }
    drop(host);
    for name in ["peek-other", "peek-own", "inject-other", "inject-own"] {
        let _ = tenant.delete(name, &Default::default()).await;
    }
    let _ = other.delete("victim", &Default::default()).await;
}

/// What the real server's audit log shows of the plugin's requests: the refused writes sent by
/// the host's account as the plugin's, and every request the plugin caused impersonating its
/// account.
async fn audited(plane: &ControlPlane, host_user: &str) {
    let refused_writes = eventually_async("the audit log shows the refused writes", || async {
        let events = plane.audit_events();
        let refused: Vec<Value> = events
            .into_iter()
            .filter(|e| {
                e["objectRef"]["namespace"] == OTHER
                    && e["objectRef"]["name"] == "victim"
                    && e["impersonatedUser"]["username"] == user((TENANT, ACCOUNT)).as_str()
            })
            .collect();
        let verbs: std::collections::BTreeSet<String> = refused
            .iter()
            .filter_map(|e| e["verb"].as_str().map(ToOwned::to_owned))
            .collect();
        (verbs.len() == 3).then_some(refused)
    })
    .await;
    for event in &refused_writes {
        assert_eq!(event["responseStatus"]["code"], 403, "{event}");
        assert_eq!(event["user"]["username"], host_user, "{event}");
    }

    // Every request the plugin caused carries its account as the impersonated user: all that
    // the host's account sent about single ConfigMaps (its informers list and watch as itself).
    let events = plane.audit_events();
    let by_plugin: Vec<&Value> = events
        .iter()
        .filter(|e| e["user"]["username"] == host_user)
        .filter(|e| {
            e["objectRef"]["resource"] == "configmaps" && e["objectRef"]["name"].is_string()
        })
        .collect();
    assert!(
        by_plugin.len() >= 6,
        "the plugin's calls are audited: {by_plugin:#?}"
    );
    for event in by_plugin {
        assert_eq!(
            event["impersonatedUser"]["username"],
            user((TENANT, ACCOUNT)).as_str(),
            "a request the plugin caused went out as the host: {event}"
        );
        assert!(
            event["impersonatedUser"]["groups"]
                .as_array()
                .is_none_or(|groups| groups.iter().all(|g| g.as_str().is_some_and(|g| g
                    .starts_with("system:serviceaccounts")
                    || g == "system:authenticated"))),
            "no groups are asserted: {event}"
        );
    }
}
