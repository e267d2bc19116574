//! Reads from the host's informer caches: no API round trip, and only the kinds the manifest
//! lists (`for`, `owns` and `cache`). The cache may be a moment behind the API server.

use serde::de::DeserializeOwned;

use crate::bindings::kube::reconcile::types::Kind;
use crate::error::{Context, Error};
use crate::host::cache as host;

/// The cached object `name` of `kind` in `namespace` (`None` for cluster-scoped kinds), parsed
/// as `T`; `None` if the cache does not hold it.
///
/// # Errors
///
/// When the kind is not cached for this plugin, or the object does not parse as `T`.
pub fn get<T: DeserializeOwned>(
    kind: &Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<T>, Error> {
    let describe = || match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    };
    let json = host::get(kind, namespace, name)
        .with_context(|| format!("failed to read {} from the cache", describe()))?;
    json.as_deref()
        .map(serde_json::from_str)
        .transpose()
        .with_context(|| format!("the cached {} does not parse", describe()))
}

/// Every cached object of `kind`, in `namespace` only if given, matching the label `selector`
/// if given (`app=web,tier!=db,env in (a,b),!legacy`), ordered by namespace and name.
///
/// # Errors
///
/// When the kind is not cached for this plugin, the selector is malformed, or an object does
/// not parse as `T`.
pub fn list<T: DeserializeOwned>(
    kind: &Kind,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<T>, Error> {
    let jsons = host::list(kind, namespace, selector)
        .with_context(|| format!("failed to list {kind} from the cache"))?;
    jsons
        .iter()
        .map(|json| serde_json::from_str(json))
        .collect::<Result<_, _>>()
        .with_context(|| format!("a cached {kind} does not parse"))
}
