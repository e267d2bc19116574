//! Example reconciler: copies each ConfigMap labelled `replicator.example.com/replicate=true`
//! into the namespaces its annotation `replicator.example.com/namespaces` lists that accept
//! copies (label `replicator.example.com/accept-copies=true` on the namespace), keeps the copies
//! in sync, removes copies from namespaces no longer listed, and deletes every copy before the
//! source goes away (finalizer `replicator.example.com/cleanup`).
//!
//! Whoever can write a source names where copies go, and the plugin writes with the host's
//! rights, not theirs. So it writes only where a namespace has said yes, and it never
//! overwrites or deletes an object that is not a copy of this source (its copy-of label): a
//! source cannot be used to replace or delete what others own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reconcile_guest::prelude::*;

/// The annotation listing the target namespaces, comma-separated: `"team-a, team-b"`.
const NAMESPACES: &str = "replicator.example.com/namespaces";
/// The label on each copy naming its source, `<namespace>.<name>`.
const COPY_OF: &str = "replicator.example.com/copy-of";
/// The label (value `true`) a namespace carries to accept copies.
const ACCEPTS: &str = "replicator.example.com/accept-copies";
/// The finalizer that keeps a source until its copies are deleted.
const FINALIZER: &str = "replicator.example.com/cleanup";
/// How long to wait before trying again the namespaces that got no copy.
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

/// The listed namespaces that got no copy, by reason.
#[derive(Default)]
struct Skipped {
    /// Namespaces that do not exist (yet).
    missing: Vec<String>,
    /// Namespaces without the accept label.
    refusing: Vec<String>,
    /// Namespaces holding an object of the source's name that is not its copy.
    taken: Vec<String>,
}

/// Writes a copy into every listed namespace that accepts it, and deletes copies in namespaces
/// no longer listed.
fn sync(source: &ConfigMap) -> Result<Action, Error> {
    let source_ref = ObjectRef::of(source)?;
    let targets = target_namespaces(source);
    let mut skipped = Skipped::default();
    for namespace in &targets {
        match cache::get::<Namespace>(&Kind::of::<Namespace>(), None, namespace)? {
            None => skipped.missing.push(namespace.clone()),
            Some(target) if !accepts(&target) => skipped.refusing.push(namespace.clone()),
            Some(_) => {
                if !write_copy(source, namespace)? {
                    skipped.taken.push(namespace.clone());
                }
            }
        }
    }
    for stale in copies(source)? {
        let Some(namespace) = stale.metadata.namespace.as_deref() else {
            continue;
        };
        if !targets.contains(namespace) && delete_copy(source, &ObjectRef::of(&stale)?)? {
            info!("deleted the copy of {source_ref} in {namespace}, no longer listed");
        }
    }
    if skipped.missing.is_empty() && skipped.refusing.is_empty() && skipped.taken.is_empty() {
        let listed: Vec<&str> = targets.iter().map(String::as_str).collect();
        debug!("{source_ref} is copied to [{}]", listed.join(", "));
        return Ok(Action::done());
    }
    let retry = MISSING_NAMESPACE_RETRY.as_secs();
    let warnings = [
        (
            &skipped.missing,
            "NamespaceNotFound",
            "Cannot copy to namespaces that do not exist",
        ),
        (
            &skipped.refusing,
            "NamespaceNotAccepting",
            "Not copied to namespaces without the label replicator.example.com/accept-copies=true",
        ),
        (
            &skipped.taken,
            "NotACopy",
            "Not copied to namespaces holding a ConfigMap of this name that is not its copy",
        ),
    ];
    for (namespaces, reason, text) in warnings {
        if namespaces.is_empty() {
            continue;
        }
        let note = format!("{text}: {}; retrying in {retry}s", namespaces.join(", "));
        if let Err(error) = events::record(&source_ref, EventType::Warning, reason, &note) {
            warn!("{error:#}");
        }
    }
    Ok(Action::requeue_after(MISSING_NAMESPACE_RETRY))
}

