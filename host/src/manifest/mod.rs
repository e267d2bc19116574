//! The plugin manifest (YAML): what a plugin reconciles, what it may read and change, its limits.
//!
//! A plugin is a WebAssembly component plus this manifest:
//!
//! ```yaml
//! name: website                 # required; a DNS-1123 label naming logs, metrics, field manager
//! module: website.wasm          # required; relative to the manifest's directory
//! for: {apiVersion: example.com/v1, kind: Website}    # required: the kind reconciled
//! owns:                         # changes enqueue their controlling owner of the `for` kind
//!   - {apiVersion: apps/v1, kind: Deployment}
//! cache:                        # extra kinds readable through the `cache` import
//!   - {apiVersion: v1, kind: Secret}
//! namespace: default            # default: all namespaces (applies to every kind above)
//! serviceAccountName: website   # the ServiceAccount it acts as (impersonated); its namespace:
//!                               # serviceAccountNamespace, default `namespace`
//! labelSelector: "app=web"      # only `for` objects matching it
//! generationChanged: true       # skip updates that leave metadata.generation unchanged
//! placement: keys                # sharded mode: keys spread over replicas (default), or `whole`
//! resync: 10m                   # ≥ 1s; default: none
//! concurrency: 2                # 1..=64, default 1
//! rateLimiter: {baseDelay: 5ms, maxDelay: 1000s, qps: 10, burst: 100}   # client-go defaults
//! limits: {deadline: 10s, memory: 64Mi}                 # per call; 1ms..=10m, 1Mi..=4Gi
//!   # also minRequeueAfter: 100ms (10ms..=1h): shorter requeue-after answers are raised to it,
//!   # and logLinesPerSecond: 100 (1..=100000; 5 s worth at once): guest log lines past it dropped
//! apiRateLimit: {qps: 5, burst: 10}  # the plugin's own API budget; default and ceiling: the host's
//! instanceReuse: {maxCalls: 1000, maxMemory: 32Mi}      # absent: a fresh instance per call
//! env: {LOG_FORMAT: json}
//! grants:                       # what the `client` import may do; default: nothing
//!   - apiVersion: apps/v1
//!     kind: Deployment
//!     verbs: [get, create, update, patch, delete]   # server-side apply needs `patch`
//!     namespaces: [default]     # default (or ["*"]): every namespace
//!     subresources: [status]    # writes to a subresource need it listed
//! shadow:                       # run after sampled reconciles, writes dry-run and compared
//!   module: website-v2.wasm     # also sample: 0.2 (default 1), limits, env (default: the plugin's)
//! canary: {selector: "track=canary", module: website-v2.wasm}   # keys it picks go to module
//! ```

mod grant;
mod identity;
mod model;
pub mod namespaced;
mod raw;
pub mod reserved;
#[cfg(test)]
mod resource_tests;
mod status;
#[cfg(test)]
mod tests;
mod validate;
mod values;

use std::path::{Path, PathBuf};

pub use grant::{Denied, Grant, Missing, Verb};
pub use identity::ServiceAccountRef;
pub use model::{
    ApiRateLimit, Canary, InstanceReuse, Limits, Manifest, RateLimiterSettings, Shadow,
};
pub use raw::{ModuleSource, RawConfigMapRef, RawManifest, ReconcilerPlugin};
pub use status::{PluginCondition, ReconcilerPluginStatus};
pub use values::quantity;

use crate::bounded_read::MAX_MANIFEST_BYTES;
use values::Problem;

/// A manifest that cannot be used; messages say where, what and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read plugin manifest {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML of this schema: a syntax error, an unknown field, a wrong type.
    #[error("plugin manifest {path}: {message}")]
    Parse {
        /// The file ([`Manifest::parse`]: the base directory).
        path: PathBuf,
        /// serde_yaml_ng's message, with the field, line and column (and, for an unknown field,
        /// the fields allowed there).
        message: String,
    },
    /// A value that parses but cannot be used.
    #[error("plugin manifest {path}: `{field}`: {problem}")]
    Invalid {
        /// The file ([`Manifest::parse`]: the base directory).
        path: PathBuf,
        /// The field as a dotted path, e.g. `limits.memory` or `grants[1].verbs`.
        field: String,
        /// The bad value, what is wrong with it, and what to write instead.
        problem: String,
    },
}

