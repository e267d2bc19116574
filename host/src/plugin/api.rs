//! Where a guest's `client` and `events` calls go once their grants are checked: the API server
//! (raw JSON in and out, no re-encoding), or a recorder for local runs.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, Resource};
use kube::discovery::{self, Scope};
use parking_lot::Mutex;

use super::bindings::{ApiStatus, CallError};
use crate::runtime::KindRef;

/// The object a call is about.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Target {
    /// Its kind.
    pub kind: KindRef,
    /// Its namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// A patch body and its format.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "patch")]
pub enum PatchDoc {
    /// RFC 7386 merge patch.
    Merge(serde_json::Value),
    /// RFC 6902 JSON patch.
    Json(serde_json::Value),
    /// Strategic merge patch.
    Strategic(serde_json::Value),
}

/// One API call a guest asked for, after validation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "verb")]
pub enum ApiCall {
    /// Server-side apply.
    Apply {
        /// The object applied.
        target: Target,
        /// The applied configuration.
        object: serde_json::Value,
        /// Take over conflicting fields.
        force: bool,
        /// `status`, or `None` for the object itself.
        subresource: Option<String>,
        /// The field manager (the plugin's name).
        field_manager: String,
    },
    /// A patch.
    Patch {
        /// The object patched.
        target: Target,
        /// The patch.
        body: PatchDoc,
        /// `status`, or `None` for the object itself.
        subresource: Option<String>,
        /// The field manager (the plugin's name).
        field_manager: String,
    },
    /// A create.
    Create {
        /// The object created (namespace and name as given; name may be empty with
        /// `generateName`).
        target: Target,
        /// The object.
        object: serde_json::Value,
        /// The field manager (the plugin's name).
        field_manager: String,
    },
    /// A replace (update).
    Replace {
        /// The object replaced.
        target: Target,
        /// The new object, carrying the resourceVersion it was read at.
        object: serde_json::Value,
        /// The field manager (the plugin's name).
        field_manager: String,
    },
    /// A delete (background propagation).
    Delete {
        /// The object deleted.
        target: Target,
    },
    /// A live read.
    Get {
        /// The object read.
        target: Target,
    },
}

impl ApiCall {
    /// The object the call is about.
    #[must_use]
    pub fn target(&self) -> &Target {
        match self {
            Self::Apply { target, .. }
            | Self::Patch { target, .. }
            | Self::Create { target, .. }
            | Self::Replace { target, .. }
            | Self::Delete { target }
            | Self::Get { target } => target,
        }
    }
}

/// What a call returns: the object as stored (JSON text), `None` for delete and for a get of an
/// object that does not exist.
pub type ApiResult = Result<Option<String>, CallError>;

/// Boxed future of an [`ApiResult`].
pub type ApiFuture<'a> = Pin<Box<dyn Future<Output = ApiResult> + Send + 'a>>;

/// Carries out validated API calls.
pub trait ApiBackend: Send + Sync + 'static {
    /// Performs `call`.
    fn call(&self, call: ApiCall) -> ApiFuture<'_>;

    /// Told of a call the plugin's grants refused (it was not performed); `message` is what the
    /// guest got. Nothing by default.
    fn refused(&self, call: &ApiCall, message: &str) {
        let _ = (call, message);
    }
}

