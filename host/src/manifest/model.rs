//! The validated manifest: what a plugin reconciles, its limits, and the access checks its
//! grants answer on every guest API call.

use std::path::PathBuf;
use std::time::Duration;

use label_selector::LabelSelector;

use super::grant::{Denied, Grant, Missing, Verb};
use super::identity::ServiceAccountRef;
use super::values::MI;
use crate::runtime::KindRef;

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
    /// The ServiceAccount the plugin acts as (impersonated on every API request it causes);
    /// `None`: the host's default, if it has one, else the host's own identity.
    pub service_account: Option<ServiceAccountRef>,
    /// Only `for` objects matching this selector.
    pub label_selector: Option<LabelSelector>,
    /// Skip updates that leave `metadata.generation` unchanged.
    pub generation_changed: bool,
    /// Sharded mode: how the keys are placed on the replicas.
    pub placement: crate::shard::Placement,
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
    /// A module run after the primary on the same key and object, its writes compared.
    pub shadow: Option<Shadow>,
    /// A module that reconciles the keys whose object matches a selector.
    pub canary: Option<Canary>,
}

/// `shadow:`: after each sampled reconcile, the shadow module runs on the same key and object
/// snapshot; its writes are answered by server-side dry runs and compared with the primary's.
#[derive(Clone, Debug, PartialEq)]
pub struct Shadow {
    /// Absolute path of the shadow's component.
    pub module: PathBuf,
    /// The fraction of reconciles shadowed, in (0, 1].
    pub sample: f64,
    /// The shadow's per-call limits.
    pub limits: Limits,
    /// The shadow's environment, sorted by name.
    pub env: Vec<(String, String)>,
}

/// `canary:`: keys whose cached object matches `selector` are reconciled by `module`; the rest
/// (and keys whose object is gone) by the plugin's module.
#[derive(Clone, Debug, PartialEq)]
pub struct Canary {
    /// Which objects go to the canary.
    pub selector: LabelSelector,
    /// Absolute path of the canary's component.
    pub module: PathBuf,
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

impl Manifest {
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
