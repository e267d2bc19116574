//! `check`'s exercise: one call of the `reconcile` export with a sample object — the
//! `--sample` file, else the first object of the `for` kind in `samples/` beside the manifest,
//! else a minimal object of the manifest's `for` kind — through the machinery of
//! `reconcile` (caches holding only the sample, every call recorded, not applied), so a
//! component that traps fails `check` rather than a cluster, in words that name the fix.
//!
//! # Outcomes
//! - The export answers an action and its grants allowed every call: passed.
//! - It answers, but its grants refused calls: failed, listing each refused call with the grant
//!   it lacks (`--allow-failure`: passed, the refusals counted).
//! - It returns `err(reconcile-error)`: failed, with the message rendered line by line
//!   (`--allow-failure`: passed, with the message shown — the host logs such an error and
//!   retries with backoff).
//! - It traps, overruns its deadline or memory limit, or cannot start: failed, whatever the
//!   flags. The explanation quotes what the guest wrote (its runtime's or SDK's message) and
//!   names the fix.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::instrument::WithSubscriber as _;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt as _;

use super::diagnose::explain;
use super::fixtures::{Fixture, describe, fixture, read_object, samples_beside};
use super::language::{Language, javascript_names};
use super::load::Loaded;
use super::outcome::ActionRecord;
use super::run::Run;
use crate::manifest::Manifest;
use crate::runtime::KindRef;
use crate::wasm::invoke::GuestFailure;
use label_selector::Operator;

/// The name of the minimal sample object.
pub(super) const SAMPLE_NAME: &str = "check-sample";

/// Where the host logs guest text (stdout, stderr, the `log` import).
const GUEST_LOG_TARGET: &str = "reconcile_host::wasm::guest_log";

/// Kinds of the built-in API groups that are cluster-scoped: their minimal sample has no
/// namespace. Any other kind gets the manifest's `namespace`, else `default`.
const CLUSTER_SCOPED: [&str; 16] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "CSIDriver",
    "CSINode",
    "APIService",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ReconcilerPlugin",
];

/// What the exercise found.
pub(super) enum Verdict {
    /// The export ran as it should (or failed in a way `--allow-failure` accepts): lines for
    /// stdout.
    Passed(String),
    /// It failed: the lines so far for stdout, the explanation for stderr, and the short reason
    /// for `not ok`.
    Failed {
        lines: String,
        explanation: String,
        reason: String,
    },
}

