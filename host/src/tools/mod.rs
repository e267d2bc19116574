//! `check` and `reconcile`: tools for plugin authors, with no cluster — validate a manifest and
//! its component, and run one reconcile against object files, recording the calls it makes.
//!
//! # `reconcile --output json`
//! One JSON document, with these fields (stable; plugin authors' tests may rely on them):
//!
//! ```json
//! {
//!   "action": {"type": "requeue-after", "afterMs": 60000},
//!   "error": null,
//!   "calls": [{"verb": "apply", "apiVersion": "apps/v1", "kind": "Deployment",
//!              "namespace": "default", "name": "web", "subresource": null,
//!              "force": true, "patchType": null, "body": {"apiVersion": "apps/v1", "...": "..."}}],
//!   "denied": [{"verb": "get", "apiVersion": "v1", "kind": "Secret", "...": "...",
//!               "message": "plugin `web` has no grant to `get` v1 Secret in namespace ..."}]
//! }
//! ```
//!
//! - `action`: what the guest returned — `{"type": "done"}`, `{"type": "requeue"}` or
//!   `{"type": "requeue-after", "afterMs": <u32>}` — or `null` when it failed.
//! - `error`: `null`, or why the guest failed (returned `err`, trapped, overran its deadline or
//!   memory limit), with the cause chain.
//! - `calls`: every `client` and `events` call the grants allowed, in order; recorded, not
//!   applied (see [`CallRecord`]).
//! - `denied`: every `client` call the grants refused, in order: the fields of a call plus
//!   `message`, the `call-error::denied` text the guest got (see [`DeniedRecord`]).
//!
//! # Guarantees
//! The guest runs as in the host: same engine, limits, WASI context and host imports, its logs
//! on stderr. Only where its calls go differs: live reads answer from the `--cache` files and
//! the object, writes answer with what was sent (a patch: with the object patched, unchanged).

mod args;
mod diagnose;
mod exercise;
mod fixtures;
mod language;
mod load;
mod outcome;
mod replay;
mod report;
mod run;
mod served;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use anyhow::Context as _;

pub use args::{CheckArgs, Output, ReconcileArgs, ReplayArgs};
pub use outcome::{ActionRecord, CallRecord, DeniedRecord, Outcome};
pub use replay::replay;

use crate::exit::EXIT_CONFIG;
use exercise::Verdict;
use load::load;
use report::check_report;
use run::prepare;

/// Exit code of `reconcile` when the guest failed (returned `err`, trapped, overran a limit),
/// and of `check` when its sample reconcile failed (see [`check`]).
pub const EXIT_GUEST_FAILED: u8 = 1;

/// `check`: loads the manifest and its component as the host would and prints what they
/// declare, then calls `reconcile` once with a sample object (`--sample`, else the first of the
/// `for` kind in `samples/` beside the manifest, else a minimal object of the `for` kind) against in-memory caches, recording its calls; with `--kubeconfig`, also
/// asks that API server whether it serves every kind the manifest names. Exit 0 when all is
/// usable (last line `ok: …`); 1 when the sample reconcile fails: it returns an error, a call
/// it makes is denied, it traps, overruns a limit, or the component cannot start; 2 (with the
/// reason) on any other problem, such as a kind the API server does not serve (last line
/// `not ok: …` for 1 and for unserved kinds). `--allow-failure` accepts a returned error and
/// denied calls.
pub async fn check(args: CheckArgs) -> ExitCode {
    let loaded = match load(&args.manifest, args.module_cache).await {
        Ok(loaded) => loaded,
        Err(error) => return bad_input(&error),
    };
    print!("{}", check_report(&args.manifest, &loaded));
    let name = &loaded.manifest.name;
    let not_ok = |reason: &str, code: u8| {
        println!("not ok: plugin `{name}`: {reason}");
        ExitCode::from(code)
    };
    match exercise::exercise(
        &loaded,
        &args.manifest,
        args.sample.as_deref(),
        args.allow_failure,
    )
    .await
    {
        Ok(Verdict::Passed(lines)) => print!("{lines}"),
        Ok(Verdict::Failed {
            lines,
            explanation,
            reason,
        }) => {
            print!("{lines}");
            eprint!("{explanation}");
            return not_ok(&reason, EXIT_GUEST_FAILED);
        }
        Err(error) => return bad_input(&error),
    }
    if let Some(kubeconfig) = &args.kubeconfig {
        match served::unserved_kinds(kubeconfig, &loaded.manifest).await {
            Ok(unserved) if unserved.is_empty() => {
                println!("{:<10}every kind named is served", "served");
            }
            Ok(unserved) => {
                eprint!("{}", served::report(&unserved));
                return not_ok("kinds it names are not served", EXIT_CONFIG);
            }
            Err(error) => return bad_input(&error),
        }
    }
    println!("ok: plugin `{name}` is valid");
    ExitCode::SUCCESS
}

/// `reconcile`: one reconcile of the object in `--object`, against the `--cache` fixtures, with
/// every call recorded; exit 0 when it succeeds, 1 when the guest fails, 2 on bad input.
pub async fn reconcile(args: ReconcileArgs) -> ExitCode {
    let run = match prepare(&args).await {
        Ok(run) => run,
        Err(error) => return bad_input(&error),
    };
    let outcome = run.reconcile(args.requeues).await;
    if let Some(path) = &args.record {
        let written = run
            .recorded()
            .context("the reconcile was not recorded")
            .and_then(|bundle| Ok(serde_json::to_vec_pretty(&*bundle)?))
            .and_then(|text| {
                std::fs::write(path, text)
                    .with_context(|| format!("cannot write --record {}", path.display()))
            });
        if let Err(error) = written {
            return bad_input(&error);
        }
    }
    match args.output {
        Output::Text => print!("{}", outcome.text(&run.subject())),
        Output::Json => match serde_json::to_string_pretty(&outcome) {
            Ok(json) => println!("{json}"),
            Err(error) => return bad_input(&error.into()),
        },
    }
    if outcome.error.is_some() {
        ExitCode::from(EXIT_GUEST_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn bad_input(error: &anyhow::Error) -> ExitCode {
    eprintln!("error: {error:#}");
    ExitCode::from(EXIT_CONFIG)
}
