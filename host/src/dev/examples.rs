//! The examples as `ReconcilerPlugin` objects, as a cluster would have them: each example's
//! component pushed to the dev registry, its manifest declared as an object naming the pushed
//! digest. Declared again when a file under the examples changes, so an edited manifest or a
//! rebuilt component (with its manifest touched) reaches the host through its object.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::CustomResourceExt as _;
use kube::api::DynamicObject;
use notify::RecursiveMode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::apply::apply;
use crate::config::HostConfig;
use crate::delivery::oci::push::publish_component;
use crate::file_changes::FileChanges;
use crate::manifest::{Manifest, ReconcilerPlugin};

/// How long the examples must be quiet after a change before they are declared again.
const SETTLE: Duration = Duration::from_millis(250);

/// The examples' manifests, declared through one API server with one registry.
pub(super) struct Examples {
    pub client: kube::Client,
    /// The host's configuration: its registry settings and module cache are used to push.
    pub config: HostConfig,
    /// The registry's address (`127.0.0.1:5001`).
    pub registry: String,
    pub manifests: Vec<PathBuf>,
}

impl Examples {
    /// Installs the ReconcilerPlugin and NamespacedReconcilerPlugin CRDs.
    pub async fn install_crd(&self) -> anyhow::Result<()> {
        for crd in [ReconcilerPlugin::crd(), crate::manifest::namespaced::crd()] {
            let crd: DynamicObject = serde_json::from_value(serde_json::to_value(crd)?)?;
            apply(&self.client, &crd).await.context("the plugin CRDs")?;
        }
        Ok(())
    }

    /// Pushes every example's component and declares its object; how many.
    pub async fn declare(&self) -> anyhow::Result<usize> {
        let declared = futures::future::try_join_all(
            self.manifests
                .iter()
                .map(|manifest| self.declare_one(manifest)),
        )
        .await?;
        Ok(declared.len())
    }

    async fn declare_one(&self, path: &Path) -> anyhow::Result<()> {
        let manifest = Manifest::load(path)?;
        let target = format!("{}/examples/{}:dev", self.registry, manifest.name);
        let reference = publish_component(&self.config, &manifest.module, &target)
            .await
            .with_context(|| format!("cannot push example {}", manifest.name))?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut spec: Value = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("{} is not YAML", path.display()))?;
        if let Some(fields) = spec.as_object_mut() {
            fields.remove("name");
            fields.remove("module");
            fields.insert("oci".to_owned(), json!(reference));
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "reconcile-host.dev/v1alpha1",
            "kind": "ReconcilerPlugin",
            "metadata": {"name": manifest.name},
            "spec": spec,
        }))?;
        apply(&self.client, &object)
            .await
            .with_context(|| format!("cannot declare example {}", manifest.name))
    }

    /// Declares the examples again after every change under `dir`, until `stop`; a failure is
    /// logged and leaves the objects as they were.
    pub fn follow(self: Arc<Self>, dir: &Path, stop: CancellationToken) {
        let changes = FileChanges::new(SETTLE).and_then(|mut changes| {
            changes.watch(dir, RecursiveMode::Recursive)?;
            Ok(changes)
        });
        let mut changes = match changes {
            Ok(changes) => changes,
            Err(error) => {
                tracing::warn!(path = %dir.display(), %error,
                    "cannot watch the examples; their changes need a restart");
                return;
            }
        };
        tokio::spawn(async move {
            while changes.next(&stop).await {
                match self.declare().await {
                    Ok(count) => tracing::info!(examples = count, "examples declared again"),
                    Err(error) => tracing::error!(
                        error = format!("{error:#}"),
                        "cannot declare the changed examples; their objects stay as they were"
                    ),
                }
            }
        });
    }
}
