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
    /// When not served: what the API server serves instead (filled in by [`unserved_kinds`]).
    pub instead: Option<Instead>,
}

/// What an API server serves where a kind is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Instead {
    /// Nothing under the kind's apiVersion.
    NoSuchApiVersion,
    /// The apiVersion, with this kind of a likely spelling (`Configmap` → `ConfigMap`).
    Kind(String),
    /// The apiVersion, with no kind spelled like it.
    OtherKinds,
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
                instead: None,
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
        let missing = match discovery::pinned_kind(&client, &gvk).await {
            Ok(_) => false,
            Err(kube::Error::Api(status)) if status.code == 404 => true,
            Err(kube::Error::Discovery(_)) => true,
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot look up kind {}/{} at {url}; check that the API server is up \
                         and the kubeconfig's credentials",
                        named.kind.api_version, named.kind.kind
                    )
                });
            }
        };
        if missing {
            let kinds = served_kinds(&client, group, version).await;
            let instead = match kinds {
                None => Instead::NoSuchApiVersion,
                Some(kinds) => crate::spelling::closest(&named.kind.kind, &kinds)
                    .map_or(Instead::OtherKinds, |kind| Instead::Kind(kind.to_owned())),
            };
            unserved.push(Named {
                instead: Some(instead),
                ..named
            });
        }
    }
    Ok(unserved)
}

/// The kinds the API server serves under `group`/`version`; `None` when it serves no such
/// apiVersion.
async fn served_kinds(client: &kube::Client, group: &str, version: &str) -> Option<Vec<String>> {
    let list = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        (client)
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
    };
    let resources = list.ok()?.resources;
    Some(resources.into_iter().map(|r| r.kind).collect())
}

/// The lines `check` prints for `unserved` kinds.
pub(super) fn report(unserved: &[Named]) -> String {
    unserved
        .iter()
        .map(|n| {
            let KindRef { api_version, kind } = &n.kind;
            let fix = match &n.instead {
                Some(Instead::Kind(likely)) => {
                    format!("it serves {api_version} {likely}: did you mean `kind: {likely}`?")
                }
                Some(Instead::NoSuchApiVersion) => format!(
                    "it serves no apiVersion {api_version}: check the apiVersion's spelling, or \
                     install the CustomResourceDefinition of {kind}"
                ),
                Some(Instead::OtherKinds) | None => {
                    "check the kind's spelling, or install its CustomResourceDefinition".to_owned()
                }
            };
            format!(
                "kind {api_version}/{kind} (in `{}`) is not served by the API server; {fix}\n",
                n.field
            )
        })
        .collect()
}