impl Manifest {
    /// Reads and validates the manifest at `path`; `module` is resolved against its directory.
    ///
    /// # Errors
    /// [`ManifestError`] when the file cannot be read, parsed or validated. Whether the module
    /// exists is not checked.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = crate::bounded_read::read_to_string(path, MAX_MANIFEST_BYTES, "manifest")
            .map_err(|source| ManifestError::Read {
                path: path.to_owned(),
                source,
            })?;
        let base_dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        Self::parse_named(&text, base_dir, path)
    }

    /// Parses and validates manifest text; a relative `module` is resolved against `base_dir`
    /// (itself made absolute against the current directory).
    ///
    /// # Errors
    /// [`ManifestError::Parse`] or [`ManifestError::Invalid`], naming `base_dir` as the place.
    pub fn parse(text: &str, base_dir: &Path) -> Result<Self, ManifestError> {
        Self::parse_named(text, base_dir, base_dir)
    }

    /// Reads and validates a `ReconcilerPlugin` object's file (YAML, as for `kubectl apply`):
    /// the manifest it declares (its module path: the object's file, never read) and where its
    /// module comes from.
    ///
    /// # Errors
    /// [`ManifestError`] when the file cannot be read, is not a ReconcilerPlugin, or its spec
    /// is invalid.
    pub fn load_object(path: &Path) -> Result<(Self, ModuleSource), ManifestError> {
        let text = crate::bounded_read::read_to_string(path, MAX_MANIFEST_BYTES, "manifest")
            .map_err(|source| ManifestError::Read {
                path: path.to_owned(),
                source,
            })?;
        let parse_error = |message: String| ManifestError::Parse {
            path: path.to_owned(),
            message: abbreviated(&crate::spelling::with_suggestion(&message)),
        };
        let object: ReconcilerPlugin =
            serde_yaml_ng::from_str(&text).map_err(|e| parse_error(e.to_string()))?;
        let name = object.metadata.name.clone().unwrap_or_default();
        let module = path.display().to_string();
        let invalid = |Problem { field, problem }| ManifestError::Invalid {
            path: path.to_owned(),
            field,
            problem: abbreviated(&problem),
        };
        let (raw, source) = object.spec.into_file_form(name, module).map_err(invalid)?;
        let manifest = raw.validate(Path::new("/")).map_err(invalid)?;
        Ok((manifest, source))
    }

    /// Whether the YAML `text` is a `ReconcilerPlugin` object rather than a manifest file.
    #[must_use]
    pub fn is_object(text: &str) -> bool {
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).is_ok_and(|value| {
            value.get("kind").and_then(serde_yaml_ng::Value::as_str) == Some("ReconcilerPlugin")
        })
    }

    fn parse_named(text: &str, base_dir: &Path, path: &Path) -> Result<Self, ManifestError> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let raw: RawManifest = serde_yaml_ng::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_owned(),
            message: abbreviated(&crate::spelling::with_suggestion(&e.to_string())),
        })?;
        raw.validate(base_dir)
            .map_err(|Problem { field, problem }| ManifestError::Invalid {
                path: path.to_owned(),
                field,
                problem: abbreviated(&problem),
            })
    }
}

/// The longest quoted value a message repeats whole.
const QUOTED_MAX: usize = 80;

/// `message` with every value quoted in it (between backticks or double quotes) longer than
/// [`QUOTED_MAX`] bytes cut, saying how long it was: a message never echoes a huge value.
fn abbreviated(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(1024));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = &rest[open..=open];
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(quote) else {
            break;
        };
        let value = &rest[..close];
        if value.len() > QUOTED_MAX {
            let mut end = QUOTED_MAX;
            while !value.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&value[..end]);
            out.push_str(&format!("… ({} bytes)", value.len()));
        } else {
            out.push_str(value);
        }
        out.push_str(quote);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}
