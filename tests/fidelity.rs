//! The differential fidelity suite: every request sequence of `fidelity/corpus.yaml` is sent to a
//! real kube-apiserver (with etcd) and to the embedded API server, the answers are normalised and
//! compared field by field, and the test fails on any difference the corpus does not list as a
//! known departure (each with its reason; `apiserver/README.md` lists them too).
//!
//! Run alone: `make control-plane && cargo test -p end-to-end --test fidelity -- --nocapture`;
//! `FIDELITY_ONLY=<part of a sequence name>` runs only matching sequences, `FIDELITY_VERBOSE=1`
//! also prints every difference a known departure accepts.

mod common;
#[path = "fidelity/compare.rs"]
mod compare;
#[path = "fidelity/corpus.rs"]
mod corpus;
#[path = "fidelity/transport.rs"]
mod transport;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::control_plane::ControlPlane;
use compare::Difference;
use corpus::{Corpus, Sequence, Step};
use embedded_apiserver::{ApiServer, Config};
use transport::{Reply, Server};

/// The embedded server's admin token (its default; the server authorizes as the real one does).
const ADMIN_TOKEN: &str = "embedded-apiserver";

/// How long a step with `until` resends before the difference stands.
const UNTIL: Duration = Duration::from_secs(30);

/// The totals the report prints.
#[derive(Default)]
struct Totals {
    requests: usize,
    identical: usize,
    known: usize,
    unknown: Vec<String>,
    departures_seen: BTreeMap<String, usize>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_server_answers_every_corpus_request_like_a_real_one() {
    let path = common::host::workspace().join("tests/fidelity/corpus.yaml");
    let corpus = Corpus::load(&path);
    let only = std::env::var("FIDELITY_ONLY").ok();

    let plane = tokio::task::spawn_blocking(ControlPlane::start)
        .await
        .expect("the control plane starts");
    let embedded = ApiServer::start(Config::default().authorization(true))
        .await
        .expect("the embedded API server starts");
    let servers = Pair {
        real: Server::new("real", plane.url(), Some(plane.token())),
        embedded: Server::new("embedded", &embedded.url(), Some(ADMIN_TOKEN)),
        etcd: Server::new("etcd", &etcd_url(&plane), None),
        compact: embedded.faults(),
    };

    let started = Instant::now();
    let mut totals = Totals::default();
    for sequence in &corpus.sequences {
        if only.as_deref().is_some_and(|o| !sequence.name.contains(o)) {
            continue;
        }
        run(&servers, &corpus, sequence, &mut totals).await;
    }
    let elapsed = started.elapsed();

    let sequences = corpus
        .sequences
        .iter()
        .filter(|s| only.as_deref().is_none_or(|o| s.name.contains(o)))
        .count();
    eprintln!(
        "fidelity: {sequences} sequences, {} requests compared: {} identical, {} different \
         ({} only by known departures, {} by unknown differences), in {:.1} s",
        totals.requests,
        totals.identical,
        totals.requests - totals.identical,
        totals.known,
        totals.unknown.len(),
        elapsed.as_secs_f64()
    );
    let unused: Vec<&str> = corpus
        .departures
        .iter()
        .filter(|d| !totals.departures_seen.contains_key(&d.id))
        .map(|d| d.id.as_str())
        .collect();
    eprintln!(
        "fidelity: {} known departures listed, {} seen (differing fields each):",
        corpus.departures.len(),
        totals.departures_seen.len(),
    );
    for departure in &corpus.departures {
        if let Some(count) = totals.departures_seen.get(&departure.id) {
            eprintln!("  {} ({count}): {}", departure.id, departure.reason);
        }
    }
    if only.is_none() {
        assert!(
            unused.is_empty(),
            "known departures that no request showed (remove them from {}): {unused:?}",
            path.display()
        );
    }
    assert!(
        totals.unknown.is_empty(),
        "{} requests differ in ways {} does not list as known departures; fix the embedded \
         server or add a departure with its reason:\n{}",
        totals.unknown.len(),
        path.display(),
        totals.unknown.join("\n")
    );
}

/// Both servers, the real one's etcd and the embedded one's history compaction.
struct Pair {
    real: Server,
    embedded: Server,
    etcd: Server,
    compact: embedded_apiserver::Faults,
}

impl Pair {
    /// Compacts both servers' history up to now: etcd's revisions (through its JSON gateway) and
    /// the embedded server's watch history, so older resourceVersions are gone on both.
    async fn compact(&self) {
        let json = [("Content-Type".to_owned(), "application/json".to_owned())];
        // The newest revision: a range read's header ("/" base64-encoded).
        let range = self
            .etcd
            .send(
                "POST",
                "/v3/kv/range",
                &json,
                br#"{"key":"Lw==","limit":1}"#.to_vec(),
            )
            .await;
        let revision = range.body["header"]["revision"]
            .as_str()
            .unwrap_or_else(|| {
                panic!(
                    "etcd's range answer has no header.revision: {:?}",
                    range.body
                )
            })
            .to_owned();
        let compacted = self
            .etcd
            .send(
                "POST",
                "/v3/kv/compaction",
                &json,
                format!(r#"{{"revision":"{revision}","physical":true}}"#).into_bytes(),
            )
            .await;
        assert_eq!(
            compacted.code, 200,
            "etcd compaction failed: {:?}",
            compacted.body
        );
        self.compact.compact_history();
    }
}

/// The client URL of the control plane's etcd, read from its command line (`--data-dir` is in
/// the plane's state directory, beside the kubeconfig).
fn etcd_url(plane: &ControlPlane) -> String {
    let dir = plane
        .kubeconfig()
        .parent()
        .expect("the kubeconfig is in the state directory")
        .display()
        .to_string();
    let processes = std::fs::read_dir("/proc").expect("/proc is readable");
    for process in processes.flatten() {
        let Ok(cmdline) = std::fs::read(process.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args
            .iter()
            .any(|a| a.starts_with(&format!("--data-dir={dir}/")))
        {
            continue;
        }
        if let Some(url) = args
            .iter()
            .find_map(|a| a.strip_prefix("--listen-client-urls="))
        {
            return url.to_owned();
        }
    }
    panic!("no etcd process with its data in {dir}: did the control plane start?")
}

/// Runs one sequence in its own namespace on both servers, comparing every step.
async fn run(servers: &Pair, corpus: &Corpus, sequence: &Sequence, totals: &mut Totals) {
    let namespace = format!("fidelity-{}", sequence.name);
    let mut vars = [BTreeMap::new(), BTreeMap::new()];
    for (server, vars) in [&servers.real, &servers.embedded]
        .into_iter()
        .zip(&mut vars)
    {
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace}});
        let reply = server
            .send(
                "POST",
                "/api/v1/namespaces",
                &[("Content-Type".into(), "application/json".into())],
                body.to_string().into_bytes(),
            )
            .await;
        assert_eq!(
            reply.code, 201,
            "namespace {namespace} on the {} server: {:?}",
            server.name, reply.body
        );
        vars.insert("ns".to_owned(), namespace.clone());
    }
    for step in &sequence.steps {
        if step.compact {
            servers.compact().await;
        }
        let [real_vars, embedded_vars] = &mut vars;
        let (real, embedded) = tokio::join!(
            send(&servers.real, step, real_vars),
            send(&servers.embedded, step, embedded_vars)
        );
        for (reply, vars) in [(&real, real_vars), (&embedded, embedded_vars)] {
            for (name, pointer) in &step.save {
                let value = reply.body.pointer(pointer).map(|v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                if let Some(value) = value {
                    vars.insert(name.clone(), value);
                }
            }
        }
        let differences = compare::compare(&real, &embedded, step.compare, &step.select);
        totals.requests += 1;
        if differences.is_empty() {
            totals.identical += 1;
            continue;
        }
        let mut unknown = Vec::new();
        for difference in &differences {
            match corpus.departure(&sequence.name, &step.name, difference) {
                Some(departure) => {
                    *totals
                        .departures_seen
                        .entry(departure.id.clone())
                        .or_default() += 1;
                    if std::env::var_os("FIDELITY_VERBOSE").is_some() {
                        eprintln!(
                            "known {} in {}/{}: {}",
                            departure.id,
                            sequence.name,
                            step.name,
                            describe(difference)
                        );
                    }
                }
                None => unknown.push(describe(difference)),
            }
        }
        if unknown.is_empty() {
            totals.known += 1;
        } else {
            totals.unknown.push(format!(
                "{}/{} ({} {}):\n    {}",
                sequence.name,
                step.name,
                step.method,
                step.path,
                unknown.join("\n    ")
            ));
        }
    }
}

/// Sends `step` to `server`; with `until` (`until_text`), resends (bounded) until the answer has
/// that code (its body that text).
async fn send(server: &Server, step: &Step, vars: &BTreeMap<String, String>) -> Reply {
    let path = corpus::substitute(&step.path, vars);
    let headers = step.request_headers(vars);
    let bearer = step.bearer.as_deref().map(|b| corpus::substitute(b, vars));
    let text = step
        .until_text
        .as_deref()
        .map(|t| corpus::substitute(t, vars));
    let deadline = Instant::now() + UNTIL;
    loop {
        let reply = server
            .send_as(
                bearer.as_deref(),
                &step.method,
                &path,
                &headers,
                step.request_body(vars),
            )
            .await;
        let waiting = step.until.is_some_and(|code| reply.code != code)
            || text
                .as_deref()
                .is_some_and(|t| !reply.body.to_string().contains(t));
        if !waiting || Instant::now() >= deadline {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One difference on one line, long values cut.
fn describe(difference: &Difference) -> String {
    let show = |v: &Option<serde_json::Value>| match v {
        None => "(absent)".to_owned(),
        Some(v) => {
            let text = v.to_string();
            if text.len() > 300 {
                format!(
                    "{}… ({} bytes)",
                    &text[..text.floor_char_boundary(300)],
                    text.len()
                )
            } else {
                text
            }
        }
    };
    format!(
        "{}: real {} / embedded {}",
        difference.path,
        show(&difference.real),
        show(&difference.embedded)
    )
}
