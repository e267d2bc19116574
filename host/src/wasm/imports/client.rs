//! `client`: API calls checked against the manifest's grants, then handed to the backend.

use std::sync::Arc;
use std::time::Instant;

use super::{parse_object, target};
use crate::manifest::Verb;
use crate::wasm::api::{ApiCall, ApiResult, PatchDoc, Target, target_of};
use crate::wasm::bindings::kube::reconcile::client::{Host, PatchBody};
use crate::wasm::bindings::{CallError, ObjectRef};
use crate::wasm::call_trace;
use crate::wasm::cost::Import;
use crate::wasm::record;
use crate::wasm::reference;
use crate::wasm::state::GuestState;
use crate::wasm::tape;

/// The environment variable that switches the host's grant check off for plugins acting as a
/// ServiceAccount, so that a test can show the API server refusing on its own what the grants
/// would have refused. Never for a plugin acting as the host; logged as a warning when set.
pub const SKIP_GRANT_CHECK_FOR_TESTS: &str = "RECONCILE_HOST_TEST_ONLY_SKIP_GRANT_CHECK";

fn grant_check_skipped() -> bool {
    static SKIPPED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SKIPPED.get_or_init(|| {
        let skipped = std::env::var(SKIP_GRANT_CHECK_FOR_TESTS).is_ok_and(|value| value == "true");
        if skipped {
            tracing::warn!(
                "{SKIP_GRANT_CHECK_FOR_TESTS}=true: the grants of plugins acting as a \
                 ServiceAccount are not checked; only the API server's RBAC limits them. For \
                 tests only: unset it"
            );
        }
        skipped
    })
}

impl GuestState {
    /// Checks the grant for `verb` on `target` (and `subresource`), then performs `call`.
    fn granted(
        &self,
        verb: Verb,
        subresource: Option<&str>,
        call: ApiCall,
    ) -> impl Future<Output = ApiResult> + Send + 'static {
        let plugin = Arc::clone(&self.plugin);
        let tape = self.tape.clone();
        let target = call.target();
        let checked = checked_reference(&call, subresource).and_then(|()| {
            if plugin.manifest.service_account.is_some() && grant_check_skipped() {
                return Ok(());
            }
            plugin
                .manifest
                .allows(&target.kind, verb, target.namespace.as_deref(), subresource)
                .map_err(|denied| {
                    let message = denied.to_string();
                    plugin.api.refused(&call, &message);
                    CallError::Denied(message)
                })
        });
        async move {
            checked?;
            tape::perform(Arc::clone(&plugin.api), tape, call).await
        }
    }

    /// Checks the grant, performs `call` and awaits the answer as `import`'s wait, and notes
    /// the call for the reconcile's history.
    async fn api(
        &mut self,
        import: Import,
        verb: Verb,
        subresource: Option<&str>,
        call: ApiCall,
    ) -> ApiResult {
        let target = call.target().clone();
        let trace = self.trace.clone();
        let request = self.granted(verb, subresource, call);
        let traced = call_trace::api_request(trace.as_ref(), verb.as_str(), &target, request);
        let result = self.wait_api(import, traced).await;
        self.api_notes.note(verb, &target, subresource, &result);
        result
    }

    /// Awaits `call` (the API backend's answer), counting the wait as `import`'s.
    async fn wait_api(
        &mut self,
        import: Import,
        call: impl Future<Output = ApiResult> + Send,
    ) -> ApiResult {
        let started = Instant::now();
        let result = call.await;
        self.cost.api_wait(import, started);
        result
    }

    fn field_manager(&self) -> String {
        self.plugin.name.to_string()
    }
}

/// The call's reference checked by the rules of [`reference`]; only a create may leave the name
/// empty (the API server then generates one from `metadata.generateName`).
fn checked_reference(call: &ApiCall, subresource: Option<&str>) -> Result<(), CallError> {
    let target = call.target();
    reference::check_kind(&target.kind)?;
    reference::check_namespace(target.namespace.as_deref())?;
    if !(target.name.is_empty() && matches!(call, ApiCall::Create { .. })) {
        reference::check_name(&target.kind, &target.name)?;
    }
    reference::check_subresource(subresource)
}

fn stored(result: ApiResult) -> Result<String, CallError> {
    result.map(Option::unwrap_or_default)
}

fn json_of(text: &str) -> Result<serde_json::Value, CallError> {
    serde_json::from_str(text)
        .map_err(|error| CallError::Invalid(format!("the patch is not valid JSON: {error}")))
}

impl GuestState {
    // What each import does when no replay answers it.
    async fn live_client_apply(
        &mut self,
        object: String,
        force: bool,
        subresource: Option<String>,
    ) -> Result<String, CallError> {
        let object = parse_object(&object)?;
        let target: Target = target_of(&object)?;
        let call = ApiCall::Apply {
            target,
            object,
            force,
            subresource: subresource.clone(),
            field_manager: self.field_manager(),
        };
        stored(
            self.api(
                Import::ClientApply,
                Verb::Patch,
                subresource.as_deref(),
                call,
            )
            .await,
        )
    }

