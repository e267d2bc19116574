//! Walks over objects along a kind's schema for server-side apply: the fields an applied
//! configuration sets, the fields an update adds, changes or removes, merging an applied
//! configuration into a live object, and removing fields nobody owns any more.

use serde_json::{Map, Value};

use super::conflict::ApplyError;
use super::fields::{FieldSet, display_path, field_element, key_element, value_element};
use super::schema::{ListType, Schema, element_key};

/// Metadata fields the server owns: never copied from an applied configuration, never owned.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// Fields that are string maps (Go `map[string]string`) in the built-in kinds, which an update
/// that adds them owns as nodes (`".": {}`), unlike struct-typed objects.
const STRING_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "nodeSelector",
    "matchLabels",
    "limits",
    "requests",
    "capacity",
    "allocatable",
    "hard",
    "used",
    "parameters",
];

/// Fields that are pointers to structs in the built-in kinds, which an update that adds them owns
/// as nodes (`".": {}`) as upstream does: the access reviews' attributes.
const OPTIONAL_STRUCTS: &[&str] = &["resourceAttributes", "nonResourceAttributes"];

/// Whether the field `name` of the map at `path` is excluded from ownership.
fn ignored(path: &[&str], name: &str) -> bool {
    match path {
        [] => name == "apiVersion" || name == "kind",
        ["metadata"] => name == "name" || name == "namespace" || SERVER_METADATA.contains(&name),
        _ => false,
    }
}

/// Walks values along the kind's schema to compute field sets.
pub(crate) struct Walker {
    pub(crate) schema: Schema,
}

