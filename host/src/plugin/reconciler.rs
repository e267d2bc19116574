//! A plugin as the controller sees it: a [`Reconciler`] whose every call goes into the plugin's
//! current module, on a fresh instance (or a reused one, if the manifest opts in).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use super::bindings::{self, Kind, ObjectRef};
use super::context::PluginContext;
use super::invoke::{self, GuestFailure, InstancePool};
use super::module::Module;
use crate::controller::{Action, Reconciler, Request};
use crate::informer::CachedObject;
use crate::telemetry::PluginFailures;

/// Every reason a guest call can fail, as labelled in metrics.
pub const FAILURE_REASONS: [&str; 5] = ["error", "trap", "deadline", "memory", "instantiate"];

/// A failed reconcile of a plugin: which plugin, and how its guest failed.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}` (module {digest:.12})")]
pub struct PluginError {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// The digest of the module that ran.
    pub digest: String,
    /// What happened.
    #[source]
    pub failure: GuestFailure,
}

/// The module a plugin currently runs, with its reuse pool.
#[derive(Debug)]
pub struct Loaded {
    /// The module.
    pub module: Arc<Module>,
    /// Idle instances, when the manifest asks for instance reuse.
    pub pool: Option<InstancePool>,
}

/// A plugin: its context, its current module (swappable; calls in flight keep the module they
/// started with) and its failure counters.
#[derive(Debug)]
pub struct Plugin {
    context: Arc<PluginContext>,
    current: RwLock<Arc<Loaded>>,
    failures: Option<PluginFailures>,
}

impl Plugin {
    /// A plugin running `module` with `context`.
    #[must_use]
    pub fn new(
        context: Arc<PluginContext>,
        module: Arc<Module>,
        failures: Option<PluginFailures>,
    ) -> Self {
        let loaded = Self::loaded(&context, module);
        Self {
            context,
            current: RwLock::new(Arc::new(loaded)),
            failures,
        }
    }

    fn loaded(context: &PluginContext, module: Arc<Module>) -> Loaded {
        Loaded {
            module,
            pool: context.manifest.instance_reuse.map(InstancePool::new),
        }
    }

    /// The plugin's context.
    #[must_use]
    pub fn context(&self) -> &Arc<PluginContext> {
        &self.context
    }

    /// The module new calls go to.
    #[must_use]
    pub fn module(&self) -> Arc<Module> {
        Arc::clone(&self.current.read().module)
    }

    /// Makes `module` serve every call that starts from now on; calls in flight finish on the
    /// module they started with.
    pub fn swap(&self, module: Arc<Module>) {
        let loaded = Arc::new(Self::loaded(&self.context, module));
        *self.current.write() = loaded;
    }

    /// Calls the guest's `reconcile` with `request` (the `for` kind's key and object).
    ///
    /// # Errors
    /// [`PluginError`] when the guest fails in any way.
    pub async fn call(
        &self,
        target: ObjectRef,
        object: Option<String>,
        requeues: u32,
    ) -> Result<bindings::Action, PluginError> {
        let loaded = Arc::clone(&self.current.read());
        let request = bindings::Request {
            target,
            object,
            requeues,
        };
        invoke::reconcile(
            &loaded.module,
            &self.context,
            loaded.pool.as_ref(),
            &request,
        )
        .await
        .map_err(|failure| {
            if let Some(failures) = &self.failures {
                failures.failed(failure.reason());
            }
            PluginError {
                plugin: Arc::clone(&self.context.name),
                digest: loaded.module.digest().to_owned(),
                failure,
            }
        })
    }
}

/// The controller's view of a plugin.
#[derive(Clone, Debug)]
pub struct PluginReconciler {
    plugin: Arc<Plugin>,
    kind: Kind,
}

impl PluginReconciler {
    /// Reconciles through `plugin`.
    #[must_use]
    pub fn new(plugin: Arc<Plugin>) -> Self {
        let for_kind = &plugin.context.manifest.for_kind;
        let kind = Kind {
            api_version: for_kind.api_version.clone(),
            kind: for_kind.kind.clone(),
        };
        Self { plugin, kind }
    }
}

impl Reconciler for PluginReconciler {
    type Object = CachedObject;
    type Error = PluginError;

    async fn reconcile(&self, request: Request<CachedObject>) -> Result<Action, PluginError> {
        let target = ObjectRef {
            kind: self.kind.clone(),
            namespace: request.key.namespace.as_deref().map(str::to_owned),
            name: request.key.name.to_string(),
        };
        let object = request.object.map(|object| object.json().to_owned());
        let action = self.plugin.call(target, object, request.requeues).await?;
        Ok(match action {
            bindings::Action::Done => Action::Done,
            bindings::Action::Requeue => Action::Requeue,
            bindings::Action::RequeueAfter(ms) => {
                Action::RequeueAfter(Duration::from_millis(u64::from(ms)))
            }
        })
    }
}
