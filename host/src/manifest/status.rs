//! What the host reports in a `ReconcilerPlugin`'s status: the generation and modules it serves,
//! conditions in the Kubernetes convention, and the replicas serving it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of a `ReconcilerPlugin`, written by the host.
#[derive(Default, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilerPluginStatus {
    /// The `metadata.generation` this status describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The module's digest (`sha256:…`): the tag's resolution for an `oci` reference, the bytes'
    /// digest for a ConfigMap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_digest: Option<String>,
    /// The shadow's manifest digest: what its `oci` reference resolved to, pinned until the
    /// spec changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow_digest: Option<String>,
    /// The canary's manifest digest: what its `oci` reference resolved to, pinned until the
    /// spec changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_digest: Option<String>,
    /// `Fetched`, `Compiled`, `GrantsValid`, `Ready` and `Degraded`, with reasons and messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PluginCondition>,
    /// The host replicas serving this plugin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
}

/// One condition of a `ReconcilerPlugin` (the shape of `metav1.Condition`).
#[derive(Default, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginCondition {
    /// `Fetched`, `Compiled`, `GrantsValid`, `Ready` or `Degraded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase word saying why.
    pub reason: String,
    /// What happened, in words that name the fix.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// The `metadata.generation` the condition was set for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
