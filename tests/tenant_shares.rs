//! Fair shares between tenants (`tenants:` in the host's configuration), through the real host:
//! two plugins of one tenant whose `instances` ceiling is 1 never run at once, while a plugin of
//! another tenant runs its calls side by side; a guest growing its memory past its tenant's
//! `memory` ceiling (below its own limit) fails as out of memory, naming the tenant. On both
//! servers (on the real one the plugins' accounts are bound to what they do).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common::backend::Backend;
use crate::common::host::{Host, component, manifest, scratch};
use crate::common::{config_maps, eventually_async, labelled_config_map, namespace};
use embedded_apiserver::Config;
use kube::api::PostParams;
use serde_json::json;

/// The tenant held to one call at once, the one left at the defaults, and the one whose memory
/// ceiling is below its plugin's own limit.
const ONE_AT_ONCE: &str = "shares-a";
const FREE: &str = "shares-b";
const SMALL: &str = "shares-c";
/// How long each ledger reconcile computes.
const MS: &str = "400";

/// `(plugin, tenant)`: two plugins of the tenant held to one call at once, one of another.
const LEDGERS: [(&str, &str); 3] = [("a-one", ONE_AT_ONCE), ("a-two", ONE_AT_ONCE), ("b", FREE)];
const OBJECTS_EACH: usize = 3;

/// One ledger reconcile's begin and end, in µs since the epoch, by key.
fn calls(log: &str) -> BTreeMap<String, Vec<(u128, u128)>> {
    let mut begun: BTreeMap<String, u128> = BTreeMap::new();
    let mut calls: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for line in log.lines() {
        let Some(at) = line.find("ledger ") else {
            continue;
        };
        let words: Vec<&str> = line[at..]
            .split(|c: char| c.is_whitespace() || c == '"')
            .filter(|word| !word.is_empty())
            .collect();
        let (Some(what), Some(key)) = (words.get(1), words.get(2)) else {
            continue;
        };
        let Some(time) = words
            .iter()
            .find_map(|word| word.strip_prefix("at="))
            .and_then(|time| time.parse::<u128>().ok())
        else {
            continue;
        };
        match *what {
            "begin" => {
                begun.insert((*key).to_owned(), time);
            }
            "end" => {
                if let Some(begin) = begun.remove(*key) {
                    calls
                        .entry((*key).to_owned())
                        .or_default()
                        .push((begin, time));
                }
            }
            _ => {}
        }
    }
    calls
}

