//! The end-to-end harness of `tests/common/`, for the host's own tests that start hosts or build
//! guests: one copy, loaded from there.
#![allow(dead_code, unused_imports)]

#[path = "../../../tests/common/mod.rs"]
mod harness;

pub use harness::*;