/// Calls the plugin's `reconcile` once with the object in `sample`, or a minimal object of its
/// `for` kind.
///
/// Without `sample`, the first object of the `for` kind in the `samples` directory beside the
/// manifest at `manifest_path` is the sample, and the directory's other objects fill the caches;
/// without one there, a minimal object.
///
/// # Errors
/// When the sample file is unusable (unreadable, not one object of the `for` kind).
pub(super) async fn exercise(
    loaded: &Loaded,
    manifest_path: &Path,
    sample: Option<&Path>,
    allow_failure: bool,
) -> anyhow::Result<Verdict> {
    let manifest = &loaded.manifest;
    let beside = match sample {
        Some(_) => None,
        None => samples_beside(manifest_path, manifest)?,
    };
    let (object, fixtures, origin) = match (sample, beside) {
        (Some(path), _) => (
            read_object(path, manifest, "--sample")?,
            Vec::new(),
            format!("from {}", path.display()),
        ),
        (None, Some((object, fixtures, dir))) => (
            object,
            fixtures,
            format!(
                "the first {} in {}; pass --sample FILE for another",
                describe(&manifest.for_kind),
                dir.display()
            ),
        ),
        (None, None) => (
            minimal_object(manifest)?,
            Vec::new(),
            "a minimal object of the `for` kind; pass --sample FILE for one of yours".to_owned(),
        ),
    };
    let subject = format!("{} {}", describe(&object.kind), object.key());
    let run = Run::new(
        manifest.clone(),
        Arc::clone(&loaded.module),
        object,
        &fixtures,
    )?;
    let guest = GuestText::default();
    let result = run.call(0).with_subscriber(dispatch(guest.clone())).await;
    let mut out = format!("{:<10}{subject} ({origin})\n", "sample");
    let failure = match result {
        Ok(action) => {
            let outcome = run.outcome(Ok(action));
            let action = match ActionRecord::from(action) {
                ActionRecord::Done => "done".to_owned(),
                ActionRecord::Requeue => "requeue".to_owned(),
                ActionRecord::RequeueAfter { after_ms } => format!("requeue-after {after_ms} ms"),
            };
            let _ = writeln!(
                out,
                "{:<10}reconcile answered {action}; {} calls recorded (not applied), {} denied",
                "exercise",
                outcome.calls.len(),
                outcome.denied.len()
            );
            if outcome.denied.is_empty() || allow_failure {
                return Ok(Verdict::Passed(out));
            }
            let mut explanation = format!(
                "check failed: plugin `{}`'s grants refused {} of its calls on the sample \
                 {subject}; in the host they fail the same way:\n",
                manifest.name,
                outcome.denied.len()
            );
            for (i, denied) in outcome.denied.iter().enumerate() {
                let _ = writeln!(explanation, "  {}. {}", i + 1, denied.call.headline());
                let _ = writeln!(explanation, "     {}", denied.message);
            }
            explanation.push_str(
                "add the grants to the manifest, or pass --allow-failure if the sample is \
                 meant to be refused\n",
            );
            return Ok(Verdict::Failed {
                lines: out,
                explanation,
                reason: match outcome.denied.len() {
                    1 => "1 call denied".to_owned(),
                    n => format!("{n} calls denied"),
                },
            });
        }
        Err(error) => error,
    };
    if let GuestFailure::Returned(message) = &failure.failure {
        let message = message.clone();
        if allow_failure {
            let _ = writeln!(
                out,
                "{:<10}reconcile returned an error, which the host logs and retries with \
                 backoff (allowed by --allow-failure): {message}",
                "exercise"
            );
            return Ok(Verdict::Passed(out));
        }
        let denied = run.outcome(Err(failure)).denied;
        let mut explanation = format!(
            "check failed: plugin `{}`'s reconcile returned an error on the sample {subject}; \
             the host would log it and retry with backoff:\n{}\n",
            manifest.name,
            super::outcome::readable(&message, "    ")
        );
        for denied in &denied {
            let _ = writeln!(
                explanation,
                "  denied: {}\n     {}",
                denied.call.headline(),
                denied.message
            );
        }
        explanation.push_str(
            "fix the reconciler, or pass --sample FILE with an object it reconciles; \
             --allow-failure accepts a reconcile error\n",
        );
        return Ok(Verdict::Failed {
            lines: out,
            explanation,
            reason: "its reconcile returned an error".to_owned(),
        });
    }
    let chain = chain(&failure);
    // What the component's bytes tell about its language, read again only now: scanning an
    // 18 MB Python component costs more than the whole exercise of a correct one.
    let bytes = tokio::fs::read(&manifest.module).await.unwrap_or_default();
    let language = Language::detect(&bytes);
    let names = if language == Language::JavaScript {
        javascript_names(&bytes)
    } else {
        Vec::new()
    };
    let explanation = explain(&failure.failure, &chain, &guest.0.lock(), language, &names);
    let what = match failure.failure {
        GuestFailure::Trapped(_) => "trapped",
        GuestFailure::Instantiate(_) => "could not start",
        _ => "failed",
    };
    Ok(Verdict::Failed {
        explanation: format!(
            "{out}check failed: plugin `{}`'s reconcile {what} on the sample {subject}:\n\
             {explanation}\nthe failure: {}\n",
            manifest.name,
            super::outcome::readable(&chain, "    ")
        ),
        lines: String::new(),
        reason: format!("its reconcile {what}"),
    })
}

