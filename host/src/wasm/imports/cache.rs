//! `cache`: reads from the plugin's informer caches.

use std::time::Instant;

use super::kind_ref;
use crate::controller::ObjectKey;
use crate::informer::Store;
use crate::wasm::bindings::kube::reconcile::cache::Host;
use crate::wasm::bindings::{CallError, Kind};
use crate::wasm::cost::Import;
use crate::wasm::record;
use crate::wasm::reference;
use crate::wasm::state::GuestState;
use label_selector::LabelSelector;

impl GuestState {
    fn cache_of(&self, kind: &Kind) -> Result<&Store, CallError> {
        let kind = kind_ref(kind);
        reference::check_kind(&kind)?;
        self.plugin.caches.get(&kind).map(|store| &**store).ok_or_else(|| {
            CallError::Denied(format!(
                "plugin `{}` does not cache {kind}; list it under `cache:` (or `for`/`owns`) in \
                 its manifest",
                self.plugin.name
            ))
        })
    }
}

impl GuestState {
    // What each import does when no replay answers it.
    async fn live_cache_get(
        &mut self,
        kind: Kind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, CallError> {
        let store = self.cache_of(&kind)?;
        reference::check_namespace(namespace.as_deref())?;
        reference::check_name(&kind_ref(&kind), &name)?;
        let key = ObjectKey::in_namespace(namespace.as_deref(), &name);
        Ok(store.get(&key).map(|object| object.json().to_owned()))
    }

    async fn live_cache_list(
        &mut self,
        kind: Kind,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, CallError> {
        let selector = match label_selector.as_deref() {
            Some(text) => Some(
                text.parse::<LabelSelector>()
                    .map_err(|error| CallError::Invalid(error.to_string()))?,
            ),
            None => None,
        };
        let store = self.cache_of(&kind)?;
        reference::check_namespace(namespace.as_deref())?;
        let mut objects: Vec<_> = store
            .list()
            .into_iter()
            .filter(|object| namespace.is_none() || object.namespace() == namespace.as_deref())
            .filter(|object| {
                selector
                    .as_ref()
                    .is_none_or(|selector| selector.matches(object.labels()))
            })
            .collect();
        objects.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
        Ok(objects
            .into_iter()
            .map(|object| object.json().to_owned())
            .collect())
    }
}

impl Host for GuestState {
    async fn get(
        &mut self,
        kind: Kind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, CallError> {
        let started = Instant::now();
        let args = record::args(
            &self.session,
            || serde_json::json!({"kind": &kind, "namespace": &namespace, "name": &name}),
        );
        if let Some(answer) = record::replayed(&self.session, "cache.get", args.as_ref()) {
            self.cost.import(Import::CacheGet, started);
            return answer;
        }
        let result = self.live_cache_get(kind, namespace, name).await;
        record::keep(&self.session, "cache.get", args, &result);
        self.cost.import(Import::CacheGet, started);
        result
    }

    async fn list(
        &mut self,
        kind: Kind,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, CallError> {
        let started = Instant::now();
        let args = record::args(
            &self.session,
            || serde_json::json!({"kind": &kind, "namespace": &namespace, "label_selector": &label_selector}),
        );
        if let Some(answer) = record::replayed(&self.session, "cache.list", args.as_ref()) {
            self.cost.import(Import::CacheList, started);
            return answer;
        }
        let result = self.live_cache_list(kind, namespace, label_selector).await;
        record::keep(&self.session, "cache.list", args, &result);
        self.cost.import(Import::CacheList, started);
        result
    }
}
