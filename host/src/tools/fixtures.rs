//! The object and cache fixtures of `reconcile`: read from files, completed, checked against
//! the manifest and turned into the caches the guest reads.

use std::collections::{BTreeSet, HashMap};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use label_selector::LabelSelector;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::controller::ObjectKey;
use crate::delivery::loader::cache_scopes;
use crate::informer::{CachedObject, Store};
use crate::manifest::Manifest;
use crate::runtime::KindRef;

pub(super) fn describe(kind: &KindRef) -> String {
    format!("{} {}", kind.api_version, kind.kind)
}

/// An object read from a file: its identity and its JSON text.
#[derive(Clone, Debug)]
pub(super) struct Fixture {
    pub(super) kind: KindRef,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) json: String,
}

impl Fixture {
    pub(super) fn key(&self) -> ObjectKey {
        ObjectKey::in_namespace(self.namespace.as_deref(), &self.name)
    }

    pub(super) fn cached(&self) -> anyhow::Result<CachedObject> {
        CachedObject::from_json(&self.json)
            .with_context(|| format!("{} {} has bad metadata", describe(&self.kind), self.key()))
    }
}

/// The object of `flag` (`--object`, `--sample`): one object of the manifest's `for` kind.
pub(super) fn read_object(path: &Path, manifest: &Manifest, flag: &str) -> anyhow::Result<Fixture> {
    let (text, source) = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the object from stdin")?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the object file {}", path.display()))?;
        (text, path.display().to_string())
    };
    let mut values = objects_in(&text, &source)?;
    if values.len() != 1 {
        bail!(
            "{source} holds {} objects; {flag} takes exactly one{}",
            values.len(),
            if flag == "--object" {
                " (pass others with --cache)"
            } else {
                ""
            }
        );
    }
    let object = fixture(values.remove(0), &source)?;
    if object.kind != manifest.for_kind {
        bail!(
            "{source} is a {}, but plugin `{}` reconciles {} (its `for`); pass an object of \
             that kind with {flag}",
            describe(&object.kind),
            manifest.name,
            describe(&manifest.for_kind)
        );
    }
    Ok(object)
}

/// The directory of samples beside a manifest.
pub(super) const SAMPLES_DIR: &str = "samples";

/// From the [`SAMPLES_DIR`] directory beside the manifest at `manifest_path`: its first object of
/// the manifest's `for` kind (files in name order), the directory's other objects of kinds the
/// plugin reads or holds a grant for, and the directory; `None` without such a directory or
/// such an object.
///
/// # Errors
/// When a file there cannot be read or holds an object without `apiVersion`, `kind` or name.
pub(super) fn samples_beside(
    manifest_path: &Path,
    manifest: &Manifest,
) -> anyhow::Result<Option<(Fixture, Vec<Fixture>, PathBuf)>> {
    let dir = manifest_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(SAMPLES_DIR);
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut objects = Vec::new();
    for file in fixture_files(&dir)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read the sample file {}", file.display()))?;
        let source = file.display().to_string();
        for value in objects_in(&text, &source)? {
            objects.push(fixture(value, &source)?);
        }
    }
    let Some(first) = objects.iter().position(|o| o.kind == manifest.for_kind) else {
        return Ok(None);
    };
    let object = objects.remove(first);
    // The kinds it reads or may get: others there (a CRD beside its samples) mean nothing to it.
    objects.retain(|o| {
        manifest.reads(&o.kind) || (manifest.grants.iter()).any(|grant| grant.kind == o.kind)
    });
    Ok(Some((object, objects, dir)))
}

/// The files a `--cache` path names: the file itself, or a directory's `*.yaml`, `*.yml` and
/// `*.json` files, sorted.
pub(super) fn fixture_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let entries = std::fs::read_dir(path)
        .with_context(|| format!("cannot read --cache directory {}", path.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|file| {
            file.is_file()
                && file
                    .extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The objects in `text` (read from `source`): JSON, or YAML with any number of documents; a
/// `kind: List` stands for its items.
pub(super) fn objects_in(text: &str, source: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .with_context(|| format!("{source}: document {} is not valid YAML or JSON", i + 1))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                let Some(Value::Array(items)) = map.get("items") else {
                    bail!("{source}: document {} is a List without `items`", i + 1);
                };
                objects.extend(items.iter().cloned());
            }
            value => objects.push(value),
        }
    }
    Ok(objects)
}

