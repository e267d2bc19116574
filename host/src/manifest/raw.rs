//! The manifest as written (YAML through serde, or a `ReconcilerPlugin` object's spec) and its
//! conversion to the file form; [`validate`](super::validate) turns it into a
//! [`Manifest`](super::Manifest).

use std::fmt;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::status::ReconcilerPluginStatus;
use super::values::{Problem, problem};

/// The manifest as written, in a file or as the spec of a `ReconcilerPlugin` object (one type:
/// the file format and the CRD's schema cannot drift apart); [`RawManifest::validate`] turns it
/// into a [`Manifest`](super::Manifest). Scalars such as durations and sizes stay text (serde_yaml_ng reads
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
    printcolumn(name = "Degraded", type_ = "string", json_path = ".status.conditions[?(@.type==\"Degraded\")].status"),
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
    pub(super) name: Option<String>,
    /// A file's component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module: Option<String>,
    /// The component in an OCI registry: `<registry>/<repository>@sha256:<digest>`, or
    /// `…:<tag>` (resolved once to a digest, pinned in status).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub(super) oci: Option<String>,
    /// The component in a ConfigMap's `binaryData` (at most 1 MiB: larger components go to a
    /// registry, see `oci`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) config_map: Option<RawConfigMapRef>,
    /// The kind reconciled, e.g. `{apiVersion: example.com/v1, kind: Website}`.
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub(super) for_kind: Option<RawKind>,
    /// Kinds whose changes enqueue their controlling owner of the `for` kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) owns: Option<Vec<RawKind>>,
    /// Extra kinds readable through the `cache` import.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache: Option<Vec<RawKind>>,
    /// The ServiceAccount the plugin acts as: every API request it causes (client calls,
    /// Events, a shadow's dry runs) impersonates it, so the API server's RBAC decides as well
    /// as `grants`, and its cached reads are answered only where it may get and list. Absent:
    /// the host's `pluginIdentity.defaultServiceAccount`, or (when the host allows it) the
    /// host's own identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub(super) service_account_name: Option<String>,
    /// The namespace of `serviceAccountName`; default: `namespace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub(super) service_account_namespace: Option<String>,
    /// The one namespace watched (every kind above); absent: all namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub(super) namespace: Option<String>,
    /// Only `for` objects matching this label selector, e.g. `app=web,tier!=cache`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) label_selector: Option<String>,
    /// Skip updates that leave `metadata.generation` unchanged (kinds that have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) generation_changed: Option<bool>,
    /// Sharded mode: `keys` spreads the keys over the replicas (default); `whole` puts the
    /// whole plugin on one replica, for reconcilers that need to see everything at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) placement: Option<crate::shard::Placement>,
    /// Reconcile every object again this often (at least `1s`); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub(super) resync: Option<String>,
    /// Concurrent reconciles, 1 to 64 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub(super) concurrency: Option<i64>,
    /// The retry backoff and overall rate of the plugin's workqueue (client-go's defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rate_limiter: Option<RawRateLimiter>,
    /// Per-call limits: deadline, memory, shortest requeue-after, guest log lines per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) limits: Option<RawLimits>,
    /// The plugin's own API request budget; default and ceiling: the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_rate_limit: Option<RawApiRateLimit>,
    /// Reuse an instance for many calls; absent: a fresh instance per call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) instance_reuse: Option<RawInstanceReuse>,
    /// Environment variables the guest sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) env: Option<Env>,
    /// What the `client` import may do; default: nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) grants: Option<Vec<RawGrant>>,
    /// Another module run after sampled reconciles on the same key and object, its writes
    /// answered by server-side dry runs and compared with the plugin's (never applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) shadow: Option<RawShadow>,
    /// Keys whose object matches `selector` are reconciled by the canary's module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) canary: Option<RawCanary>,
}

/// `shadow:`.
#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(
    expecting = "a mapping of `module` (an object: `oci`) and optional `sample`, `limits` \
                     and `env`"
)]
pub(super) struct RawShadow {
    /// A file's shadow component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module: Option<String>,
    /// The shadow's component in an OCI registry: `<registry>/<repository>@sha256:<digest>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub(super) oci: Option<String>,
    /// The fraction of reconciles shadowed, above 0 and at most 1 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub(super) sample: Option<f64>,
    /// The shadow's own per-call limits (default: the plugin's `limits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) limits: Option<RawLimits>,
    /// The shadow's environment (default: the plugin's `env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) env: Option<Env>,
}

