//! The host's imports as the SDK calls them: the component's imports, unless a
//! [`FakeHost`](crate::testing::FakeHost) is installed on this thread (unit tests, with the
//! `testing` feature), which then answers instead. Without the feature, as in a component built
//! for release, the fake is not compiled in at all.

/// Whether the fake host answers on this thread.
#[cfg(any(test, feature = "testing"))]
fn fake() -> bool {
    crate::testing::installed()
}

/// `client`.
pub(crate) mod client {
    #[cfg(any(test, feature = "testing"))]
    use super::fake;
    use crate::bindings::kube::reconcile::client as real;
    use crate::bindings::kube::reconcile::client::PatchBody;
    use crate::bindings::kube::reconcile::types::{CallError, ObjectRef};
    #[cfg(any(test, feature = "testing"))]
    use crate::testing::imports::client as fake_host;

    pub fn apply(object: &str, force: bool, sub: Option<&str>) -> Result<String, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::apply(object, force, sub);
        }
        real::apply(object, force, sub)
    }

    pub fn patch(
        target: &ObjectRef,
        body: &PatchBody,
        sub: Option<&str>,
    ) -> Result<String, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::patch(target, body, sub);
        }
        real::patch(target, body, sub)
    }

    pub fn create(object: &str) -> Result<String, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::create(object);
        }
        real::create(object)
    }

    pub fn replace(object: &str) -> Result<String, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::replace(object);
        }
        real::replace(object)
    }

    pub fn delete(target: &ObjectRef) -> Result<(), CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::delete(target);
        }
        real::delete(target)
    }

    pub fn get(target: &ObjectRef) -> Result<Option<String>, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::get(target);
        }
        real::get(target)
    }
}

/// `cache`.
pub(crate) mod cache {
    #[cfg(any(test, feature = "testing"))]
    use super::fake;
    use crate::bindings::kube::reconcile::cache as real;
    use crate::bindings::kube::reconcile::types::{CallError, Kind};
    #[cfg(any(test, feature = "testing"))]
    use crate::testing::imports::cache as fake_host;

    pub fn get(
        kind: &Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::get(kind, namespace, name);
        }
        real::get(kind, namespace, name)
    }

    pub fn list(
        kind: &Kind,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::list(kind, namespace, selector);
        }
        real::list(kind, namespace, selector)
    }
}

/// `events`.
pub(crate) mod events {
    #[cfg(any(test, feature = "testing"))]
    use super::fake;
    use crate::bindings::kube::reconcile::events as real;
    use crate::bindings::kube::reconcile::events::EventType;
    use crate::bindings::kube::reconcile::types::{CallError, ObjectRef};
    #[cfg(any(test, feature = "testing"))]
    use crate::testing::imports::events as fake_host;

    pub fn record_event(
        regarding: &ObjectRef,
        event_type: EventType,
        reason: &str,
        note: &str,
    ) -> Result<(), CallError> {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::record_event(regarding, event_type, reason, note);
        }
        real::record_event(regarding, event_type, reason, note)
    }
}

/// `log`.
pub(crate) mod log {
    #[cfg(any(test, feature = "testing"))]
    use super::fake;
    use crate::bindings::kube::reconcile::log as real;
    use crate::bindings::kube::reconcile::log::Level;
    #[cfg(any(test, feature = "testing"))]
    use crate::testing::imports::log as fake_host;

    pub fn log(level: Level, message: &str) {
        #[cfg(any(test, feature = "testing"))]
        if fake() {
            return fake_host::log(level, message);
        }
        real::log(level, message);
    }
}
