//! The manifest as written (YAML through serde, or a `ReconcilerPlugin` object's spec) and its
//! validation into a [`Manifest`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::{CustomResource, KubeSchema};
use label_selector::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::grant::{Grant, VERBS, Verb};
use super::model::{
    ApiRateLimit, Canary, InstanceReuse, Limits, Manifest, RateLimiterSettings, Shadow,
};
use super::status::ReconcilerPluginStatus;
use super::values::{
    GI, MI, Problem, describe, duration_in, each_once, integer_in, kind_ref, label_problem,
    memory_in, problem,
};

/// The manifest as written, in a file or as the spec of a `ReconcilerPlugin` object (one type:
/// the file format and the CRD's schema cannot drift apart); [`RawManifest::validate`] turns it
/// into a [`Manifest`]. Scalars such as durations and sizes stay text (serde_yaml_ng reads
/// `1000` into a `String` too) so that validation errors quote them as written. `name` and
/// `module` are the file's: an object's name is its `metadata.name`, its module comes from `oci`
/// or `configMap`.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, Default)]
#[kube(
    group = "reconcile-host.dev",
    version = "v1alpha1",
    kind = "ReconcilerPlugin",
    plural = "reconcilerplugins",
    shortname = "rplugin",
    category = "reconcile-host",
    status = "ReconcilerPluginStatus",
    doc = "A reconciler plugin: a WebAssembly component from a registry or a ConfigMap, what it \
           reconciles, what it may read and change, and its limits. The reconcile host loads it, \
           swaps it on change and reports its state in status.",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Digest", type_ = "string", json_path = ".status.resolvedDigest"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("has(self.spec.oci) != has(self.spec.configMap)").message(
        "set exactly one module source: `oci` (a registry reference) or `configMap` \
         ({namespace, name, key})"
    ),
)]
#[schemars(
    description = "What the plugin reconciles, what it may read and change, its limits, and where \
                   its component comes from: `oci` (a registry) or `configMap`."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(
    expecting = "a plugin manifest: a mapping with `name`, `module`, `for` and optional fields"
)]
pub struct RawManifest {
    /// A file's plugin name; an object's is its `metadata.name`.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// A file's component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    /// The component in an OCI registry: `<registry>/<repository>@sha256:<digest>`, or
    /// `…:<tag>` (resolved once to a digest, pinned in status).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    oci: Option<String>,
    /// The component in a ConfigMap's `binaryData` (at most 1 MiB: larger components go to a
    /// registry, see `oci`).
    #[serde(skip_serializing_if = "Option::is_none")]
    config_map: Option<RawConfigMapRef>,
    /// The kind reconciled, e.g. `{apiVersion: example.com/v1, kind: Website}`.
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    for_kind: Option<RawKind>,
    /// Kinds whose changes enqueue their controlling owner of the `for` kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    owns: Option<Vec<RawKind>>,
    /// Extra kinds readable through the `cache` import.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<Vec<RawKind>>,
    /// The one namespace watched (every kind above); absent: all namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    namespace: Option<String>,
    /// Only `for` objects matching this label selector, e.g. `app=web,tier!=cache`.
    #[serde(skip_serializing_if = "Option::is_none")]
    label_selector: Option<String>,
    /// Skip updates that leave `metadata.generation` unchanged (kinds that have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_changed: Option<bool>,
    /// Sharded mode: `keys` spreads the keys over the replicas (default); `whole` puts the
    /// whole plugin on one replica, for reconcilers that need to see everything at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<crate::shard::Placement>,
    /// Reconcile every object again this often (at least `1s`); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    resync: Option<String>,
    /// Concurrent reconciles, 1 to 64 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    concurrency: Option<i64>,
    /// The retry backoff and overall rate of the plugin's workqueue (client-go's defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limiter: Option<RawRateLimiter>,
    /// Per-call limits: deadline, memory, shortest requeue-after, guest log lines per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<RawLimits>,
    /// The plugin's own API request budget; default and ceiling: the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    api_rate_limit: Option<RawApiRateLimit>,
    /// Reuse an instance for many calls; absent: a fresh instance per call.
    #[serde(skip_serializing_if = "Option::is_none")]
    instance_reuse: Option<RawInstanceReuse>,
    /// Environment variables the guest sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<Env>,
    /// What the `client` import may do; default: nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    grants: Option<Vec<RawGrant>>,
    /// Another module run after sampled reconciles on the same key and object, its writes
    /// answered by server-side dry runs and compared with the plugin's (never applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    shadow: Option<RawShadow>,
    /// Keys whose object matches `selector` are reconciled by the canary's module.
    #[serde(skip_serializing_if = "Option::is_none")]
    canary: Option<RawCanary>,
}

