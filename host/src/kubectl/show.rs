//! How `kubectl reconcile` prints the replicas' answers.

use std::fmt::Write as _;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::replicas::Answer;

/// Every answer as one JSON document: `{"replicas": [{"replica", "answer" | "error"}]}`.
pub fn answers_json(answers: &[Answer]) -> String {
    let replicas: Vec<Value> = answers
        .iter()
        .map(|answer| match &answer.body {
            Ok(body) => json!({"replica": answer.replica, "answer": body}),
            Err(error) => json!({"replica": answer.replica, "error": error}),
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "replicas": replicas })).unwrap_or_default()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// `why`: every replica's reconciles of the object, newest first.
pub fn why(answers: &[Answer], kind: &str, namespace: Option<&str>, name: &str) -> String {
    let mut reconciles: Vec<(&str, &Value)> = Vec::new();
    for answer in answers {
        if let Ok(body) = &answer.body {
            let replica = body.get("replica").map_or(answer.replica.as_str(), text);
            for entry in body["reconciles"].as_array().into_iter().flatten() {
                reconciles.push((replica, entry));
            }
        }
    }
    let started = |entry: &Value| text(&entry["started"]).parse::<Timestamp>().ok();
    reconciles.sort_by_key(|(_, entry)| std::cmp::Reverse(started(entry)));
    let object = namespace.map_or_else(|| name.to_owned(), |ns| format!("{ns}/{name}"));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{kind} {object}: {} reconcile{} on {} replica{} asked",
        reconciles.len(),
        if reconciles.len() == 1 { "" } else { "s" },
        answers.len(),
        if answers.len() == 1 { "" } else { "s" },
    );
    for (replica, entry) in reconciles {
        let _ = writeln!(
            out,
            "\n{}  {}  plugin {}  module {:.12}  {:.1} ms  {}{}",
            text(&entry["started"]),
            replica,
            text(&entry["plugin"]),
            text(&entry["module"]),
            entry["durationMs"].as_f64().unwrap_or_default(),
            text(&entry["outcome"]),
            outcome_detail(entry),
        );
        let causes: Vec<String> = entry["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cause)
            .collect();
        let dropped = entry["causesDropped"].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "  because: {}{}",
            if causes.is_empty() {
                "(none noted)".to_owned()
            } else {
                causes.join("; ")
            },
            if dropped > 0 {
                format!(" (and {dropped} more)")
            } else {
                String::new()
            }
        );
        for call in entry["calls"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  call:    {}", call_line(call));
        }
        if let Some(more) = entry["callsDropped"].as_u64() {
            let _ = writeln!(out, "  call:    … and {more} more");
        }
        if let Some(trace) = entry["traceId"].as_str() {
            let _ = writeln!(out, "  trace:   {trace}");
        }
    }
    failures(&mut out, answers);
    out
}

fn outcome_detail(entry: &Value) -> String {
    match text(&entry["outcome"]) {
        "requeue_after" => format!(" {} ms", entry["afterMs"].as_u64().unwrap_or_default()),
        "error" => format!(" ({}): {}", text(&entry["reason"]), text(&entry["error"])),
        _ => String::new(),
    }
}

fn cause(cause: &Value) -> String {
    let mut out = text(&cause["why"]).to_owned();
    let object = &cause["object"];
    if object.is_object() {
        let name = match object["namespace"].as_str() {
            Some(ns) => format!("{ns}/{}", text(&object["name"])),
            None => text(&object["name"]).to_owned(),
        };
        let _ = write!(
            out,
            " {} {name} rv {}",
            text(&object["kind"]),
            text(&object["resourceVersion"])
        );
    }
    if let Some(after) = cause["afterMs"].as_u64() {
        let _ = write!(out, " {after} ms");
    }
    if let Some(module) = cause["module"].as_str() {
        let _ = write!(out, " to {module:.12}");
    }
    if let Some(error) = cause["error"].as_str() {
        let _ = write!(out, " after: {error:.160}");
    }
    let at = text(&cause["at"]);
    if let Some(time) = at.split_once('T').map(|(_, time)| time) {
        let _ = write!(out, " at {time}");
    }
    out
}