/// Writes the copy of `source` into `namespace`: created if the namespace has no ConfigMap of
/// its name, updated if it holds the source's copy; false, and nothing written, if it holds
/// anything else.
fn write_copy(source: &ConfigMap, namespace: &str) -> Result<bool, Error> {
    let name = source.metadata.name.as_deref().unwrap_or_default();
    let target = ObjectRef::namespaced(Kind::of::<ConfigMap>(), namespace, name);
    let failed = |error: Error| error.context(format!("failed to copy to {namespace}"));
    let known = cache::get::<ConfigMap>(&Kind::of::<ConfigMap>(), Some(namespace), name)?;
    let existing = match known {
        Some(existing) => existing,
        None => match client::create(&copy(source, namespace)) {
            Ok(_) => return Ok(true),
            // Created since the cache last heard: look at the object itself.
            Err(error) if error.is_conflict() => match client::get::<ConfigMap>(&target)? {
                Some(existing) => existing,
                None => return Ok(true), // deleted again meanwhile: the next reconcile sees
            },
            Err(error) => return Err(failed(error)),
        },
    };
    if !is_copy_of(&existing, source) {
        return Ok(false);
    }
    client::apply(&copy(source, namespace)).map_err(failed)?;
    Ok(true)
}

/// Deletes `target` if it is a copy of `source` (as the API server has it now); true if this
/// call deleted it.
fn delete_copy(source: &ConfigMap, target: &ObjectRef) -> Result<bool, Error> {
    match client::get::<ConfigMap>(target)? {
        Some(live) if is_copy_of(&live, source) => client::delete(target),
        _ => Ok(false),
    }
}

/// Deletes every copy: those the cache knows, and any in the listed namespaces it may not know
/// yet; never an object that is not a copy of this source.
fn cleanup(source: &ConfigMap) -> Result<Action, Error> {
    let source_ref = ObjectRef::of(source)?;
    let mut namespaces = target_namespaces(source);
    for copy in copies(source)? {
        namespaces.extend(copy.metadata.namespace);
    }
    for namespace in namespaces {
        let copy = ObjectRef::namespaced(Kind::of::<ConfigMap>(), namespace, &source_ref.name);
        if delete_copy(source, &copy)? {
            info!("deleted {copy}, the copy of {source_ref} being deleted");
        }
    }
    Ok(Action::done())
}

/// Whether the namespace accepts copies: labelled `replicator.example.com/accept-copies=true`.
fn accepts(namespace: &Namespace) -> bool {
    let labels = namespace.metadata.labels.as_ref();
    labels
        .and_then(|labels| labels.get(ACCEPTS))
        .map(String::as_str)
        == Some("true")
}

/// Whether `object` is a copy of `source`: it carries the source's copy-of label.
fn is_copy_of(object: &ConfigMap, source: &ConfigMap) -> bool {
    let labels = object.metadata.labels.as_ref();
    labels.and_then(|labels| labels.get(COPY_OF)) == Some(&copy_of(source))
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
    fn only_a_labelled_namespace_accepts_and_only_the_sources_label_makes_a_copy() {
        let namespace = |labels: &[(&str, &str)]| Namespace {
            metadata: ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        assert!(accepts(&namespace(&[(ACCEPTS, "true")])));
        assert!(!accepts(&namespace(&[(ACCEPTS, "yes")])));
        assert!(!accepts(&namespace(&[])));
        assert!(!accepts(&Namespace::default()));

        let source = source("team-a");
        assert!(is_copy_of(&copy(&source, "team-a"), &source));
        let mut foreign = copy(&source, "team-a");
        foreign.metadata.labels = None;
        assert!(!is_copy_of(&foreign, &source));
        let mut other = source.clone();
        other.metadata.name = Some("other".into());
        assert!(!is_copy_of(&copy(&other, "team-a"), &source));
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