/// `shadow:`.
#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(
    expecting = "a mapping of `module` (an object: `oci`) and optional `sample`, `limits` \
                     and `env`"
)]
struct RawShadow {
    /// A file's shadow component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    /// The shadow's component in an OCI registry: `<registry>/<repository>@sha256:<digest>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    oci: Option<String>,
    /// The fraction of reconciles shadowed, above 0 and at most 1 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    sample: Option<f64>,
    /// The shadow's own per-call limits (default: the plugin's `limits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<RawLimits>,
    /// The shadow's environment (default: the plugin's `env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<Env>,
}

/// `canary:`.
#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(expecting = "a mapping of `selector` and `module` (an object: `oci`)")]
struct RawCanary {
    /// Keys whose object matches this label selector go to the canary, e.g. `track=canary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<String>,
    /// A file's canary component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    /// The canary's component in an OCI registry: `<registry>/<repository>@sha256:<digest>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    oci: Option<String>,
}

/// Go-style durations as the manifest's parser reads them: `500ms`, `15s`, `2m`, `1h`, `1m30s`.
const DURATION: &str = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$";

/// In a CRD's schema, `apiVersion` and `kind` are required and have no default. (The file format
/// reads a missing one as empty so that validation names the field and the fix.)
fn kind_required(schema: &mut schemars::Schema) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for field in ["apiVersion", "kind"] {
            if let Some(Value::Object(property)) = properties.get_mut(field) {
                property.remove("default");
            }
        }
    }
    schema.insert(
        "required".to_owned(),
        serde_json::json!(["apiVersion", "kind"]),
    );
}

/// A memory size as the manifest reads it: a quantity (`64Mi`) or a number of bytes.
fn quantity(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "nullable": true,
    })
}

/// A memory size written as text or, in an object's JSON, as a number of bytes: kept as text.
fn int_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(
        untagged,
        expecting = "a memory size such as 64Mi, or a number of bytes"
    )]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    Ok(Option::<Size>::deserialize(d)?.map(|size| match size {
        Size::Bytes(bytes) => bytes.to_string(),
        Size::Text(text) => text,
    }))
}

/// A component in a ConfigMap's `binaryData`.
#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(expecting = "a mapping of `namespace`, `name` and `key`")]
pub struct RawConfigMapRef {
    /// The ConfigMap's namespace.
    #[schemars(length(min = 1, max = 63))]
    namespace: String,
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    name: String,
    /// The `binaryData` key holding the component.
    #[schemars(length(min = 1, max = 253))]
    key: String,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(transform = kind_required)]
