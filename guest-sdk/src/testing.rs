//! A fake host for a reconciler's native unit tests (`cargo test`): no component, no API server.
//! Compiled with the `testing` feature: `[dev-dependencies] reconcile-guest = { …, features =
//! ["testing"] }`, so a component built for release carries none of it.
//!
//! While a [`FakeHost`] is installed on a thread, the SDK's [`client`](crate::client), [`cache`](crate::cache), [`events`](crate::events) and
//! [`log`](crate::log) calls on that thread go to it: an in-memory store of objects of any kind,
//! with every call, event and log line recorded.
//!
//! ```
//! use reconcile_guest::testing::FakeHost;
//! use serde_json::json;
//!
//! let host = FakeHost::install();
//! let request = host.request(json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "web", "namespace": "default"}}));
//! // my_reconciler::reconcile(request)?;
//! assert!(host.calls().is_empty());
//! ```
//!
//! The store answers as an API server would in the ways reconcilers depend on: a write carrying
//! a `metadata.resourceVersion` other than the stored one is refused 409 `Conflict`, a write or
//! delete of an object that is not there 404 `NotFound`, a create of one that is 409
//! `AlreadyExists`; each write bumps the object's resourceVersion. [`FakeHost::deny`] refuses a
//! verb as `call-error::denied`, as a manifest without that grant would. The cache reads the
//! same store. Patches: merge patches (RFC 7386) only.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde_json::Value;

use crate::Request;
use crate::bindings::kube::reconcile::types::{ApiStatus, CallError, Kind, ObjectRef};
use crate::events::EventType;
use crate::log::Level;

/// apiVersion, kind, namespace (`""` cluster-wide), name.
type Key = (String, String, String, String);

/// One client call: its verb (`patch` for applies), apiVersion, kind, namespace and name.
pub type Call = (String, String, String, String, String);

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Value>,
    version: u64,
    calls: Vec<Call>,
    events: Vec<(EventType, String, String, ObjectRef)>,
    logs: Vec<(Level, String)>,
    denied: BTreeSet<String>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<RefCell<State>>>> = const { RefCell::new(None) };
}

/// Whether a fake host is installed on this thread.
pub(crate) fn installed() -> bool {
    CURRENT.with(|current| current.borrow().is_some())
}

/// The fake host installed on this thread until it is dropped (see the module docs).
pub struct FakeHost {
    state: Rc<RefCell<State>>,
}

impl FakeHost {
    /// Installs an empty fake host on this thread.
    ///
    /// # Panics
    /// When one is installed already.
    #[must_use]
    pub fn install() -> Self {
        let state = Rc::new(RefCell::new(State::default()));
        CURRENT.with(|current| {
            let mut current = current.borrow_mut();
            assert!(
                current.is_none(),
                "a FakeHost is installed on this thread already"
            );
            *current = Some(Rc::clone(&state));
        });
        Self { state }
    }

    /// Stores `object` with a new resourceVersion; the stored copy.
    ///
    /// # Panics
    /// When `object` has no `apiVersion`, `kind` or `metadata.name`.
    pub fn put(&self, object: Value) -> Value {
        put(&mut self.state.borrow_mut(), object)
    }

    /// The stored object, if any.
    #[must_use]
    pub fn find(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Value> {
        let key = key(&kind.api_version, &kind.kind, namespace, name);
        self.state.borrow().objects.get(&key).cloned()
    }

    /// The request the host would send for `object`, stored first as the cache holds it.
    #[must_use]
    pub fn request(&self, object: Value) -> Request {
        let stored = self.put(object);
        Request::new(reference(&stored), Some(stored.to_string()), 0)
    }

    /// The request the host sends once `object` is deleted: removed, no object.
    #[must_use]
    pub fn deleted(&self, object: &Value) -> Request {
        let target = reference(object);
        let key = key_of(object);
        self.state.borrow_mut().objects.remove(&key);
        Request::new(target, None, 0)
    }

    /// Refuses `verb` (`get`, `create`, `update`, `patch`, `delete`) as a missing grant would.
    pub fn deny(&self, verb: &str) {
        self.state.borrow_mut().denied.insert(verb.to_owned());
    }

    /// The client calls so far: `(verb, apiVersion, kind, namespace, name)`.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// The events recorded so far: type, reason, note, and the object they are about.
    #[must_use]
    pub fn events(&self) -> Vec<(EventType, String, String, ObjectRef)> {
        self.state.borrow().events.clone()
    }

    /// The log lines so far.
    #[must_use]
    pub fn logs(&self) -> Vec<(Level, String)> {
        self.state.borrow().logs.clone()
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        CURRENT.with(|current| current.borrow_mut().take());
    }
}

fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
    (
        api_version.to_owned(),
        kind.to_owned(),
        namespace.unwrap_or_default().to_owned(),
        name.to_owned(),
    )
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn key_of(object: &Value) -> Key {
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let name = text(object, "/metadata/name");
    assert!(
        !name.is_empty(),
        "an object without metadata.name: {object}"
    );
    key(
        text(object, "/apiVersion"),
        text(object, "/kind"),
        namespace,
        name,
    )
}

fn reference(object: &Value) -> ObjectRef {
    let (api_version, kind, namespace, name) = key_of(object);
    ObjectRef {
        kind: Kind { api_version, kind },
        namespace: (!namespace.is_empty()).then_some(namespace),
        name,
    }
}

fn put(state: &mut State, mut object: Value) -> Value {
    state.version += 1;
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".into(), state.version.to_string().into());
    }
    state.objects.insert(key_of(&object), object.clone());
    object
}

