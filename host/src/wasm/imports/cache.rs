//! `cache`: reads from the plugin's informer caches.

use std::collections::HashMap;
use std::time::Instant;

use super::kind_ref;
use crate::controller::ObjectKey;
use crate::informer::Store;
use crate::runtime::KindRef;
use crate::wasm::api::ReadFuture;
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
    /// Whether the plugin's identity may `verb` objects of `kind` in `namespace` (the API
    /// server's RBAC, for a plugin acting as a ServiceAccount; see [`crate::authz`]).
    fn may_read<'a>(
        &'a self,
        kind: &'a KindRef,
        verb: &'static str,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> ReadFuture<'a> {
        self.plugin.api.may_read(kind, verb, namespace, name)
    }

    /// The refusal of a cached read the plugin's ServiceAccount may not make.
    fn read_refused(&self, kind: &KindRef, verb: &str, namespace: Option<&str>) -> CallError {
        let account = (self.plugin.manifest.service_account.as_ref()).map_or_else(
            || "its identity".to_owned(),
            |account| format!("ServiceAccount {account}"),
        );
        let place = namespace.map_or_else(
            || "cluster-wide".to_owned(),
            |namespace| format!("in namespace `{namespace}`"),
        );
        CallError::Denied(format!(
            "plugin `{}` acts as {account}, which may not {verb} {kind} {place}; its cached \
             reads follow the API server's RBAC: bind the account a Role that allows {verb}",
            self.plugin.name
        ))
    }

    // What each import does when no replay answers it.
    async fn live_cache_get(
        &mut self,
        kind: Kind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, CallError> {
        let store = self.cache_of(&kind)?;
        reference::check_namespace(namespace.as_deref())?;
        let kind = kind_ref(&kind);
        reference::check_name(&kind, &name)?;
        if !self
            .may_read(&kind, "get", namespace.as_deref(), Some(&name))
            .await?
        {
            return Err(self.read_refused(&kind, "get", namespace.as_deref()));
        }
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
        let kind = kind_ref(&kind);
        let everywhere = self
            .may_read(&kind, "list", namespace.as_deref(), None)
            .await?;
        if !everywhere && namespace.is_some() {
            return Err(self.read_refused(&kind, "list", namespace.as_deref()));
        }
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
        if !everywhere {
            // Not cluster-wide: the objects of the namespaces the account may list.
            let mut allowed: HashMap<String, bool> = HashMap::new();
            for object in &objects {
                if let Some(ns) = object.namespace()
                    && !allowed.contains_key(ns)
                {
                    let may = self.may_read(&kind, "list", Some(ns), None).await?;
                    allowed.insert(ns.to_owned(), may);
                }
            }
            objects.retain(|object| object.namespace().is_some_and(|ns| allowed[ns]));
        }
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
            self.imported(Import::CacheGet, started);
            return answer;
        }
        let result = self.live_cache_get(kind, namespace, name).await;
        record::keep(&self.session, "cache.get", args, &result);
        self.imported(Import::CacheGet, started);
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
            self.imported(Import::CacheList, started);
            return answer;
        }
        let result = self.live_cache_list(kind, namespace, label_selector).await;
        record::keep(&self.session, "cache.list", args, &result);
        self.imported(Import::CacheList, started);
        result
    }
}
