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
//! labelSelector: "app=web"      # only `for` objects matching it
//! generationChanged: true       # skip updates that leave metadata.generation unchanged
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
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::config::duration;
use crate::runtime::KindRef;
use label_selector::{LabelSelector, is_dns_label, is_dns_subdomain};

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;
const VERBS: &str = "get, create, update, patch or delete";

/// A validated plugin manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The plugin's name (a DNS-1123 label); names its logs, metrics and field manager.
    pub name: String,
    /// Absolute path of the component (resolved against the manifest's directory). Not checked
    /// to exist: the loader does that.
    pub module: PathBuf,
    /// The kind reconciled (`for:`).
    pub for_kind: KindRef,
    /// Kinds whose changes enqueue their controlling owner of the `for` kind.
    pub owns: Vec<KindRef>,
    /// Extra kinds the guest may read through the `cache` import, cached without the label
    /// selector. Listing the `for` kind here makes all of its objects readable, not only the
    /// selected ones.
    pub cache: Vec<KindRef>,
    /// Watch only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// Only `for` objects matching this selector.
    pub label_selector: Option<LabelSelector>,
    /// Skip updates that leave `metadata.generation` unchanged.
    pub generation_changed: bool,
    /// Re-enqueue every cached object this often; `None` for never.
    pub resync: Option<Duration>,
    /// Concurrent reconciles, 1..=64.
    pub concurrency: usize,
    /// Per-key backoff and the overall rate of reconciles.
    pub rate_limiter: RateLimiterSettings,
    /// Per-call deadline and memory cap, shortest requeue-after.
    pub limits: Limits,
    /// The plugin's own API request budget; `None` for the host's default.
    pub api_rate_limit: Option<ApiRateLimit>,
    /// Keep instances between calls; `None` for a fresh instance per call.
    pub instance_reuse: Option<InstanceReuse>,
    /// Environment variables the guest may read through WASI, sorted by name.
    pub env: Vec<(String, String)>,
    /// What the guest may do through the `client` import.
    pub grants: Vec<Grant>,
}

/// `rateLimiter:`: the queue's limiter settings (client-go's controller defaults). `qps` and
/// `burst` limit retries (failures and `requeue` answers) across keys; new events and
/// `requeue-after` answers are not limited.
pub use crate::queue::ControllerLimiter as RateLimiterSettings;

/// `limits:`, enforced on every call into the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one reconcile call (default 10s).
    pub deadline: Duration,
    /// Cap of the guest's linear memory in bytes (default 64Mi).
    pub memory: u64,
    /// The shortest `requeue-after` honoured (default 100ms, at least 10ms): a shorter answer
    /// is raised to it, so a key cannot requeue itself in a hot loop.
    pub min_requeue_after: Duration,
    /// Guest log lines (stdout, stderr, `log`) a second, on average (default 100); five
    /// seconds' worth may come at once. Lines past it are dropped and counted.
    pub log_lines_per_second: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            memory: 64 * MI,
            min_requeue_after: Duration::from_millis(100),
            log_lines_per_second: 100,
        }
    }
}

/// `apiRateLimit:`: the plugin's own token bucket for its `client` and `events` calls, so that
/// one plugin cannot spend another's share of the API server. The host's configuration gives
/// the default and the ceiling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApiRateLimit {
    /// Requests per second, on average.
    pub qps: f64,
    /// Requests at once.
    pub burst: u32,
}

/// `instanceReuse:`: when a kept instance is replaced by a fresh one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceReuse {
    /// Replace the instance after this many calls (default 1000).
    pub max_calls: u32,
    /// Replace it once its memory has grown past this many bytes (default: `limits.memory`,
    /// 64Mi by default).
    pub max_memory: u64,
}

impl Default for InstanceReuse {
    fn default() -> Self {
        Self {
            max_calls: 1000,
            max_memory: Limits::default().memory,
        }
    }
}

/// A Kubernetes verb a grant can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// Read one object from the API server.
    Get,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Patch an object, including server-side apply.
    Patch,
    /// Delete an object.
    Delete,
}

impl Verb {
    /// Every verb, in the order they are listed in messages.
    pub const ALL: [Self; 5] = [
        Self::Get,
        Self::Create,
        Self::Update,
        Self::Patch,
        Self::Delete,
    ];

    /// The lowercase Kubernetes verb, e.g. `patch`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `grants:`: verbs allowed on a kind, in some namespaces, on some subresources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The kind.
    pub kind: KindRef,
    /// Allowed verbs, non-empty and without duplicates.
    pub verbs: Vec<Verb>,
    /// Allowed namespaces; `None` for every namespace and cluster-wide calls.
    pub namespaces: Option<Vec<String>>,
    /// Subresources (e.g. `status`) that may be written besides the object itself.
    pub subresources: Vec<String>,
}

impl Grant {
    /// Whether this grant alone allows the call; allocation-free.
    #[must_use]
    pub fn covers(
        &self,
        kind: &KindRef,
        verb: Verb,
        namespace: Option<&str>,
        subresource: Option<&str>,
    ) -> bool {
        self.kind == *kind
            && self.verbs.contains(&verb)
            && self.covers_namespace(namespace)
            && subresource.is_none_or(|wanted| self.subresources.iter().any(|s| s == wanted))
    }

    fn covers_namespace(&self, namespace: Option<&str>) -> bool {
        match (&self.namespaces, namespace) {
            (None, _) => true,
            (Some(listed), Some(wanted)) => listed.iter().any(|n| n == wanted),
            (Some(_), None) => false,
        }
    }
}

/// A guest call that no grant allows. Its message names the plugin, the call and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The plugin's name.
    pub plugin: Box<str>,
    /// The kind called on.
    pub kind: KindRef,
    /// The verb.
    pub verb: Verb,
    /// The namespace; `None` for a cluster-wide call.
    pub namespace: Option<Box<str>>,
    /// The subresource, if the call was to one.
    pub subresource: Option<Box<str>>,
    /// What the closest grant lacks.
    pub missing: Missing,
}

