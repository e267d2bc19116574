//! End to end, with real processes: replicas in sharded mode share a plugin's keys; a replica
//! joining, one killed, one leaving gracefully and one frozen past its Lease never make two
//! replicas reconcile one key at once, and at quiescence every object is reconciled at its
//! latest version. The ledger guest logs when each reconcile begins and ends (wall clock).

use crate::common;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{Host, Scratch, component, manifest, scratch};
use crate::common::{config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;

const OWNED: &str = "reconcile_host_shard_keys_owned{plugin=\"ledger\"}";

/// Replica `name` in sharded mode with a short lease (2 s, renewed within 1.5 s, tried every
/// 250 ms), running the ledger plugin with env `REPLICA=<name>`.
fn member(server: &ApiServer, dir: &Path, name: &str) -> Host {
    replica(server, dir, name, "sharded")
}

/// Replica `name` in election mode `mode`, as [`member`] says.
fn replica(server: &ApiServer, dir: &Path, name: &str, mode: &str) -> Host {
    // One file per replica: a replica starting reads it while the next one is written.
    let plugin_dir = dir.join(name);
    std::fs::create_dir_all(&plugin_dir).expect("replica dir");
    let kubeconfig = plugin_dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let env = format!("{{REPLICA: {name}}}");
    let plugin: PathBuf = manifest(
        &plugin_dir,
        "host/tests/guests/ledger/plugin.yaml",
        &component("ledger"),
        &[("env", &env)],
    );
    let mut command = Host::command();
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--election-mode", mode])
        .args(["--lease-duration", "2s", "--renew-deadline", "1500ms"])
        .args(["--retry-period", "250ms"])
        .arg("--plugin")
        .arg(plugin);
    Host::spawn(command)
}

fn object(name: &str, version: u32, ms: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("ledger".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("v".to_owned(), version.to_string()),
                ("ms".to_owned(), ms.to_string()),
            ]
            .into(),
        ),
        ..ConfigMap::default()
    }
}

/// An API server with namespace `ledger`, and replicas `a`, `b`, `c` in sharded mode, settled;
/// their directory.
async fn ring_of_three(test: &str) -> (ApiServer, Scratch, BTreeMap<&'static str, Host>) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, "ledger", &[]).await;
    let dir = scratch(test);
    let hosts: BTreeMap<&str, Host> = ["a", "b", "c"]
        .into_iter()
        .map(|name| (name, member(&server, &dir, name)))
        .collect();
    for host in hosts.values() {
        host.wait_log(&["ring settled", "members=3"]).await;
    }
    (server, dir, hosts)
}

/// Creates `count` objects `object-<i>` at version 1 with `ms` of work each; their names.
async fn create_objects(api: &Api<ConfigMap>, count: usize, ms: u32) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|i| format!("object-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &object(name, 1, ms))
            .await
            .expect("created");
    }
    names
}

