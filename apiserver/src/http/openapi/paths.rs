//! What both OpenAPI documents say of a kind's paths.

use crate::resources::Resource;

/// The query parameters declared on a kind's writes: `fieldValidation` tells kubectl the server
/// validates fields itself (so it sends `fieldValidation=Strict` instead of validating).
pub(crate) const PATCH_PARAMETERS: &[&str] = &["fieldValidation", "fieldManager", "dryRun"];

/// The path of one object of `r`, e.g. `/apis/apps/v1/namespaces/{namespace}/deployments/{name}`.
pub(crate) fn item_path(r: &Resource) -> String {
    let prefix = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{prefix}/{}/{{name}}", r.plural)
    }
}