fn call_line(call: &Value) -> String {
    let name = match call["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", text(&call["name"])),
        None => text(&call["name"]).to_owned(),
    };
    let subresource = call["subresource"]
        .as_str()
        .map(|sub| format!(" ({sub})"))
        .unwrap_or_default();
    format!(
        "{} {} {name}{subresource} → {}",
        text(&call["verb"]),
        text(&call["kind"]),
        text(&call["result"])
    )
}

/// `top`: every replica's plugins by busy time.
pub fn top(answers: &[Answer]) -> String {
    let mut rows: Vec<(String, &Value)> = Vec::new();
    for answer in answers {
        if let Ok(body) = &answer.body {
            let replica = body.get("replica").map_or(answer.replica.as_str(), text);
            for plugin in body["plugins"].as_array().into_iter().flatten() {
                rows.push((replica.to_owned(), plugin));
            }
        }
    }
    let busy = |plugin: &Value| plugin["busySeconds"].as_f64().unwrap_or_default();
    rows.sort_by(|a, b| busy(b.1).total_cmp(&busy(a.1)));
    let mut out = format!(
        "{:<24} {:<28} {:<24} {:>10} {:>8} {:>10} {:>6}\n",
        "PLUGIN", "REPLICA", "KIND", "RECONCILES", "ERRORS", "BUSY(s)", "QUEUE"
    );
    for (replica, plugin) in rows {
        let _ = writeln!(
            out,
            "{:<24} {:<28} {:<24} {:>10} {:>8} {:>10.3} {:>6}",
            text(&plugin["plugin"]),
            replica,
            text(&plugin["kind"]),
            plugin["reconciles"].as_u64().unwrap_or_default(),
            plugin["errors"].as_u64().unwrap_or_default(),
            busy(plugin),
            plugin["queueDepth"].as_u64().unwrap_or_default(),
        );
    }
    failures(&mut out, answers);
    out
}

fn failures(out: &mut String, answers: &[Answer]) {
    for answer in answers {
        if let Err(error) = &answer.body {
            let _ = writeln!(out, "\nreplica {} did not answer: {error}", answer.replica);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_lists_every_replicas_reconciles_newest_first_with_causes_and_calls() {
        let answer = |replica: &str, started: &str, why: Value| Answer {
            replica: format!("pod-{replica}"),
            body: Ok(json!({"replica": replica, "reconciles": [{
                "plugin": "marker", "module": "sha256:0123456789abcdef", "started": started,
                "durationMs": 2.5, "outcome": "success", "causes": [why],
                "calls": [{"verb": "patch", "kind": "v1/ConfigMap", "namespace": "ns",
                           "name": "a", "result": "ok"}],
            }]})),
        };
        let answers = [
            answer(
                "r1",
                "2026-01-01T00:00:01Z",
                json!({"why": "requeue",
                "at": "2026-01-01T00:00:00.9Z"}),
            ),
            answer(
                "r2",
                "2026-01-01T00:00:02.5Z",
                json!({"why": "modified",
                "at": "2026-01-01T00:00:02Z", "object": {"kind": "ConfigMap",
                "namespace": "ns", "name": "a", "resourceVersion": "42"}}),
            ),
            Answer {
                replica: "pod-r3".into(),
                body: Err("401: no".into()),
            },
        ];
        let shown = why(&answers, "configmap", Some("ns"), "a");
        let r2 = shown.find("r2  plugin marker").expect(&shown);
        let r1 = shown.find("r1  plugin marker").expect(&shown);
        assert!(r2 < r1, "newest first:\n{shown}");
        assert!(shown.contains("because: modified ConfigMap ns/a rv 42 at 00:00:02Z"));
        assert!(shown.contains("because: requeue at 00:00:00.9Z"));
        assert!(shown.contains("call:    patch v1/ConfigMap ns/a → ok"));
        assert!(shown.contains("replica pod-r3 did not answer: 401: no"));
        assert!(shown.starts_with("configmap ns/a: 2 reconciles on 3 replicas asked"));
    }
}
