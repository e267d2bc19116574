//! Plugins acting as their own ServiceAccounts, on the real kube-apiserver with an audit log:
//! the host (bound only to what `reconcile-host rbac --include-host` gives it) impersonates the
//! account a plugin names on every request the plugin causes; with the host's grant check
//! switched off (a test-only setting), the API server alone refuses what the account may not do;
//! the plugin's cached reads follow the account's RBAC; the host may impersonate no other
//! account. Only a real server authorizes, so on the embedded one the test says so and stops.

use std::path::Path;
use std::process::Command;

use crate::common::backend::Backend;
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

fn kubectl(plane: &ControlPlane, args: &[&str]) -> String {
    let output = plane.kubectl().args(args).output().expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// `kubectl auth can-i` as `user`.
fn can_i(plane: &ControlPlane, user: &str, args: &[&str]) -> String {
    let output = plane
        .kubectl()
        .args(["auth", "can-i"])
        .args(args)
        .args(["--as", user])
        .output()
        .expect("kubectl runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn user((namespace, name): (&str, &str)) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The documents of `reconcile-host rbac --include-host <manifest>` bound to the host's account
/// (the plugin account's own rules are the tenant's to write, below).
fn host_rbac(manifest: &Path) -> Vec<Value> {
    let output = Command::new(HOST_BINARY)
        .args(["rbac", "--include-host"])
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
    assert!(
        kept.iter().any(
            |d| d["rules"][0]["verbs"] == serde_json::json!(["impersonate"])
                && d["rules"][0]["resourceNames"] == serde_json::json!([ACCOUNT])
        ),
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
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let Some(plane) = backend.control_plane() else {
        eprintln!("the embedded API server does not authorize requests; run with E2E_BACKEND=real");
        return;
    };
    for name in [HOST.0, TENANT, OTHER] {
        if kubectl(
            plane,
            &["get", "namespace", name, "--ignore-not-found", "-o", "name"],
        )
        .is_empty()
        {
            namespace(&backend, name, &[]).await;
        }
    }
    let dir = scratch("tenancy");
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
    let mut items = host_rbac(&plugin);
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
    kubectl(plane, &["apply", "-f", &rbac.display().to_string()]);
    let host_user = user(HOST);
    let other_account = format!("serviceaccounts/{}", "other");
    assert_eq!(
        can_i(
            plane,
            &host_user,
            &[
                "impersonate",
                &format!("serviceaccounts/{ACCOUNT}"),
                "-n",
                TENANT
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(
            plane,
            &host_user,
            &["impersonate", &other_account, "-n", TENANT]
        ),
        "no",
        "the host may impersonate only the accounts its plugins name"
    );
    assert_eq!(
        can_i(plane, &host_user, &["impersonate", "users/admin"]),
        "no"
    );

    // The host runs on its account's token, with the grant check off for accounts.
    let token = plane.service_account_token(HOST.0, HOST.1);
    let _ = plane.service_account_token(TENANT, ACCOUNT);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    \
             certificate-authority: {}\nusers:\n- name: host\n  user:\n    token: {token}\n\
             contexts:\n- name: host\n  context: {{cluster: real, user: host, namespace: default}}\n\
             current-context: host\n",
            plane.url(),
            plane.ca_path().display()
        ),
    )
    .expect("kubeconfig written");
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
        assert_eq!(event["user"]["username"], host_user.as_str(), "{event}");
    }
    let kept = other
        .get("victim")
        .await
        .expect("the victim is still there");
    assert_eq!(
        kept.data.and_then(|d| d.get("keep").cloned()).as_deref(),
        Some("me"),
        "the refused patch changed nothing"
    );
    assert!(
        host.log().contains("the API server refused ServiceAccount"),
        "the guest sees `denied` with the server's reason"
    );

    // Every request the plugin caused carries its account as the impersonated user: all that
    // the host's account sent about single ConfigMaps (its informers list and watch as itself).
    let events = plane.audit_events();
    let by_plugin: Vec<&Value> = events
        .iter()
        .filter(|e| e["user"]["username"] == host_user.as_str())
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
    drop(host);
    for name in ["peek-other", "peek-own", "inject-other", "inject-own"] {
        let _ = tenant.delete(name, &Default::default()).await;
    }
    let _ = other.delete("victim", &Default::default()).await;
}
