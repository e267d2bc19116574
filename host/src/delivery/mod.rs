//! How plugins arrive and run in a host: manifest files and directories watched for changes, the
//! supervisor that loads, swaps and drops them without losing work, `ReconcilerPlugin` objects,
//! modules pulled from OCI registries, and the [`Plugin`](reconciler::Plugin) a controller calls.
//! It uses the runtime ([`crate::wasm`]) to load and call modules and [`crate::upgrade`] to run
//! shadows and canaries and keep recordings.

pub mod health;
pub mod history;
pub mod loader;
pub mod objects;
pub mod oci;
mod ran;
pub mod reconciler;
pub mod supervisor;
