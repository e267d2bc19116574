//! Test guest for hot-reload tests: a component that loads fine and traps in every call.

use reconcile_guest::bindings::{Action, Guest, ReconcileError, Request};

struct AlwaysTrap;

impl Guest for AlwaysTrap {
    fn reconcile(_request: Request) -> Result<Action, ReconcileError> {
        panic!("always-trap: every call traps")
    }
}

reconcile_guest::bindings::export!(AlwaysTrap with_types_in reconcile_guest::bindings);
