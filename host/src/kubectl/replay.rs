//! `kubectl reconcile replay <plugin> [<kind>/<name>]`: fetches a plugin's newest recorded
//! reconcile (of that object) from the replicas and re-runs it here with no cluster, as
//! `reconcile-host replay` does with a bundle file.
//!
//! The hosts serve recordings only with `recording.serve: true`, and only to readers the API
//! server authorizes for `/debug/recordings` (the ClusterRole `reconcile-host-recording-reader`):
//! a recording holds what the plugin read, Secret values redacted unless
//! `recording.keepSecrets`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{ReachArgs, exit, logs::plugin_name, replicas};

/// `replay <plugin> [<kind>/<name>]`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The plugin whose recording to replay.
    plugin: String,
    /// Only recordings of this object: `<kind>/<name>` [default: the plugin's newest recording].
    object: Option<String>,
    /// The object's namespace [default: any].
    #[arg(short, long)]
    namespace: Option<String>,
    /// The component to run: the recorded one (its digest is checked), or another to compare
    /// with the recording. The module the host ran is on the host's disk, not here.
    #[arg(long, value_name = "WASM")]
    module: PathBuf,
    /// Also keep the bundle in this file (for `reconcile-host replay`).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Directory for compiled plugin modules [default: as `run`].
    #[arg(long, env = "RECONCILE_HOST_MODULE_CACHE", value_name = "DIR")]
    module_cache: Option<PathBuf>,
    #[command(flatten)]
    reach: ReachArgs,
}

/// Runs `replay`: the replay's exit code (0 same, 1 different), 1 when no replica has a
/// matching recording (each replica's refusal printed).
pub async fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    plugin_name(&args.plugin)?;
    let object = match &args.object {
        None => None,
        Some(object) => Some(
            object
                .split_once('/')
                .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{object:?} is not an object: give <kind>/<name>, e.g. configmap/settings"
                    )
                })?,
        ),
    };
    let reach = replicas::Reach::new(&args.reach).await?;
    let answers = reach
        .ask_all(&format!("/debug/recordings/{}", args.plugin))
        .await?;
    let mut bundles = Vec::new();
    for answer in &answers {
        match &answer.body {
            Ok(Value::Array(held)) => bundles.extend(held.iter().map(|b| (&answer.replica, b))),
            Ok(_) => eprintln!(
                "{}: answered something that is not a list of bundles",
                answer.replica
            ),
            Err(error) => eprintln!("{}: {error}", answer.replica),
        }
    }
    let chosen = bundles
        .into_iter()
        .filter(|(_, bundle)| matches(bundle, object, args.namespace.as_deref()))
        .max_by_key(|(_, bundle)| {
            bundle["recordedAt"]
                .as_str()
                .or_else(|| bundle["recorded_at"].as_str())
                .and_then(|at| at.parse::<Timestamp>().ok())
        });
    let Some((replica, bundle)) = chosen else {
        eprintln!(
            "no replica holds a recording of plugin {:?}{}: a host records failed reconciles, \
             and a key's next reconcile on `POST /debug/recordings/<plugin>/<namespace>/<name>`",
            args.plugin,
            args.object
                .as_deref()
                .map(|o| format!(" for {o}"))
                .unwrap_or_default()
        );
        return Ok(exit(true));
    };
    let target = &bundle["request"]["target"];
    eprintln!(
        "replaying the recording of {}/{} from {replica}",
        target["namespace"].as_str().unwrap_or("_"),
        target["name"].as_str().unwrap_or("")
    );
    let (path, temporary) = match &args.save {
        Some(path) => (path.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "kubectl-reconcile-replay-{}.json",
                std::process::id()
            )),
            true,
        ),
    };
    std::fs::write(&path, serde_json::to_vec_pretty(bundle)?)
        .with_context(|| format!("cannot write the bundle to {}", path.display()))?;
    let code = crate::tools::replay(crate::tools::ReplayArgs {
        bundle: path.clone(),
        module: Some(args.module),
        module_cache: args.module_cache,
    })
    .await;
    if temporary {
        let _ = std::fs::remove_file(&path);
    }
    Ok(code)
}

/// Whether `bundle` records a reconcile of `object` (kind compared without case, its group
/// ignored) in `namespace`.
fn matches(bundle: &Value, object: Option<(&str, &str)>, namespace: Option<&str>) -> bool {
    let target = &bundle["request"]["target"];
    if namespace.is_some_and(|ns| target["namespace"].as_str() != Some(ns)) {
        return false;
    }
    let Some((kind, name)) = object else {
        return true;
    };
    let kind = kind.split('.').next().unwrap_or(kind);
    target["name"].as_str() == Some(name)
        && target["kind"]["kind"]
            .as_str()
            .is_some_and(|k| k.eq_ignore_ascii_case(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bundles_are_chosen_by_kind_name_and_namespace() {
        let bundle = json!({"request": {"target": {
            "kind": {"api_version": "v1", "kind": "ConfigMap"},
            "namespace": "team-a", "name": "settings"}}});
        assert!(matches(&bundle, None, None));
        assert!(matches(&bundle, Some(("configmap", "settings")), None));
        assert!(matches(
            &bundle,
            Some(("ConfigMap", "settings")),
            Some("team-a")
        ));
        assert!(!matches(
            &bundle,
            Some(("configmap", "settings")),
            Some("team-b")
        ));
        assert!(!matches(&bundle, Some(("secret", "settings")), None));
        assert!(!matches(&bundle, Some(("configmap", "other")), None));
    }
}
