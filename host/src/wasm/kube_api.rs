//! The API server as a plugin's backend: raw JSON in and out (no re-encoding), each plugin
//! through a client of its own with its own token bucket ([`KubeApis`]), so one plugin's
//! requests never wait behind another's.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, Resource};
use kube::discovery::{self, Scope};
use parking_lot::Mutex;

use crate::authz::{Read, ReadAuthorizer};
use crate::client::{self, ClientLimits, SharedBudget};
use crate::election::Fence;
use crate::manifest::{ApiRateLimit, Grant, Manifest, ServiceAccountRef};
use crate::runtime::KindRef;
use crate::wasm::api::{
    ApiBackend, ApiCall, ApiFuture, ApiProvider, ApiResult, PatchDoc, ReadFuture, SharedApi,
    Unavailable,
};
use crate::wasm::bindings::{ApiStatus, CallError};

/// The requests per second, and at once, of the client that asks the API server whether
/// plugins' accounts may read (SubjectAccessReviews, cheap for the server; answers are kept).
const REVIEW_QPS: f64 = 50.0;
const REVIEW_BURST: u32 = 100;

/// Builds each plugin's [`KubeApi`] on a client of its own: the plugin's `apiRateLimit`, or the
/// host's default, capped at the host's ceiling.
pub struct KubeApis {
    config: kube::Config,
    default: ApiRateLimit,
    ceiling: ApiRateLimit,
    fence: Fence,
    /// Answers whether a plugin's ServiceAccount may read; built on first use.
    reads: std::sync::OnceLock<Option<Arc<ReadAuthorizer>>>,
}

impl std::fmt::Debug for KubeApis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApis")
            .field("default", &self.default)
            .field("ceiling", &self.ceiling)
            .finish_non_exhaustive()
    }
}

impl KubeApis {
    /// Plugin clients for the cluster of `config`, limited to `default` unless a manifest asks
    /// for another budget, and never above `ceiling` (raised to `default` where it is lower).
    #[must_use]
    pub fn new(config: kube::Config, default: ApiRateLimit, ceiling: ApiRateLimit) -> Self {
        let ceiling = ApiRateLimit {
            qps: ceiling.qps.max(default.qps),
            burst: ceiling.burst.max(default.burst),
        };
        Self {
            config,
            default,
            ceiling,
            fence: Fence::always_open(),
            reads: std::sync::OnceLock::new(),
        }
    }

    /// The authorizer of plugins' cached reads: reviews sent with the host's own identity.
    fn reads(&self) -> Option<Arc<ReadAuthorizer>> {
        let built = self.reads.get_or_init(|| {
            // A budget of its own, above the informers' default: a guest's list across many
            // namespaces asks one review per namespace before its deadline.
            let limits = ClientLimits::default().qps(REVIEW_QPS).burst(REVIEW_BURST);
            match client::client(self.config.clone(), &limits) {
                Ok(client) => Some(ReadAuthorizer::new(client)),
                Err(error) => {
                    tracing::error!(error = %crate::error_chain(&error),
                        "the host could not build the client that authorizes plugins' cached \
                         reads; every cached read of a plugin acting as a ServiceAccount is \
                         refused");
                    None
                }
            }
        });
        built.clone()
    }

    /// Sends plugins' writes only while `fence` is open (the runtime's: while this replica's
    /// lease is valid by its own clock).
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// The budget of a plugin asking for `wanted`: the default when it asks for none, the
    /// ceiling when it asks for more.
    #[must_use]
    pub fn budget(&self, plugin: &str, wanted: Option<ApiRateLimit>) -> ApiRateLimit {
        let wanted = wanted.unwrap_or(self.default);
        let budget = ApiRateLimit {
            qps: wanted.qps.min(self.ceiling.qps),
            burst: wanted.burst.min(self.ceiling.burst),
        };
        if budget != wanted {
            tracing::warn!(
                plugin,
                asked_qps = wanted.qps,
                asked_burst = wanted.burst,
                qps = budget.qps,
                burst = budget.burst,
                "the plugin's apiRateLimit is above the host's ceiling (pluginClient.maxQps, \
                 pluginClient.maxBurst); capped"
            );
        }
        budget
    }
}

