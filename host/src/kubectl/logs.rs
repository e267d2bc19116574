//! `kubectl reconcile logs <plugin>`: the plugin's latest log lines from every replica, merged
//! by time — the guest's output and `log` calls, and the host's lines about its reconciles.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{Output, ReachArgs, exit, replicas};

/// `logs <plugin>`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The plugin (its `ReconcilerPlugin` or manifest name).
    plugin: String,
    /// The last N lines of each replica [default: all it keeps, up to 1000].
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    /// Keep printing new lines, asking every replica each `--interval`, until interrupted.
    #[arg(short, long)]
    follow: bool,
    /// How often `--follow` asks, in seconds.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    interval: f64,
    /// `text`, or `json`: one JSON object a line, each with its `replica`.
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
    #[command(flatten)]
    reach: ReachArgs,
}

/// Checks that `plugin` can be a path segment: a Kubernetes object name.
pub fn plugin_name(plugin: &str) -> anyhow::Result<()> {
    let alphanumeric =
        |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let valid = alphanumeric(plugin.as_bytes().first())
        && alphanumeric(plugin.as_bytes().last())
        && plugin.len() <= 253
        && plugin
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        anyhow::bail!(
            "{plugin:?} is not a plugin name: give the name of its ReconcilerPlugin (lower-case \
             letters, digits, '-' and '.'); `kubectl reconcile top` lists them"
        );
    }
    Ok(())
}

/// Runs `logs`: 0 when every replica answered (each time, with `--follow`), 1 when one did not.
pub async fn logs(args: LogsArgs) -> anyhow::Result<ExitCode> {
    plugin_name(&args.plugin)?;
    if !(args.interval > 0.0 && args.interval <= 3600.0) {
        anyhow::bail!(
            "--interval {}: give seconds between 0 and 3600",
            args.interval
        );
    }
    let reach = replicas::Reach::new(&args.reach).await?;
    let mut after: HashMap<String, u64> = HashMap::new();
    let mut failed = false;
    let mut first = true;
    loop {
        let answers = reach
            .ask_each(|replica| {
                let after = after.get(replica).copied().unwrap_or(0);
                match (first, args.tail) {
                    (true, Some(tail)) => format!("/debug/logs/{}?tail={tail}", args.plugin),
                    _ => format!("/debug/logs/{}?after={after}", args.plugin),
                }
            })
            .await?;
        let mut lines = Vec::new();
        for answer in &answers {
            match &answer.body {
                Ok(body) => {
                    if let Some(next) = body["next"].as_u64() {
                        after.insert(answer.replica.clone(), next);
                    }
                    let replica = body["replica"].as_str().unwrap_or(&answer.replica);
                    for line in body["lines"].as_array().into_iter().flatten() {
                        lines.push((replica.to_owned(), line.clone()));
                    }
                }
                Err(error) => {
                    failed = true;
                    eprintln!("{}: {error}", answer.replica);
                }
            }
        }
        print!("{}", show(&mut lines, args.output));
        if first && lines.is_empty() && !args.follow {
            eprintln!(
                "no replica holds log lines of plugin {:?} (lines are kept from the host's \
                 start, at the level it logs; GET /debug/logs lists the plugins that have some)",
                args.plugin
            );
        }
        first = false;
        if !args.follow {
            return Ok(exit(failed));
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(args.interval)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(exit(failed)),
        }
    }
}

/// The lines, oldest first, as text or JSON lines.
fn show(lines: &mut [(String, Value)], output: Output) -> String {
    let at = |line: &Value| {
        line["at"]
            .as_str()
            .and_then(|at| at.parse::<Timestamp>().ok())
    };
    lines.sort_by_key(|(_, line)| at(line));
    let mut out = String::new();
    for (replica, line) in lines.iter() {
        match output {
            Output::Json => {
                let mut line = line.clone();
                if let Some(fields) = line.as_object_mut() {
                    fields.insert("replica".into(), json!(replica));
                }
                let _ = writeln!(out, "{line}");
            }
            Output::Text => {
                let text = |value: &Value| value.as_str().unwrap_or("").to_owned();
                let _ = write!(
                    out,
                    "{}  {}  {:5}",
                    text(&line["at"]),
                    replica,
                    text(&line["level"])
                );
                if let Some(key) = line["key"].as_str() {
                    let _ = write!(out, "  {key}");
                }
                let _ = write!(out, "  {}", text(&line["message"]));
                for (name, value) in line["fields"].as_object().into_iter().flatten() {
                    let _ = write!(out, " {name}={value}");
                }
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_two_replicas_are_merged_by_time() {
        let mut lines = vec![
            (
                "b".to_owned(),
                json!({"at": "2026-12-05T01:00:02Z", "level": "WARN", "key": "ns/x",
                       "message": "reconcile failed", "fields": {"error": "boom"}}),
            ),
            (
                "a".to_owned(),
                json!({"at": "2026-12-05T01:00:01Z", "level": "INFO", "key": null,
                       "message": "guest log", "fields": {"text": "hi"}}),
            ),
        ];
        let text = show(&mut lines, Output::Text);
        assert_eq!(
            text,
            "2026-12-05T01:00:01Z  a  INFO   guest log text=\"hi\"\n\
             2026-12-05T01:00:02Z  b  WARN   ns/x  reconcile failed error=\"boom\"\n"
        );
        let json = show(&mut lines, Output::Json);
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(first["replica"], "a");
    }

    #[test]
    fn a_plugin_name_must_be_an_object_name() {
        assert!(plugin_name("config-replicator.v2").is_ok());
        for bad in ["", "a/b", "A", "x?y", "..", "-a"] {
            let error = plugin_name(bad).unwrap_err().to_string();
            assert!(error.contains("not a plugin name"), "{bad}: {error}");
        }
    }
}
