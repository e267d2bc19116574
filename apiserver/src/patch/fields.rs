//! Sets of field paths in Kubernetes' `FieldsV1` encoding, the content of a
//! `metadata.managedFields[].fieldsV1`.
//!
//! A set is a tree keyed by path elements: `f:<field>` for a field of a map, `k:<json>` for an
//! element of an associative list by its key fields (`k:{"name":"web"}`), `v:<json>` for an
//! element of a set list (`v:"example.com/finalizer"`), `i:<n>` for a list index. A node that is
//! itself in the set and also has children carries the marker `".": {}`; a leaf in the set is
//! `{}`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A set of field paths, convertible to and from the `FieldsV1` JSON encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path leading to this node is itself in the set.
    member: bool,
    /// Children by encoded path element (`f:name`, `k:{..}`, `v:..`, `i:..`).
    children: BTreeMap<String, FieldSet>,
}

/// The `f:` element of a map field.
pub(crate) fn field_element(name: &str) -> String {
    format!("f:{name}")
}

/// The `k:` element of an associative list item, from its key fields (sorted by name, as
/// Kubernetes writes them).
pub(crate) fn key_element(key: &[(&str, Value)]) -> String {
    let mut fields: Vec<_> = key.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let body = fields
        .iter()
        .map(|(name, value)| format!("{}:{}", Value::from(*name), value))
        .collect::<Vec<_>>()
        .join(",");
    format!("k:{{{body}}}")
}

/// The `v:` element of a set list item.
pub(crate) fn value_element(value: &Value) -> String {
    format!("v:{value}")
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set holding only the path to this node (a leaf).
    pub(crate) fn leaf() -> Self {
        FieldSet {
            member: true,
            children: BTreeMap::new(),
        }
    }

    /// Decodes a `fieldsV1` value. Anything that is not an object decodes to the empty set.
    pub fn from_fields_v1(value: &Value) -> Self {
        let mut set = FieldSet::new();
        if let Value::Object(map) = value {
            for (key, child) in map {
                if key == "." {
                    set.member = true;
                } else {
                    let child = FieldSet::from_fields_v1(child);
                    let child = if child.is_empty() {
                        FieldSet::leaf()
                    } else {
                        child
                    };
                    set.children.insert(key.clone(), child);
                }
            }
        }
        set
    }

    /// Encodes the set as a `fieldsV1` value.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (key, child) in &self.children {
            map.insert(key.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Whether the set holds `path` (a list of encoded path elements).
    pub fn contains(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Adds `path` (a list of encoded path elements) to the set.
    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Every path in the set, in encoded-element order.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (key, child) in &self.children {
            prefix.push(key.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The child node for one path element.
    pub(crate) fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// Puts this node itself in the set.
    pub(crate) fn make_member(&mut self) {
        self.member = true;
    }

    /// Whether this node is itself in the set.
    pub(crate) fn is_member(&self) -> bool {
        self.member
    }

    /// The children with their path elements.
    pub(crate) fn children(&self) -> impl Iterator<Item = (&String, &FieldSet)> {
        self.children.iter()
    }

    /// Attaches `child` under `element` unless it is empty (merging with an existing child).
    pub(crate) fn attach(&mut self, element: String, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        match self.children.entry(element) {
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(child);
            }
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                entry.get_mut().union_with(&child);
            }
        }
    }

    /// Adds every path of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (key, child) in &other.children {
            self.children
                .entry(key.clone())
                .or_default()
                .union_with(child);
        }
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            let child = match other.children.get(key) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !child.is_empty() {
                out.children.insert(key.clone(), child);
            }
        }
        out
    }

    /// The paths in both `self` and `other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (key, child) in &self.children {
            if let Some(theirs) = other.children.get(key) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(key.clone(), both);
                }
            }
        }
        out
    }
}

/// Renders an encoded path the way Kubernetes prints it in conflict messages:
/// `.spec.containers[name="web"].image`, `.metadata.finalizers[="a"]`, `.spec.args[0]`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(key) = element.strip_prefix("k:") {
            match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(fields) => {
                    let fields: Vec<String> = fields
                        .iter()
                        .map(|(name, value)| format!("{name}={value}"))
                        .collect();
                    out.push_str(&format!("[{}]", fields.join(",")));
                }
                Err(_) => out.push_str(&format!("[{key}]")),
            }
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else if let Some(index) = element.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        } else {
            out.push_str(element);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> Vec<String> {
        elements.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_member_markers() {
        let encoded = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}
        });
        let set = FieldSet::from_fields_v1(&encoded);
        assert!(set.contains(&path(&["f:metadata", "f:labels"])));
        assert!(!set.contains(&path(&["f:metadata"])));
        assert!(set.contains(&path(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"web\"}",
            "f:image"
        ])));
        assert_eq!(set.to_fields_v1(), encoded);
    }

    #[test]
    fn key_elements_sort_their_fields_like_kubernetes() {
        assert_eq!(
            key_element(&[("protocol", json!("TCP")), ("containerPort", json!(80))]),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(value_element(&json!("a/b")), r#"v:"a/b""#);
    }

    #[test]
    fn set_algebra_keeps_only_the_right_paths() {
        let mut a = FieldSet::new();
        a.insert(&path(&["f:a", "f:x"]));
        a.insert(&path(&["f:a", "f:y"]));
        let mut b = FieldSet::new();
        b.insert(&path(&["f:a", "f:y"]));
        b.insert(&path(&["f:b"]));
        assert_eq!(a.difference(&b).paths(), vec![path(&["f:a", "f:x"])]);
        assert_eq!(a.intersection(&b).paths(), vec![path(&["f:a", "f:y"])]);
        a.union_with(&b);
        assert_eq!(a.paths().len(), 3);
        assert!(FieldSet::new().is_empty());
    }

    #[test]
    fn paths_display_as_in_kubernetes_conflict_messages() {
        assert_eq!(
            display_path(&path(&[
                "f:spec",
                "f:containers",
                r#"k:{"name":"web"}"#,
                "f:image"
            ])),
            r#".spec.containers[name="web"].image"#
        );
        assert_eq!(
            display_path(&path(&["f:metadata", "f:finalizers", r#"v:"a""#])),
            r#".metadata.finalizers[="a"]"#
        );
    }
}