/// Whether and how a value is walked below its own node.
enum Shape<'v> {
    /// A granular map.
    Map(&'v Map<String, Value>),
    /// A keyed list, with each element's `k:` path element.
    Keyed(Vec<(String, &'v Value)>),
    /// A set list.
    Set(&'v [Value]),
    /// A scalar, an atomic list or an atomic map.
    Atomic,
}

impl Walker {
    fn shape<'v>(&self, value: &'v Value, path: &[&str]) -> Shape<'v> {
        match value {
            Value::Object(map) if !self.schema.is_atomic_map(path) => Shape::Map(map),
            Value::Array(items) => match self.schema.list_type(path) {
                ListType::Set => Shape::Set(items),
                ListType::Map { keys, .. } => {
                    let keyed: Option<Vec<_>> = items
                        .iter()
                        .map(|item| element_key(item, keys).map(|key| (key_element(&key), item)))
                        .collect();
                    match keyed {
                        Some(keyed) => Shape::Keyed(keyed),
                        // Elements without keys cannot be tracked one by one.
                        None => Shape::Atomic,
                    }
                }
                ListType::Atomic => Shape::Atomic,
            },
            _ => Shape::Atomic,
        }
    }

    /// The fields an applied configuration sets: leaves, atomic values and the elements of keyed
    /// and set lists (Kubernetes' `ToFieldSet`). Granular maps and non-atomic lists are not
    /// members themselves, so an empty one sets nothing.
    pub(crate) fn applied_set<'a>(&self, value: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
        let mut set = FieldSet::new();
        match self.shape(value, path) {
            Shape::Map(map) => {
                for (name, child) in map {
                    if ignored(path, name) {
                        continue;
                    }
                    path.push(name);
                    set.attach(field_element(name), self.applied_set(child, path));
                    path.pop();
                }
            }
            Shape::Keyed(items) => {
                for (element, item) in &items {
                    let mut item_set = self.applied_set(item, path);
                    item_set.union_with(&FieldSet::leaf());
                    set.attach(element.clone(), item_set);
                }
            }
            Shape::Set(items) => {
                for item in items {
                    set.attach(value_element(item), FieldSet::leaf());
                }
            }
            Shape::Atomic => set = FieldSet::leaf(),
        }
        set
    }

    /// Every path of a value, the value's own node included (what an update adds). Unlike
    /// [`Walker::applied_set`], lists and the well-known string maps ([`STRING_MAPS`]) are
    /// owned as nodes too, as Kubernetes owns an added Go map or slice; other maps (Go structs
    /// there) are not.
    fn full_set<'a>(&self, value: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
        let mut set = FieldSet::new();
        let member = match self.shape(value, path) {
            Shape::Map(map) => {
                for (name, child) in map {
                    if ignored(path, name) {
                        continue;
                    }
                    path.push(name);
                    set.attach(field_element(name), self.full_set(child, path));
                    path.pop();
                }
                // An empty object is owned as a leaf (`f:resources: {}`), as upstream does.
                map.is_empty()
                    || path.last().is_some_and(|name| {
                        STRING_MAPS.contains(name) || OPTIONAL_STRUCTS.contains(name)
                    })
            }
            Shape::Keyed(items) => {
                for (element, item) in items {
                    set.attach(element, self.element_set(item, path));
                }
                true
            }
            Shape::Set(items) => {
                for item in items {
                    set.attach(value_element(item), FieldSet::leaf());
                }
                true
            }
            Shape::Atomic => true,
        };
        if member {
            set.make_member();
        }
        set
    }

    /// Every path of a keyed list element, the element itself included.
    fn element_set<'a>(&self, item: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
        let mut set = self.full_set(item, path);
        set.make_member();
        set
    }

    /// The paths added or changed (first) and removed (second) from `old` to `new`, relative
    /// to the node at `path`.
    pub(crate) fn compare<'a>(
        &self,
        old: Option<&'a Value>,
        new: Option<&'a Value>,
        path: &mut Vec<&'a str>,
    ) -> (FieldSet, FieldSet) {
        let (old, new) = match (old, new) {
            (None, None) => return (FieldSet::new(), FieldSet::new()),
            (None, Some(new)) => return (self.full_set(new, path), FieldSet::new()),
            (Some(old), None) => return (FieldSet::new(), self.full_set(old, path)),
            (Some(old), Some(new)) => (old, new),
        };
        let mut changed = FieldSet::new();
        let mut removed = FieldSet::new();
        match (self.shape(old, path), self.shape(new, path)) {
            (Shape::Map(old), Shape::Map(new)) => {
                let names = old
                    .keys()
                    .chain(new.keys().filter(|k| !old.contains_key(*k)));
                for name in names {
                    if ignored(path, name) {
                        continue;
                    }
                    path.push(name);
                    let (c, r) = self.compare(old.get(name), new.get(name), path);
                    path.pop();
                    changed.attach(field_element(name), c);
                    removed.attach(field_element(name), r);
                }
            }
            (Shape::Keyed(old), Shape::Keyed(new)) => {
                for (element, item) in &old {
                    match find(&new, element) {
                        Some(new_item) => {
                            let (c, r) = self.compare(Some(item), Some(new_item), path);
                            changed.attach(element.clone(), c);
                            removed.attach(element.clone(), r);
                        }
                        None => removed.attach(element.clone(), self.element_set(item, path)),
                    }
                }
                for (element, item) in &new {
                    if find(&old, element).is_none() {
                        changed.attach(element.clone(), self.element_set(item, path));
                    }
                }
            }
            (Shape::Set(old), Shape::Set(new)) => {
                for item in new.iter().filter(|item| !old.contains(item)) {
                    changed.attach(value_element(item), FieldSet::leaf());
                }
                for item in old.iter().filter(|item| !new.contains(item)) {
                    removed.attach(value_element(item), FieldSet::leaf());
                }
            }
            _ if old == new => {}
            _ => {
                changed = self.full_set(new, path);
                // What was below the old value is gone, the node itself stays.
                removed = self.full_set(old, path).difference(&FieldSet::leaf());
                removed = removed.difference(&changed);
            }
        }
        (changed, removed)
    }
}

/// The element of a keyed list with the given `k:` path element.
fn find<'a>(items: &[(String, &'a Value)], element: &str) -> Option<&'a Value> {
    items.iter().find(|(e, _)| e == element).map(|(_, v)| *v)
}

