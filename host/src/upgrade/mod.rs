//! Trying a new version of a plugin safely: shadow runs whose API writes are compared with the
//! primary's, never sent ([`shadow`], [`compare`]), and the recordings of reconciles kept per plugin to replay
//! them on another module ([`recordings`]). It uses the runtime ([`crate::wasm`]) only.

pub mod compare;
pub mod recordings;
pub mod shadow;
