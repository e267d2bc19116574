//! What both OpenAPI documents say of a kind's paths.

use serde_json::{Map, Value, json};

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

/// One path item per kind (its object path), with get, put, patch and delete naming the kind
/// and declaring [`PATCH_PARAMETERS`], each written by `parameter` in the document's form.
pub(crate) fn item_paths(
    resources: &[std::sync::Arc<Resource>],
    parameter: impl Fn(&str) -> Value,
) -> Map<String, Value> {
    let parameters: Vec<Value> = PATCH_PARAMETERS
        .iter()
        .map(|name| parameter(name))
        .collect();
    let mut paths = Map::new();
    for r in resources {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters,
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            item_path(r),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
    }
    paths
}
