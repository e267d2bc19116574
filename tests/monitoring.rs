//! The shipped Grafana dashboard (`deploy/monitoring/dashboard.json`) and Prometheus alerting
//! rules (`deploy/monitoring/alerts.yaml`) query only series the host exports: every expression
//! parses as PromQL, and every metric it selects is one that real hosts' `/metrics` declare, by
//! its family's `# TYPE`: counters as `<family>_total`, histograms as `_bucket`, `_sum` and
//! `_count`, gauges by their name. A family shows in `/metrics` once it has a series, so the
//! hosts (on the embedded API server) run what makes every family the files name: a leader, a
//! sharded replica, a plugin with a shadow that differs, a tenant's plugin, and a
//! ReconcilerPlugin whose module cannot be fetched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::backend::Cluster as _;
use crate::common::host::{Host, component, manifest, scratch, workspace};
use crate::common::{crd_established, eventually_async, namespace};
use embedded_apiserver::{ApiServer, Config};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use promql_parser::parser::{self, Expr};
use reconcile_host::manifest::ReconcilerPlugin;
use serde_json::{Value, json};

/// The sample names `exposition` declares, from its `# TYPE <family> <type>` lines.
fn exported(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(declared) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = declared.split_whitespace();
        let (Some(family), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{family}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{family}{suffix}"));
                }
            }
            _ => {
                names.insert(family.to_owned());
            }
        }
    }
    names
}

/// Every metric name `expr` selects.
fn selected(expr: &Expr, names: &mut BTreeSet<String>) {
    match expr {
        Expr::VectorSelector(selector) => names.extend(selector.name.clone()),
        Expr::MatrixSelector(matrix) => names.extend(matrix.vs.name.clone()),
        Expr::Aggregate(aggregate) => {
            selected(&aggregate.expr, names);
            if let Some(param) = &aggregate.param {
                selected(param, names);
            }
        }
        Expr::Unary(unary) => selected(&unary.expr, names),
        Expr::Binary(binary) => {
            selected(&binary.lhs, names);
            selected(&binary.rhs, names);
        }
        Expr::Paren(paren) => selected(&paren.expr, names),
        Expr::Subquery(subquery) => selected(&subquery.expr, names),
        Expr::Call(call) => call.args.args.iter().for_each(|arg| selected(arg, names)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The PromQL of every panel target of the dashboard, each with where it is.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = workspace().join("deploy/monitoring/dashboard.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            let title = panel["title"].as_str().unwrap_or_default();
            queries.push((format!("panel {title:?}"), expr.to_owned()));
        }
    }
    queries
}

/// The PromQL of every alerting rule, each with its alert's name.
fn alert_queries() -> Vec<(String, String)> {
    let path = workspace().join("deploy/monitoring/alerts.yaml");
    let text = std::fs::read_to_string(&path).expect("the alerts");
    let rules: Value = serde_yaml_ng::from_str(&text).expect("the alerts are YAML");
    let mut queries = Vec::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("an alert's name");
            let expr = rule["expr"].as_str().expect("an alert's expr");
            assert!(
                ["critical", "warning", "info"]
                    .contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
                "alert {name} has no severity"
            );
            assert!(
                rule["annotations"]["summary"].is_string(),
                "alert {name} has no summary"
            );
            queries.push((format!("alert {name}"), expr.to_owned()));
        }
    }
    queries
}

/// A host started with `args` and `plugins` on `server`'s kubeconfig, leader election as the
/// arguments say (on by default).
fn host(server: &ApiServer, dir: &Path, plugins: &[PathBuf], args: &[&str]) -> Host {
    let kubeconfig = dir.join("kubeconfig");
    server.kubeconfig_to(&kubeconfig);
    let mut command = Host::command();
    command.arg("--kubeconfig").arg(&kubeconfig).args(args);
    for plugin in plugins {
        command.arg("--plugin").arg(plugin);
    }
    Host::spawn(command)
}

/// `/metrics` of `host` once it has every series in `wanted`.
async fn exposition(host: &Host, wanted: &[&str]) -> String {
    eventually_async(&format!("/metrics with {wanted:?}"), || async {
        let body = host.get("/metrics").await;
        wanted
            .iter()
            .all(|series| body.contains(series))
            .then_some(body)
    })
    .await
}