#[serde(expecting = "a kind: a mapping like `{apiVersion: apps/v1, kind: Deployment}`")]
struct RawKind {
    /// The kind's group and version, e.g. `apps/v1` or `v1`.
    #[schemars(length(min = 1))]
    api_version: String,
    /// The kind, e.g. `Deployment`.
    #[schemars(length(min = 1))]
    kind: String,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `baseDelay`, `maxDelay`, `qps` and `burst`")]
struct RawRateLimiter {
    /// The first retry delay, doubled per failure (default `5ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    base_delay: Option<String>,
    /// The longest retry delay (default `1000s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    max_delay: Option<String>,
    /// Reconciles per second over all keys (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    qps: Option<f64>,
    /// Reconciles at once above the rate (default 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    burst: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `deadline`, `memory`, `minRequeueAfter` and `logLinesPerSecond`")]
struct RawLimits {
    /// Wall-clock time per call, `1ms` to `10m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    deadline: Option<String>,
    /// Linear memory per instance, `1Mi` to `4Gi` (a quantity such as `64Mi`, or bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default, deserialize_with = "int_or_string")]
    #[schemars(schema_with = "quantity")]
    memory: Option<String>,
    /// Shorter requeue-after answers are raised to it, `10ms` to `1h` (default `100ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    min_requeue_after: Option<String>,
    /// Guest log lines a second, 1 to 100000 (default 100); more are dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    log_lines_per_second: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `qps` and `burst`")]
struct RawApiRateLimit {
    /// API requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    qps: Option<f64>,
    /// Requests at once above the rate (default: qps, rounded up).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    burst: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `maxCalls` and `maxMemory`")]
struct RawInstanceReuse {
    /// Replace the instance after this many calls (default 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    max_calls: Option<i64>,
    /// Replace the instance when its memory grows past this (default: `limits.memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default, deserialize_with = "int_or_string")]
    #[schemars(schema_with = "quantity")]
    max_memory: Option<String>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(transform = kind_required)]
#[serde(
    expecting = "a grant: a mapping of `apiVersion`, `kind`, `verbs` and optional `namespaces` and `subresources`"
)]
struct RawGrant {
    /// The kind's group and version, e.g. `apps/v1`.
    #[schemars(length(min = 1))]
    api_version: String,
    /// The kind, e.g. `Deployment`.
    #[schemars(length(min = 1))]
    kind: String,
    /// Some of get, create, update, patch, delete (server-side apply needs `patch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    verbs: Option<Vec<String>>,
    /// The namespaces it applies to; absent or `["*"]`: every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    namespaces: Option<Vec<String>>,
    /// Subresources it also allows writing, e.g. `status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    subresources: Option<Vec<String>>,
}

/// `env:` in file order; unlike a map type, refuses a name written twice.
#[derive(Clone, Debug)]
struct Env(Vec<(String, String)>);

impl Serialize for Env {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl JsonSchema for Env {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Env".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <std::collections::BTreeMap<String, String>>::json_schema(generator)
    }
}

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

/// Where an object's module comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// A registry reference.
    Oci(String),
    /// A ConfigMap's `binaryData` key.
    ConfigMap {
        /// The ConfigMap's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key holding the component.
        key: String,
    },
}

impl RawManifest {
    /// An object's spec in the file form: named `name`, its module `module`, and the source it
    /// declared (taken out).
    pub(super) fn into_file_form(
        mut self,
        name: String,
        module: String,
    ) -> Result<(Self, ModuleSource), Problem> {
        let source = match (self.oci.take(), self.config_map.take()) {
            (Some(reference), None) => ModuleSource::Oci(reference),
            (None, Some(r)) => ModuleSource::ConfigMap {
                namespace: r.namespace,
                name: r.name,
                key: r.key,
            },
            _ => {
                return Err(problem(
                    "spec",
                    "set exactly one module source: `oci` (a registry reference) or \
                     `configMap` ({namespace, name, key})",
                ));
            }
        };
        // A shadow's or canary's `oci` becomes the file form's `module` (never read here: the
        // object's file; the host's materializer writes the pulled module's path).
        let side = |field: &str, module: &mut Option<String>, oci: &mut Option<String>| {
            if module.is_some() {
                return Err(problem(
                    format!("spec.{field}.module"),
                    format!(
                        "is a manifest file's field; an object names the {field}'s component \
                         with `{field}.oci` (a registry reference)"
                    ),
                ));
            }
            if oci.take().is_none() {
                return Err(problem(
                    format!("spec.{field}.oci"),
                    format!(
                        "missing; add the {field}'s component as a registry reference, e.g. \
                         `oci: registry.example.com/website@sha256:…`"
                    ),
                ));
            }
            *module = Some(String::new());
            Ok(())
        };
        if let Some(shadow) = &mut self.shadow {
            side("shadow", &mut shadow.module, &mut shadow.oci)?;
        }
        if let Some(canary) = &mut self.canary {
            side("canary", &mut canary.module, &mut canary.oci)?;
        }
        if self.name.is_some() || self.module.is_some() {
            let field = if self.name.is_some() {
                "name"
            } else {
                "module"
            };
            return Err(problem(
                format!("spec.{field}"),
                "is a manifest file's field; an object is named by metadata.name and its module \
                 comes from `oci` or `configMap`",
            ));
        }
        for side in [
            self.shadow.as_mut().map(|s| &mut s.module),
            self.canary.as_mut().map(|c| &mut c.module),
        ]
        .into_iter()
        .flatten()
        {
            *side = Some(module.clone());
        }
        self.name = Some(name);
        self.module = Some(module);
        Ok((self, source))
    }

    pub(super) fn validate(self, base_dir: &Path) -> Result<Manifest, Problem> {
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
        if let Some(field) = [
            ("oci", self.oci.is_some()),
            ("configMap", self.config_map.is_some()),
        ]
        .into_iter()
        .find_map(|(field, set)| set.then_some(field))
        {
            return Err(problem(
                field,
                "is a module source of ReconcilerPlugin objects (`kubectl apply`); a manifest file \
                 names its component with `module: <path>`",
            ));
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
        let limits = validate_limits("limits", self.limits.unwrap_or_default(), Limits::default())?;
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
        let env = validate_env("env", self.env)?;
        let shadow = match self.shadow {
            Some(raw) => Some(validate_shadow(raw, base_dir, limits, &env)?),
            None => None,
        };
        let canary = match self.canary {
            Some(raw) => Some(validate_canary(raw, base_dir)?),
            None => None,
        };
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
            placement: self.placement.unwrap_or_default(),
            resync,
            concurrency,
            rate_limiter,
            limits,
            api_rate_limit,
            instance_reuse,
            env,
            grants,
            shadow,
            canary,
        })
    }
}

