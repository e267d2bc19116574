//! The state a running server shares, what a write request carries, the checks every write
//! makes of an object's type, and `GET` of one object; creates, updates, patches and deletes
//! build on it.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::error::ApiError;
use crate::faults::Faults;
use crate::resources::{Registry, Resource};
use crate::store::Store;

/// The table of namespaces.
pub const NAMESPACES: &str = "namespaces";
/// The table of CRDs.
pub const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main endpoint: everything but `status` when a status subresource exists.
    Main,
    /// The `/status` subresource: only `status`.
    Status,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager`, or a name derived from the user agent.
    pub field_manager: String,
    /// The object's managedFields were already computed by server-side apply.
    pub applied: bool,
}

/// A patch request.
#[derive(Debug, Clone)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`, with `force`.
    Apply {
        /// `force=true`.
        force: bool,
    },
}

/// A patch: its type (from `Content-Type`) and its parsed body.
#[derive(Debug, Clone)]
pub struct PatchRequest {
    /// The patch type.
    pub kind: PatchKind,
    /// The patch document.
    pub body: Value,
}

/// `DeleteOptions` that change behaviour.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `Orphan`, `Background` (default) or `Foreground`.
    pub propagation: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `orphanDependents: false` was sent: a deletion left pending answers 202, as upstream.
    pub cascade_requested: bool,
}

/// Work a deletion hands to the garbage collector.
#[derive(Debug, Clone)]
pub(crate) enum GcTask {
    /// A namespace started terminating: delete its contents, then it.
    Namespace(String),
    /// A foreground deletion: delete the owner's dependents, then drop its
    /// `foregroundDeletion` finalizer.
    Foreground {
        /// Table of the owner.
        table: Arc<str>,
        /// The owner's key.
        key: crate::store::ObjKey,
        /// The owner's uid.
        uid: String,
    },
}

/// The shared state of a running server.
pub struct Cluster {
    /// Object storage.
    pub store: Arc<Store>,
    /// Served resources.
    pub registry: Arc<Registry>,
    /// Fault injection.
    pub faults: Faults,
    /// Configuration.
    pub config: Config,
    /// Work for the garbage collector that a deletion starts.
    pub(crate) gc: tokio::sync::mpsc::UnboundedSender<GcTask>,
}

pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

pub(crate) fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

impl Cluster {
    /// Fills and checks `apiVersion` and `kind` against the resource.
    pub(crate) fn check_type(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} request must be a JSON object",
                res.kind
            )));
        }
        let api_version = res.api_version();
        match obj.get("kind").and_then(Value::as_str) {
            None | Some("") => obj["kind"] = json!(res.kind),
            Some(k) if k != res.kind => {
                return Err(ApiError::BadRequest(format!(
                    "the object kind `{k}` does not match the resource `{}`, which serves `{}`",
                    res.group_resource(),
                    res.kind
                )));
            }
            Some(_) => {}
        }
        match obj.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => obj["apiVersion"] = json!(api_version),
            Some(v) if v != api_version => {
                return Err(ApiError::BadRequest(format!(
                    "the object apiVersion `{v}` does not match the request path's `{api_version}`"
                )));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// `GET` of one object.
    pub fn get(&self, res: &Resource, ns: &str, name: &str) -> Result<Bytes, ApiError> {
        let ns = if res.namespaced { ns } else { "" };
        self.store
            .get(&res.table(), ns, name)
            .map(|s| s.bytes)
            .ok_or_else(|| ApiError::not_found(&res.group_resource(), name))
    }
}
