//! Controllers: a rate-limited workqueue per controller and the workers that reconcile its keys
//! (SEMANTICS §4).

pub mod causes;
mod intake;
mod key;
mod reconciler;
mod runner;
mod span;
#[cfg(test)]
mod tests;
pub mod unhandled;

pub use causes::{Cause, Causes, Origin, Why};
pub use intake::Intake;
pub use key::ObjectKey;
pub use reconciler::{Action, ObjectLookup, Reconciler, Request};
pub use runner::{Controller, NoReconcileMetrics, Outcome, ReconcileMetrics};
pub use unhandled::Unhandled;
