//! Kubernetes strategic merge patch: the `application/strategic-merge-patch+json` patch type.
//!
//! Maps merge as in a JSON merge patch (`null` deletes a key). Lists follow the kind's schema
//! (see `schema.rs`): lists of objects with a patch merge key (containers by `name`, Service
//! ports by `port`, conditions by `type`, ...) merge element by element on that key; lists of
//! scalars with the `merge` strategy (`metadata.finalizers`) merge as sets; all other lists are
//! replaced.
//!
//! Directives:
//! - `$patch: replace` in a map replaces the map with the rest of the patch map; as an element
//!   of a keyed list, it replaces the list with the other elements.
//! - `$patch: delete` in a map removes the map (like `null`; Kubernetes leaves an empty map,
//!   which built-in kinds then omit when serializing); as an element of a keyed list it removes
//!   the elements with the same merge key.
//! - `$patch: merge` is the default and accepted (Kubernetes rejects it on list elements).
//! - `$retainKeys: [..]` drops every key of the live map not listed, before merging; the patch
//!   may only set listed keys.
//! - `$deleteFromPrimitiveList/<field>: [..]` removes those values from the scalar list `field`.
//! - `$setElementOrder/<field>: [..]` orders the merged list `field`: listed elements (by merge
//!   key, or by value for scalars) come first in the given order, unlisted ones follow in their
//!   previous relative order. (Kubernetes interleaves unlisted elements by their old positions.)
//!
//! Merged keyed lists keep their elements in place and append new ones at the end; Kubernetes
//! moves the patched elements into the patch's order.
//!
//! Custom resources have no patch strategies; like a real API server this module refuses them
//! with [`PatchError::UnsupportedForKind`], which the server answers `415 UnsupportedMediaType`.

use serde_json::{Map, Value};

use super::error::{PatchError, type_name};
use super::schema::{ListType, Schema};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a Kubernetes strategic merge patch to `target` in place, using the list merge keys
/// of the built-in kind `kind` in `api_version` (e.g. `apps/v1`, `Deployment`).
///
/// # Errors
///
/// - [`PatchError::UnsupportedForKind`] when `api_version`/`kind` is not a built-in kind (a
///   custom resource): answer `415 UnsupportedMediaType`.
/// - [`PatchError::PatchNotAnObject`], [`PatchError::MissingMergeKey`] and
///   [`PatchError::InvalidDirective`] for malformed patches.
///
/// On error `target` is unchanged.
pub fn strategic_merge_patch(
    target: &mut Value,
    patch: &Value,
    api_version: &str,
    kind: &str,
) -> Result<(), PatchError> {
    let schema =
        Schema::builtin(api_version, kind).ok_or_else(|| PatchError::UnsupportedForKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::PatchNotAnObject {
            found: type_name(patch),
        });
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let merger = Merger { schema };
    let merged = merger.merge_map(original, patch, &mut Vec::new())?;
    *target = Value::Object(merged.unwrap_or_default());
    Ok(())
}

struct Merger {
    schema: Schema,
}

fn dotted(path: &[String]) -> String {
    path.join(".")
}

fn is_directive(key: &str) -> bool {
    key == PATCH
        || key == RETAIN_KEYS
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
        || key.starts_with(SET_ELEMENT_ORDER)
}

fn invalid(path: &[String], directive: &str, reason: impl Into<String>) -> PatchError {
    PatchError::InvalidDirective {
        path: dotted(path),
        directive: directive.to_owned(),
        reason: reason.into(),
    }
}

/// What a `$patch` directive asks for.
enum Directive {
    Merge,
    Replace,
    Delete,
}

fn directive_of(map: &Map<String, Value>, path: &[String]) -> Result<Directive, PatchError> {
    match map.get(PATCH) {
        None => Ok(Directive::Merge),
        Some(Value::String(s)) if s == "merge" => Ok(Directive::Merge),
        Some(Value::String(s)) if s == "replace" => Ok(Directive::Replace),
        Some(Value::String(s)) if s == "delete" => Ok(Directive::Delete),
        Some(other) => Err(invalid(
            path,
            PATCH,
            format!("must be `replace`, `delete` or `merge`, got {other}"),
        )),
    }
}