/// The most of `intervals` that overlap at one instant.
fn most_at_once(intervals: &[(u128, u128)]) -> usize {
    let mut edges: Vec<(u128, i32)> = intervals
        .iter()
        .flat_map(|(begin, end)| [(*begin, 1), (*end, -1)])
        .collect();
    // An end and a begin at the same microsecond do not overlap: ends first.
    edges.sort_unstable();
    let (mut now, mut most) = (0_i32, 0_i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    usize::try_from(most).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_ceilings_hold_its_plugins_together_and_leave_other_tenants_alone() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("tenant-shares");
    for tenant in [ONE_AT_ONCE, FREE, SMALL] {
        namespace(&backend, tenant, &[]).await;
    }
    if backend.is_real() {
        // What the tenants bind their plugins' accounts to: ConfigMaps in their namespace.
        let mut items = Vec::new();
        for tenant in [ONE_AT_ONCE, FREE, SMALL] {
            items.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "plugins", "namespace": tenant},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                           "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}));
            items.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "plugins", "namespace": tenant},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plugins"},
                "subjects": [{"kind": "Group", "name": format!("system:serviceaccounts:{tenant}"),
                              "apiGroup": "rbac.authorization.k8s.io"}]}));
        }
        let path = dir.join("rbac.json");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(&path, list.to_string()).expect("written");
        backend.kubectl_ok(&dir, &["apply", "-f", path.to_str().expect("UTF-8")]);
    }
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!(
            "tenants:\n  namespaces:\n    {ONE_AT_ONCE}: {{instances: 1}}\n    {SMALL}: {{memory: 16Mi}}\n"
        ),
    )
    .expect("config written");

    let ledger = component("ledger");
    let mut plugins: Vec<PathBuf> = Vec::new();
    for (plugin, tenant) in LEDGERS {
        let selector = format!("ledger={plugin}");
        let grants = format!(
            "[{{apiVersion: v1, kind: ConfigMap, verbs: [get, patch], namespaces: [{tenant}]}}]"
        );
        let file = manifest(
            &dir,
            "host/tests/guests/ledger/plugin.yaml",
            &ledger,
            &[
                ("name", plugin),
                ("labelSelector", &selector),
                ("grants", &grants),
                ("serviceAccountName", "plugins"),
                ("serviceAccountNamespace", tenant),
            ],
        );
        let renamed = dir.join(format!("{plugin}.yaml"));
        std::fs::rename(&file, &renamed).expect("renamed");
        plugins.push(renamed);
    }
    let testbed_grants = format!(
        "[{{apiVersion: v1, kind: ConfigMap, verbs: [get, create, update, patch, delete], namespaces: [{SMALL}]}}]"
    );
    plugins.push(manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[
            ("grants", &testbed_grants),
            ("serviceAccountName", "plugins"),
            ("serviceAccountNamespace", SMALL),
        ],
    ));
    let host = Host::start_with(
        &backend,
        &dir,
        &plugins,
        &["--config", config.to_str().expect("UTF-8")],
    );

    let post = PostParams::default();
    for (plugin, tenant) in LEDGERS {
        let api = config_maps(&backend, tenant);
        for i in 0..OBJECTS_EACH {
            let object = labelled_config_map(
                tenant,
                &format!("{plugin}-{i}"),
                &[("ledger", plugin)],
                &[("v", "1"), ("ms", MS)],
            );
            api.create(&post, &object).await.expect("created");
        }
    }
    let hoard = labelled_config_map(
        SMALL,
        "hoard",
        &[("testbed", "true")],
        &[("behave", "alloc")],
    );
    config_maps(&backend, SMALL)
        .create(&post, &hoard)
        .await
        .expect("created");

    // Every ledger object reconciled (its version recorded), then the calls from the log.
    for (plugin, tenant) in LEDGERS {
        let api = config_maps(&backend, tenant);
        for i in 0..OBJECTS_EACH {
            let name = format!("{plugin}-{i}");
            eventually_async(&format!("{tenant}/{name} reconciled"), || {
                let (api, name) = (api.clone(), name.clone());
                async move {
                    let object = api.get(&name).await.ok()?;
                    let seen = object
                        .metadata
                        .annotations?
                        .get("ledger.test/seen")
                        .cloned();
                    (seen.as_deref() == Some("1")).then_some(())
                }
            })
            .await;
        }
    }
    host.wait_log(&[
        "tenant memory ceiling reached",
        &format!("tenant `{SMALL}`"),
    ])
    .await;
    let log = host.log();
    let calls = calls(&log);
    let of = |tenant: &str| -> Vec<(u128, u128)> {
        calls
            .iter()
            .filter(|(key, _)| key.starts_with(&format!("{tenant}/")))
            .flat_map(|(_, calls)| calls.iter().copied())
            .collect()
    };
    let held = of(ONE_AT_ONCE);
    assert!(
        held.len() >= 2 * OBJECTS_EACH,
        "every object of both plugins reconciled: {calls:?}; the ledger's lines:\n{}",
        log.lines()
            .filter(|line| line.contains("ledger"))
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        most_at_once(&held),
        1,
        "the two plugins of `{ONE_AT_ONCE}` ran at once past its ceiling of 1: {held:?}"
    );
    let free = of(FREE);
    assert!(
        most_at_once(&free) >= 2,
        "the plugin of `{FREE}` (concurrency 4, default ceilings) ran its calls one by one: \
         {free:?}"
    );

    // The hoarding guest's failure names its tenant's ceiling, not its own 32Mi limit, and the
    // memory it held came back with its instance.
    let refusals = host
        .wait_metric(
            &format!("reconcile_host_tenant_memory_refusals_total{{namespace=\"{SMALL}\"}}"),
            1.0,
        )
        .await;
    assert!(refusals >= 1.0);
    assert!(
        !log.contains("exceeded its memory limit of 33554432 bytes"),
        "the guest's own limit stopped it before its tenant's ceiling"
    );
    let held_by_small = host
        .metric(&format!(
            "reconcile_host_tenant_memory_bytes{{namespace=\"{SMALL}\"}}"
        ))
        .await;
    assert!(
        held_by_small <= 16.0 * 1024.0 * 1024.0,
        "the tenant's instances hold {held_by_small} bytes, past its 16Mi"
    );
}