/// The API server, through the host's client (rate limits and retries included).
pub struct KubeApi {
    client: kube::Client,
    kinds: Mutex<HashMap<KindRef, (ApiResource, bool)>>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi").finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Calls go through `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            kinds: Mutex::default(),
        }
    }

    /// The resource of `kind` and whether it is namespaced (discovery, cached).
    async fn resolve(&self, kind: &KindRef) -> Result<(ApiResource, bool), CallError> {
        if let Some(found) = self.kinds.lock().get(kind) {
            return Ok(found.clone());
        }
        let (group, version) = match kind.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", kind.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
        let (resource, capabilities) =
            discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|error| match error {
                    kube::Error::Api(status) if status.code == 404 => CallError::Invalid(format!(
                        "kind {}/{} is not served by the API server",
                        kind.api_version, kind.kind
                    )),
                    other => call_error(other),
                })?;
        let namespaced = matches!(capabilities.scope, Scope::Namespaced);
        self.kinds
            .lock()
            .insert(kind.clone(), (resource.clone(), namespaced));
        Ok((resource, namespaced))
    }

    async fn perform(&self, call: ApiCall) -> ApiResult {
        let target = call.target();
        let (resource, namespaced) = self.resolve(&target.kind).await?;
        let namespace = match (namespaced, target.namespace.as_deref()) {
            (true, None) => {
                return Err(CallError::Invalid(format!(
                    "{}/{} is namespaced: give a namespace",
                    target.kind.api_version, target.kind.kind
                )));
            }
            (false, Some(namespace)) => {
                return Err(CallError::Invalid(format!(
                    "{}/{} is cluster-scoped: give no namespace (got `{namespace}`)",
                    target.kind.api_version, target.kind.kind
                )));
            }
            (_, namespace) => namespace,
        };
        let url = DynamicObject::url_path(&resource, namespace);
        let request = kube::core::Request::new(url);
        let built = match &call {
            ApiCall::Apply {
                target,
                object,
                force,
                subresource,
                field_manager,
            } => {
                let mut params = PatchParams::apply(field_manager);
                params.force = *force;
                let patch = Patch::Apply(object);
                match subresource {
                    Some(sub) => request.patch_subresource(sub, &target.name, &params, &patch),
                    None => request.patch(&target.name, &params, &patch),
                }
            }
            ApiCall::Patch {
                target,
                body,
                subresource,
                field_manager,
            } => {
                let params = PatchParams {
                    field_manager: Some(field_manager.clone()),
                    ..PatchParams::default()
                };
                let patch = match body {
                    PatchDoc::Merge(value) => Patch::Merge(value.clone()),
                    PatchDoc::Strategic(value) => Patch::Strategic(value.clone()),
                    PatchDoc::Json(value) => match serde_json::from_value(value.clone()) {
                        Ok(patch) => Patch::Json::<serde_json::Value>(patch),
                        Err(error) => {
                            return Err(CallError::Invalid(format!(
                                "not a JSON patch (RFC 6902): {error}"
                            )));
                        }
                    },
                };
                match subresource {
                    Some(sub) => request.patch_subresource(sub, &target.name, &params, &patch),
                    None => request.patch(&target.name, &params, &patch),
                }
            }
            ApiCall::Create {
                object,
                field_manager,
                ..
            } => {
                let params = PostParams {
                    field_manager: Some(field_manager.clone()),
                    ..PostParams::default()
                };
                request.create(&params, serde_json::to_vec(object).unwrap_or_default())
            }
            ApiCall::Replace {
                target,
                object,
                field_manager,
            } => {
                let params = PostParams {
                    field_manager: Some(field_manager.clone()),
                    ..PostParams::default()
                };
                request.replace(
                    &target.name,
                    &params,
                    serde_json::to_vec(object).unwrap_or_default(),
                )
            }
            ApiCall::Delete { target } => request.delete(&target.name, &DeleteParams::background()),
            ApiCall::Get { target } => request.get(&target.name, &GetParams::default()),
        };
        let http_request = built.map_err(|error| CallError::Invalid(error.to_string()))?;
        match self.client.request_text(http_request).await {
            Ok(_) if matches!(call, ApiCall::Delete { .. }) => Ok(None),
            Ok(text) => Ok(Some(text)),
            Err(kube::Error::Api(status))
                if status.code == 404 && matches!(call, ApiCall::Get { .. }) =>
            {
                Ok(None)
            }
            Err(error) => Err(call_error(error)),
        }
    }
}

impl ApiBackend for KubeApi {
    fn call(&self, call: ApiCall) -> ApiFuture<'_> {
        Box::pin(self.perform(call))
    }
}

/// A kube error as the guest sees it: the API server's status, or "unavailable".
fn call_error(error: kube::Error) -> CallError {
    match error {
        kube::Error::Api(status) => CallError::Api(ApiStatus {
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }),
        other => {
            let mut message = other.to_string();
            let mut source = std::error::Error::source(&other);
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            CallError::Unavailable(message)
        }
    }
}

/// Records every call (and every call the grants refused) and answers from fixtures instead of
/// an API server: for running a reconcile locally. Apply, patch, create and replace answer with the object sent (patches:
/// the target's fixture, if any, or `{}`); get answers with the fixture; delete succeeds.
#[derive(Debug, Default)]
pub struct Recorder {
    calls: Mutex<Vec<ApiCall>>,
    refused: Mutex<Vec<(ApiCall, String)>>,
    objects: HashMap<(KindRef, Option<String>, String), String>,
}

impl Recorder {
    /// A recorder whose live reads find `objects` (JSON texts).
    ///
    /// # Errors
    /// When an object is not JSON with `apiVersion`, `kind` and `metadata.name`.
    pub fn with_objects(objects: &[String]) -> Result<Self, String> {
        let mut recorder = Self::default();
        for text in objects {
            let value: serde_json::Value =
                serde_json::from_str(text).map_err(|error| error.to_string())?;
            let target = super::imports::target_of(&value).map_err(|e| match e {
                CallError::Invalid(message) => message,
                other => format!("{other:?}"),
            })?;
            recorder
                .objects
                .insert((target.kind, target.namespace, target.name), text.clone());
        }
        Ok(recorder)
    }

    /// The calls made so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<ApiCall> {
        self.calls.lock().clone()
    }

    /// The calls the grants refused so far, in order, with the message the guest got.
    #[must_use]
    pub fn refused_calls(&self) -> Vec<(ApiCall, String)> {
        self.refused.lock().clone()
    }

    fn fixture(&self, target: &Target) -> Option<String> {
        self.objects
            .get(&(
                target.kind.clone(),
                target.namespace.clone(),
                target.name.clone(),
            ))
            .cloned()
    }
}

impl ApiBackend for Recorder {
    fn call(&self, call: ApiCall) -> ApiFuture<'_> {
        let answer = match &call {
            ApiCall::Apply { object, .. }
            | ApiCall::Create { object, .. }
            | ApiCall::Replace { object, .. } => Some(object.to_string()),
            ApiCall::Patch { target, .. } => {
                Some(self.fixture(target).unwrap_or_else(|| "{}".to_owned()))
            }
            ApiCall::Delete { .. } => None,
            ApiCall::Get { target } => self.fixture(target),
        };
        self.calls.lock().push(call);
        Box::pin(std::future::ready(Ok(answer)))
    }

    fn refused(&self, call: &ApiCall, message: &str) {
        self.refused.lock().push((call.clone(), message.to_owned()));
    }
}

/// Shared handle to a backend.
pub type SharedApi = Arc<dyn ApiBackend>;
