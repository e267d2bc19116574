//! Test guest for the host's isolation tests: reconciles ConfigMaps labelled `hostile=true`
//! and attacks the host as each one's `data.attack` asks (the table in
//! `host/tests/guests/README.md`). Every attack answers `done` (or the error it was asked to
//! return), so the test sees its effect on the host, not on the guest.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use reconcile_guest::events::EventType;
use reconcile_guest::log;
use reconcile_guest::prelude::*;
use serde::Deserialize;
use serde_json::Value;

/// The part of a ConfigMap the guest reads.
#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

struct Hostile;

impl Hostile {
    fn size(data: &BTreeMap<String, String>) -> usize {
        data.get("bytes")
            .and_then(|bytes| bytes.parse().ok())
            .unwrap_or(100 << 20)
    }
}

impl Reconciler for Hostile {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(source) = request.object::<ConfigMap>()? else {
            return Ok(Action::done());
        };
        let data = &source.data;
        let text = |key: &str| data.get(key).cloned().unwrap_or_default();
        match data.get("attack").map_or("", String::as_str) {
            "inject" => {
                // A reference whose namespace and name would rewrite the request path.
                let target = ObjectRef::namespaced(
                    Kind::new("v1", "ConfigMap"),
                    text("namespace"),
                    text("name"),
                );
                if let Err(error) = client::get::<Value>(&target) {
                    let chain: Vec<String> = error.chain().collect();
                    log::write(
                        log::Level::Info,
                        &format!("hostile: get refused: {}", chain.join(": ")),
                    );
                }
                let _ = client::merge_patch(&target, &serde_json::json!({"data": {"x": "y"}}));
                let _ = client::delete(&target);
            }
            "stdout" => {
                // One write of the whole buffer.
                let flood = vec![b'x'; Self::size(data)];
                let _ = std::io::stdout().write_all(&flood);
            }
            "log" => log::write(log::Level::Info, &"y".repeat(Self::size(data))),
            "error" => return Err(Error::msg("z".repeat(Self::size(data)))),
            "forge" => {
                // A message that would end the host's line and start one of its own.
                log::write(log::Level::Info, &text("line"));
                println!("{}", text("line"));
            }
            "hammer" => {
                let target =
                    ObjectRef::namespaced(Kind::new("v1", "ConfigMap"), "hostile", request.name());
                let calls: usize = text("calls").parse().unwrap_or(1000);
                for _ in 0..calls {
                    let _ = client::get::<Value>(&target);
                }
            }
            "hot" => return Ok(Action::requeue_after(Duration::ZERO)),
            "flood" => {
                // A tenant taking all it can: computes for `data.ms`, gets its own ConfigMap
                // `data.calls` times, and asks to run again at once.
                let ms: u64 = text("ms").parse().unwrap_or(20);
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(ms) {
                    std::hint::black_box(0);
                }
                let own = ObjectRef::namespaced(
                    Kind::new("v1", "ConfigMap"),
                    request.namespace().unwrap_or_default(),
                    request.name(),
                );
                let calls: usize = text("calls").parse().unwrap_or(10);
                for _ in 0..calls {
                    let _ = client::get::<Value>(&own);
                }
                return Ok(Action::requeue_after(Duration::ZERO));
            }
            "slow-write" => {
                // Announces itself, computes for `data.ms`, then records which replica wrote
                // (`REPLICA` from the manifest's env) and when.
                let replica = std::env::var("REPLICA").unwrap_or_default();
                log::write(
                    log::Level::Info,
                    &format!("hostile: slow-write started on {replica}"),
                );
                let ms: u64 = text("ms").parse().unwrap_or(3000);
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(ms) {
                    std::hint::black_box(0);
                }
                let millis = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_millis());
                let patch = serde_json::json!({"data": {format!("written-by-{replica}"): millis.to_string()}});
                client::merge_patch(request.target(), &patch)?;
            }
            "spin" => {
                // Busy for `data.ms` milliseconds, then done: keeps keys queued behind it.
                let ms: u64 = text("ms").parse().unwrap_or(20);
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(ms) {
                    std::hint::black_box(0);
                }
            }
            "event" => {
                let secret = ObjectRef::namespaced(
                    Kind::new("v1", "Secret"),
                    text("namespace"),
                    text("name"),
                );
                if let Err(error) = events::record(&secret, EventType::Warning, "Probe", "probe") {
                    log::write(
                        log::Level::Info,
                        &format!("hostile: event refused: denied={}", error.is_denied()),
                    );
                }
            }
            "peek" => {
                // Reads ConfigMaps through the cache: `data.namespace`/`data.name`, the list
                // of `data.namespace`, and the list of every namespace.
                let kind = Kind::new("v1", "ConfigMap");
                let namespace = text("namespace");
                let outcome = |result: Result<String, Error>| {
                    result.unwrap_or_else(|error| {
                        format!("refused({})", error.chain().collect::<Vec<_>>().join(": "))
                    })
                };
                let got = cache::get::<Value>(&kind, Some(&namespace), &text("name"))
                    .map(|found| if found.is_some() { "found" } else { "missing" }.to_owned());
                let listed = cache::list::<Value>(&kind, Some(&namespace), None)
                    .map(|objects| objects.len().to_string());
                let everywhere = cache::list::<Value>(&kind, None, None).map(|objects| {
                    let mut seen: Vec<String> = objects
                        .iter()
                        .filter_map(|object| object["metadata"]["namespace"].as_str())
                        .map(ToOwned::to_owned)
                        .collect();
                    seen.dedup();
                    seen.join(",")
                });
                log::write(
                    log::Level::Info,
                    &format!(
                        "hostile: peek get={} list={} everywhere={}",
                        outcome(got),
                        outcome(listed),
                        outcome(everywhere)
                    ),
                );
            }
            other => return Err(Error::msg(format!("hostile: unknown attack `{other}`"))),
        }
        Ok(Action::done())
    }
}

reconcile_guest::export_reconciler!(Hostile);
