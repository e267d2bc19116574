//! The host's imports as the SDK calls them: the component's imports when built for
//! WebAssembly, the installed [`FakeHost`](crate::testing::FakeHost) in native unit tests.

#[cfg(target_family = "wasm")]
pub(crate) use crate::bindings::kube::reconcile::{cache, client, events, log};
#[cfg(not(target_family = "wasm"))]
pub(crate) use crate::testing::imports::{cache, client, events, log};