fn string_list<'a>(
    value: &'a Value,
    path: &[String],
    directive: &str,
) -> Result<Vec<&'a str>, PatchError> {
    value
        .as_array()
        .and_then(|items| items.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
        .ok_or_else(|| invalid(path, directive, "must be a list of strings"))
}

impl Merger {
    fn list_type(&self, path: &[String]) -> ListType {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        self.schema.list_type(&path)
    }

    /// Merges `patch` into `original`; `None` means the map is deleted.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        path: &mut Vec<String>,
    ) -> Result<Option<Map<String, Value>>, PatchError> {
        match directive_of(patch, path)? {
            Directive::Delete => return Ok(None),
            Directive::Replace => {
                let mut rest = patch.clone();
                rest.remove(PATCH);
                return self.merge_map(Map::new(), &rest, path);
            }
            Directive::Merge => {}
        }
        if let Some(retain) = patch.get(RETAIN_KEYS) {
            let retain = string_list(retain, path, RETAIN_KEYS)?;
            let unlisted = patch.iter().find(|(key, value)| {
                !value.is_null() && !is_directive(key) && !retain.contains(&key.as_str())
            });
            if let Some((key, _)) = unlisted {
                return Err(invalid(
                    path,
                    RETAIN_KEYS,
                    format!("the patch sets `{key}`, which the list does not retain"),
                ));
            }
            original.retain(|key, _| retain.contains(&key.as_str()));
        }
        let mut orders = Vec::new();
        for (key, value) in patch {
            if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                let Value::Array(remove) = value else {
                    return Err(invalid(path, key, "must be a list"));
                };
                if let Some(Value::Array(items)) = original.get_mut(field) {
                    items.retain(|item| !remove.contains(item));
                }
            } else if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
                let Value::Array(order) = value else {
                    return Err(invalid(path, key, "must be a list"));
                };
                orders.push((field, order));
            }
        }
        for (key, value) in patch {
            if is_directive(key) {
                continue;
            }
            if value.is_null() {
                original.remove(key);
                continue;
            }
            path.push(key.clone());
            let merged = self.merge_field(original.remove(key), value, path)?;
            path.pop();
            if let Some(merged) = merged {
                original.insert(key.clone(), merged);
            }
        }
        for (field, order) in orders {
            path.push(field.to_owned());
            let list_type = self.list_type(path);
            path.pop();
            if let Some(Value::Array(items)) = original.get_mut(field) {
                apply_element_order(items, order, list_type);
            }
        }
        Ok(Some(original))
    }

    /// Merges a patch value into an optional original; `None` means the field is deleted.
    fn merge_field(
        &self,
        original: Option<Value>,
        patch: &Value,
        path: &mut Vec<String>,
    ) -> Result<Option<Value>, PatchError> {
        match patch {
            Value::Object(patch) => {
                let original = match original {
                    Some(Value::Object(map)) => map,
                    _ => Map::new(),
                };
                Ok(self.merge_map(original, patch, path)?.map(Value::Object))
            }
            Value::Array(patch) => {
                let original = match original {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                let merged = match self.list_type(path) {
                    ListType::Atomic => patch.clone(),
                    ListType::Set => {
                        let server = original.clone();
                        let merged = merge_set(original, patch);
                        upstream_order(merged, patch, &server, None)
                    }
                    ListType::Map { merge_key, .. } => {
                        let server = original.clone();
                        let merged = self.merge_keyed_list(original, patch, merge_key, path)?;
                        upstream_order(merged, patch, &server, Some(merge_key))
                    }
                };
                Ok(Some(Value::Array(merged)))
            }
            scalar => Ok(Some(scalar.clone())),
        }
    }

    fn merge_keyed_list(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let missing_key = |path: &[String]| PatchError::MissingMergeKey {
            path: dotted(path),
            key: merge_key.to_owned(),
        };
        let mut elements = Vec::with_capacity(patch.len());
        let mut replace = false;
        for element in patch {
            let Value::Object(element) = element else {
                return Err(missing_key(path));
            };
            match directive_of(element, path)? {
                Directive::Replace => replace = true,
                directive => elements.push((directive, element)),
            }
        }
        if replace {
            original.clear();
        }
        for (directive, element) in elements {
            let key = element.get(merge_key).ok_or_else(|| missing_key(path))?;
            let position = original
                .iter()
                .position(|item| item.get(merge_key) == Some(key));
            if let Directive::Delete = directive {
                original.retain(|item| item.get(merge_key) != Some(key));
                continue;
            }
            match position {
                Some(index) => {
                    let Value::Object(live) = std::mem::take(&mut original[index]) else {
                        unreachable!("an element with a merge key is an object");
                    };
                    match self.merge_map(live, element, path)? {
                        Some(merged) => original[index] = Value::Object(merged),
                        None => {
                            original.remove(index);
                        }
                    }
                }
                None => {
                    if let Some(merged) = self.merge_map(Map::new(), element, path)? {
                        original.push(Value::Object(merged));
                    }
                }
            }
        }
        Ok(original)
    }
}

