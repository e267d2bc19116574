//! Controllers: a rate-limited workqueue per controller and the workers that reconcile its keys
//! (SEMANTICS §4).

mod key;
mod reconciler;
mod runner;
#[cfg(test)]
mod tests;
pub mod unhandled;

pub use key::ObjectKey;
pub use reconciler::{Action, ObjectLookup, Reconciler, Request};
pub use runner::{Controller, NoReconcileMetrics, Outcome, ReconcileMetrics};
pub use unhandled::Unhandled;