fn merge(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let map = target.as_object_mut().expect("an object");
    for (name, value) in fields {
        if value.is_null() {
            map.remove(name);
        } else {
            merge(map.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

fn refused(code: u16, reason: &str, message: String) -> CallError {
    CallError::Api(ApiStatus {
        code,
        reason: reason.to_owned(),
        message,
    })
}

/// Runs `f` on the installed fake host's state.
///
/// # Panics
/// When no fake host is installed: the SDK's imports exist only in a component.
fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let state = CURRENT.with(|current| current.borrow().clone()).expect(
        "the host's imports exist only in a component; in native tests install \
         reconcile_guest::testing::FakeHost first",
    );
    let mut state = state.borrow_mut();
    f(&mut state)
}

/// Records a call of `verb` on `key`, refusing it when the verb is denied.
fn call(state: &mut State, verb: &str, key: &Key) -> Result<(), CallError> {
    let (api_version, kind, namespace, name) = key.clone();
    if state.denied.contains(verb) {
        let place = if namespace.is_empty() {
            "cluster-wide".to_owned()
        } else {
            format!("in namespace `{namespace}`")
        };
        return Err(CallError::Denied(format!(
            "plugin `test` has no grant to `{verb}` {api_version} {kind} {place}"
        )));
    }
    state
        .calls
        .push((verb.to_owned(), api_version, kind, namespace, name));
    Ok(())
}

/// Stores `object` at `key` unless it carries a stale resourceVersion; the stored text.
fn write(state: &mut State, key: &Key, object: Value) -> Result<String, CallError> {
    let sent = text(&object, "/metadata/resourceVersion");
    if let Some(stored) = state.objects.get(key)
        && !sent.is_empty()
        && sent != text(stored, "/metadata/resourceVersion")
    {
        return Err(refused(
            409,
            "Conflict",
            format!("the object {} has been modified", key.3),
        ));
    }
    Ok(put(state, object).to_string())
}

fn parse(json: &str) -> Result<Value, CallError> {
    serde_json::from_str(json).map_err(|error| CallError::Invalid(error.to_string()))
}

/// The imports, with the signatures the bindings give them in a component.
pub(crate) mod imports {
    /// `client`.
    pub mod client {
        use super::super::{Key, call, key, merge, parse, refused, with, write};
        use crate::bindings::kube::reconcile::client::PatchBody;
        use crate::bindings::kube::reconcile::types::{CallError, ObjectRef};

        fn key_of(target: &ObjectRef) -> Key {
            let kind = &target.kind;
            key(
                &kind.api_version,
                &kind.kind,
                target.namespace.as_deref(),
                &target.name,
            )
        }

        pub fn apply(object: &str, _force: bool, _sub: Option<&str>) -> Result<String, CallError> {
            let object = parse(object)?;
            with(|state| {
                let key = super::super::key_of(&object);
                call(state, "patch", &key)?;
                let mut merged = state.objects.get(&key).cloned().unwrap_or_default();
                merge(&mut merged, &object);
                write(state, &key, merged)
            })
        }

        pub fn patch(
            target: &ObjectRef,
            body: &PatchBody,
            _sub: Option<&str>,
        ) -> Result<String, CallError> {
            let PatchBody::Merge(patch) = body else {
                return Err(CallError::Invalid(
                    "the FakeHost applies merge patches only".into(),
                ));
            };
            let patch = parse(patch)?;
            with(|state| {
                let key = key_of(target);
                call(state, "patch", &key)?;
                let Some(mut object) = state.objects.get(&key).cloned() else {
                    return Err(refused(404, "NotFound", format!("{target} not found")));
                };
                merge(&mut object, &patch);
                write(state, &key, object)
            })
        }

        pub fn create(object: &str) -> Result<String, CallError> {
            let object = parse(object)?;
            with(|state| {
                let key = super::super::key_of(&object);
                call(state, "create", &key)?;
                if state.objects.contains_key(&key) {
                    return Err(refused(409, "AlreadyExists", format!("{} exists", key.3)));
                }
                write(state, &key, object)
            })
        }

        pub fn replace(object: &str) -> Result<String, CallError> {
            let object = parse(object)?;
            with(|state| {
                let key = super::super::key_of(&object);
                call(state, "update", &key)?;
                if !state.objects.contains_key(&key) {
                    return Err(refused(404, "NotFound", format!("{} not found", key.3)));
                }
                write(state, &key, object)
            })
        }

        pub fn delete(target: &ObjectRef) -> Result<(), CallError> {
            with(|state| {
                let key = key_of(target);
                call(state, "delete", &key)?;
                match state.objects.remove(&key) {
                    Some(_) => Ok(()),
                    None => Err(refused(404, "NotFound", format!("{target} not found"))),
                }
            })
        }

        pub fn get(target: &ObjectRef) -> Result<Option<String>, CallError> {
            with(|state| {
                let key = key_of(target);
                call(state, "get", &key)?;
                Ok(state.objects.get(&key).map(ToString::to_string))
            })
        }
    }

    /// `cache`.
    pub mod cache {
        use super::super::{key, text, with};
        use crate::bindings::kube::reconcile::types::{CallError, Kind};

        pub fn get(
            kind: &Kind,
            namespace: Option<&str>,
            name: &str,
        ) -> Result<Option<String>, CallError> {
            let key = key(&kind.api_version, &kind.kind, namespace, name);
            Ok(with(|state| {
                state.objects.get(&key).map(ToString::to_string)
            }))
        }

        /// `key=value` and `key` terms only.
        pub fn list(
            kind: &Kind,
            namespace: Option<&str>,
            selector: Option<&str>,
        ) -> Result<Vec<String>, CallError> {
            let selected = |object: &serde_json::Value| {
                selector
                    .unwrap_or_default()
                    .split(',')
                    .filter(|t| !t.is_empty())
                    .all(|term| {
                        let (name, value) = term.split_once('=').unwrap_or((term, ""));
                        let label = object
                            .pointer("/metadata/labels")
                            .and_then(|l| l.get(name.trim()));
                        label.is_some_and(|label| !term.contains('=') || label == value.trim())
                    })
            };
            Ok(with(|state| {
                (state.objects.iter())
                    .filter(|((api_version, k, ns, _), object)| {
                        (api_version, k) == (&kind.api_version, &kind.kind)
                            && namespace.is_none_or(|wanted| wanted == ns)
                            && selected(object)
                            && !text(object, "/metadata/name").is_empty()
                    })
                    .map(|(_, object)| object.to_string())
                    .collect()
            }))
        }
    }

    /// `events`.
    pub mod events {
        use super::super::with;
        use crate::bindings::kube::reconcile::types::{CallError, ObjectRef};
        use crate::events::EventType;

        pub fn record_event(
            regarding: &ObjectRef,
            event_type: EventType,
            reason: &str,
            note: &str,
        ) -> Result<(), CallError> {
            with(|state| {
                (state.events).push((event_type, reason.into(), note.into(), regarding.clone()));
            });
            Ok(())
        }
    }

    /// `log`.
    pub mod log {
        use super::super::with;
        use crate::log::Level;

        pub fn log(level: Level, message: &str) {
            with(|state| state.logs.push((level, message.to_owned())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cache, client, events, info};
    use serde_json::json;

    fn config_map(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}}})
    }

    #[test]
    fn the_sdks_calls_reach_the_fake_store_and_are_recorded() {
        let host = FakeHost::install();
        let request = host.request(config_map("a"));
        let target = request.target().clone();
        let patched: Value = client::merge_patch(&target, &json!({"data": {"k": "v"}})).unwrap();
        assert_eq!(patched["data"]["k"], "v");
        assert_eq!(patched["metadata"]["resourceVersion"], "2");
        let kind = Kind {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let cached: Vec<Value> = cache::list(&kind, Some("default"), Some("app=web")).unwrap();
        assert_eq!(cached.len(), 1);
        assert!(
            cache::list::<Value>(&kind, None, Some("app=db"))
                .unwrap()
                .is_empty()
        );
        events::record(&target, EventType::Normal, "Synced", "ok").unwrap();
        info!("done with {}", target.name);
        assert_eq!(
            host.calls(),
            [(
                "patch".into(),
                "v1".into(),
                "ConfigMap".into(),
                "default".into(),
                "a".into()
            )]
        );
        assert_eq!(host.events()[0].1, "Synced");
        assert_eq!(host.logs()[0].1, "done with a");
    }

    #[test]
    fn it_answers_as_an_api_server_would_and_refuses_denied_verbs() {
        let host = FakeHost::install();
        let stored = host.put(config_map("a"));
        let stale = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "namespace": "default", "resourceVersion": "0"}});
        assert!(client::replace(&stale).unwrap_err().is_conflict());
        assert!(client::create(&stored).unwrap_err().is_conflict());
        let gone = host.deleted(&stored);
        assert!(gone.object::<Value>().unwrap().is_none());
        assert!(!client::delete(gone.target()).unwrap(), "already gone");
        host.deny("create");
        let denied = client::create(&config_map("b")).unwrap_err();
        assert!(
            format!("{denied:#}").contains("has no grant to `create`"),
            "{denied:#}"
        );
        assert!(
            host.find(&gone.target().kind, Some("default"), "b")
                .is_none()
        );
    }
}