fn validate_limits(field: &str, raw: RawLimits, default: Limits) -> Result<Limits, Problem> {
    Ok(Limits {
        deadline: duration_in(
            &format!("{field}.deadline"),
            raw.deadline.as_deref(),
            default.deadline,
            (Duration::from_millis(1), Duration::from_secs(600)),
            "a deadline is between 1ms and 10m",
        )?,
        memory: memory_in(
            &format!("{field}.memory"),
            raw.memory.as_deref(),
            default.memory,
            (MI, 4 * GI),
            "a memory limit is between 1Mi and 4Gi",
        )?,
        min_requeue_after: duration_in(
            &format!("{field}.minRequeueAfter"),
            raw.min_requeue_after.as_deref(),
            default.min_requeue_after,
            (Duration::from_millis(10), Duration::from_secs(3600)),
            "the shortest requeue-after is between 10ms and 1h (default 100ms)",
        )?,
        log_lines_per_second: integer_in(
            &format!("{field}.logLinesPerSecond"),
            raw.log_lines_per_second,
            default.log_lines_per_second,
            100_000,
            "allow 1 to 100000 guest log lines a second (default 100)",
        )?,
    })
}

fn validate_env(field: &str, raw: Option<Env>) -> Result<Vec<(String, String)>, Problem> {
    let mut env = raw.map(|Env(vars)| vars).unwrap_or_default();
    env.sort();
    for (name, _) in &env {
        let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(problem(
                format!("{field}.{name}"),
                format!(
                    "`{name}` is not an environment variable name; use letters, digits and \
                     `_`, not starting with a digit, e.g. `LOG_FORMAT`"
                ),
            ));
        }
    }
    Ok(env)
}

/// A module path of `field`, absolute (resolved against the manifest's directory).
fn module_path(field: &str, module: Option<&str>, base_dir: &Path) -> Result<PathBuf, Problem> {
    match module {
        None | Some("") => Err(problem(
            field,
            "missing; add the component's path, e.g. `module: website-v2.wasm` (relative to \
             the manifest's directory)",
        )),
        Some(module) => std::path::absolute(base_dir.join(module))
            .map_err(|e| problem(field, format!("cannot make `{module}` absolute: {e}"))),
    }
}

/// A file's shadow or canary names its component with `module`, never `oci`.
fn file_source(field: &str, oci: Option<&String>) -> Result<(), Problem> {
    match oci {
        Some(_) => Err(problem(
            format!("{field}.oci"),
            format!(
                "is a module source of ReconcilerPlugin objects (`kubectl apply`); a manifest \
                 file names the {field}'s component with `{field}.module: <path>`"
            ),
        )),
        None => Ok(()),
    }
}

fn validate_shadow(
    raw: RawShadow,
    base_dir: &Path,
    limits: Limits,
    env: &[(String, String)],
) -> Result<Shadow, Problem> {
    file_source("shadow", raw.oci.as_ref())?;
    let module = module_path("shadow.module", raw.module.as_deref(), base_dir)?;
    let sample = raw.sample.unwrap_or(1.0);
    if !(sample > 0.0 && sample <= 1.0) {
        return Err(problem(
            "shadow.sample",
            format!(
                "{sample} is not a fraction of reconciles; give a number above 0 and at most 1 \
                 (default 1: every reconcile)"
            ),
        ));
    }
    let limits = match raw.limits {
        Some(raw) => validate_limits("shadow.limits", raw, limits)?,
        None => limits,
    };
    let env = match raw.env {
        Some(raw) => validate_env("shadow.env", Some(raw))?,
        None => env.to_vec(),
    };
    Ok(Shadow {
        module,
        sample,
        limits,
        env,
    })
}

fn validate_canary(raw: RawCanary, base_dir: &Path) -> Result<Canary, Problem> {
    file_source("canary", raw.oci.as_ref())?;
    let module = module_path("canary.module", raw.module.as_deref(), base_dir)?;
    let selector = match raw.selector.as_deref() {
        None | Some("") => {
            return Err(problem(
                "canary.selector",
                "missing; add the label selector of the objects the canary reconciles, e.g. \
                 `selector: \"canary=true\"`",
            ));
        }
        Some(text) => {
            LabelSelector::parse(text).map_err(|e| problem("canary.selector", e.to_string()))?
        }
    };
    Ok(Canary { selector, module })
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
