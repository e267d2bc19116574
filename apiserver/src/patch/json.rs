//! JSON patch (RFC 6902): the `application/json-patch+json` patch type.
//!
//! Built on the `json-patch` crate. One difference from Kubernetes (which decodes numbers as
//! `float64`): `test` compares numbers as written, so `1` does not test equal to `1.0`.

use serde_json::Value;

use super::error::{PatchError, type_name};

/// Applies a JSON patch (RFC 6902) to `target` in place: `add`, `remove`, `replace`, `move`,
/// `copy` and `test`, in order.
///
/// # Errors
///
/// [`PatchError::JsonPatchNotAnArray`] and [`PatchError::InvalidJsonPatchOperation`] for a
/// malformed document (nothing is applied); [`PatchError::JsonPatchFailed`], naming the index,
/// operation and path, when an operation cannot be applied. The patch is atomic: on any error
/// `target` is left as it was.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Array(operations) = patch else {
        return Err(PatchError::JsonPatchNotAnArray {
            found: type_name(patch),
        });
    };
    let operations = operations
        .iter()
        .enumerate()
        .map(|(index, operation)| {
            serde_json::from_value::<json_patch::PatchOperation>(operation.clone()).map_err(
                |error| PatchError::InvalidJsonPatchOperation {
                    index,
                    reason: error.to_string(),
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    json_patch::patch(target, &operations).map_err(|error| {
        let op = match operations.get(error.operation) {
            Some(json_patch::PatchOperation::Add(_)) => "add",
            Some(json_patch::PatchOperation::Remove(_)) => "remove",
            Some(json_patch::PatchOperation::Replace(_)) => "replace",
            Some(json_patch::PatchOperation::Move(_)) => "move",
            Some(json_patch::PatchOperation::Copy(_)) => "copy",
            Some(json_patch::PatchOperation::Test(_)) | None => "test",
        };
        PatchError::JsonPatchFailed {
            index: error.operation,
            op,
            path: error.path.to_string(),
            reason: error.kind.to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(target: Value, patch: Value) -> Result<Value, PatchError> {
        let mut target = target;
        json_patch(&mut target, &patch)?;
        Ok(target)
    }

    #[test]
    fn rfc6902_appendix_a_successful_examples_all_hold() {
        // (document, patch, result) for RFC 6902 A.1-A.7, A.8, A.10, A.14 and A.16.
        let cases = [
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux"}]),
                json!({"baz": "qux", "foo": "bar"}),
            ),
            (
                json!({"foo": ["bar", "baz"]}),
                json!([{"op": "add", "path": "/foo/1", "value": "qux"}]),
                json!({"foo": ["bar", "qux", "baz"]}),
            ),
            (
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "remove", "path": "/baz"}]),
                json!({"foo": "bar"}),
            ),
            (
                json!({"foo": ["bar", "qux", "baz"]}),
                json!([{"op": "remove", "path": "/foo/1"}]),
                json!({"foo": ["bar", "baz"]}),
            ),
            (
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "replace", "path": "/baz", "value": "boo"}]),
                json!({"baz": "boo", "foo": "bar"}),
            ),
            (
                json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
                json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}]),
                json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
            ),
            (
                json!({"foo": ["all", "grass", "cows", "eat"]}),
                json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}]),
                json!({"foo": ["all", "cows", "eat", "grass"]}),
            ),
            (
                json!({"baz": "qux", "foo": ["a", 2, "c"]}),
                json!([
                    {"op": "test", "path": "/baz", "value": "qux"},
                    {"op": "test", "path": "/foo/1", "value": 2}
                ]),
                json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            ),
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}]),
                json!({"foo": "bar", "child": {"grandchild": {}}}),
            ),
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}]),
                json!({"foo": "bar", "baz": "qux"}),
            ),
            (
                json!({"/": 9, "~1": 10}),
                json!([{"op": "test", "path": "/~01", "value": 10}]),
                json!({"/": 9, "~1": 10}),
            ),
            (
                json!({"foo": ["bar"]}),
                json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]),
                json!({"foo": ["bar", ["abc", "def"]]}),
            ),
        ];
        for (index, (document, patch, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                patched(document, patch),
                Ok(expected),
                "RFC 6902 case {index}"
            );
        }
    }

    #[test]
    fn rfc6902_a9_failing_test_names_the_operation_and_path() {
        let error = patched(
            json!({"baz": "qux"}),
            json!([{"op": "test", "path": "/baz", "value": "bar"}]),
        )
        .unwrap_err();
        assert_eq!(
            error,
            PatchError::JsonPatchFailed {
                index: 0,
                op: "test",
                path: "/baz".into(),
                reason: "value did not match".into(),
            }
        );
        assert_eq!(
            error.to_string(),
            "JSON patch operation 0 (test at path `/baz`) failed: value did not match"
        );
    }

    #[test]
    fn rfc6902_a11_adding_to_a_nonexistent_target_fails() {
        let error = patched(
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
        )
        .unwrap_err();
        assert!(
            matches!(&error, PatchError::JsonPatchFailed { index: 0, op: "add", path, .. } if path == "/baz/bat"),
            "{error:?}"
        );
    }

    #[test]
    fn rfc6902_a15_a_string_does_not_test_equal_to_a_number() {
        let error = patched(
            json!({"/": 9, "~1": 10}),
            json!([{"op": "test", "path": "/~01", "value": "10"}]),
        )
        .unwrap_err();
        assert!(
            matches!(&error, PatchError::JsonPatchFailed { op: "test", path, .. } if path == "/~01"),
            "{error:?}"
        );
    }

    #[test]
    fn failing_operation_leaves_the_target_unchanged_and_is_named_by_index() {
        let mut target = json!({"a": 1});
        let error = json_patch(
            &mut target,
            &json!([
                {"op": "add", "path": "/b", "value": 2},
                {"op": "remove", "path": "/missing"}
            ]),
        )
        .unwrap_err();
        assert_eq!(target, json!({"a": 1}));
        assert!(
            matches!(&error, PatchError::JsonPatchFailed { index: 1, op: "remove", path, .. } if path == "/missing"),
            "{error:?}"
        );
    }

    #[test]
    fn test_compares_numbers_as_written() {
        let error = patched(
            json!({"a": 1}),
            json!([{"op": "test", "path": "/a", "value": 1.0}]),
        );
        assert!(matches!(
            error,
            Err(PatchError::JsonPatchFailed { op: "test", .. })
        ));
    }

    #[test]
    fn copy_duplicates_a_value_at_a_new_path() {
        assert_eq!(
            patched(
                json!({"metadata": {"labels": {"app": "web"}}}),
                json!([{"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"}]),
            ),
            Ok(json!({"metadata": {"labels": {"app": "web"}, "annotations": {"app": "web"}}}))
        );
    }

    #[test]
    fn unknown_op_is_a_malformed_operation_naming_its_index() {
        let error = patched(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": 1}, {"op": "frobnicate", "path": "/a"}]),
        )
        .unwrap_err();
        assert!(
            matches!(
                error,
                PatchError::InvalidJsonPatchOperation { index: 1, .. }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn non_array_json_patch_is_rejected() {
        assert_eq!(
            patched(json!({}), json!({"op": "add"})),
            Err(PatchError::JsonPatchNotAnArray { found: "object" })
        );
    }
}