async fn set_version(api: &Api<ConfigMap>, names: &[String], version: u32) {
    for name in names {
        let patch = serde_json::json!({"data": {"v": version.to_string()}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
    }
}

/// Waits until every object's `ledger.test/seen` is its `data.v`; fails naming those that are
/// not.
async fn quiescent(api: &Api<ConfigMap>, count: usize) {
    let deadline = std::time::Instant::now() + common::WAIT;
    loop {
        let behind: Vec<String> = match api.list(&Default::default()).await {
            Ok(list) if list.items.len() == count => list
                .items
                .iter()
                .filter_map(|o| {
                    let annotations = o.metadata.annotations.clone().unwrap_or_default();
                    let seen = annotations.get("ledger.test/seen");
                    let version = o.data.as_ref().and_then(|d| d.get("v"));
                    (seen.is_none() || seen != version).then(|| {
                        format!(
                            "{} v={version:?} seen={seen:?} by={:?}",
                            o.metadata.name.as_deref().unwrap_or_default(),
                            annotations.get("ledger.test/by")
                        )
                    })
                })
                .collect(),
            Ok(list) => vec![format!("{} objects listed", list.items.len())],
            Err(error) => vec![format!("list failed: {error}")],
        };
        if behind.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not every object reconciled at its latest version: {behind:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One reconcile as the ledger logged it on one replica.
#[derive(Clone, Debug)]
struct Reconcile {
    replica: String,
    begin: u128,
    end: Option<u128>,
    wrote: Option<String>,
}

/// `(key → reconciles)` from the ledger lines of `log`, written by `replica`.
fn ledger(replica: &str, log: &str, into: &mut BTreeMap<String, Vec<Reconcile>>) {
    let mut open: HashMap<String, usize> = HashMap::new();
    for line in log.lines() {
        let Some(at) = ["ledger begin ", "ledger end ", "ledger refused "]
            .iter()
            .find_map(|marker| line.find(marker))
        else {
            continue;
        };
        let words: Vec<&str> = line[at..]
            .split(|c: char| c.is_whitespace() || c == '"')
            .filter(|w| !w.is_empty())
            .collect();
        let (Some(what), Some(key)) = (words.get(1), words.get(2)) else {
            continue;
        };
        let field = |name: &str| {
            words
                .iter()
                .find_map(|w| w.strip_prefix(name).map(str::to_owned))
        };
        let Some(time) = field("at=").and_then(|t| t.parse::<u128>().ok()) else {
            continue;
        };
        let reconciles = into.entry((*key).to_owned()).or_default();
        match *what {
            "begin" => {
                open.insert((*key).to_owned(), reconciles.len());
                reconciles.push(Reconcile {
                    replica: replica.to_owned(),
                    begin: time,
                    end: None,
                    wrote: None,
                });
            }
            "end" | "refused" => {
                if let Some(index) = open.remove(*key) {
                    reconciles[index].end = Some(time);
                    reconciles[index].wrote =
                        Some(field("wrote=").unwrap_or_else(|| "refused".to_owned()));
                }
            }
            _ => {}
        }
    }
}

/// Fails if two replicas' finished reconciles of one key overlap in time. A reconcile with no
/// end was aborted or its process killed: it wrote nothing after it began. One whose write the
/// fence refused changed nothing either: a process frozen mid-reconcile finishes it when it
/// wakes, while the key's new owner may be at work, and only its write is stopped.
fn assert_no_overlap(reconciles: &BTreeMap<String, Vec<Reconcile>>) {
    for (key, list) in reconciles {
        let finished: Vec<&Reconcile> = list
            .iter()
            .filter(|r| r.end.is_some() && r.wrote.as_deref() != Some("refused"))
            .collect();
        for (i, a) in finished.iter().enumerate() {
            for b in &finished[i + 1..] {
                if a.replica == b.replica {
                    continue;
                }
                let (a_end, b_end) = (a.end.unwrap_or(0), b.end.unwrap_or(0));
                assert!(
                    a_end < b.begin || b_end < a.begin,
                    "{key} reconciled at once by {} ({}..{a_end}) and {} ({}..{b_end})",
                    a.replica,
                    a.begin,
                    b.replica,
                    b.begin
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_keys_without_overlap_through_a_kill_a_join_and_a_graceful_leave() {
    let (server, dir, mut hosts) = ring_of_three("scale-out-churn").await;
    let api = config_maps(&server, "ledger");
    let names = create_objects(&api, 60, 20).await;
    quiescent(&api, names.len()).await;
    // Spread: each replica owns a share, together all of them.
    let mut total = 0.0;
    for (name, host) in &hosts {
        let owned = host.metric(OWNED).await;
        assert!(owned > 0.0, "replica {name} owns no key");
        total += owned;
    }
    assert_eq!(total, names.len() as f64);

    // Killed: its keys move once its lease expires.
    set_version(&api, &names, 2).await;
    hosts.get("c").expect("c").signal("KILL");
    quiescent(&api, names.len()).await;
    // Joined: takes a share.
    set_version(&api, &names, 3).await;
    hosts.insert("d", member(&server, &dir, "d"));
    hosts["d"].wait_log(&["ring settled", "members=3"]).await;
    set_version(&api, &names, 4).await;
    quiescent(&api, names.len()).await;
    assert!(
        hosts["d"].metric(OWNED).await > 0.0,
        "the new replica took no key"
    );
    // Left gracefully: drains, deletes its lease, the others take its keys at once.
    let mut leaving = hosts.remove("b").expect("b");
    leaving.signal("TERM");
    assert_eq!(leaving.exit_code().await, Some(0));
    assert!(leaving.log().contains("left the ring"), "{}", leaving.log());
    set_version(&api, &names, 5).await;
    quiescent(&api, names.len()).await;

    let mut reconciles = BTreeMap::new();
    ledger("b", &leaving.log(), &mut reconciles);
    for (name, host) in &hosts {
        ledger(name, &host.log(), &mut reconciles);
    }
    assert_eq!(reconciles.len(), names.len());
    assert_no_overlap(&reconciles);
    for (name, host) in &hosts {
        let log = host.log();
        assert!(!log.contains("panicked"), "replica {name}: {log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_frozen_past_its_lease_writes_nothing_when_it_wakes() {
    let (server, _dir, hosts) = ring_of_three("scale-out-frozen").await;
    let api = config_maps(&server, "ledger");
    // Four seconds of work: the owner is frozen mid-reconcile, long past its lease.
    api.create(&PostParams::default(), &object("frozen", 1, 4_000))
        .await
        .expect("created");
    let owner = eventually_async("a replica to begin the reconcile", || async {
        hosts
            .iter()
            .find(|(_, host)| host.log().contains("ledger begin ledger/frozen"))
            .map(|(name, _)| *name)
    })
    .await;
    let frozen = &hosts[owner];
    frozen.signal("STOP");
    let by = eventually_async("another replica's write", || async {
        let object = api.get_opt("frozen").await.ok()??;
        let annotations = object.metadata.annotations?;
        (annotations.get("ledger.test/seen").map(String::as_str) == Some("1"))
            .then(|| annotations.get("ledger.test/by").cloned())
            .flatten()
    })
    .await;
    assert_ne!(by, owner, "the frozen replica's write landed");

    frozen.signal("CONT");
    frozen
        .wait_log(&["membership lease lapsed by this replica's clock"])
        .await;
    // Back in the ring, and it never wrote.
    frozen.wait_log(&["ring settled", "members=3"]).await;
    let mut reconciles = BTreeMap::new();
    for (name, host) in &hosts {
        ledger(name, &host.log(), &mut reconciles);
    }
    let writes: Vec<&Reconcile> = reconciles["ledger/frozen"]
        .iter()
        .filter(|r| r.replica == owner && r.wrote.as_deref() == Some("ok"))
        .collect();
    assert!(writes.is_empty(), "the frozen replica wrote: {writes:?}");
    assert_no_overlap(&reconciles);
    let object = api.get("frozen").await.expect("object");
    let annotations = object.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("ledger.test/by"), Some(&by));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_out_of_reach_past_the_renew_deadline_stops_every_member_until_it_returns() {
    let (server, _dir, hosts) = ring_of_three("scale-out-unreachable").await;
    let api = config_maps(&server, "ledger");
    let names = create_objects(&api, 30, 10).await;
    quiescent(&api, names.len()).await;
    server.pause();
    // Every member finds its lease lapsed by its own clock and stops.
    for host in hosts.values() {
        host.wait_log(&["membership lease lapsed by this replica's clock"])
            .await;
    }
    server.resume();
    for host in hosts.values() {
        eventually_async("the member back in a ring of three", || async {
            let log = host.log();
            let after = &log[log.rfind("membership lease lapsed")?..];
            after
                .lines()
                .any(|line| line.contains("ring settled") && line.contains("members=3"))
                .then_some(())
        })
        .await;
    }
    set_version(&api, &names, 2).await;
    quiescent(&api, names.len()).await;
    let mut reconciles = BTreeMap::new();
    for (name, host) in &hosts {
        ledger(name, &host.log(), &mut reconciles);
    }
    assert_no_overlap(&reconciles);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_mode_hands_every_key_over_without_overlap_through_a_kill_and_a_graceful_leave() {
    const LEADER: &str = "leader_election_master_status{name=\"reconcile-host\"}";
    let server = ApiServer::start(Config::default())
        .await
        .expect("API server starts");
    namespace(&server, "ledger", &[]).await;
    let dir = scratch("scale-out-leader");
    let mut hosts: BTreeMap<&str, Host> = ["a", "b", "c"]
        .into_iter()
        .map(|name| (name, replica(&server, &dir, name, "leader")))
        .collect();
    let api = config_maps(&server, "ledger");
    let names = create_objects(&api, 30, 20).await;
    quiescent(&api, names.len()).await;
    let mut retired = Vec::new();
    for (version, signal) in [(2, "KILL"), (3, "TERM")] {
        let mut leader = None;
        for (name, host) in &hosts {
            if host.metric(LEADER).await == 1.0 {
                leader = Some(*name);
            }
        }
        let leader = leader.expect("a leader");
        set_version(&api, &names, version).await;
        let mut host = hosts.remove(leader).expect("leader");
        host.signal(signal);
        if signal == "TERM" {
            assert_eq!(host.exit_code().await, Some(0));
        }
        quiescent(&api, names.len()).await;
        retired.push((leader, host));
    }
    let mut reconciles = BTreeMap::new();
    for (name, host) in hosts.iter().chain(retired.iter().map(|(n, h)| (n, h))) {
        ledger(name, &host.log(), &mut reconciles);
    }
    assert_no_overlap(&reconciles);
}
