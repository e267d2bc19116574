//! Where a guest's `client` and `events` calls go once their grants are checked: the calls as
//! values, the backend trait, and a recorder for local runs (the API server backend is
//! [`kube_api`](crate::wasm::kube_api)).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::client::SharedBudget;
use crate::manifest::Manifest;
use crate::runtime::KindRef;
use crate::wasm::bindings::CallError;

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

/// Boxed future of a read's authorization: whether it is allowed, or why no answer could be
/// had.
pub type ReadFuture<'a> = Pin<Box<dyn Future<Output = Result<bool, CallError>> + Send + 'a>>;

/// Carries out validated API calls.
pub trait ApiBackend: Send + Sync + 'static {
    /// Performs `call`.
    fn call(&self, call: ApiCall) -> ApiFuture<'_>;

    /// Sends the write `call` as a server-side dry run (`dryRun=All`): the API server answers
    /// as it would, and stores nothing. Backends that cannot dry-run answer `unavailable`.
    fn dry_run(&self, call: ApiCall) -> ApiFuture<'_> {
        let _ = call;
        Box::pin(std::future::ready(Err(CallError::Unavailable(
            "this backend cannot dry-run writes".to_owned(),
        ))))
    }

    /// Whether the plugin's identity may `verb` (`get` or `list`) objects of `kind` in
    /// `namespace` (`None`: every namespace, or a cluster-scoped kind), the object `name` for a
    /// `get`: asked before its cached reads are answered. Allowed by default: a backend acting as the host leaves reads to the
    /// manifest (`for`, `owns`, `cache`).
    fn may_read<'a>(
        &'a self,
        kind: &'a KindRef,
        verb: &'static str,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> ReadFuture<'a> {
        let _ = (kind, verb, namespace, name);
        Box::pin(std::future::ready(Ok(true)))
    }

    /// Told of a call the plugin's grants refused (it was not performed); `message` is what the
    /// guest got. Nothing by default.
    fn refused(&self, call: &ApiCall, message: &str) {
        let _ = (call, message);
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
            let target = target_of(&value).map_err(|e| match e {
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

impl Recorder {
    fn answer(&self, call: &ApiCall) -> Option<String> {
        match call {
            ApiCall::Apply { object, .. }
            | ApiCall::Create { object, .. }
            | ApiCall::Replace { object, .. } => Some(object.to_string()),
            ApiCall::Patch { target, .. } => {
                Some(self.fixture(target).unwrap_or_else(|| "{}".to_owned()))
            }
            ApiCall::Delete { .. } => None,
            ApiCall::Get { target } => self.fixture(target),
        }
    }
}

impl ApiBackend for Recorder {
    fn call(&self, call: ApiCall) -> ApiFuture<'_> {
        let answer = self.answer(&call);
        self.calls.lock().push(call);
        Box::pin(std::future::ready(Ok(answer)))
    }

    /// Answers as [`call`](Self::call) does, without recording the call.
    fn dry_run(&self, call: ApiCall) -> ApiFuture<'_> {
        Box::pin(std::future::ready(Ok(self.answer(&call))))
    }

    fn refused(&self, call: &ApiCall, message: &str) {
        self.refused.lock().push((call.clone(), message.to_owned()));
    }
}

/// Shared handle to a backend.
pub type SharedApi = Arc<dyn ApiBackend>;

/// Gives each plugin the backend its calls go to (the API server through a client of the
/// plugin's own, or one shared backend such as a [`Recorder`]).
pub trait ApiProvider: Send + Sync + 'static {
    /// The backend for the plugin of `manifest`, whose requests also wait for tokens of
    /// `tenant` (its tenant's budget) when given.
    fn for_plugin(&self, manifest: &Manifest, tenant: Option<SharedBudget>) -> SharedApi;
}

/// One backend shared by every plugin.
impl ApiProvider for SharedApi {
    fn for_plugin(&self, _manifest: &Manifest, _tenant: Option<SharedBudget>) -> SharedApi {
        Arc::clone(self)
    }
}

/// A backend that answers every call `unavailable` with one message: for a plugin whose
/// client could not be built.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl ApiBackend for Unavailable {
    fn call(&self, _call: ApiCall) -> ApiFuture<'_> {
        Box::pin(std::future::ready(Err(CallError::Unavailable(
            self.0.clone(),
        ))))
    }
}

/// The kind, namespace and name written in an object's JSON.
///
/// # Errors
/// `invalid` when a field is missing or not a string.
pub(crate) fn target_of(object: &serde_json::Value) -> Result<Target, CallError> {
    let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
    let api_version = text("/apiVersion")
        .ok_or_else(|| CallError::Invalid("the object has no `apiVersion`".to_owned()))?;
    let kind =
        text("/kind").ok_or_else(|| CallError::Invalid("the object has no `kind`".to_owned()))?;
    let name = text("/metadata/name").unwrap_or_default();
    if name.is_empty() && text("/metadata/generateName").is_none() {
        return Err(CallError::Invalid(format!(
            "the {api_version}/{kind} has no `metadata.name`"
        )));
    }
    Ok(Target {
        kind: KindRef::new(api_version, kind),
        namespace: text("/metadata/namespace").map(str::to_owned),
        name: name.to_owned(),
    })
}