/// `value` as a fixture, with the metadata an API server would have set filled in.
pub(super) fn fixture(mut value: Value, source: &str) -> anyhow::Result<Fixture> {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) = (
        text("/apiVersion"),
        text("/kind"),
        text("/metadata/name").filter(|name| !name.is_empty()),
    ) else {
        bail!(
            "{source}: every object needs `apiVersion`, `kind` and `metadata.name`; one lacks \
             them: {}",
            abbreviate(&value)
        );
    };
    let kind = KindRef::new(api_version, kind);
    let name = name.to_owned();
    let namespace = text("/metadata/namespace").map(str::to_owned);
    complete_metadata(&mut value, &kind, namespace.as_deref(), &name);
    Ok(Fixture {
        kind,
        namespace,
        name,
        json: value.to_string(),
    })
}

/// Fills in what an API server sets on every stored object when a file leaves it out, so guests
/// that read them (owner references need the uid) behave as in a cluster: `metadata.uid`
/// (derived from kind, namespace and name, so runs are repeatable), `metadata.resourceVersion`
/// (`"1"`) and, for objects with a `spec`, `metadata.generation` (1).
pub(super) fn complete_metadata(
    value: &mut Value,
    kind: &KindRef,
    namespace: Option<&str>,
    name: &str,
) {
    let has_spec = value.get("spec").is_some();
    let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let identity = format!(
        "{}/{}/{}/{name}",
        kind.api_version,
        kind.kind,
        namespace.unwrap_or_default()
    );
    metadata
        .entry("uid")
        .or_insert_with(|| json!(uid(&identity)));
    metadata
        .entry("resourceVersion")
        .or_insert_with(|| json!("1"));
    if has_spec {
        metadata.entry("generation").or_insert_with(|| json!(1));
    }
}

/// A UUID-shaped id from the SHA-256 of `identity`.
pub(super) fn uid(identity: &str) -> String {
    let hex: String = Sha256::digest(identity.as_bytes())
        .iter()
        .take(16)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

pub(super) fn abbreviate(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The caches the guest's `cache` import reads, one per kind the manifest lists (as
/// [`cache_scopes`] says), each holding the fixtures of its kind inside its scope; the object
/// is in the `for` kind's cache, as in a host.
pub(super) fn caches(
    manifest: &Manifest,
    fixtures: &[Fixture],
    object: &Fixture,
) -> anyhow::Result<HashMap<KindRef, Arc<Store>>> {
    let scopes = cache_scopes(manifest);
    let mut caches = HashMap::new();
    for (kind, scope) in &scopes {
        let selector = match &scope.label_selector {
            Some(text) => Some(LabelSelector::parse(text)?),
            None => None,
        };
        let in_scope = |object: &CachedObject| {
            let namespace_ok = match (&scope.namespace, object.namespace()) {
                (Some(wanted), Some(namespace)) => wanted == namespace,
                _ => true,
            };
            namespace_ok && selector.as_ref().is_none_or(|s| s.matches(object.labels()))
        };
        let mut objects = Vec::new();
        for fixture in fixtures.iter().filter(|f| f.kind == *kind) {
            let cached = fixture.cached()?;
            if in_scope(&cached) {
                objects.push(cached);
            } else {
                tracing::warn!(
                    "the fixture {} {} is outside plugin `{}`'s namespace or label selector, \
                     so a host would not cache it; it only answers client.get",
                    describe(kind),
                    fixture.key(),
                    manifest.name
                );
            }
        }
        if *kind == manifest.for_kind {
            let cached = object.cached()?;
            if !in_scope(&cached) {
                tracing::warn!(
                    "the object {} is outside plugin `{}`'s namespace or label selector, so a \
                     host would not reconcile it",
                    object.key(),
                    manifest.name
                );
            }
            objects.push(cached);
        }
        caches.insert(kind.clone(), Arc::new(Store::from_objects(objects)));
    }
    let unread: BTreeSet<String> = fixtures
        .iter()
        .filter(|f| !scopes.iter().any(|(kind, _)| *kind == f.kind))
        .map(|f| describe(&f.kind))
        .collect();
    for kind in unread {
        tracing::warn!(
            "plugin `{}` does not cache {kind} (not its `for`, `owns` or `cache`), so its \
             fixtures only answer client.get",
            manifest.name
        );
    }
    Ok(caches)
}