/// `canary:`.
#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(expecting = "a mapping of `selector` and `module` (an object: `oci`)")]
pub(super) struct RawCanary {
    /// Keys whose object matches this label selector go to the canary, e.g. `track=canary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) selector: Option<String>,
    /// A file's canary component path, relative to the manifest's directory.
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) module: Option<String>,
    /// The canary's component in an OCI registry: `<registry>/<repository>@sha256:<digest>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub(super) oci: Option<String>,
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
    pub(super) namespace: String,
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub(super) name: String,
    /// The `binaryData` key holding the component.
    #[schemars(length(min = 1, max = 253))]
    pub(super) key: String,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(transform = kind_required)]
#[serde(expecting = "a kind: a mapping like `{apiVersion: apps/v1, kind: Deployment}`")]
pub(super) struct RawKind {
    /// The kind's group and version, e.g. `apps/v1` or `v1`.
    #[schemars(length(min = 1))]
    pub(super) api_version: String,
    /// The kind, e.g. `Deployment`.
    #[schemars(length(min = 1))]
    pub(super) kind: String,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `baseDelay`, `maxDelay`, `qps` and `burst`")]
pub(super) struct RawRateLimiter {
    /// The first retry delay, doubled per failure (default `5ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub(super) base_delay: Option<String>,
    /// The longest retry delay (default `1000s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub(super) max_delay: Option<String>,
    /// Reconciles per second over all keys (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) qps: Option<f64>,
    /// Reconciles at once above the rate (default 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub(super) burst: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `deadline`, `memory`, `minRequeueAfter` and `logLinesPerSecond`")]
pub(super) struct RawLimits {
    /// Wall-clock time per call, `1ms` to `10m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub(super) deadline: Option<String>,
    /// Linear memory per instance, `1Mi` to `4Gi` (a quantity such as `64Mi`, or bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default, deserialize_with = "int_or_string")]
    #[schemars(schema_with = "quantity")]
    pub(super) memory: Option<String>,
    /// Shorter requeue-after answers are raised to it, `10ms` to `1h` (default `100ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub(super) min_requeue_after: Option<String>,
    /// Guest log lines a second, 1 to 100000 (default 100); more are dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub(super) log_lines_per_second: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `qps` and `burst`")]
pub(super) struct RawApiRateLimit {
    /// API requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) qps: Option<f64>,
    /// Requests at once above the rate (default: qps, rounded up).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub(super) burst: Option<i64>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[serde(expecting = "a mapping of `maxCalls` and `maxMemory`")]
pub(super) struct RawInstanceReuse {
    /// Replace the instance after this many calls (default 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub(super) max_calls: Option<i64>,
    /// Replace the instance when its memory grows past this (default: `limits.memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default, deserialize_with = "int_or_string")]
    #[schemars(schema_with = "quantity")]
    pub(super) max_memory: Option<String>,
}

#[derive(Default, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(transform = kind_required)]
#[serde(
    expecting = "a grant: a mapping of `apiVersion`, `kind`, `verbs` and optional `namespaces`, `subresources` \
                 and `resource`"
)]
pub(super) struct RawGrant {
    /// The kind's group and version, e.g. `apps/v1`.
    #[schemars(length(min = 1))]
    pub(super) api_version: String,
    /// The kind, e.g. `Deployment`.
    #[schemars(length(min = 1))]
    pub(super) kind: String,
    /// Some of get, create, update, patch, delete (server-side apply needs `patch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) verbs: Option<Vec<String>>,
    /// The namespaces it applies to; absent or `["*"]`: every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) namespaces: Option<Vec<String>>,
    /// Subresources it also allows writing, e.g. `status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) subresources: Option<Vec<String>>,
    /// The kind's resource (its plural, e.g. `gateways`), which the admission policy checks
    /// the requester holds; absent: Kubernetes' guess from the kind (lowercase, `s` → `ses`,
    /// `y` → `ies`, else `+s`). The host refuses calls when it is not the kind's resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) resource: Option<String>,
}

/// `env:` in file order; unlike a map type, refuses a name written twice.
#[derive(Clone, Debug)]
pub(super) struct Env(pub(super) Vec<(String, String)>);

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
}
