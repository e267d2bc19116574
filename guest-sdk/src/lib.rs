//! Write Kubernetes reconcilers in Rust that run as WebAssembly components in the reconcile host.
//!
//! A reconciler is a type implementing [`Reconciler`], exported with [`export_reconciler!`] and
//! built with `cargo build --release --target wasm32-wasip2`. The host calls it once per dequeued
//! key with the object its cache holds; it answers with an [`Action`] or an [`Error`].
//!
//! ```no_run
//! use reconcile_guest::prelude::*;
//!
//! struct Labeller;
//!
//! impl Reconciler for Labeller {
//!     fn reconcile(request: Request) -> Result<Action, Error> {
//!         let Some(object) = request.object::<serde_json::Value>()? else {
//!             return Ok(Action::done()); // deleted: nothing to do
//!         };
//!         let target = ObjectRef::from_value(&object)?;
//!         let patch = serde_json::json!({"metadata": {"labels": {"seen": "true"}}});
//!         client::merge_patch(&target, &patch)?;
//!         info!("labelled {target}");
//!         Ok(Action::done())
//!     }
//! }
//!
//! reconcile_guest::export_reconciler!(Labeller);
//! ```
//!
//! The modules wrap the host's imports, as declared in the WIT package `kube:reconcile@0.1.0`
//! (`wit/reconcile.wit`): [`client`] (writes and live reads, checked against the manifest's
//! grants), [`cache`] (the host's informer caches), [`events`] and [`log`] (with the [`info!`]
//! family of macros). [`finalizer()`] runs cleanup before an object goes away. The raw generated
//! bindings are in [`bindings`] for reconcilers that want no layer at all.
//!
//! Every function that calls the host works inside a component run by the host; in unit tests,
//! with the `testing` feature (a dev-dependency with `features = ["testing"]`), it goes to the
//! `testing::FakeHost` installed on the thread (natively, without one, it panics). The pure parts — [`Request`] access, [`Action`] constructors, [`Error`], [`ObjectRef`],
//! [`finalizer::plan`] — work anywhere.

mod action;
pub mod cache;
pub mod client;
mod error;
pub mod events;
pub mod finalizer;
mod host;
pub mod log;
mod object;
mod request;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The bindings `wit-bindgen` generates from `wit/reconcile.wit` (world `reconciler`).
///
/// [`export_reconciler!`] is the usual way in. A reconciler that wants no layer implements
/// [`bindings::Guest`] itself and exports it with
/// `reconcile_guest::bindings::export!(MyType with_types_in reconcile_guest::bindings);`.
pub mod bindings;

pub use bindings::kube::reconcile::types::{Action, ApiStatus, CallError, Kind, ObjectRef};
pub use error::{Context, Error};
pub use finalizer::finalizer;
pub use request::Request;

/// A reconciler: brings the world in line with one object and says when to look again.
///
/// Export it with [`export_reconciler!`]. The host never runs two reconciles of one key at once,
/// but may run reconciles of different keys in separate instances of the component, and may
/// reuse an instance for later calls: keep no state between calls that the next call relies on.
pub trait Reconciler {
    /// Reconciles the object named by `request`.
    ///
    /// # Errors
    ///
    /// An error is logged by the host with its full chain of causes and the key is retried with
    /// the rate limiter's growing backoff ([`Request::requeues`] counts the retries in a row).
    fn reconcile(request: Request) -> Result<Action, Error>;
}

/// Exports a [`Reconciler`] as the component's `reconcile` function.
///
/// Use it once per component, at the crate root of a `cdylib` built for `wasm32-wasip2`:
///
/// ```no_run
/// use reconcile_guest::{Action, Error, Reconciler, Request};
///
/// struct MyReconciler;
///
/// impl Reconciler for MyReconciler {
///     fn reconcile(_request: Request) -> Result<Action, Error> {
///         Ok(Action::done())
///     }
/// }
///
/// reconcile_guest::export_reconciler!(MyReconciler);
/// ```
#[macro_export]
macro_rules! export_reconciler {
    ($reconciler:ty) => {
        const _: () = {
            struct ReconcileExport;

            impl $crate::bindings::Guest for ReconcileExport {
                fn reconcile(
                    request: $crate::bindings::Request,
                ) -> ::core::result::Result<
                    $crate::bindings::Action,
                    $crate::bindings::ReconcileError,
                > {
                    $crate::__private::reconcile::<$reconciler>(request)
                }
            }

    $crate::bindings::export!(ReconcileExport with_types_in $crate::bindings);
        };
    };
}

/// Everything a reconciler usually needs: `use reconcile_guest::prelude::*;`.
pub mod prelude {
    pub use crate::events::EventType;
    pub use crate::{
        Action, Context, Error, Kind, ObjectRef, Reconciler, Request, cache, client, events,
        finalizer,
    };
    pub use crate::{debug, error, info, trace, warn};
}

#[doc(hidden)]
pub mod __private {
    use crate::{Reconciler, Request, bindings};

    /// The body of the `reconcile` export [`export_reconciler!`] generates.
    pub fn reconcile<R: Reconciler>(
        request: bindings::Request,
    ) -> Result<bindings::Action, bindings::ReconcileError> {
        R::reconcile(Request::from(request)).map_err(bindings::ReconcileError::from)
    }
}