    async fn live_client_patch(
        &mut self,
        object: ObjectRef,
        body: PatchBody,
        subresource: Option<String>,
    ) -> Result<String, CallError> {
        let body = match body {
            PatchBody::Merge(text) => PatchDoc::Merge(json_of(&text)?),
            PatchBody::Json(text) => PatchDoc::Json(json_of(&text)?),
            PatchBody::Strategic(text) => PatchDoc::Strategic(json_of(&text)?),
        };
        let call = ApiCall::Patch {
            target: target(&object),
            body,
            subresource: subresource.clone(),
            field_manager: self.field_manager(),
        };
        stored(
            self.api(
                Import::ClientPatch,
                Verb::Patch,
                subresource.as_deref(),
                call,
            )
            .await,
        )
    }

    async fn live_client_create(&mut self, object: String) -> Result<String, CallError> {
        let object = parse_object(&object)?;
        let call = ApiCall::Create {
            target: target_of(&object)?,
            object,
            field_manager: self.field_manager(),
        };
        stored(
            self.api(Import::ClientCreate, Verb::Create, None, call)
                .await,
        )
    }

    async fn live_client_replace(&mut self, object: String) -> Result<String, CallError> {
        let object = parse_object(&object)?;
        let call = ApiCall::Replace {
            target: target_of(&object)?,
            object,
            field_manager: self.field_manager(),
        };
        stored(
            self.api(Import::ClientReplace, Verb::Update, None, call)
                .await,
        )
    }

    async fn live_client_delete(&mut self, object: ObjectRef) -> Result<(), CallError> {
        let call = ApiCall::Delete {
            target: target(&object),
        };
        self.api(Import::ClientDelete, Verb::Delete, None, call)
            .await
            .map(drop)
    }

    async fn live_client_get(&mut self, object: ObjectRef) -> Result<Option<String>, CallError> {
        let call = ApiCall::Get {
            target: target(&object),
        };
        self.api(Import::ClientGet, Verb::Get, None, call).await
    }
}

impl Host for GuestState {
    async fn apply(
        &mut self,
        object: String,
        force: bool,
        subresource: Option<String>,
    ) -> Result<String, CallError> {
        let started = Instant::now();
        let args = record::args(
            &self.session,
            || serde_json::json!({"object": &object, "force": &force, "subresource": &subresource}),
        );
        if let Some(answer) = record::replayed(&self.session, "client.apply", args.as_ref()) {
            self.imported(Import::ClientApply, started);
            return answer;
        }
        let result = self.live_client_apply(object, force, subresource).await;
        record::keep(&self.session, "client.apply", args, &result);
        self.imported(Import::ClientApply, started);
        result
    }

    async fn patch(
        &mut self,
        object: ObjectRef,
        body: PatchBody,
        subresource: Option<String>,
    ) -> Result<String, CallError> {
        let started = Instant::now();
        let args = record::args(
            &self.session,
            || serde_json::json!({"object": &object, "body": &body, "subresource": &subresource}),
        );
        if let Some(answer) = record::replayed(&self.session, "client.patch", args.as_ref()) {
            self.imported(Import::ClientPatch, started);
            return answer;
        }
        let result = self.live_client_patch(object, body, subresource).await;
        record::keep(&self.session, "client.patch", args, &result);
        self.imported(Import::ClientPatch, started);
        result
    }

    async fn create(&mut self, object: String) -> Result<String, CallError> {
        let started = Instant::now();
        let args = record::args(&self.session, || serde_json::json!({"object": &object}));
        if let Some(answer) = record::replayed(&self.session, "client.create", args.as_ref()) {
            self.imported(Import::ClientCreate, started);
            return answer;
        }
        let result = self.live_client_create(object).await;
        record::keep(&self.session, "client.create", args, &result);
        self.imported(Import::ClientCreate, started);
        result
    }

    async fn replace(&mut self, object: String) -> Result<String, CallError> {
        let started = Instant::now();
        let args = record::args(&self.session, || serde_json::json!({"object": &object}));
        if let Some(answer) = record::replayed(&self.session, "client.replace", args.as_ref()) {
            self.imported(Import::ClientReplace, started);
            return answer;
        }
        let result = self.live_client_replace(object).await;
        record::keep(&self.session, "client.replace", args, &result);
        self.imported(Import::ClientReplace, started);
        result
    }

    async fn delete(&mut self, object: ObjectRef) -> Result<(), CallError> {
        let started = Instant::now();
        let args = record::args(&self.session, || serde_json::json!({"object": &object}));
        if let Some(answer) = record::replayed(&self.session, "client.delete", args.as_ref()) {
            self.imported(Import::ClientDelete, started);
            return answer;
        }
        let result = self.live_client_delete(object).await;
        record::keep(&self.session, "client.delete", args, &result);
        self.imported(Import::ClientDelete, started);
        result
    }

    async fn get(&mut self, object: ObjectRef) -> Result<Option<String>, CallError> {
        let started = Instant::now();
        let args = record::args(&self.session, || serde_json::json!({"object": &object}));
        if let Some(answer) = record::replayed(&self.session, "client.get", args.as_ref()) {
            self.imported(Import::ClientGet, started);
            return answer;
        }
        let result = self.live_client_get(object).await;
        record::keep(&self.session, "client.get", args, &result);
        self.imported(Import::ClientGet, started);
        result
    }
}
