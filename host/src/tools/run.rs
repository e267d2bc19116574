//! One recorded reconcile: the plugin with its fixture caches, called once.

use std::sync::Arc;

use anyhow::Context;
use tracing::Instrument;

use super::args::ReconcileArgs;
use super::fixtures::{Fixture, caches, fixture, fixture_files, objects_in, read_object};
use super::load::{Loaded, load};
use super::outcome::{ActionRecord, CallRecord, DeniedRecord, Outcome};
use crate::config::RecordingConfig;
use crate::delivery::reconciler::{Plugin, PluginError};
use crate::manifest::Manifest;
use crate::upgrade::recordings::PluginRecordings;
use crate::wasm::api::{Recorder, SharedApi};
use crate::wasm::context::PluginContext;
use crate::wasm::module::Module;
use crate::wasm::{GuestAction, Kind, ObjectRef};

/// A reconcile ready to run: the plugin with its fixture caches and recording backend.
pub(super) struct Run {
    pub(super) plugin: Plugin,
    pub(super) object: Fixture,
    pub(super) backend: Arc<Recorder>,
}

/// Reads the manifest, the component, the object and the fixtures.
pub(super) async fn prepare(args: &ReconcileArgs) -> anyhow::Result<Run> {
    let Loaded {
        manifest, module, ..
    } = load(&args.manifest, args.module_cache.clone()).await?;
    let object = read_object(&args.object, &manifest, "--object")?;
    let mut fixtures = Vec::new();
    for path in &args.cache {
        for file in fixture_files(path)? {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read --cache file {}", file.display()))?;
            let source = file.display().to_string();
            for value in objects_in(&text, &source)? {
                fixtures.push(fixture(value, &source)?);
            }
        }
    }
    let run = Run::new(manifest, module, object, &fixtures)?;
    Ok(match &args.record {
        Some(_) => run.recording(),
        None => run,
    })
}

impl Run {
    /// The plugin of `manifest` and `module` with `object` and the `fixtures` in its caches and
    /// its recording backend: what `reconcile` runs, and what `check` exercises its sample on.
    pub(super) fn new(
        manifest: Manifest,
        module: Arc<Module>,
        object: Fixture,
        fixtures: &[Fixture],
    ) -> anyhow::Result<Self> {
        let caches = caches(&manifest, fixtures, &object)?;
        let mut texts: Vec<String> = fixtures.iter().map(|f| f.json.clone()).collect();
        texts.push(object.json.clone());
        let recorder = Recorder::with_objects(&texts)
            .map_err(anyhow::Error::msg)
            .context("cannot index the objects for live reads")?;
        let backend = Arc::new(recorder);
        let api: SharedApi = backend.clone();
        let context = Arc::new(PluginContext::new(Arc::new(manifest), caches, api));
        Ok(Self {
            plugin: Plugin::new(context, module, None),
            object,
            backend,
        })
    }

    /// The same run, recording the call (see [`recorded`](Self::recorded)).
    #[must_use]
    pub(super) fn recording(mut self) -> Self {
        let name = self.plugin.context().name.to_string();
        let settings = RecordingConfig {
            keep: 1,
            ..RecordingConfig::default()
        };
        let recordings = Arc::new(PluginRecordings::new(&name, settings).every_call());
        self.plugin = self.plugin.with_recordings(recordings);
        self
    }

    /// The bundle of the last call, when the run records.
    #[must_use]
    pub(super) fn recorded(&self) -> Option<Arc<crate::wasm::record::Bundle>> {
        self.plugin.recordings()?.bundles().pop()
    }

    /// The object, the plugin and its module, as the report's first line names them.
    pub(super) fn subject(&self) -> String {
        format!(
            "{} {} with plugin `{}` (module {:.12})",
            super::fixtures::describe(&self.object.kind),
            self.object.key(),
            self.plugin.context().name,
            self.plugin.module().digest()
        )
    }

    /// Calls the guest once, in a `reconcile` span like the host's, and records what it did.
    pub(super) async fn reconcile(&self, requeues: u32) -> Outcome {
        let result = self.call(requeues).await;
        self.outcome(result)
    }

    /// Calls the guest once, in a `reconcile` span like the host's.
    pub(super) async fn call(&self, requeues: u32) -> Result<GuestAction, PluginError> {
        let object = &self.object;
        let target = ObjectRef {
            kind: Kind {
                api_version: object.kind.api_version.clone(),
                kind: object.kind.kind.clone(),
            },
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        let context = self.plugin.context();
        let span = tracing::info_span!("reconcile", plugin = %context.name, key = %object.key());
        self.plugin
            .call(target, Some(object.json.clone()), requeues)
            .instrument(span)
            .await
    }

    /// The outcome of a call's `result`, with the calls recorded so far.
    pub(super) fn outcome(&self, result: Result<GuestAction, PluginError>) -> Outcome {
        let (action, error) = match result {
            Ok(action) => (Some(ActionRecord::from(action)), None),
            Err(error) => (None, Some(format!("{:#}", anyhow::Error::new(error)))),
        };
        Outcome {
            action,
            error,
            calls: self.backend.calls().iter().map(CallRecord::from).collect(),
            denied: self
                .backend
                .refused_calls()
                .iter()
                .map(|(call, message)| DeniedRecord {
                    call: CallRecord::from(call),
                    message: message.clone(),
                })
                .collect(),
        }
    }
}