/// What stands between a denied call and a grant that would allow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No grant names the kind.
    Kind,
    /// Grants name the kind but none gives the verb.
    Verb,
    /// Grants give the verb on the kind but not in this namespace.
    Namespace,
    /// Grants allow the call on the object but not on this subresource.
    Subresource,
}

impl std::error::Error for Denied {}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = describe(&self.kind);
        write!(
            f,
            "plugin `{}` has no grant to `{}` ",
            self.plugin, self.verb
        )?;
        if let Some(subresource) = &self.subresource {
            write!(f, "the `{subresource}` subresource of ")?;
        }
        match &self.namespace {
            Some(namespace) => write!(f, "{kind} in namespace `{namespace}`; ")?,
            None => write!(f, "{kind} cluster-wide; ")?,
        }
        let grant = format!("its grant for {kind} under `grants:` in its manifest");
        match (self.missing, &self.namespace, &self.subresource) {
            (Missing::Kind, ..) => {
                f.write_str("add a grant for it under `grants:` in its manifest")
            }
            (Missing::Verb, ..) => write!(f, "add `{}` to the `verbs` of {grant}", self.verb),
            (Missing::Namespace, Some(namespace), _) => write!(
                f,
                "add `{namespace}` to the `namespaces` of {grant}, or remove `namespaces` to \
                 allow every namespace"
            ),
            (Missing::Namespace, None, _) => write!(
                f,
                "remove `namespaces` from {grant} (or write [\"*\"]) to allow cluster-wide calls"
            ),
            (Missing::Subresource, _, subresource) => write!(
                f,
                "add `{}` to the `subresources` of {grant}",
                subresource.as_deref().unwrap_or_default()
            ),
        }
    }
}

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
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
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

    fn parse_named(text: &str, base_dir: &Path, path: &Path) -> Result<Self, ManifestError> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let raw: RawManifest = serde_yaml_ng::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_owned(),
            message: abbreviated(&e.to_string()),
        })?;
        raw.validate(base_dir)
            .map_err(|Problem { field, problem }| ManifestError::Invalid {
                path: path.to_owned(),
                field,
                problem: abbreviated(&problem),
            })
    }

    /// Whether the guest may read `kind` through the `cache` import: the `for` kind, an `owns`
    /// kind or a `cache` kind.
    #[must_use]
    pub fn reads(&self, kind: &KindRef) -> bool {
        self.for_kind == *kind || self.owns.contains(kind) || self.cache.contains(kind)
    }

    /// Whether some grant allows `verb` on `kind` in `namespace` (`None`: cluster-wide) and, if
    /// given, on `subresource`. Runs on every guest API call: the success path does not
    /// allocate.
    ///
    /// # Errors
    /// [`Denied`], naming what is missing and how to grant it.
    pub fn allows(
        &self,
        kind: &KindRef,
        verb: Verb,
        namespace: Option<&str>,
        subresource: Option<&str>,
    ) -> Result<(), Denied> {
        if self
            .grants
            .iter()
            .any(|g| g.covers(kind, verb, namespace, subresource))
        {
            return Ok(());
        }
        let of_kind = || self.grants.iter().filter(|g| g.kind == *kind);
        let with_verb = || of_kind().filter(|g| g.verbs.contains(&verb));
        let missing = if of_kind().next().is_none() {
            Missing::Kind
        } else if with_verb().next().is_none() {
            Missing::Verb
        } else if !with_verb().any(|g| g.covers_namespace(namespace)) {
            Missing::Namespace
        } else {
            Missing::Subresource
        };
        Err(Denied {
            plugin: self.name.as_str().into(),
            kind: kind.clone(),
            verb,
            namespace: namespace.map(Into::into),
            subresource: subresource.map(Into::into),
            missing,
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

/// Parses a Kubernetes memory quantity into bytes: plain bytes (`67108864`), binary suffixes
/// `Ki Mi Gi Ti Pi Ei` or decimal suffixes `k M G T P E`, with an optional fraction (`1.5Gi`,
/// rounded up to a whole byte).
///
/// # Errors
/// A message quoting the text and showing how to write a size.
pub fn quantity(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a memory size; write it like 64Mi, 1Gi or 67108864");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return Err(bad()),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(bad());
    }
    let value = |s: &str| s.parse::<u128>().unwrap_or(0);
    let scale = 10_u128.pow(u32::try_from(fraction.len()).unwrap_or(0));
    let bytes = value(whole) * multiplier + (value(fraction) * multiplier).div_ceil(scale);
    u64::try_from(bytes).map_err(|_| format!("`{text}` is too large a memory size"))
}

/// A problem found while validating, before the manifest's path is attached.
struct Problem {
    field: String,
    problem: String,
}

fn problem(field: impl Into<String>, problem: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The manifest as written; [`RawManifest::validate`] turns it into a [`Manifest`]. Scalars
/// such as durations and sizes stay text (serde_yaml_ng reads `1000` into a `String` too) so
/// that validation errors quote them as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(
    expecting = "a plugin manifest: a mapping with `name`, `module`, `for` and optional fields"
)]
struct RawManifest {
    name: Option<String>,
    module: Option<String>,
    #[serde(rename = "for")]
    for_kind: Option<RawKind>,
    owns: Option<Vec<RawKind>>,
    cache: Option<Vec<RawKind>>,
    namespace: Option<String>,
    label_selector: Option<String>,
    generation_changed: Option<bool>,
    resync: Option<String>,
    concurrency: Option<i64>,
    rate_limiter: Option<RawRateLimiter>,
    limits: Option<RawLimits>,
    api_rate_limit: Option<RawApiRateLimit>,
    instance_reuse: Option<RawInstanceReuse>,
    env: Option<Env>,
    grants: Option<Vec<RawGrant>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a kind: a mapping like `{apiVersion: apps/v1, kind: Deployment}`")]
struct RawKind {
    api_version: String,
    kind: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `baseDelay`, `maxDelay`, `qps` and `burst`")]
struct RawRateLimiter {
    base_delay: Option<String>,
    max_delay: Option<String>,
    qps: Option<f64>,
    burst: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `deadline`, `memory`, `minRequeueAfter` and `logLinesPerSecond`")]
struct RawLimits {
    deadline: Option<String>,
    memory: Option<String>,
    min_requeue_after: Option<String>,
    log_lines_per_second: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `qps` and `burst`")]
struct RawApiRateLimit {
    qps: Option<f64>,
    burst: Option<i64>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `maxCalls` and `maxMemory`")]
struct RawInstanceReuse {
    max_calls: Option<i64>,
    max_memory: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(
    expecting = "a grant: a mapping of `apiVersion`, `kind`, `verbs` and optional `namespaces` and `subresources`"
)]
struct RawGrant {
    api_version: String,
    kind: String,
    verbs: Option<Vec<String>>,
    namespaces: Option<Vec<String>>,
    subresources: Option<Vec<String>>,
}

/// `env:` in file order; unlike a map type, refuses a name written twice.
struct Env(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Env {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Env;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of variable names to values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Env, A::Error> {
                let mut vars: Vec<(String, String)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    if vars.iter().any(|(n, _)| *n == name) {
                        let message = format!("variable `{name}` is set twice; keep one");
                        return Err(serde::de::Error::custom(message));
                    }
                    vars.push((name, value));
                }
                Ok(Env(vars))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// A duration field: `default` when absent, else parsed and checked to be in `min..=max`.
fn duration_in(
    field: &str,
    text: Option<&str>,
    default: Duration,
    (min, max): (Duration, Duration),
    range: &str,
) -> Result<Duration, Problem> {
    let Some(text) = text else {
        return Ok(default);
    };
    let parsed = duration::parse(text).map_err(|message| problem(field, message))?;
    if parsed < min || parsed > max {
        return Err(problem(field, format!("`{text}` is out of range; {range}")));
    }
    Ok(parsed)
}

/// A memory field: `default` when absent, else a quantity in `min..=max` bytes.
fn memory_in(
    field: &str,
    text: Option<&str>,
    default: u64,
    (min, max): (u64, u64),
    range: &str,
) -> Result<u64, Problem> {
    let Some(text) = text else {
        return Ok(default);
    };
    let bytes = quantity(text).map_err(|message| problem(field, message))?;
    if bytes < min || bytes > max {
        return Err(problem(field, format!("`{text}` is out of range; {range}")));
    }
    Ok(bytes)
}

/// An integer field: `default` when absent, else in `min..=max`.
fn integer_in<T: TryFrom<i64>>(
    field: &str,
    value: Option<i64>,
    default: T,
    max: i64,
    fix: &str,
) -> Result<T, Problem> {
    match value {
        None => Ok(default),
        Some(value) => (1..=max)
            .contains(&value)
            .then(|| T::try_from(value).ok())
            .flatten()
            .ok_or_else(|| problem(field, format!("`{value}` is out of range; {fix}"))),
    }
}

fn kind_ref(field: &str, api_version: &str, kind: &str) -> Result<KindRef, Problem> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, api_version),
    };
    let version_ok = is_dns_label(version) && version.starts_with(|c: char| c.is_ascii_lowercase());
    if api_version.is_empty() || !version_ok || group.is_some_and(|g| !is_dns_subdomain(g)) {
        let what = if api_version.is_empty() {
            "missing".to_owned()
        } else {
            format!("`{api_version}` is not an apiVersion")
        };
        return Err(problem(
            format!("{field}.apiVersion"),
            format!(
                "{what}; write `version` for the core group (e.g. `v1`) or `group/version` (e.g. `apps/v1`), in lowercase"
            ),
        ));
    }
    let kind_ok = kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok {
        let what = if kind.is_empty() {
            "missing".to_owned()
        } else {
            format!("`{kind}` is not a kind")
        };
        return Err(problem(
            format!("{field}.kind"),
            format!("{what}; write the kind's name, letters and digits, e.g. `Deployment`"),
        ));
    }
    Ok(KindRef::new(api_version, kind))
}

fn describe(kind: &KindRef) -> String {
    format!("{} {}", kind.api_version, kind.kind)
}

/// Checks a DNS-1123 label (a name or namespace); `Some(problem)` when it is not one.
fn label_problem(what: &str, value: &str) -> Option<String> {
    (!is_dns_label(value)).then(|| {
        format!(
            "`{value}` is not a valid {what}; use lowercase letters, digits and `-`, at most 63 \
             characters, starting and ending with a letter or digit"
        )
    })
}

/// Checks a list: each entry passes `check`, none is written twice.
fn each_once(
    field: &str,
    list: &[String],
    check: impl Fn(&str) -> Option<String>,
) -> Result<(), Problem> {
    for (i, entry) in list.iter().enumerate() {
        if let Some(problem_text) = check(entry) {
            return Err(problem(field, problem_text));
        }
        if list[..i].contains(entry) {
            return Err(problem(
                field,
                format!("`{entry}` is listed twice; remove one"),
            ));
        }
    }
    Ok(())
}

impl RawManifest {
    fn validate(self, base_dir: &Path) -> Result<Manifest, Problem> {
        let name = self.name.unwrap_or_default();
        if name.is_empty() {
            return Err(problem(
                "name",
                "missing; add the plugin's name, e.g. `name: website`",
            ));
        }
        if let Some(problem_text) = label_problem("name", &name) {
            return Err(problem("name", problem_text));
        }
        let module = match self.module.as_deref() {
            None | Some("") => {
                return Err(problem(
                    "module",
                    "missing; add the component's path, e.g. `module: website.wasm` (relative \
                     to the manifest's directory)",
                ));
            }
            Some(module) => std::path::absolute(base_dir.join(module))
                .map_err(|e| problem("module", format!("cannot make `{module}` absolute: {e}")))?,
        };
        let Some(for_raw) = &self.for_kind else {
            return Err(problem(
                "for",
                "missing; add the kind to reconcile, e.g. `for: {apiVersion: example.com/v1, \
                 kind: Website}`",
            ));
        };
        let for_kind = kind_ref("for", &for_raw.api_version, &for_raw.kind)?;
        let mut seen = vec![("for".to_owned(), for_kind.clone())];
        let mut kinds = |list: &str, raw: Option<Vec<RawKind>>| {
            let mut kinds = Vec::new();
            for (i, raw) in raw.into_iter().flatten().enumerate() {
                let field = format!("{list}[{i}]");
                let kind = kind_ref(&field, &raw.api_version, &raw.kind)?;
                // `cache` may repeat the `for` kind: the guest then reads all of its objects,
                // not only those matching `labelSelector`.
                let repeats = |earlier: &str| !(list == "cache" && earlier == "for");
                if let Some((earlier, _)) =
                    seen.iter().find(|(e, k)| *k == kind && repeats(e.as_str()))
                {
                    return Err(problem(
                        field,
                        format!(
                            "{} is already listed as `{earlier}`; list each kind once",
                            describe(&kind)
                        ),
                    ));
                }
                seen.push((field, kind.clone()));
                kinds.push(kind);
            }
            Ok(kinds)
        };
        let owns = kinds("owns", self.owns)?;
        let cache = kinds("cache", self.cache)?;
        if let Some(namespace) = &self.namespace
            && let Some(problem_text) = label_problem("namespace name", namespace)
        {
            let fix = "; or remove `namespace` to watch every namespace";
            return Err(problem("namespace", problem_text + fix));
        }
        let label_selector = match &self.label_selector {
            Some(text) => Some(
                LabelSelector::parse(text).map_err(|e| problem("labelSelector", e.to_string()))?,
            ),
            None => None,
        };
        let resync = match self.resync.as_deref() {
            Some(text) => Some(duration_in(
                "resync",
                Some(text),
                Duration::ZERO,
                (Duration::from_secs(1), Duration::MAX),
                "resync at most once a second (e.g. `10m`), or remove `resync` to turn it off",
            )?),
            None => None,
        };
        let concurrency = integer_in(
            "concurrency",
            self.concurrency,
            1,
            64,
            "allow 1 to 64 concurrent reconciles",
        )?;
        let rate_limiter = validate_rate_limiter(self.rate_limiter.unwrap_or_default())?;
        let (raw, default) = (self.limits.unwrap_or_default(), Limits::default());
        let limits = Limits {
            deadline: duration_in(
                "limits.deadline",
                raw.deadline.as_deref(),
                default.deadline,
                (Duration::from_millis(1), Duration::from_secs(600)),
                "a deadline is between 1ms and 10m",
            )?,
            memory: memory_in(
                "limits.memory",
                raw.memory.as_deref(),
                default.memory,
                (MI, 4 * GI),
                "a memory limit is between 1Mi and 4Gi",
            )?,
            min_requeue_after: duration_in(
                "limits.minRequeueAfter",
                raw.min_requeue_after.as_deref(),
                default.min_requeue_after,
                (Duration::from_millis(10), Duration::from_secs(3600)),
                "the shortest requeue-after is between 10ms and 1h (default 100ms)",
            )?,
            log_lines_per_second: integer_in(
                "limits.logLinesPerSecond",
                raw.log_lines_per_second,
                default.log_lines_per_second,
                100_000,
                "allow 1 to 100000 guest log lines a second (default 100)",
            )?,
        };
        let api_rate_limit = match self.api_rate_limit {
            Some(raw) => Some(validate_api_rate_limit(raw)?),
            None => None,
        };
        let instance_reuse = match self.instance_reuse {
            Some(raw) => Some(InstanceReuse {
                max_calls: integer_in(
                    "instanceReuse.maxCalls",
                    raw.max_calls,
                    1000,
                    u32::MAX.into(),
                    "replace the instance after 1 or more calls (default 1000)",
                )?,
                max_memory: memory_in(
                    "instanceReuse.maxMemory",
                    raw.max_memory.as_deref(),
                    limits.memory,
                    (1, limits.memory),
                    &format!(
                        "it must be more than 0 and at most limits.memory ({} bytes); lower it \
                         or raise limits.memory",
                        limits.memory
                    ),
                )?,
            }),
            None => None,
        };
        let mut env = self.env.map(|Env(vars)| vars).unwrap_or_default();
        env.sort();
        for (name, _) in &env {
            let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(problem(
                    format!("env.{name}"),
                    format!(
                        "`{name}` is not an environment variable name; use letters, digits and \
                         `_`, not starting with a digit, e.g. `LOG_FORMAT`"
                    ),
                ));
            }
        }
        let grants = (self.grants.iter().flatten().enumerate())
            .map(|(i, raw)| validate_grant(&format!("grants[{i}]"), raw))
            .collect::<Result<_, _>>()?;
        Ok(Manifest {
            name,
            module,
            for_kind,
            owns,
            cache,
            namespace: self.namespace,
            label_selector,
            generation_changed: self.generation_changed.unwrap_or(false),
            resync,
            concurrency,
            rate_limiter,
            limits,
            api_rate_limit,
            instance_reuse,
            env,
            grants,
        })
    }
}

fn validate_rate_limiter(raw: RawRateLimiter) -> Result<RateLimiterSettings, Problem> {
    let default = RateLimiterSettings::default();
    let base_delay = duration_in(
        "rateLimiter.baseDelay",
        raw.base_delay.as_deref(),
        default.base_delay,
        (Duration::from_nanos(1), Duration::MAX),
        "the first retry delay must be more than 0 (default 5ms)",
    )?;
    let max_delay = duration_in(
        "rateLimiter.maxDelay",
        raw.max_delay.as_deref(),
        default.max_delay,
        (base_delay, Duration::MAX),
        &format!("maxDelay must be at least baseDelay ({base_delay:?})"),
    )?;
    let qps = raw.qps.unwrap_or(default.qps);
    if !(qps.is_finite() && qps > 0.0) {
        return Err(problem(
            "rateLimiter.qps",
            format!("`{qps}` is not a positive rate; write reconciles per second, e.g. 10"),
        ));
    }
    let burst = integer_in(
        "rateLimiter.burst",
        raw.burst,
        default.burst,
        u32::MAX.into(),
        "burst must be at least 1 (default 100)",
    )?;
    Ok(RateLimiterSettings {
        base_delay,
        max_delay,
        qps,
        burst,
    })
}

fn validate_api_rate_limit(raw: RawApiRateLimit) -> Result<ApiRateLimit, Problem> {
    let Some(qps) = raw.qps else {
        return Err(problem(
            "apiRateLimit.qps",
            "missing; write the plugin's API requests per second, e.g. `qps: 5`",
        ));
    };
    if !(qps.is_finite() && qps > 0.0) {
        return Err(problem(
            "apiRateLimit.qps",
            format!("`{qps}` is not a positive rate; write requests per second, e.g. 5"),
        ));
    }
    let burst = integer_in(
        "apiRateLimit.burst",
        raw.burst,
        (qps.ceil() as u32).max(1),
        u32::MAX.into(),
        "burst must be at least 1 (default: qps, rounded up)",
    )?;
    Ok(ApiRateLimit { qps, burst })
}

fn validate_grant(field: &str, raw: &RawGrant) -> Result<Grant, Problem> {
    let kind = kind_ref(field, &raw.api_version, &raw.kind)?;
    let verbs_field = format!("{field}.verbs");
    let written = raw.verbs.as_deref().unwrap_or_default();
    if written.is_empty() {
        let message = format!(
            "missing; list what the plugin may do with {}: some of {VERBS}",
            describe(&kind)
        );
        return Err(problem(verbs_field, message));
    }
    each_once(&verbs_field, written, |verb| {
        let hint = if matches!(verb, "list" | "watch") {
            " (lists and watches go through the `cache` import: add the kind under `cache:`)"
        } else {
            ""
        };
        let known = Verb::ALL.iter().any(|v| v.as_str() == verb);
        (!known).then(|| format!("`{verb}` is not a verb a grant can give; use {VERBS}{hint}"))
    })?;
    let verbs = (written.iter())
        .filter_map(|w| Verb::ALL.into_iter().find(|v| v.as_str() == w))
        .collect();
    let namespaces_field = format!("{field}.namespaces");
    let namespaces = match raw.namespaces.as_deref() {
        None => None,
        Some([all]) if all == "*" => None,
        Some([]) => {
            return Err(problem(
                namespaces_field,
                "is empty, so the grant allows nothing; list namespaces, or remove `namespaces` \
                 (or write [\"*\"]) to allow every namespace",
            ));
        }
        Some(list) => {
            each_once(&namespaces_field, list, |namespace| match namespace {
                "*" => Some(
                    "`*` already means every namespace; write [\"*\"] alone or list names"
                        .to_owned(),
                ),
                _ => label_problem("namespace name", namespace)
                    .map(|p| p + ", or `*` for every namespace"),
            })?;
            Some(list.to_vec())
        }
    };
    let subresources = raw.subresources.clone().unwrap_or_default();
    each_once(&format!("{field}.subresources"), &subresources, |name| {
        label_problem("subresource name", name).map(|p| p + ", e.g. `status` or `scale`")
    })?;
    Ok(Grant {
        kind,
        verbs,
        namespaces,
        subresources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
name: website
module: website.wasm
for:
  apiVersion: example.com/v1
  kind: Website
owns:
  - apiVersion: apps/v1
    kind: Deployment
cache:
  - apiVersion: v1
    kind: Namespace
namespace: default
labelSelector: "app=web"
generationChanged: true
resync: 10m
concurrency: 2
rateLimiter:
  baseDelay: 5ms
  maxDelay: 1000s
  qps: 10
  burst: 100
limits:
  deadline: 10s
  memory: 64Mi
  minRequeueAfter: 100ms
apiRateLimit:
  qps: 20
  burst: 40
instanceReuse:
  maxCalls: 1000
  maxMemory: 32Mi
env:
  LOG_FORMAT: json
grants:
  - apiVersion: apps/v1
    kind: Deployment
    verbs: [get, create, update, patch, delete]
    namespaces: [default]
    subresources: [status]
"#;

    const MINIMAL: &str = "name: web\nmodule: web.wasm\nfor: {apiVersion: v1, kind: ConfigMap}\n";

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("/plugins/web"))
    }

    fn deployment() -> KindRef {
        KindRef::new("apps/v1", "Deployment")
    }

    #[test]
    fn a_minimal_manifest_gets_every_default() {
        let manifest = parse(MINIMAL).unwrap();
        assert_eq!(manifest.name, "web");
        assert_eq!(manifest.module, Path::new("/plugins/web/web.wasm"));
        assert_eq!(manifest.for_kind, KindRef::new("v1", "ConfigMap"));
        assert!(manifest.owns.is_empty() && manifest.cache.is_empty());
        assert_eq!(manifest.namespace, None);
        assert_eq!(manifest.label_selector, None);
        assert!(!manifest.generation_changed);
        assert_eq!(manifest.resync, None);
        assert_eq!(manifest.concurrency, 1);
        assert_eq!(manifest.rate_limiter, RateLimiterSettings::default());
        assert_eq!(manifest.rate_limiter.base_delay, Duration::from_millis(5));
        assert_eq!(manifest.rate_limiter.max_delay, Duration::from_secs(1000));
        assert_eq!(
            (manifest.rate_limiter.qps, manifest.rate_limiter.burst),
            (10.0, 100)
        );
        assert_eq!(manifest.limits, Limits::default());
        assert_eq!(manifest.limits.deadline, Duration::from_secs(10));
        assert_eq!(manifest.limits.memory, 64 << 20);
        assert_eq!(
            manifest.limits.min_requeue_after,
            Duration::from_millis(100)
        );
        assert_eq!(manifest.api_rate_limit, None);
        assert_eq!(manifest.instance_reuse, None);
        assert!(manifest.env.is_empty() && manifest.grants.is_empty());
    }

    #[test]
    fn the_full_example_parses_to_its_values() {
        let manifest = parse(FULL).unwrap();
        assert_eq!(manifest.name, "website");
        assert_eq!(manifest.module, Path::new("/plugins/web/website.wasm"));
        assert_eq!(manifest.for_kind, KindRef::new("example.com/v1", "Website"));
        assert_eq!(manifest.owns, [deployment()]);
        assert_eq!(manifest.cache, [KindRef::new("v1", "Namespace")]);
        assert_eq!(manifest.namespace.as_deref(), Some("default"));
        assert_eq!(manifest.label_selector.unwrap().to_string(), "app=web");
        assert!(manifest.generation_changed);
        assert_eq!(manifest.resync, Some(Duration::from_secs(600)));
        assert_eq!(manifest.concurrency, 2);
        assert_eq!(manifest.rate_limiter, RateLimiterSettings::default());
        assert_eq!(manifest.limits, Limits::default());
        assert_eq!(
            manifest.api_rate_limit,
            Some(ApiRateLimit {
                qps: 20.0,
                burst: 40
            })
        );
        let reuse = manifest.instance_reuse.unwrap();
        assert_eq!((reuse.max_calls, reuse.max_memory), (1000, 32 << 20));
        assert_eq!(manifest.env, [("LOG_FORMAT".to_owned(), "json".to_owned())]);
        assert_eq!(
            manifest.grants,
            [Grant {
                kind: deployment(),
                verbs: Verb::ALL.to_vec(),
                namespaces: Some(vec!["default".to_owned()]),
                subresources: vec!["status".to_owned()],
            }]
        );
    }

    #[test]
    fn instance_reuse_defaults_its_memory_to_the_limit_and_env_is_sorted() {
        let manifest = parse(&format!(
            "{MINIMAL}limits: {{memory: 128Mi}}\ninstanceReuse: {{}}\nenv: {{B: '2', A: '1'}}\n"
        ))
        .unwrap();
        let reuse = manifest.instance_reuse.unwrap();
        assert_eq!((reuse.max_calls, reuse.max_memory), (1000, 128 << 20));
        assert_eq!(manifest.env[0].0, "A");
        assert_eq!(manifest.env[1].0, "B");
    }

    #[test]
    fn the_module_is_resolved_against_the_manifest_directory() {
        let at = |module: &str, dir: &str| {
            Manifest::parse(&MINIMAL.replace("web.wasm", module), Path::new(dir))
                .unwrap()
                .module
        };
        assert_eq!(at("x.wasm", "/a/b"), Path::new("/a/b/x.wasm"));
        assert_eq!(at("lib/x.wasm", "/a"), Path::new("/a/lib/x.wasm"));
        assert_eq!(at("/abs/x.wasm", "/a"), Path::new("/abs/x.wasm"));
        let relative = at("x.wasm", "plugins");
        assert!(relative.is_absolute(), "{}", relative.display());
        assert!(relative.ends_with("plugins/x.wasm"));
    }

    #[test]
    fn load_reads_the_file_and_names_it_in_errors_without_needing_the_module() {
        let dir = std::env::temp_dir().join(format!("manifest-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plugin.yaml");
        std::fs::write(&path, MINIMAL).unwrap();
        let manifest = Manifest::load(&path).unwrap();
        assert_eq!(manifest.module, dir.join("web.wasm"));
        std::fs::write(&path, format!("{MINIMAL}concurrency: 0\n")).unwrap();
        let error = Manifest::load(&path).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "plugin manifest {}: `concurrency`",
                path.display()
            )),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let error = Manifest::load(&path).unwrap_err();
        assert!(matches!(error, ManifestError::Read { .. }), "{error}");
    }

    #[test]
    fn each_invalid_value_is_refused_naming_its_field_value_and_fix() {
        // One case a line: YAML added to (or replacing a line of) MINIMAL | field | message part.
        let cases = "\
            name: Web_Site | name | `Web_Site` is not a valid name; use lowercase letters
            name: '' | name | missing; add the plugin's name
            module: '' | module | missing; add the component's path
            for: {apiVersion: '', kind: X} | for.apiVersion | missing; write `version`
            for: {apiVersion: Apps/v1, kind: X} | for.apiVersion | `Apps/v1` is not an apiVersion
            for: {apiVersion: v1, kind: ''} | for.kind | missing; write the kind's name
            owns: [{apiVersion: v1, kind: ConfigMap}] | owns[0] | v1 ConfigMap is already listed as `for`
            owns: [{apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: Secret}] | owns[1] | already listed as `owns[0]`
            cache: [{apiVersion: v1, kind: 'Con fig'}] | cache[0].kind | `Con fig` is not a kind
            owns: [{apiVersion: v1, kind: Secret}]\\ncache: [{apiVersion: v1, kind: Secret}] | cache[0] | already listed as `owns[0]`
            namespace: Prod | namespace | `Prod` is not a valid namespace name
            labelSelector: 'app in (a,b' | labelSelector | label selector `app in (a,b`: expected `)` after `b`
            resync: 500ms | resync | `500ms` is out of range; resync at most once a second
            resync: soon | resync | `soon` is not a duration
            concurrency: 65 | concurrency | `65` is out of range; allow 1 to 64
            concurrency: 0 | concurrency | `0` is out of range
            rateLimiter: {baseDelay: 0s} | rateLimiter.baseDelay | `0s` is out of range
            rateLimiter: {baseDelay: 2s, maxDelay: 1s} | rateLimiter.maxDelay | at least baseDelay (2s)
            rateLimiter: {qps: 0} | rateLimiter.qps | `0` is not a positive rate
            rateLimiter: {qps: .nan} | rateLimiter.qps | `NaN` is not a positive rate
            rateLimiter: {burst: 0} | rateLimiter.burst | `0` is out of range; burst must be at least 1
            limits: {deadline: 11m} | limits.deadline | `11m` is out of range; a deadline is between 1ms and 10m
            limits: {deadline: 0s} | limits.deadline | `0s` is out of range
            limits: {memory: 64MB} | limits.memory | `64MB` is not a memory size; write it like 64Mi
            limits: {memory: 5Gi} | limits.memory | `5Gi` is out of range; a memory limit is between 1Mi and 4Gi
            limits: {memory: 1000} | limits.memory | `1000` is out of range
            limits: {minRequeueAfter: 0s} | limits.minRequeueAfter | `0s` is out of range; the shortest requeue-after is between 10ms and 1h
            limits: {minRequeueAfter: 2h} | limits.minRequeueAfter | `2h` is out of range
            limits: {logLinesPerSecond: 0} | limits.logLinesPerSecond | `0` is out of range; allow 1 to 100000 guest log lines a second
            apiRateLimit: {burst: 3} | apiRateLimit.qps | missing; write the plugin's API requests per second
            apiRateLimit: {qps: 0} | apiRateLimit.qps | `0` is not a positive rate
            apiRateLimit: {qps: 5, burst: 0} | apiRateLimit.burst | `0` is out of range; burst must be at least 1
            instanceReuse: {maxCalls: 0} | instanceReuse.maxCalls | `0` is out of range
            instanceReuse: {maxMemory: 128Mi} | instanceReuse.maxMemory | at most limits.memory (67108864 bytes)
            env: {LOG-FORMAT: json} | env.LOG-FORMAT | `LOG-FORMAT` is not an environment variable name
            env: {1X: json} | env.1X | not starting with a digit
            grants: [{apiVersion: v1, kind: Secret}] | grants[0].verbs | missing; list what the plugin may do with v1 Secret
            grants: [{apiVersion: v1, kind: Secret, verbs: []}] | grants[0].verbs | missing
            grants: [{apiVersion: v1, kind: Secret, verbs: [list]}] | grants[0].verbs | `list` is not a verb a grant can give; use get, create, update, patch or delete (lists and watches go through the `cache` import
            grants: [{apiVersion: v1, kind: Secret, verbs: [Get]}] | grants[0].verbs | `Get` is not a verb
            grants: [{apiVersion: v1, kind: Secret, verbs: [get, get]}] | grants[0].verbs | `get` is listed twice
            grants: [{apiVersion: v1, kind: A, verbs: [get]}, {kind: B}] | grants[1].apiVersion | missing
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: []}] | grants[0].namespaces | is empty, so the grant allows nothing
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: [a, '*']}] | grants[0].namespaces | `*` already means every namespace
            grants: [{apiVersion: v1, kind: A, verbs: [get], namespaces: [A]}] | grants[0].namespaces | `A` is not a valid namespace name
            grants: [{apiVersion: v1, kind: A, verbs: [get], subresources: [Status]}] | grants[0].subresources | `Status` is not a valid subresource name";
        for case in cases.lines() {
            let mut parts = case.trim().split(" | ");
            let (extra, field, fragment) = (
                parts.next().expect(case),
                parts.next().expect(case),
                parts.next().expect(case),
            );
            let extra = extra.replace("\\n", "\n");
            let key = extra.split(':').next().unwrap();
            let kept: Vec<&str> = MINIMAL
                .lines()
                .filter(|line| !line.starts_with(key))
                .collect();
            let text = format!("{}\n{extra}\n", kept.join("\n"));
            match parse(&text) {
                Err(ManifestError::Invalid {
                    field: got,
                    problem,
                    ..
                }) => {
                    assert_eq!(got, field, "{extra}: {problem}");
                    assert!(problem.contains(fragment), "{extra}: {problem}");
                }
                other => panic!("{extra}: expected an invalid `{field}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_invalid_field_reads_as_path_field_value_and_fix() {
        let error = parse(&format!("{MINIMAL}limits: {{memory: 64MB}}\n")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin manifest /plugins/web: `limits.memory`: `64MB` is not a memory size; write \
             it like 64Mi, 1Gi or 67108864"
        );
    }

    #[test]
    fn missing_required_fields_are_named() {
        for (text, field) in [
            ("", "name"),
            ("name: web\n", "module"),
            ("name: web\nmodule: w.wasm\n", "for"),
        ] {
            let Err(ManifestError::Invalid { field: got, .. }) = parse(text) else {
                panic!("{text:?} should be invalid");
            };
            assert_eq!(got, field);
        }
    }

    #[test]
    fn a_huge_bad_value_is_not_echoed_whole() {
        let huge = "x".repeat(4 << 20);
        for text in [
            format!("{MINIMAL}resync: {huge}\n"),
            format!("{MINIMAL}labelSelector: '{huge} in ('\n"),
            format!("{MINIMAL}concurrency: {huge}\n"),
        ] {
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.len() < 1024,
                "{} bytes: {}",
                error.len(),
                &error[..200]
            );
            assert!(error.contains("bytes)"), "{error}");
        }
    }

    #[test]
    fn unknown_fields_are_refused_listing_the_allowed_ones() {
        let error = parse(&format!("{MINIMAL}concurency: 2\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `concurency`"), "{error}");
        assert!(
            error.contains("`concurrency`") && error.contains("`grants`"),
            "{error}"
        );
        assert!(error.contains("line 4"), "{error}");
        let error = parse(&format!("{MINIMAL}limits: {{memry: 1Gi}}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "limits: unknown field `memry`, expected one of `deadline`, `memory`, \
                 `minRequeueAfter`, `logLinesPerSecond`"
            ),
            "{error}"
        );
        let error = parse(&format!(
            "{MINIMAL}grants: [{{apiVersion: v1, kind: X, verb: [get]}}]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains("grants[0]: unknown field `verb`"), "{error}");
        assert!(error.contains("`verbs`"), "{error}");
    }

    #[test]
    fn scalars_are_read_as_written_and_wrong_types_are_parse_errors() {
        let manifest = parse(&format!("{MINIMAL}env: {{PORT: 8080, VERSION: 1.10}}\n")).unwrap();
        let want =
            [("PORT", "8080"), ("VERSION", "1.10")].map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(manifest.env, want);
        let error = parse(&format!("{MINIMAL}env: {{A: [1]}}\n")).unwrap_err();
        assert!(matches!(error, ManifestError::Parse { .. }), "{error}");
        assert!(
            error.to_string().contains("env.A: invalid type: sequence"),
            "{error}"
        );
        let error = parse(&format!("{MINIMAL}env: {{A: x, A: y}}\n")).unwrap_err();
        assert!(
            error.to_string().contains("variable `A` is set twice"),
            "{error}"
        );
        let error = parse(&format!("{MINIMAL}owns: [apps/v1 Deployment]\n")).unwrap_err();
        assert!(
            error.to_string().contains(
                "owns[0]: invalid type: string \"apps/v1 Deployment\", \
                                        expected a kind: a mapping like"
            ),
            "{error}"
        );
        let error = parse(&format!("{MINIMAL}concurrency: two\n")).unwrap_err();
        assert!(
            error.to_string().contains("concurrency: invalid type"),
            "{error}"
        );
    }

    #[test]
    fn memory_sizes_parse_like_kubernetes_quantities() {
        for (text, want) in [
            ("67108864", 64 << 20),
            ("64Mi", 64 << 20),
            ("1Gi", 1 << 30),
            ("4Ki", 4096),
            ("1.5Gi", 3 << 29),
            ("0.5Ki", 512),
            ("128M", 128_000_000),
            ("1k", 1000),
            ("2G", 2_000_000_000),
            ("1.0000001k", 1001),
        ] {
            assert_eq!(quantity(text), Ok(want), "{text}");
        }
        for bad in [
            "", "64MB", "64mi", "1K", "-1Mi", "Mi", "1.2.3Mi", " 1Mi", "1e3", ".",
        ] {
            assert!(quantity(bad).is_err(), "{bad} should be refused");
        }
        assert!(quantity("16Ei").unwrap_err().contains("too large"));
        assert_eq!(
            parse(&format!("{MINIMAL}limits: {{memory: 67108864}}\n"))
                .unwrap()
                .limits
                .memory,
            64 << 20
        );
    }

    #[test]
    fn star_in_grant_namespaces_means_every_namespace() {
        let manifest = parse(&format!(
            "{MINIMAL}grants: [{{apiVersion: v1, kind: Secret, verbs: [get], namespaces: ['*']}}]\n"
        ))
        .unwrap();
        assert_eq!(manifest.grants[0].namespaces, None);
        let secret = KindRef::new("v1", "Secret");
        manifest
            .allows(&secret, Verb::Get, Some("anywhere"), None)
            .unwrap();
        manifest.allows(&secret, Verb::Get, None, None).unwrap();
    }

    #[test]
    fn allows_needs_one_grant_covering_kind_verb_namespace_and_subresource() {
        let manifest = parse(FULL).unwrap();
        let deployment = deployment();
        manifest
            .allows(&deployment, Verb::Delete, Some("default"), None)
            .unwrap();
        manifest
            .allows(&deployment, Verb::Patch, Some("default"), Some("status"))
            .unwrap();
        let denied = |kind: &KindRef, verb, namespace, subresource| {
            manifest
                .allows(kind, verb, namespace, subresource)
                .unwrap_err()
        };
        let error = denied(
            &KindRef::new("v1", "Secret"),
            Verb::Get,
            Some("default"),
            None,
        );
        assert_eq!(error.missing, Missing::Kind);
        assert_eq!(
            error.to_string(),
            "plugin `website` has no grant to `get` v1 Secret in namespace `default`; add a \
             grant for it under `grants:` in its manifest"
        );
        let error = denied(&deployment, Verb::Delete, Some("prod"), None);
        assert_eq!(error.missing, Missing::Namespace);
        assert!(
            error.to_string().starts_with(
                "plugin `website` has no grant to `delete` apps/v1 Deployment in namespace `prod`; \
                 add `prod` to the `namespaces` of its grant for apps/v1 Deployment"
            ),
            "{error}"
        );
        let error = denied(&deployment, Verb::Get, None, None);
        assert_eq!(error.missing, Missing::Namespace);
        assert!(
            error
                .to_string()
                .contains("cluster-wide; remove `namespaces`"),
            "{error}"
        );
        let error = denied(&deployment, Verb::Patch, Some("default"), Some("scale"));
        assert_eq!(error.missing, Missing::Subresource);
        assert!(
            error.to_string().contains(
                "to `patch` the `scale` subresource of apps/v1 Deployment in namespace \
                 `default`; add `scale` to the `subresources`"
            ),
            "{error}"
        );
        let read_only = parse(&format!(
            "{MINIMAL}grants: [{{apiVersion: apps/v1, kind: Deployment, verbs: [get]}}]\n"
        ))
        .unwrap();
        let error = read_only
            .allows(&deployment, Verb::Patch, Some("x"), None)
            .unwrap_err();
        assert_eq!(error.missing, Missing::Verb);
        assert!(
            error.to_string().contains("add `patch` to the `verbs`"),
            "{error}"
        );
    }

    #[test]
    fn any_of_several_grants_for_a_kind_may_allow_a_call() {
        let manifest = parse(&format!(
            "{MINIMAL}grants:\n  - {{apiVersion: v1, kind: Secret, verbs: [get]}}\n  - \
             {{apiVersion: v1, kind: Secret, verbs: [delete], namespaces: [tmp]}}\n"
        ))
        .unwrap();
        let secret = KindRef::new("v1", "Secret");
        manifest
            .allows(&secret, Verb::Get, Some("prod"), None)
            .unwrap();
        manifest
            .allows(&secret, Verb::Delete, Some("tmp"), None)
            .unwrap();
        let error = manifest
            .allows(&secret, Verb::Delete, Some("prod"), None)
            .unwrap_err();
        assert_eq!(error.missing, Missing::Namespace);
    }

    #[test]
    fn cache_may_repeat_the_for_kind_to_read_all_of_its_objects() {
        let text = format!(
            "{MINIMAL}labelSelector: replicate=true\ncache: [{{apiVersion: v1, kind: ConfigMap}}]\n"
        );
        let manifest = Manifest::parse(&text, Path::new("/plugins")).unwrap();
        assert_eq!(manifest.cache, vec![manifest.for_kind.clone()]);
    }

    #[test]
    fn reads_covers_the_for_owns_and_cache_kinds_only() {
        let manifest = parse(FULL).unwrap();
        assert!(manifest.reads(&KindRef::new("example.com/v1", "Website")));
        assert!(manifest.reads(&deployment()));
        assert!(manifest.reads(&KindRef::new("v1", "Namespace")));
        assert!(!manifest.reads(&KindRef::new("v1", "Secret")));
        assert!(!manifest.reads(&KindRef::new("apps/v1beta1", "Deployment")));
    }

    #[test]
    fn verbs_display_as_lowercase_kubernetes_verbs() {
        let shown: Vec<String> = Verb::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["get", "create", "update", "patch", "delete"]);
    }
}
