//! The patch algorithms of the API server: JSON merge patch, JSON patch, strategic merge patch and
//! server-side apply, as pure functions over `serde_json::Value`.
//!
//! | request `Content-Type`                   | function                    |
//! |------------------------------------------|-----------------------------|
//! | `application/merge-patch+json`           | [`merge_patch()`]           |
//! | `application/json-patch+json`            | [`json_patch()`]            |
//! | `application/strategic-merge-patch+json` | [`strategic_merge_patch()`] |
//! | `application/apply-patch+yaml`           | [`apply()`]                 |
//!
//! PUT and the three non-apply patch types record the fields they changed with
//! [`record_update`], so that a later [`apply()`] by another manager conflicts with them as it
//! would on a real API server.
//!
//! Nothing here touches storage, versions or HTTP: the caller decodes the body, loads the live
//! object, calls one of these functions and validates and stores the result.
//!
//! # Errors
//!
//! The three patch functions fail with [`PatchError`], whose [`PatchError::status_code`] is the
//! HTTP status a real API server answers: `400 BadRequest` for a malformed patch document,
//! `422 Invalid` for a well-formed one that cannot be applied (a failing JSON patch operation, a
//! list element without its merge key), `415 UnsupportedMediaType` for
//! [`PatchError::UnsupportedForKind`]. [`apply()`] fails with [`ApplyError`]:
//! [`ApplyError::Conflict`] is `409 Conflict` with `FieldManagerConflict` causes (see
//! [`FieldConflict::status_cause`]), everything else `400 BadRequest`
//! ([`ApplyError::status_code`]).

mod apply;
mod conflict;
mod error;
mod fields;
mod json;
mod merge;
mod ownership;
pub(crate) mod schema;
mod strategic;

pub use apply::{ApplyRequest, apply, record_update, record_update_with};
pub use conflict::{ApplyError, FieldConflict};
pub use error::PatchError;
pub use fields::FieldSet;
pub use json::json_patch;
pub use merge::{create_merge_patch, merge_patch};
pub use strategic::strategic_merge_patch;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_errors_carry_the_status_code_kubernetes_answers() {
        let mut target = json!({"a": 1});
        let failed = json_patch(
            &mut target,
            &json!([{"op": "test", "path": "/a", "value": 2}]),
        );
        assert_eq!(failed.unwrap_err().status_code(), 422);
        let malformed = json_patch(&mut target, &json!({"op": "add"}));
        assert_eq!(malformed.unwrap_err().status_code(), 400);
        let custom = strategic_merge_patch(&mut target, &json!({}), "example.com/v1", "Widget");
        assert_eq!(custom.unwrap_err().status_code(), 415);
        let keyless = strategic_merge_patch(
            &mut target,
            &json!({"spec": {"containers": [{"image": "x"}]}}),
            "v1",
            "Pod",
        );
        assert_eq!(keyless.unwrap_err().status_code(), 422);
    }
}