impl ApiProvider for KubeApis {
    fn for_plugin(&self, manifest: &Manifest, tenant: Option<SharedBudget>) -> SharedApi {
        let budget = self.budget(&manifest.name, manifest.api_rate_limit);
        let limits = ClientLimits::default().qps(budget.qps).burst(budget.burst);
        let mut config = self.config.clone();
        if let Some(account) = &manifest.service_account {
            // The user only: the API server adds the account's groups itself.
            config.auth_info.impersonate = Some(account.user());
            config.auth_info.impersonate_groups = None;
        }
        match client::fenced_client(config, &limits, self.fence.clone(), tenant) {
            Ok(client) => Arc::new(match &manifest.service_account {
                Some(account) => KubeApi::new(client)
                    .with_grants(&manifest.grants)
                    .acting_as(account.clone(), self.reads()),
                None => KubeApi::new(client).with_grants(&manifest.grants),
            }),
            Err(error) => {
                let message = format!(
                    "the host could not build an API client for plugin `{}`: {}",
                    manifest.name,
                    crate::error_chain(&error)
                );
                tracing::error!("{message}");
                Arc::new(Unavailable(message))
            }
        }
    }
}

/// The API server, through the host's client (rate limits and retries included).
pub struct KubeApi {
    client: kube::Client,
    kinds: Mutex<HashMap<KindRef, (ApiResource, bool)>>,
    /// The ServiceAccount the client impersonates, and who answers whether it may read
    /// (`None` inside: nobody can, so every cached read is refused).
    account: Option<(ServiceAccountRef, Option<Arc<ReadAuthorizer>>)>,
    /// Each granted kind's resources as its grants name them (written or guessed): what the
    /// admission policy checked the plugin object's author holds.
    granted: HashMap<KindRef, Vec<String>>,
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
            account: None,
            granted: HashMap::new(),
        }
    }

    /// Refuses calls on a kind of `grants` whose resource, as the API server serves it, is not
    /// the one each grant of that kind names ([`Grant::resource`]): the admission policy
    /// checked the author of a plugin object holds that resource, so a call on any other would
    /// use rights nobody checked.
    #[must_use]
    pub fn with_grants(mut self, grants: &[Grant]) -> Self {
        for grant in grants {
            let resources = self.granted.entry(grant.kind.clone()).or_default();
            let resource = grant.resource().into_owned();
            if !resources.contains(&resource) {
                resources.push(resource);
            }
        }
        self
    }

    /// `Denied` when a grant of `kind` names another resource than `served`.
    fn check_granted_resource(&self, kind: &KindRef, served: &str) -> Result<(), CallError> {
        let named = self.granted.get(kind).into_iter().flatten();
        match named.into_iter().find(|resource| *resource != served) {
            None => Ok(()),
            Some(resource) => Err(CallError::Denied(format!(
                "a grant for {}/{} names resource `{resource}` (its `resource`, or guessed from \
                 the kind), but the API server serves the kind as `{served}`; write `resource: \
                 {served}` in that grant (the admission policy then checks `{served}`)",
                kind.api_version, kind.kind
            ))),
        }
    }

    /// Calls made as `account` (its client impersonates it): a 403 reaches the guest as
    /// `denied`, and its cached reads are asked of `reads`.
    #[must_use]
    pub fn acting_as(
        mut self,
        account: ServiceAccountRef,
        reads: Option<Arc<ReadAuthorizer>>,
    ) -> Self {
        self.account = Some((account, reads));
        self
    }

    async fn authorize_read(
        &self,
        kind: &KindRef,
        verb: &'static str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<bool, CallError> {
        let Some((account, reads)) = &self.account else {
            return Ok(true);
        };
        let Some(reads) = reads else {
            return Err(CallError::Denied(format!(
                "cannot tell whether ServiceAccount {account} may {verb} {}/{}: the host has no \
                 client to ask the API server (see the host's log)",
                kind.api_version, kind.kind
            )));
        };
        let (resource, namespaced) = self.resolve(kind).await?;
        let read = Read {
            verb,
            group: &resource.group,
            resource: &resource.plural,
            namespace: if namespaced { namespace } else { None },
            name,
        };
        reads.allowed(account, read).await.map_err(|why| {
            CallError::Denied(format!(
                "cannot tell whether ServiceAccount {account} may {verb} {}: {why}",
                resource.plural
            ))
        })
    }

    /// The resource of `kind` and whether it is namespaced (discovery, cached).
    async fn resolve(&self, kind: &KindRef) -> Result<(ApiResource, bool), CallError> {
        if let Some(found) = self.kinds.lock().get(kind) {
            return Ok(found.clone());
        }
        // The kind's group and version become a discovery URL.
        crate::wasm::reference::check_kind(kind)?;
        let (group, version) = match kind.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", kind.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
        let not_served = || {
            CallError::Invalid(format!(
                "kind {}/{} is not served by the API server; check the spelling, or install its \
                 CustomResourceDefinition",
                kind.api_version, kind.kind
            ))
        };
        let (resource, capabilities) =
            discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|error| match error {
                    kube::Error::Api(status) if status.code == 404 => not_served(),
                    kube::Error::Discovery(
                        kube::error::DiscoveryError::MissingKind(_)
                        | kube::error::DiscoveryError::MissingApiGroup(_)
                        | kube::error::DiscoveryError::MissingResource(_)
                        | kube::error::DiscoveryError::EmptyApiGroup(_),
                    ) => not_served(),
                    other => call_error(other),
                })?;
        let namespaced = matches!(capabilities.scope, Scope::Namespaced);
        self.kinds
            .lock()
            .insert(kind.clone(), (resource.clone(), namespaced));
        Ok((resource, namespaced))
    }

    async fn perform(&self, call: ApiCall, dry_run: bool) -> ApiResult {
        let target = call.target();
        let (resource, namespaced) = self.resolve(&target.kind).await?;
        self.check_granted_resource(&target.kind, &resource.plural)?;
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
        // Validated references never need escaping; encoding anyway means no string can change
        // the path or the query whatever validation let through.
        let namespace = namespace.map(segment);
        let name = segment(&target.name);
        let url = DynamicObject::url_path(&resource, namespace.as_deref());
        let request = kube::core::Request::new(url);
        let built = match &call {
            ApiCall::Apply {
                object,
                force,
                subresource,
                field_manager,
                ..
            } => {
                let mut params = PatchParams::apply(field_manager);
                params.force = *force;
                params.dry_run = dry_run;
                let patch = Patch::Apply(object);
                match subresource {
                    Some(sub) => request.patch_subresource(&segment(sub), &name, &params, &patch),
                    None => request.patch(&name, &params, &patch),
                }
            }
            ApiCall::Patch {
                body,
                subresource,
                field_manager,
                ..
            } => {
                let params = PatchParams {
                    field_manager: Some(field_manager.clone()),
                    dry_run,
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
                    Some(sub) => request.patch_subresource(&segment(sub), &name, &params, &patch),
                    None => request.patch(&name, &params, &patch),
                }
            }
            ApiCall::Create {
                object,
                field_manager,
                ..
            } => {
                let params = PostParams {
                    field_manager: Some(field_manager.clone()),
                    dry_run,
                };
                request.create(&params, serde_json::to_vec(object).unwrap_or_default())
            }
            ApiCall::Replace {
                object,
                field_manager,
                ..
            } => {
                let params = PostParams {
                    field_manager: Some(field_manager.clone()),
                    dry_run,
                };
                request.replace(
                    &name,
                    &params,
                    serde_json::to_vec(object).unwrap_or_default(),
                )
            }
            ApiCall::Delete { .. } => {
                let mut params = DeleteParams::background();
                params.dry_run = dry_run;
                request.delete(&name, &params)
            }
            ApiCall::Get { .. } => request.get(&name, &GetParams::default()),
        };
        let mut http_request = built.map_err(|error| CallError::Invalid(error.to_string()))?;
        if let Some(parent) = crate::wasm::call_trace::current_traceparent()
            && let Ok(value) = http::HeaderValue::from_str(&parent)
        {
            http_request.headers_mut().insert("traceparent", value);
        }
        match self.client.request_text(http_request).await {
            Ok(_) if matches!(call, ApiCall::Delete { .. }) => Ok(None),
            Ok(text) => Ok(Some(text)),
            Err(kube::Error::Api(status))
                if status.code == 404 && matches!(call, ApiCall::Get { .. }) =>
            {
                Ok(None)
            }
            Err(kube::Error::Api(status)) if status.code == 403 && self.account.is_some() => {
                let account = self.account.as_ref().map(|(account, _)| account);
                Err(CallError::Denied(format!(
                    "the API server refused ServiceAccount {}: {} (bind the account a Role that \
                     allows it)",
                    account.map(ToString::to_string).unwrap_or_default(),
                    status.message
                )))
            }
            Err(error) => Err(call_error(error)),
        }
    }
}

