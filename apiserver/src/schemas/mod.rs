//! The kinds' OpenAPI schemas: k8s-openapi's for built-in kinds (with the types they refer to,
//! under upstream's names), a CRD version's for custom resources. The OpenAPI documents publish
//! them ([`crate::http`]); writes are held to them (unknown fields, [`known_fields`]).

mod definitions;
pub(crate) mod known_fields;
mod patch_extensions;
mod refs;

pub(crate) use definitions::{builtin, for_resources, name_of};
pub(crate) use refs::V3_PREFIX;
