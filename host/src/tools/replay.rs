//! `replay`: re-runs a recorded reconcile with no cluster (see [`crate::wasm::record`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::args::ReplayArgs;
use super::load::engine;
use crate::config::HostConfig;
use crate::exit::EXIT_CONFIG;
use crate::manifest::Manifest;
use crate::wasm::api::Unavailable;
use crate::wasm::context::PluginContext;
use crate::wasm::invoke::{self, CallSession, RequestView};
use crate::wasm::module::{ModuleLoader, hex_sha256};
use crate::wasm::record::replay::{Differences, Replaying};
use crate::wasm::record::{Bundle, FORMAT, RecordedOutcome, Session};

/// The largest bundle read.
const MAX_BUNDLE: u64 = 256 << 20;

/// Exit code when the replay differs from the recording.
pub const EXIT_DIFFERS: u8 = 1;

/// `replay`: exit 0 when the replay matches the recording, 1 when it differs, 2 on bad input.
pub async fn replay(args: ReplayArgs) -> ExitCode {
    match run(&args).await {
        Ok((report, differences)) => {
            print!("{report}");
            if differences.count == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_DIFFERS)
            }
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn read_bundle(path: &Path) -> anyhow::Result<Bundle> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read the bundle {}", path.display()))?
        .len();
    if size > MAX_BUNDLE {
        bail!(
            "the bundle {} is {size} bytes, more than a recording can be ({MAX_BUNDLE}); is it \
             a bundle?",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the bundle {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("the bundle {} is not JSON", path.display()))?;
    let format = value.get("format").and_then(serde_json::Value::as_str);
    if format != Some(FORMAT) {
        bail!(
            "the bundle {} has format {}; this reconcile-host reads `{FORMAT}`",
            path.display(),
            format.map_or_else(|| "none".to_owned(), |f| format!("`{f}`"))
        );
    }
    serde_json::from_value(value)
        .with_context(|| format!("the bundle {} is not a `{FORMAT}` bundle", path.display()))
}

async fn run(args: &ReplayArgs) -> anyhow::Result<(String, Differences)> {
    let bundle = read_bundle(&args.bundle)?;
    let module_path = args
        .module
        .clone()
        .unwrap_or_else(|| bundle.module_path.clone().into());
    let bytes = tokio::fs::read(&module_path).await.with_context(|| {
        format!(
            "cannot read the module {}; pass --module <the component> (the bundle names the \
             module the host ran, which may not be on this machine)",
            module_path.display()
        )
    })?;
    let digest = hex_sha256(&bytes);
    if args.module.is_none() && digest != bundle.module_digest {
        bail!(
            "the module at {} (sha256 {digest:.12}) is not the recorded one ({:.12}); pass \
             --module <the recorded component>, or --module <another> to compare",
            module_path.display(),
            bundle.module_digest
        );
    }
    let cache = HostConfig::default().module_cache_dir();
    let cache = args.module_cache.clone().or(cache);
    let loader = ModuleLoader::new(engine(cache)?);
    let module = loader.load_bytes(&module_path, bytes).await?;
    let context = Arc::new(context(&bundle, &module_path)?);
    let mut call = CallSession {
        session: Some(Session::Replay(Box::new(
            Replaying::new(&bundle).map_err(|e| anyhow::anyhow!("the bundle: {e}"))?,
        ))),
        replay_seed: Some(match &bundle.insecure_seed {
            Some(seed) => seed
                .parse()
                .context("the bundle's insecureSeed is not a number")?,
            None => 0,
        }),
        ..CallSession::default()
    };
    let request = &bundle.request;
    let view = RequestView::of(&request.target, request.object.as_deref(), request.requeues);
    let result = invoke::reconcile(&module, &context, None, view, None, &mut call).await;
    let replayed = RecordedOutcome::of(&result);
    let replaying = match call.session.take() {
        Some(Session::Replay(replaying)) => *replaying,
        // The instance never started.
        _ => Replaying::new(&bundle).map_err(|e| anyhow::anyhow!("the bundle: {e}"))?,
    };
    let differences = replaying.finish(&bundle.outcome, &replayed);
    Ok((
        report(&bundle, &digest, &differences, &replayed),
        differences,
    ))
}

/// The context a replay runs in: the recorded limits and environment, no caches, no API.
fn context(bundle: &Bundle, module: &Path) -> anyhow::Result<PluginContext> {
    let text = format!(
        "name: {}\nmodule: {}\nfor: {{apiVersion: {}, kind: {}}}\n",
        serde_json::to_string(&bundle.plugin)?,
        serde_json::to_string(&module.display().to_string())?,
        serde_json::to_string(&bundle.manifest.api_version)?,
        serde_json::to_string(&bundle.manifest.kind)?,
    );
    let mut manifest =
        Manifest::parse(&text, Path::new("/")).context("the bundle's plugin and kind")?;
    manifest.limits.deadline = std::time::Duration::from_millis(bundle.manifest.deadline_ms);
    manifest.limits.memory = bundle.manifest.memory;
    manifest.env.clone_from(&bundle.manifest.env);
    Ok(PluginContext::new(
        Arc::new(manifest),
        HashMap::new(),
        Arc::new(Unavailable(
            "replay: calls are answered from the recording".to_owned(),
        )),
    ))
}

fn report(
    bundle: &Bundle,
    digest: &str,
    differences: &Differences,
    replayed: &RecordedOutcome,
) -> String {
    let target = &bundle.request.target;
    let key = match &target.namespace {
        Some(namespace) => format!("{namespace}/{}", target.name),
        None => target.name.clone(),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replay of plugin `{}` on {}/{} {key}, recorded {}",
        bundle.plugin, target.kind.api_version, target.kind.kind, bundle.recorded_at
    );
    let module = if digest == bundle.module_digest {
        format!("module {digest:.12} (the recorded one)")
    } else {
        format!(
            "module {digest:.12} (recorded: {:.12})",
            bundle.module_digest
        )
    };
    let _ = writeln!(out, "{module}");
    let _ = writeln!(
        out,
        "host calls: {} recorded, {} replayed",
        bundle.calls.len(),
        differences.calls
    );
    let _ = writeln!(
        out,
        "outcome: recorded {}, replayed {replayed}",
        bundle.outcome
    );
    if !bundle.fresh_instance {
        let _ = writeln!(
            out,
            "note: recorded on a reused instance (instanceReuse); its state from earlier calls is \
             not in the bundle"
        );
    }
    if bundle.truncated {
        let _ = writeln!(out, "note: the recording was truncated at its size bounds");
    }
    if differences.count == 0 {
        let _ = writeln!(out, "no difference");
    } else {
        let _ = writeln!(out, "differences: {}", differences.count);
        for difference in &differences.shown {
            let _ = writeln!(out, "  {difference}");
        }
        if differences.count > differences.shown.len() {
            let _ = writeln!(
                out,
                "  … and {} more",
                differences.count - differences.shown.len()
            );
        }
    }
    out
}