impl ApiBackend for KubeApi {
    fn call(&self, call: ApiCall) -> ApiFuture<'_> {
        Box::pin(self.perform(call, false))
    }

    fn dry_run(&self, call: ApiCall) -> ApiFuture<'_> {
        Box::pin(self.perform(call, true))
    }

    fn may_read<'a>(
        &'a self,
        kind: &'a KindRef,
        verb: &'static str,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> ReadFuture<'a> {
        Box::pin(self.authorize_read(kind, verb, namespace, name))
    }
}

/// Characters left as they are in a path segment: RFC 3986's unreserved set.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` as one URL path segment: every character that could end the segment or start a
/// query or fragment is percent-encoded, and so are `.` and `..` as whole segments.
fn segment(text: &str) -> String {
    match text {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => percent_encoding::utf8_percent_encode(text, SEGMENT).to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::api::Target;

    #[tokio::test]
    async fn a_kind_the_api_server_does_not_serve_is_invalid_not_unavailable() {
        let server = embedded_apiserver::ApiServer::start(embedded_apiserver::Config::default())
            .await
            .expect("server");
        let api = KubeApi::new(server.kube_client().expect("client"));
        for (api_version, kind) in [
            ("v1", "NoSuchKind"),
            ("example.com/v1", "Nothing"),
            ("apps/v9", "Deployment"),
        ] {
            let call = ApiCall::Get {
                target: Target {
                    kind: KindRef::new(api_version, kind),
                    namespace: Some("default".to_owned()),
                    name: "x".to_owned(),
                },
            };
            let result = api.call(call).await;
            assert!(
                matches!(&result, Err(CallError::Invalid(message)) if message.contains("is not served")),
                "{api_version}/{kind}: {result:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_call_on_a_kind_whose_grant_names_another_resource_is_denied() {
        let server = embedded_apiserver::ApiServer::start(embedded_apiserver::Config::default())
            .await
            .expect("server");
        let grant = |resource: Option<&str>| Grant {
            kind: KindRef::new("v1", "ConfigMap"),
            verbs: vec![crate::manifest::Verb::Get],
            namespaces: None,
            subresources: Vec::new(),
            resource: resource.map(str::to_owned),
        };
        let call = || ApiCall::Get {
            target: Target {
                kind: KindRef::new("v1", "ConfigMap"),
                namespace: Some("default".to_owned()),
                name: "absent".to_owned(),
            },
        };
        for resource in [None, Some("configmaps")] {
            let api =
                KubeApi::new(server.kube_client().expect("client")).with_grants(&[grant(resource)]);
            let result = api.call(call()).await;
            assert!(matches!(result, Ok(None)), "{resource:?}: {result:?}");
        }
        let api = KubeApi::new(server.kube_client().expect("client"))
            .with_grants(&[grant(Some("secrets"))]);
        let result = api.call(call()).await;
        assert!(
            matches!(&result, Err(CallError::Denied(message))
                if message.contains("names resource `secrets`")
                    && message.contains("write `resource: configmaps`")),
            "{result:?}"
        );
    }
}