/// The union of the `/metrics` of two hosts that, between them, give every family a series.
async fn every_family(server: &ApiServer) -> String {
    let dir = scratch("monitoring");
    namespace(server, "ledger", &[]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &ReconcilerPlugin::crd())
        .await
        .expect("the CRD created");
    crd_established(&server.client(), "reconcilerplugins.reconcile-host.dev").await;
    // A ReconcilerPlugin whose registry refuses connections: a fetch failure.
    let gvk = GroupVersionKind::gvk("reconcile-host.dev", "v1alpha1", "ReconcilerPlugin");
    let objects: Api<DynamicObject> = Api::all_with(server.client(), &ApiResource::from_gvk(&gvk));
    let unfetchable: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "reconcile-host.dev/v1alpha1", "kind": "ReconcilerPlugin",
        "metadata": {"name": "unfetchable"},
        "spec": {"oci": "127.0.0.1:1/plugins/none:v1",
                 "for": {"apiVersion": "v1", "kind": "ConfigMap"}},
    }))
    .expect("a ReconcilerPlugin");
    objects
        .create(&PostParams::default(), &unfetchable)
        .await
        .expect("created");

    // The leader: a plugin with a shadow that writes otherwise (the ledger guest records its
    // env), and a tenant's plugin (acting as ServiceAccount ledger/plugins).
    let shadow = format!(
        "{{module: {}, env: {{REPLICA: shadow}}}}",
        component("ledger").display()
    );
    let ledger = manifest(
        &dir,
        "host/tests/guests/ledger/plugin.yaml",
        &component("ledger"),
        &[("env", "{REPLICA: primary}"), ("shadow", &shadow)],
    );
    let tenant_dir = dir.join("tenant");
    std::fs::create_dir_all(&tenant_dir).expect("dir");
    let tenant = manifest(
        &tenant_dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[
            (
                "grants",
                "[{apiVersion: v1, kind: ConfigMap, verbs: [get, patch], namespaces: [ledger]}]",
            ),
            ("serviceAccountName", "plugins"),
            ("serviceAccountNamespace", "ledger"),
        ],
    );
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        "pluginObjects: true
oci:
  insecureRegistries: [\"127.0.0.1:1\"]
",
    )
    .expect("config written");
    let config = config.to_str().expect("UTF-8");
    let leader = host(server, &dir, &[ledger, tenant], &["--config", config]);
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("watched".to_owned()),
            labels: Some(
                [("ledger", "true"), ("testbed", "true")]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), "1".to_owned())].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(server.client(), "ledger")
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    let leading = exposition(
        &leader,
        &[
            "leader_election_master_status{",
            "reconcile_host_fenced_writes_total{",
            "reconcile_host_plugin_shadow_diffs_total{",
            "reconcile_host_tenant_memory_bytes{",
            "reconcile_host_plugin_fetch_failures_total{",
            "controller=\"testbed\"",
        ],
    )
    .await;

    // A replica of a sharded ring.
    let sharded_dir = dir.join("sharded");
    std::fs::create_dir_all(&sharded_dir).expect("dir");
    let testbed = manifest(
        &sharded_dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let replica = host(
        server,
        &sharded_dir,
        &[testbed],
        &[
            "--election-mode",
            "sharded",
            "--lease-name",
            "monitoring-ring",
        ],
    );
    let sharded = exposition(
        &replica,
        &[
            "reconcile_host_shard_members{",
            "reconcile_host_shard_keys_owned{",
        ],
    )
    .await;
    format!("{leading}\n{sharded}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_the_dashboard_and_the_alerts_query_is_one_the_host_exports() {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    let exposition = every_family(&server).await;
    let exported = exported(&exposition);
    assert!(
        exported.contains("controller_runtime_reconcile_total"),
        "no TYPE lines read from:\n{exposition}"
    );

    let queries: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .chain(alert_queries())
        .collect();
    assert!(queries.len() > 40, "{} queries", queries.len());
    let mut used = BTreeSet::new();
    for (place, query) in &queries {
        let expr = parser::parse(query)
            .unwrap_or_else(|error| panic!("{place}: not PromQL ({error}): {query}"));
        let mut names = BTreeSet::new();
        selected(&expr, &mut names);
        assert!(!names.is_empty(), "{place} selects no metric: {query}");
        for name in &names {
            assert!(
                exported.contains(name),
                "{place} queries {name}, which the host does not export (it exports: {exported:?})"
            );
        }
        used.extend(names);
    }
    // The dashboard covers what docs/deploy.md calls worth a dashboard.
    for name in [
        "leader_election_master_status",
        "reconcile_host_fenced_writes_total",
        "reconcile_host_plugin_module_reconciles_total",
        "workqueue_depth",
        "reconcile_host_plugin_shadow_diffs_total",
        "reconcile_host_plugin_log_dropped_lines_total",
        "reconcile_host_plugin_api_wait_seconds_total",
    ] {
        assert!(used.contains(name), "nothing shows {name}");
    }
}
