//! JSON merge patch (RFC 7386): the `application/merge-patch+json` patch type.

use serde_json::{Map, Value};

/// Applies a JSON merge patch (RFC 7386) to `target` in place.
///
/// An object patch merges into the target key by key, recursively; a `null` member deletes the
/// key; any other patch value (including an array) replaces the target wholesale. A non-object
/// target patched with an object is first replaced by an empty object. Merge patch cannot fail.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        unreachable!("target was just made an object");
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Computes a JSON merge patch that turns `original` into `modified`.
///
/// Keys missing from `modified` become `null`, unchanged keys are omitted, nested objects are
/// diffed recursively and everything else is copied from `modified`. Merge patch cannot express
/// a `null` stored inside an object of `modified` (it would mean "delete"), so for such inputs
/// [`merge_patch`] of the result removes that key instead.
pub fn create_merge_patch(original: &Value, modified: &Value) -> Value {
    match (original, modified) {
        (Value::Object(original), Value::Object(modified)) => {
            let mut patch = Map::new();
            for key in original.keys() {
                if !modified.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, new) in modified {
                match original.get(key) {
                    Some(old) if old == new => {}
                    Some(old) if old.is_object() && new.is_object() => {
                        patch.insert(key.clone(), create_merge_patch(old, new));
                    }
                    _ => {
                        patch.insert(key.clone(), new.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => modified.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn patched(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge_patch(&mut target, &patch);
        target
    }

    #[test]
    fn rfc7386_introduction_example_changes_deletes_and_adds() {
        let target = json!({
            "title": "Goodbye!",
            "author": {"givenName": "John", "familyName": "Doe"},
            "tags": ["example", "sample"],
            "content": "This will be unchanged"
        });
        let patch = json!({
            "title": "Hello!",
            "phoneNumber": "+01-123-456-7890",
            "author": {"familyName": null},
            "tags": ["example"]
        });
        assert_eq!(
            patched(target, patch),
            json!({
                "title": "Hello!",
                "author": {"givenName": "John"},
                "tags": ["example"],
                "content": "This will be unchanged",
                "phoneNumber": "+01-123-456-7890"
            })
        );
    }

    #[test]
    fn rfc7386_appendix_a_examples_all_hold() {
        // (original, patch, result) in the order of RFC 7386 Appendix A.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (index, (original, patch, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                patched(original, patch),
                expected,
                "RFC 7386 example {index}"
            );
        }
    }

    #[test]
    fn merge_patch_of_kubernetes_labels_removes_one_and_keeps_the_rest() {
        let object = json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "fe"}}});
        let patch = json!({"metadata": {"labels": {"tier": null, "env": "prod"}}});
        assert_eq!(
            patched(object, patch),
            json!({"metadata": {"name": "a", "labels": {"app": "web", "env": "prod"}}})
        );
    }

    #[test]
    fn created_merge_patch_nulls_removed_keys_and_omits_unchanged_ones() {
        let original = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1]});
        let modified = json!({"b": {"c": 2, "d": 4}, "e": [1], "f": true});
        assert_eq!(
            create_merge_patch(&original, &modified),
            json!({"a": null, "b": {"d": 4}, "f": true})
        );
    }

    /// JSON values with no `null` inside objects (merge patch cannot express those).
    fn json_without_nulls() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn merge_patch_created_from_a_diff_turns_a_into_b(
            a in json_without_nulls(),
            b in json_without_nulls(),
        ) {
            let patch = create_merge_patch(&a, &b);
            prop_assert_eq!(patched(a, patch), b);
        }

        #[test]
        fn merge_patch_is_idempotent(a in json_without_nulls(), p in json_without_nulls()) {
            let once = patched(a, p.clone());
            prop_assert_eq!(patched(once.clone(), p), once);
        }
    }
}
