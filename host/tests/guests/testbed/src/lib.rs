//! Test guest for the host's end-to-end tests: reconciles ConfigMaps labelled `testbed=true`,
//! behaving as each one's `data.behave` asks (the table in `host/tests/guests/README.md`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reconcile_guest::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// The part of a ConfigMap the testbed reads.
#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

struct Testbed;

impl Reconciler for Testbed {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(source) = request.object::<ConfigMap>()? else {
            return Ok(Action::done()); // deleted
        };
        let name = request.name();
        match source.data.get("behave").map_or("ok", String::as_str) {
            "ok" => seen(&request, &source),
            "error" => {
                let attempt = request.requeues();
                let mut attempts = read_data(&request, "attempts")?;
                attempts.insert(format!("attempt-{attempt}"), unix_millis().to_string());
                write_data(&request, "attempts", &attempts)?;
                Err(Error::msg(format!(
                    "testbed: asked to fail (attempt {attempt})"
                )))
            }
            behave if behave.starts_with("requeue-after:") => {
                let millis = &behave["requeue-after:".len()..];
                let millis: u64 = millis
                    .parse()
                    .with_context(|| format!("testbed: `{behave}` does not end in milliseconds"))?;
                let mut ticks = read_data(&request, "ticks")?;
                let count = ticks
                    .get("count")
                    .and_then(|count| count.parse::<u64>().ok());
                let count = count.unwrap_or(0) + 1;
                ticks.insert("count".into(), count.to_string());
                ticks.insert(format!("tick-{count}"), unix_millis().to_string());
                write_data(&request, "ticks", &ticks)?;
                Ok(Action::requeue_after(Duration::from_millis(millis)))
            }
            "panic" => panic!("testbed: asked to panic"),
            "connect" => {
                // The host implements no sockets: the first socket call traps.
                let outcome = std::net::TcpStream::connect(("127.0.0.1", 80));
                Err(Error::msg(format!(
                    "testbed: a socket call returned instead of trapping: {outcome:?}"
                )))
            }
            "loop" => {
                let mut spins = 0_u64;
                loop {
                    spins = black_box(spins.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![0xA5; 1 << 20]);
                    black_box(&hoard);
                }
            }
            "ungranted" => {
                let secret = ObjectRef {
                    kind: Kind::new("v1", "Secret"),
                    namespace: request.namespace().map(str::to_owned),
                    name: name.to_owned(),
                };
                match client::get::<Value>(&secret) {
                    Err(error) => {
                        if let Some(reconcile_guest::CallError::Denied(message)) =
                            error.call_error()
                        {
                            let denied = BTreeMap::from([("denied".to_owned(), message.clone())]);
                            write_data(&request, "seen", &denied)?;
                        }
                        Err(error)
                    }
                    Ok(_) => Err(Error::msg("testbed: reading a Secret was allowed")),
                }
            }
            "delete" => {
                let target = request.target().with_name(format!("{name}-target"));
                match client::delete(&target) {
                    Ok(deleted) => {
                        let data = BTreeMap::from([("deleted".to_owned(), deleted.to_string())]);
                        write_data(&request, "seen", &data)?;
                        Ok(Action::done())
                    }
                    Err(error) => {
                        if let Some(status) = error.api_status() {
                            let refused = BTreeMap::from([
                                ("code".to_owned(), status.code.to_string()),
                                ("reason".to_owned(), status.reason.clone()),
                            ]);
                            write_data(&request, "seen", &refused)?;
                        }
                        Err(error)
                    }
                }
            }
            "log" => {
                info!("testbed: hello from {name}");
                reconcile_guest::log::span_attribute("greeted", name);
                println!("testbed stdout {name}");
                eprintln!("testbed stderr {name}");
                seen(&request, &source)
            }
            other => Err(Error::msg(format!("testbed: unknown behaviour `{other}`"))),
        }
    }
}

reconcile_guest::export_reconciler!(Testbed);

/// The `ok` behaviour: records the source's `value` and the request's `requeues` in
/// `<name>-seen`.
fn seen(request: &Request, source: &ConfigMap) -> Result<Action, Error> {
    let value = source.data.get("value").cloned().unwrap_or_default();
    let data = BTreeMap::from([
        ("value".to_owned(), value),
        ("requeues".to_owned(), request.requeues().to_string()),
    ]);
    write_data(request, "seen", &data)?;
    Ok(Action::done())
}

/// The data of the ConfigMap `<name>-<suffix>` as the API server holds it now (empty if absent).
fn read_data(request: &Request, suffix: &str) -> Result<BTreeMap<String, String>, Error> {
    let target = request
        .target()
        .with_name(format!("{}-{suffix}", request.name()));
    let existing = client::get::<ConfigMap>(&target)?;
    Ok(existing
        .map(|config_map| config_map.data)
        .unwrap_or_default())
}

/// Server-side applies the ConfigMap `<name>-<suffix>` in the request's namespace with `data`.
fn write_data(
    request: &Request,
    suffix: &str,
    data: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("{}-{suffix}", request.name()),
            "namespace": request.namespace(),
        },
        "data": data,
    });
    client::apply(&config_map)?;
    Ok(())
}

/// Milliseconds since the Unix epoch, from the WASI wall clock.
fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis())
}
