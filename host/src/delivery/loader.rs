//! What a manifest asks of the runtime: the scopes of its caches, its controller settings, and
//! where manifests are found.

use std::path::PathBuf;

use crate::informer::{Predicates, Scope};
use crate::manifest::Manifest;
use crate::runtime::{ControllerSpec, KindRef};

/// What the manifest's caches are built from: for each readable kind, the scope watched.
/// `cache` kinds are watched without the label selector, so listing one that is also the `for`
/// kind gives the guest every object of it, not only the selected ones.
#[must_use]
pub fn cache_scopes(manifest: &Manifest) -> Vec<(KindRef, Scope)> {
    let scope = |kind: &KindRef, selector: Option<String>| Scope {
        api_version: kind.api_version.clone(),
        kind: kind.kind.clone(),
        namespace: manifest.namespace.clone(),
        label_selector: selector,
    };
    let mut scopes: Vec<(KindRef, Scope)> = Vec::new();
    let mut put = |kind: &KindRef, scope: Scope| {
        scopes.retain(|(k, _)| k != kind);
        scopes.push((kind.clone(), scope));
    };
    put(
        &manifest.for_kind,
        scope(
            &manifest.for_kind,
            manifest.label_selector.as_ref().map(ToString::to_string),
        ),
    );
    for kind in &manifest.owns {
        put(kind, scope(kind, None));
    }
    for kind in &manifest.cache {
        put(kind, scope(kind, None));
    }
    scopes
}

/// The controller settings a manifest asks for.
#[must_use]
pub fn controller_spec(manifest: &Manifest) -> ControllerSpec {
    ControllerSpec {
        name: manifest.name.clone(),
        for_kind: manifest.for_kind.clone(),
        owns: manifest.owns.clone(),
        namespace: manifest.namespace.clone(),
        label_selector: manifest.label_selector.as_ref().map(ToString::to_string),
        predicates: Predicates {
            generation_changed: manifest.generation_changed,
        },
        resync: manifest.resync,
        workers: manifest.concurrency,
        limiter: manifest.rate_limiter,
        placement: manifest.placement,
    }
}

/// The manifest files named by `paths`: each path is a manifest, or a directory whose
/// `*/plugin.yaml` files are manifests (sorted by path).
///
/// # Errors
/// When a path does not exist or a directory cannot be read.
pub fn manifest_paths(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(Result::ok)
                .map(|entry| entry.path().join("plugin.yaml"))
                .filter(|candidate| candidate.is_file())
                .collect();
            inner.sort();
            found.extend(inner);
        } else if path.is_file() {
            found.push(path.clone());
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("plugin manifest {} does not exist", path.display()),
            ));
        }
    }
    Ok(found)
}
