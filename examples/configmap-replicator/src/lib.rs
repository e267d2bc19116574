//! Example reconciler: copies each ConfigMap labelled `replicator.example.com/replicate=true`
//! into the namespaces its annotation `replicator.example.com/namespaces` lists, keeps the
//! copies in sync, removes copies from namespaces no longer listed, and deletes every copy
//! before the source goes away (finalizer `replicator.example.com/cleanup`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reconcile_guest::prelude::*;

/// The annotation listing the target namespaces, comma-separated: `"team-a, team-b"`.
const NAMESPACES: &str = "replicator.example.com/namespaces";
/// The label on each copy naming its source, `<namespace>.<name>`.
const COPY_OF: &str = "replicator.example.com/copy-of";
/// The finalizer that keeps a source until its copies are deleted.
const FINALIZER: &str = "replicator.example.com/cleanup";
/// How long to wait before retrying when a target namespace does not exist.
const MISSING_NAMESPACE_RETRY: Duration = Duration::from_secs(30);

struct Replicator;

impl Reconciler for Replicator {
    fn reconcile(request: Request) -> Result<Action, Error> {
        let Some(source) = request.object::<ConfigMap>()? else {
            return Ok(Action::done()); // gone: its finalizer already removed the copies
        };
        finalizer(&source, FINALIZER, sync, cleanup)
    }
}

reconcile_guest::export_reconciler!(Replicator);

/// Applies a copy to every listed namespace and deletes copies in namespaces no longer listed.
fn sync(source: &ConfigMap) -> Result<Action, Error> {
    let source_ref = ObjectRef::of(source)?;
    let targets = target_namespaces(source);
    let mut missing = Vec::new();
    for namespace in &targets {
        match client::apply(&copy(source, namespace)) {
            Ok(_) => {}
            // A namespaced write into a namespace that does not exist answers 404.
            Err(error) if error.is_not_found() => missing.push(namespace.as_str()),
            Err(error) => return Err(error.context(format!("failed to copy to {namespace}"))),
        }
    }
    for stale in copies(source)? {
        let Some(namespace) = stale.metadata.namespace.as_deref() else {
            continue;
        };
        if !targets.contains(namespace) {
            client::delete(&ObjectRef::of(&stale)?)?;
            info!("deleted the copy of {source_ref} in {namespace}, no longer listed");
        }
    }
    if missing.is_empty() {
        let listed: Vec<&str> = targets.iter().map(String::as_str).collect();
        debug!("{source_ref} is copied to [{}]", listed.join(", "));
        return Ok(Action::done());
    }
    let note = format!(
        "Cannot copy to namespaces that do not exist: {}; retrying in {}s",
        missing.join(", "),
        MISSING_NAMESPACE_RETRY.as_secs()
    );
    if let Err(error) = events::record(&source_ref, EventType::Warning, "NamespaceNotFound", &note)
    {
        warn!("{error:#}");
    }
    Ok(Action::requeue_after(MISSING_NAMESPACE_RETRY))
}

/// Deletes every copy: those the cache knows, and any in the listed namespaces it may not know
/// yet.
fn cleanup(source: &ConfigMap) -> Result<Action, Error> {
    let source_ref = ObjectRef::of(source)?;
    let mut namespaces = target_namespaces(source);
    for copy in copies(source)? {
        namespaces.extend(copy.metadata.namespace);
    }
    for namespace in namespaces {
        let copy = ObjectRef::namespaced(Kind::of::<ConfigMap>(), namespace, &source_ref.name);
        if client::delete(&copy)? {
            info!("deleted {copy}, the copy of {source_ref} being deleted");
        }
    }
    Ok(Action::done())
}

/// The namespaces the source's annotation lists, without its own.
fn target_namespaces(source: &ConfigMap) -> BTreeSet<String> {
    let annotations = source.metadata.annotations.as_ref();
    let listed = annotations.and_then(|annotations| annotations.get(NAMESPACES));
    listed
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|namespace| !namespace.is_empty())
                .filter(|namespace| Some(*namespace) != source.metadata.namespace.as_deref())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The value of the copy-of label on the source's copies: `<namespace>.<name>`.
fn copy_of(source: &ConfigMap) -> String {
    let namespace = source.metadata.namespace.as_deref().unwrap_or_default();
    let name = source.metadata.name.as_deref().unwrap_or_default();
    format!("{namespace}.{name}")
}

/// The copy of `source` in `namespace`: same name, data and binary data, and the copy-of label
/// (not the replicate label, so copies are not sources themselves).
fn copy(source: &ConfigMap, namespace: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: source.metadata.name.clone(),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(COPY_OF.to_owned(), copy_of(source))])),
            ..ObjectMeta::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        ..ConfigMap::default()
    }
}

/// The source's copies the cache holds, in every namespace.
fn copies(source: &ConfigMap) -> Result<Vec<ConfigMap>, Error> {
    let selector = format!("{COPY_OF}={}", copy_of(source));
    cache::list(&Kind::of::<ConfigMap>(), None, Some(&selector))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(namespaces: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                namespace: Some("default".into()),
                labels: Some(BTreeMap::from([(
                    "replicator.example.com/replicate".into(),
                    "true".into(),
                )])),
                annotations: Some(BTreeMap::from([(NAMESPACES.into(), namespaces.into())])),
                finalizers: Some(vec![FINALIZER.into()]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("a".into(), "1".into())])),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn target_namespaces_are_trimmed_deduplicated_and_exclude_the_source_namespace() {
        let targets = target_namespaces(&source(" team-a, team-b,,default ,team-a "));
        assert_eq!(
            targets.into_iter().collect::<Vec<_>>(),
            ["team-a", "team-b"]
        );
        assert!(target_namespaces(&ConfigMap::default()).is_empty());
    }

    #[test]
    fn copy_keeps_name_and_data_and_is_labelled_with_its_source_only() {
        let copy = copy(&source("team-a"), "team-a");
        assert_eq!(copy.metadata.name.as_deref(), Some("settings"));
        assert_eq!(copy.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            copy.metadata.labels,
            Some(BTreeMap::from([(
                COPY_OF.into(),
                "default.settings".into()
            )]))
        );
        assert_eq!(copy.metadata.annotations, None);
        assert_eq!(copy.metadata.finalizers, None);
        assert_eq!(copy.data, source("team-a").data);
    }
}
