//! `check --kubeconfig`: which kinds a manifest names that the API server does not serve.
//!
//! A `for`, `owns` or `cache` kind that is not served keeps the plugin from loading; a grant's
//! kind that is not served makes every call of the guest on it fail `invalid`. Both are
//! reported with the fix (the apiVersion's spelling, or the CustomResourceDefinition to
//! install).

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery;

use crate::manifest::Manifest;
use crate::runtime::KindRef;

/// One kind the manifest names, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Named {
    /// The kind.
    pub kind: KindRef,
    /// `for`, `owns`, `cache` or `grants`.
    pub field: &'static str,
}

/// Every kind `manifest` names, once each, with the first field that names it.
pub(super) fn named_kinds(manifest: &Manifest) -> Vec<Named> {
    let mut named: Vec<Named> = Vec::new();
    let fields = std::iter::once(("for", &manifest.for_kind))
        .chain(manifest.owns.iter().map(|k| ("owns", k)))
        .chain(manifest.cache.iter().map(|k| ("cache", k)))
        .chain(manifest.grants.iter().map(|g| ("grants", &g.kind)));
    for (field, kind) in fields {
        if !named.iter().any(|n| &n.kind == kind) {
            named.push(Named {
                kind: kind.clone(),
                field,
            });
        }
    }
    named
}

/// The kinds of `manifest` that the API server of the kubeconfig at `path` does not serve.
///
/// # Errors
/// When the kubeconfig cannot be read or the API server does not answer discovery.
pub(super) async fn unserved_kinds(path: &Path, manifest: &Manifest) -> anyhow::Result<Vec<Named>> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("the kubeconfig {} is not usable", path.display()))?;
    let url = config.cluster_url.to_string();
    let client = crate::client::client(config, &crate::client::ClientLimits::default())?;
    let mut unserved = Vec::new();
    for named in named_kinds(manifest) {
        let (group, version) = named
            .kind
            .api_version
            .split_once('/')
            .unwrap_or(("", named.kind.api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &named.kind.kind);
        match discovery::pinned_kind(&client, &gvk).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => unserved.push(named),
            Err(kube::Error::Discovery(_)) => unserved.push(named),
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot look up kind {}/{} at {url}; check that the API server is up \
                         and the kubeconfig's credentials",
                        named.kind.api_version, named.kind.kind
                    )
                });
            }
        }
    }
    Ok(unserved)
}

/// The lines `check` prints for `unserved` kinds.
pub(super) fn report(unserved: &[Named]) -> String {
    unserved
        .iter()
        .map(|n| {
            format!(
                "kind {}/{} (in `{}`) is not served by the API server; check the apiVersion's \
                 spelling, or install its CustomResourceDefinition\n",
                n.kind.api_version, n.kind.kind, n.field
            )
        })
        .collect()
}
