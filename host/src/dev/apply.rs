//! Server-side apply to the embedded API server: one object, once its kind is served, and the
//! examples' samples, CustomResourceDefinitions and Namespaces first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery;
use serde::Deserialize;

/// How long `dev` waits for a freshly created CRD's kind to be served.
const CRD_READY: Duration = Duration::from_secs(10);

/// Every `<example>/samples/*.yaml` under `examples`, sorted.
pub(super) fn sample_files(examples: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(examples)
        .with_context(|| format!("cannot read {}", examples.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let dir = entry.path().join("samples");
        let Ok(samples) = std::fs::read_dir(&dir) else {
            continue;
        };
        files.extend(
            samples
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml")),
        );
    }
    files.sort();
    Ok(files)
}

/// Server-side applies every object of `files`: CustomResourceDefinitions first, then
/// Namespaces, then the rest, waiting for each new CRD's kind to be served.
pub(super) async fn apply_samples(
    client: &kube::Client,
    files: &[PathBuf],
) -> anyhow::Result<usize> {
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read sample {}", file.display()))?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(document)
                .with_context(|| format!("sample {} is not valid YAML", file.display()))?;
            if !value.is_null() {
                let object: DynamicObject = serde_json::from_value(value).with_context(|| {
                    format!(
                        "sample {} holds something that is not an object",
                        file.display()
                    )
                })?;
                objects.push((file.clone(), object));
            }
        }
    }
    let rank = |object: &DynamicObject| match object.types.as_ref().map(|t| t.kind.as_str()) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    objects.sort_by_key(|(_, object)| rank(object));
    for (file, object) in &objects {
        apply(client, object)
            .await
            .with_context(|| format!("cannot apply sample {}", file.display()))?;
    }
    Ok(objects.len())
}

pub(super) async fn apply(client: &kube::Client, object: &DynamicObject) -> anyhow::Result<()> {
    let types = object
        .types
        .as_ref()
        .context("the object has no apiVersion/kind")?;
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &types.kind);
    let deadline = tokio::time::Instant::now() + CRD_READY;
    let (resource, capabilities) = loop {
        match discovery::pinned_kind(client, &gvk).await {
            Ok(found) => break found,
            Err(error) if tokio::time::Instant::now() >= deadline => {
                return Err(error).with_context(|| {
                    format!("kind {}/{} is not served", types.api_version, types.kind)
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let name = object
        .metadata
        .name
        .as_deref()
        .context("the object has no metadata.name")?;
    let api: Api<DynamicObject> = match capabilities.scope {
        discovery::Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object.metadata.namespace.as_deref().unwrap_or("default"),
            &resource,
        ),
        discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("reconcile-host-dev").force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("{} {name}", types.kind))?;
    Ok(())
}