/// Removes `null` members of maps, recursively (an applied `null` means "not specified").
pub(crate) fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn dotted(path: &[&str]) -> String {
    path.join(".")
}

impl Walker {
    /// Merges the applied configuration into the live object.
    pub(crate) fn merge<'a>(
        &self,
        live: &mut Value,
        applied: &'a Value,
        path: &mut Vec<&'a str>,
    ) -> Result<(), ApplyError> {
        match (applied, self.shape(applied, path)) {
            (Value::Object(applied), Shape::Map(_)) => {
                if !live.is_object() {
                    *live = Value::Object(Map::new());
                }
                let Value::Object(live) = live else {
                    unreachable!("live was just made an object");
                };
                for (name, child) in applied {
                    if matches!(path.as_slice(), ["metadata"])
                        && SERVER_METADATA.contains(&name.as_str())
                    {
                        continue;
                    }
                    path.push(name);
                    self.merge(live.entry(name.clone()).or_insert(Value::Null), child, path)?;
                    path.pop();
                }
                Ok(())
            }
            (Value::Array(applied), Shape::Set(_)) => {
                let mut items = match live.take() {
                    Value::Array(items) => items,
                    _ => Vec::new(),
                };
                for item in applied {
                    if !items.contains(item) {
                        items.push(item.clone());
                    }
                }
                *live = Value::Array(items);
                Ok(())
            }
            (Value::Array(applied_items), Shape::Keyed(keyed)) => {
                let ListType::Map { keys, .. } = self.schema.list_type(path) else {
                    unreachable!("a keyed shape comes from a keyed list type");
                };
                for (index, (element, _)) in keyed.iter().enumerate() {
                    if keyed[..index].iter().any(|(e, _)| e == element) {
                        return Err(ApplyError::InvalidList {
                            path: dotted(path),
                            reason: format!(
                                "duplicate entries for key {}",
                                display_path(std::slice::from_ref(element))
                            ),
                        });
                    }
                }
                let mut items = match live.take() {
                    Value::Array(items) => items,
                    _ => Vec::new(),
                };
                for (item, (element, _)) in applied_items.iter().zip(&keyed) {
                    let position = items.iter().position(|live_item| {
                        element_key(live_item, keys).is_some_and(|k| &key_element(&k) == element)
                    });
                    match position {
                        Some(index) => self.merge(&mut items[index], item, path)?,
                        None => items.push(item.clone()),
                    }
                }
                *live = Value::Array(items);
                Ok(())
            }
            (Value::Array(items), Shape::Atomic) => {
                if let ListType::Map { keys, .. } = self.schema.list_type(path)
                    && let Some(bad) = items.iter().find(|item| element_key(item, keys).is_none())
                {
                    let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
                    return Err(ApplyError::InvalidList {
                        path: dotted(path),
                        reason: format!(
                            "element {bad} lacks the key field(s) {}",
                            names.join(", ")
                        ),
                    });
                }
                *live = applied.clone();
                Ok(())
            }
            _ => {
                *live = applied.clone();
                Ok(())
            }
        }
    }

    /// Removes from `object` the paths of `remove` that `kept` holds neither itself nor anything
    /// beneath (`kept` is every field still owned by someone). Maps and lists emptied by the
    /// removal go too. `keys` names the key fields of `object` when it is a keyed list element:
    /// those stay as long as the element does.
    pub(crate) fn prune<'a>(
        &self,
        object: &mut Value,
        remove: &'a FieldSet,
        kept: Option<&FieldSet>,
        path: &mut Vec<&'a str>,
        keys: &[&str],
    ) {
        for (element, child_remove) in remove.children() {
            let child_kept = kept.and_then(|o| o.child(element));
            let kept_below = child_kept.is_some_and(|o| !o.is_empty());
            let whole = child_remove.is_member() && !kept_below;
            match object {
                Value::Object(map) => {
                    let Some(name) = element.strip_prefix("f:") else {
                        continue;
                    };
                    if keys.contains(&name) {
                        continue;
                    }
                    let Some(child) = map.get_mut(name) else {
                        continue;
                    };
                    if whole {
                        map.remove(name);
                        continue;
                    }
                    let was_empty = is_empty_container(child);
                    path.push(name);
                    self.prune(child, child_remove, child_kept, path, &[]);
                    path.pop();
                    if !was_empty && !kept_below && is_empty_container(child) {
                        map.remove(name);
                    }
                }
                Value::Array(items) => {
                    let list_type = self.schema.list_type(path);
                    let index = items.iter().position(|item| match list_type {
                        ListType::Map { keys, .. } => {
                            element_key(item, keys).is_some_and(|k| &key_element(&k) == element)
                        }
                        ListType::Set => &value_element(item) == element,
                        ListType::Atomic => false,
                    });
                    let Some(index) = index else {
                        continue;
                    };
                    if whole {
                        items.remove(index);
                    } else if let ListType::Map { keys, .. } = list_type {
                        let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
                        self.prune(&mut items[index], child_remove, child_kept, path, &names);
                    }
                }
                _ => {}
            }
        }
    }
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn walker(api_version: &str, kind: &str) -> Walker {
        Walker {
            schema: Schema::for_kind(api_version, kind),
        }
    }

    fn paths(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(|p| display_path(p)).collect()
    }

    #[test]
    fn changing_one_container_image_changes_only_that_leaf() {
        let old = json!({"spec": {"containers": [
            {"name": "web", "image": "a"},
            {"name": "log", "image": "b"}
        ]}});
        let mut new = old.clone();
        new["spec"]["containers"][1]["image"] = json!("c");
        let (changed, removed) = walker("v1", "Pod").compare(Some(&old), Some(&new), &mut vec![]);
        assert_eq!(
            paths(&changed),
            vec![r#".spec.containers[name="log"].image"#]
        );
        assert!(removed.is_empty());
    }

    #[test]
    fn a_removed_element_is_removed_with_its_fields() {
        let old = json!({"spec": {"containers": [{"name": "web", "image": "a"}]}});
        let new = json!({"spec": {"containers": []}});
        let (changed, removed) = walker("v1", "Pod").compare(Some(&old), Some(&new), &mut vec![]);
        assert!(changed.is_empty());
        assert_eq!(
            paths(&removed),
            vec![
                r#".spec.containers[name="web"]"#,
                r#".spec.containers[name="web"].image"#,
                r#".spec.containers[name="web"].name"#
            ]
        );
    }

    #[test]
    fn applied_set_owns_leaves_atomic_lists_and_elements_but_no_maps() {
        let config = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "web"}], "nodeSelector": {}, "args": []}
        });
        let set = walker("v1", "Pod").applied_set(&config, &mut vec![]);
        assert_eq!(
            paths(&set),
            vec![
                ".metadata.labels.a",
                ".spec.args",
                r#".spec.containers[name="web"]"#,
                r#".spec.containers[name="web"].name"#,
            ]
        );
    }

    #[test]
    fn an_added_struct_is_not_owned_as_a_node_but_an_added_string_map_is() {
        let old = json!({"metadata": {"name": "d"}});
        let new = json!({
            "metadata": {"name": "d", "labels": {"app": "web"}},
            "spec": {"template": {"spec": {"containers": [{"name": "web"}]}}}
        });
        let (changed, _) =
            walker("apps/v1", "Deployment").compare(Some(&old), Some(&new), &mut vec![]);
        assert_eq!(
            changed.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:template": {"f:spec": {"f:containers": {
                    ".": {},
                    "k:{\"name\":\"web\"}": {".": {}, "f:name": {}}
                }}}}
            })
        );
    }

    #[test]
    fn atomic_selector_is_owned_and_compared_whole() {
        let old = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}}});
        let new = json!({"spec": {"selector": {"matchLabels": {"app": "b"}}}});
        let (changed, _) =
            walker("apps/v1", "Deployment").compare(Some(&old), Some(&new), &mut vec![]);
        assert_eq!(paths(&changed), vec![".spec.selector"]);
    }
}