/// `error` with its causes, as `{:#}` prints an `anyhow` chain.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A minimal object of `manifest`'s `for` kind, as an API server would store it: apiVersion,
/// kind, `metadata.name` [`SAMPLE_NAME`], the manifest's namespace (`default` if it has none;
/// none for built-in cluster-scoped kinds), labels its label selector asks for, a uid and a
/// resourceVersion.
pub(super) fn minimal_object(manifest: &Manifest) -> anyhow::Result<Fixture> {
    let KindRef { api_version, kind } = &manifest.for_kind;
    let mut metadata = Map::new();
    metadata.insert("name".to_owned(), json!(SAMPLE_NAME));
    if !CLUSTER_SCOPED.contains(&kind.as_str()) || manifest.namespace.is_some() {
        let namespace = manifest.namespace.as_deref().unwrap_or("default");
        metadata.insert("namespace".to_owned(), json!(namespace));
    }
    let mut labels = Map::new();
    for requirement in manifest
        .label_selector
        .iter()
        .flat_map(|selector| selector.requirements())
    {
        let first = requirement.values.first().cloned().unwrap_or_default();
        let value = match requirement.operator {
            Operator::Equals | Operator::In => first,
            Operator::Exists => "true".to_owned(),
            Operator::GreaterThan => first
                .parse::<i64>()
                .map_or(first, |n| n.saturating_add(1).to_string()),
            Operator::LessThan => first
                .parse::<i64>()
                .map_or(first, |n| n.saturating_sub(1).to_string()),
            Operator::NotEquals | Operator::NotIn | Operator::DoesNotExist => continue,
        };
        labels.insert(requirement.key.clone(), Value::String(value));
    }
    if !labels.is_empty() {
        metadata.insert("labels".to_owned(), Value::Object(labels));
    }
    let object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    fixture(object, "the minimal sample").context("cannot make a minimal sample object")
}

/// The guest's text (stdout, stderr, `log` import) logged during the exercise, in order.
#[derive(Clone, Debug, Default)]
struct GuestText(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for GuestText {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _context: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if event.metadata().target() != GUEST_LOG_TARGET {
            return;
        }
        let mut text = TextField(None);
        event.record(&mut text);
        if let Some(text) = text.0 {
            self.0.lock().push(text);
        }
    }
}

/// The `text` field of a guest log event.
struct TextField(Option<String>);

impl Visit for TextField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "text" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "text" && self.0.is_none() {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// The log of the exercise: the binary's (stderr, `RUST_LOG` or `warn`) plus `guest`, which
/// keeps every guest line whatever the level.
fn dispatch(guest: GuestText) -> tracing::Dispatch {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(tracing_subscriber::filter::filter_fn(
            crate::telemetry::logs::keeps,
        ))
        .with_filter(filter);
    tracing::Dispatch::new(tracing_subscriber::registry().with(output).with(guest))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Value, json};

    use super::*;

    fn manifest(extra: &str) -> Manifest {
        let text = format!("name: web\nmodule: web.wasm\n{extra}");
        Manifest::parse(&text, Path::new("/plugins")).unwrap()
    }

    #[test]
    fn the_minimal_sample_meets_the_selector_and_has_what_a_server_sets() {
        let manifest = manifest(
            "for: {apiVersion: example.com/v1, kind: Website}\nnamespace: team-a\n\
             labelSelector: tier=web,env in (dev,prod),managed,!legacy\n",
        );
        let object = minimal_object(&manifest).unwrap();
        let value: Value = serde_json::from_str(&object.json).unwrap();
        assert_eq!(value["apiVersion"], "example.com/v1");
        assert_eq!(value["metadata"]["name"], SAMPLE_NAME);
        assert_eq!(value["metadata"]["namespace"], "team-a");
        assert_eq!(
            value["metadata"]["labels"],
            json!({"tier": "web", "env": "dev", "managed": "true"})
        );
        assert_eq!(value["metadata"]["resourceVersion"], "1");
        assert_eq!(value["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert!(
            manifest
                .label_selector
                .as_ref()
                .unwrap()
                .matches_by(|key| value["metadata"]["labels"][key].as_str())
        );
    }

    #[test]
    fn a_namespace_sample_has_no_namespace_and_others_default_to_default() {
        let namespaces = manifest("for: {apiVersion: v1, kind: Namespace}\n");
        let object = minimal_object(&namespaces).unwrap();
        assert_eq!(object.namespace, None);
        let config_maps = manifest("for: {apiVersion: v1, kind: ConfigMap}\n");
        let object = minimal_object(&config_maps).unwrap();
        assert_eq!(object.namespace.as_deref(), Some("default"));
    }
}
