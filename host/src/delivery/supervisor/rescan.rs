//! Watching the plugin sources: file events are debounced for [`SETTLE`], then the sources are
//! rescanned and each difference with what runs is handed to [`super::lifecycle`]; failures are
//! reported (log, metric, readiness) and leave the previous version serving.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use notify::RecursiveMode;
use tokio_util::sync::CancellationToken;

use super::lifecycle::with_path;
use super::{FailureStage, PluginError, Plugins, Running, SETTLE, SourceFailure};
use crate::delivery::loader::manifest_paths;
use crate::file_changes::FileChanges;
use crate::manifest::Manifest;

impl Plugins {
    /// Watches the sources until `stop`, applying every change (see the module's Flow).
    ///
    /// # Errors
    /// When the file watcher cannot be set up.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) -> Result<(), notify::Error> {
        let mut changes = FileChanges::new(SETTLE)?;
        for source in &self.sources {
            let (path, mode) = if source.is_dir() {
                (source.as_path(), RecursiveMode::Recursive)
            } else {
                (
                    source.parent().unwrap_or(Path::new(".")),
                    RecursiveMode::NonRecursive,
                )
            };
            changes.watch(path, mode)?;
            tracing::info!(path = %path.display(), "watching plugin sources");
        }
        // Modules kept elsewhere (e.g. a build's output directory) are watched too, so a
        // rebuilt component reloads without touching its manifest.
        let module_dirs: std::collections::BTreeSet<PathBuf> = self
            .running
            .lock()
            .await
            .values()
            .filter_map(|r| {
                r.plugin
                    .context()
                    .manifest
                    .module
                    .parent()
                    .map(Path::to_owned)
            })
            .filter(|dir| !self.sources.iter().any(|source| dir.starts_with(source)))
            .collect();
        for dir in module_dirs {
            match changes.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => tracing::info!(path = %dir.display(), "watching plugin modules"),
                Err(error) => tracing::warn!(path = %dir.display(), %error,
                    "cannot watch a plugin module's directory; its changes need a manifest change"),
            }
        }
        // What changed between the load and the watches being set up (files written by a
        // concurrent writer, such as the ReconcilerPlugin objects' materializer) raised no
        // event: compare once now, as an informer lists after it starts watching.
        let mut changed = true;
        loop {
            if changed {
                // A rescan still running at shutdown is abandoned, not finished against a
                // runtime that is stopping (its file reads would fail and be reported as reload
                // errors).
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(()),
                    () = self.sync() => tracing::debug!("plugin sources rescanned"),
                }
            }
            changed = changes.next(&stop).await;
            if !changed {
                return Ok(());
            }
            tracing::debug!("plugin sources changed; rescanning");
        }
    }

    /// Compares the sources with what runs and applies the differences; failures are
    /// reported and leave the previous version serving.
    pub async fn sync(&self) {
        // Each source on its own: one that cannot be listed (a manifest file gone, a directory
        // unreadable) keeps what runs from it and holds up no other source.
        let mut manifests = Vec::new();
        let mut unlisted = Vec::new();
        for source in &self.sources {
            match manifest_paths(std::slice::from_ref(source)) {
                Ok(found) => manifests.extend(found),
                Err(error) => {
                    tracing::warn!(source = %source.display(), %error,
                        "cannot list plugin manifests; what runs from there keeps running");
                    unlisted.push(source);
                }
            }
        }
        let mut running = self.running.lock().await;
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        for (name, plugin) in running.iter() {
            if unlisted
                .iter()
                .any(|source| plugin.path.starts_with(source))
            {
                seen.insert(name.clone(), plugin.path.clone());
            }
        }
        for path in manifests {
            let text = match crate::bounded_read::read_to_string(
                &path,
                crate::bounded_read::MAX_MANIFEST_BYTES,
                "manifest",
            ) {
                Ok(text) => text,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot read plugin manifest");
                    // Keep whatever runs from this file.
                    if let Some((name, _)) = running.iter().find(|(_, r)| r.path == path) {
                        seen.insert(name.clone(), path);
                    }
                    continue;
                }
            };
            let previous = running
                .iter()
                .find(|(_, r)| r.path == path)
                .map(|(n, _)| n.clone());
            let parsed = Manifest::parse(&text, path.parent().unwrap_or(Path::new(".")))
                .and_then(|manifest| self.checked(manifest, &path));
            let manifest = match parsed {
                Ok(manifest) => manifest,
                Err(error) => {
                    let name = previous
                        .clone()
                        .unwrap_or_else(|| path.display().to_string());
                    self.report(
                        &running,
                        &name,
                        &path,
                        &PluginError::Manifest(with_path(error, &path)),
                    );
                    if let Some(name) = previous {
                        seen.insert(name, path);
                    }
                    continue;
                }
            };
            let name = manifest.name.clone();
            if let Some(first) = seen.get(&name) {
                let error = PluginError::DuplicateName {
                    plugin: name.clone(),
                    first: first.clone(),
                    second: path.clone(),
                };
                self.report(&running, &name, &path, &error);
                continue;
            }
            seen.insert(name.clone(), path.clone());
            let renamed_from = previous.filter(|old| *old != name);
            let result = match running.get(&name) {
                None => self.add(&mut running, path.clone(), manifest, text).await,
                Some(current)
                    if current.manifest_text != text
                        || self.side_modules_changed(current, &manifest).await =>
                {
                    self.rebuild(&mut running, path.clone(), manifest, text)
                        .await
                }
                Some(_) => self.swap_if_changed(&mut running, &manifest).await,
            };
            if let Some(old) = renamed_from {
                // The file now names another plugin: the old one goes once the new one runs.
                if result.is_ok() {
                    self.stop(&mut running, &old).await;
                } else {
                    seen.insert(old, path.clone());
                }
            }
            if result.is_ok() {
                self.failures.lock().remove(&path);
            }
            match result {
                Ok(false) => {}
                Ok(true) => {
                    self.runtime
                        .telemetry()
                        .metrics()
                        .plugin_reloaded(&name, true);
                    if let Some(gate) = running.get(&name).and_then(|r| r.gate.as_ref()) {
                        gate.set_ready();
                    }
                }
                Err(error) => self.report(&running, &name, &path, &error),
            }
        }
        let gone: Vec<String> = running
            .keys()
            .filter(|name| !seen.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            self.stop(&mut running, &name).await;
            self.runtime
                .telemetry()
                .metrics()
                .plugin_reloaded(&name, true);
        }
    }

    fn report(
        &self,
        running: &BTreeMap<String, Running>,
        name: &str,
        path: &Path,
        error: &PluginError,
    ) {
        let message = crate::error_chain(error);
        self.failures.lock().insert(
            path.to_owned(),
            SourceFailure {
                stage: FailureStage::of(error),
                message: message.clone(),
            },
        );
        let serving = running.contains_key(name);
        if serving {
            tracing::error!(plugin = %name, error = %message,
                "plugin reload failed; the previous version keeps serving");
        } else {
            tracing::error!(plugin = %name, error = %message, "plugin failed to load");
        }
        self.runtime
            .telemetry()
            .metrics()
            .plugin_reloaded(name, false);
        if let Some(gate) = running.get(name).and_then(|r| r.gate.as_ref()) {
            gate.set_not_ready(format!(
                "the last reload failed, the previous version serves: {message}"
            ));
        }
    }
}
