//! References between schemas (`$ref`), in OpenAPI v3's form.

use serde_json::Value;

/// Where a document keeps its schemas, as written in a `$ref`: OpenAPI v3's.
pub(crate) const V3_PREFIX: &str = "#/components/schemas/";

/// The schema name a `$ref` (bare or wrapped in a one-element `allOf`) points to.
pub(crate) fn ref_name(schema: &Value) -> Option<String> {
    let reference = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")?
            .as_array()
            .filter(|all| all.len() == 1)?[0]
            .get("$ref")
    })?;
    reference
        .as_str()?
        .strip_prefix(V3_PREFIX)
        .map(str::to_string)
}