/// Union of two scalar lists: the original order, then new values in patch order.
fn merge_set(mut original: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    for value in patch {
        if !original.contains(value) {
            original.push(value.clone());
        }
    }
    original
}

/// Orders a merged list as upstream's strategic merge does: the elements the patch names, in the
/// patch's order, interleaved with the elements only the server had, in the server's order; two
/// elements the server had keep their server order, and an element new to the server goes before
/// a server-only one it meets (so new elements come first: `[80, 81]` patched with `[82]` is
/// `[82, 80, 81]`). Elements are matched by `merge_key`, or whole for a set.
fn upstream_order(
    merged: Vec<Value>,
    patch: &[Value],
    server: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let same = |a: &Value, b: &Value| match merge_key {
        Some(key) => a.get(key).is_some() && a.get(key) == b.get(key),
        None => a == b,
    };
    let index_in = |list: &[Value], item: &Value| list.iter().position(|o| same(o, item));
    // Each element's place in the patch and on the server, found once.
    type Placed = (Option<usize>, Option<usize>, Value);
    let (mut named, mut server_only): (Vec<Placed>, Vec<Placed>) = merged
        .into_iter()
        .map(|item| (index_in(patch, &item), index_in(server, &item), item))
        .partition(|(in_patch, _, _)| in_patch.is_some());
    named.sort_by_key(|(in_patch, _, _)| *in_patch);
    server_only.sort_by_key(|(_, on_server, _)| *on_server);
    let mut ordered = Vec::with_capacity(named.len() + server_only.len());
    let (mut named, mut server_only) = (
        named.into_iter().peekable(),
        server_only.into_iter().peekable(),
    );
    loop {
        let take_named = match (named.peek(), server_only.peek()) {
            (Some((_, left, _)), Some((_, right, _))) => match (left, right) {
                (Some(l), Some(r)) => l < r,
                _ => true,
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_named {
            named.next()
        } else {
            server_only.next()
        };
        ordered.extend(next.map(|(_, _, item)| item));
    }
    ordered
}

fn apply_element_order(items: &mut [Value], order: &[Value], list_type: ListType) {
    let rank = |item: &Value| -> usize {
        let found = match list_type {
            ListType::Map { merge_key, .. } => order.iter().position(|o| {
                o.get(merge_key).is_some() && o.get(merge_key) == item.get(merge_key)
            }),
            _ => order.iter().position(|o| o == item),
        };
        found.unwrap_or(order.len())
    };
    // A stable sort keeps unlisted elements in their relative order, after the listed ones.
    items.sort_by_key(rank);
}

#[cfg(test)]
mod tests;
