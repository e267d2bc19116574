//! What fetching one `ReconcilerPlugin` object's module gives: the module with its digests and
//! manifest, or why it could not be had, with the fix in the message and a reason for status.

use std::path::PathBuf;
use std::time::Duration;

use crate::delivery::oci::OciError;

/// The longest one object's module may take to fetch (a registry that trickles bytes would
/// otherwise hold every other object's changes and status).
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

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
            Self::TimedOut => "FetchTimedOut",
            Self::Write { .. } => "WriteFailed",
        }
    }
}

/// What fetching one object gave.
pub(super) struct Fetched {
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
}
