//! What fetching one `ReconcilerPlugin` object's module gives: the files to write and the
//! module with its digests and manifest, or why it could not be had, with the fix in the
//! message and a reason for status.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::delivery::oci::OciError;

/// The longest one object's fetch may take (a registry that trickles bytes would otherwise hold
/// one of its source's fetch slots for ever).
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a first fetch of a generation runs before status calls its source slow.
pub(super) const SLOW_AFTER: Duration = Duration::from_secs(10);

/// Why an object's module could not be fetched.
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchError {
    #[error(
        "ConfigMap {namespace}/{name} cannot be read: {source}; create it, or grant the host \
         `get` on it"
    )]
    ConfigMapRead {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "ConfigMap {namespace}/{name} has no binaryData key `{key}`; put the component there \
         (kubectl create configmap {name} --from-file={key}=component.wasm)"
    )]
    ConfigMapKey {
        namespace: String,
        name: String,
        key: String,
    },
    #[error(
        "the component in ConfigMap {namespace}/{name} is {size} bytes, over the 1 MiB a \
         ConfigMap holds; publish it to a registry (reconcile-host push) and use `oci`"
    )]
    TooLarge {
        namespace: String,
        name: String,
        size: usize,
    },
    #[error("{0}")]
    Registry(#[source] OciError),
    #[error(
        "`oci` sources need the host's registry client, which failed to start (see its log \
         line); fix the host's `oci` settings"
    )]
    NoRegistry,
    #[error("set exactly one module source: `oci` or `configMap`")]
    NoSource,
    /// A namespaced object's spec reaching out of its namespace (the field and the fix).
    #[error("{0}")]
    OutOfNamespace(String),
    #[error(
        "fetching the module took longer than {} s (a registry or API server too slow to \
         answer); it is tried again at the next change or refetch",
        FETCH_TIMEOUT.as_secs()
    )]
    TimedOut,
    #[error("cannot write the plugin's files under {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the cached module {path} does not hash to {expected} (it hashes to {actual}); it was \
         removed and is pulled again at the next refetch"
    )]
    CacheCorrupt {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

impl FetchError {
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Self::ConfigMapRead { .. } => "ConfigMapUnreadable",
            Self::ConfigMapKey { .. } => "ConfigMapKeyMissing",
            Self::TooLarge { .. } => "ModuleTooLarge",
            Self::Registry(error) if error.is_unreachable() => "RegistryUnreachable",
            Self::Registry(_) => "PullFailed",
            Self::NoRegistry => "RegistryUnavailable",
            Self::NoSource => "NoModuleSource",
            Self::OutOfNamespace(_) => "OutOfNamespace",
            Self::TimedOut => "FetchTimedOut",
            Self::Write { .. } => "WriteFailed",
            Self::CacheCorrupt { .. } => "CachedModuleCorrupt",
        }
    }
}

/// What fetching one object gave.
pub(super) struct Fetched {
    /// The object's `metadata.uid` when the fetch started (a deleted and re-created object is
    /// another object).
    pub(super) uid: Option<String>,
    pub(super) generation: Option<i64>,
    pub(super) result: Result<Module, FetchError>,
}

/// A fetched module.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Module {
    /// What status reports: the manifest digest an `oci` reference resolved to, or the
    /// content digest of a ConfigMap's module (`sha256:…`).
    pub(super) resolved: String,
    /// The sha256 of the component's bytes (hex), as the supervisor reports what serves.
    pub(super) content: String,
    /// The manifest file written for the spec, as the supervisor reports what serves.
    pub(super) manifest: String,
    /// The manifest digest the shadow's `oci` reference resolved to.
    pub(super) shadow: Option<String>,
    /// The manifest digest the canary's `oci` reference resolved to.
    pub(super) canary: Option<String>,
    /// The layer digest (hex) of each manifest digest pulled for this answer, so that a refetch
    /// of a pinned digest needs neither a request nor a read of the cache.
    pub(super) layers: BTreeMap<String, String>,
    /// Every module came from a registry, by a digest named or pinned: fetching again would
    /// give the same.
    pub(super) pinned: bool,
}

/// Where one file's bytes are.
pub(super) enum Bytes {
    /// Read from a ConfigMap.
    Memory(Vec<u8>),
    /// A module in the registry's disk cache, to be verified as it is copied.
    Cached(PathBuf),
}

/// One module file of a plugin's directory.
pub(super) struct ModuleFile {
    /// `module.wasm`, `shadow.wasm` or `canary.wasm`.
    pub(super) file: &'static str,
    /// The sha256 (hex) its bytes must have.
    pub(super) sha256: String,
    pub(super) bytes: Bytes,
}

/// What a fetch prepared: the files to write, in order, and what status reports.
pub(super) struct Prepared {
    /// The module, then a shadow's and a canary's.
    pub(super) files: Vec<ModuleFile>,
    /// The module's digests and the manifest text (`plugin.yaml`, written after the modules
    /// it names).
    pub(super) module: Module,
}
