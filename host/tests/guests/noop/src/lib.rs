//! Test guest for dispatch benchmarks: the cheapest possible reconciler. It implements the raw
//! generated bindings and answers `done` without reading, parsing or copying the object.

use reconcile_guest::bindings::{Action, Guest, ReconcileError, Request};

struct Noop;

impl Guest for Noop {
    fn reconcile(_request: Request) -> Result<Action, ReconcileError> {
        Ok(Action::Done)
    }
}

reconcile_guest::bindings::export!(Noop with_types_in reconcile_guest::bindings);
