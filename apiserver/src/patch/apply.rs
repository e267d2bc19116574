//! Server-side apply (`application/apply-patch+yaml`) and the field ownership it relies on,
//! recorded in `metadata.managedFields`.
//!
//! # Flow
//!
//! [`apply`] merges the applied configuration into the live object (maps key by key, lists with
//! keys element by element, set lists as sets, other lists and atomic maps whole), checks that
//! no field it changes is owned by another manager (or takes it from them with `force`),
//! removes the fields this manager applied last time but no longer applies (unless another
//! manager owns them too), and records the applied fields as the manager's `Apply` entry.
//!
//! [`record_update`] records a PUT or a non-apply PATCH: the fields it added or changed become
//! the manager's `Update` entry and leave every other manager's entry; removed fields leave all
//! entries. Updates never conflict.
//!
//! # Guarantees
//!
//! - `managedFields` entries use the real encoding: `manager`, `operation` (`Apply`/`Update`),
//!   `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1` with `f:`, `k:`, `v:` elements and
//!   `.` markers, so clients that read them (kubectl, client-go's extract helpers) understand
//!   them.
//! - Ownership is tracked below the object root; `apiVersion`, `kind`, `metadata.name`,
//!   `metadata.namespace` and the server-owned metadata (`uid`, `resourceVersion`, `generation`,
//!   `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `selfLink`,
//!   `managedFields`) are never owned, as in Kubernetes.
//! - Applying the same configuration twice changes nothing but the entry's `time`.
//!
//! # Departures from Kubernetes
//!
//! 1. **Schema.** List and map types come from a fixed table of the built-in kinds
//!    (`patch/schema.rs`): keyed lists such as containers (`name`), container and Service ports
//!    (`containerPort`/`port` + `protocol`, defaulting to `TCP`), env (`name`), volumeMounts
//!    (`mountPath`), volumes (`name`), conditions (`type`), ownerReferences (`uid`); set lists
//!    (`metadata.finalizers`); atomic maps (workload `spec.selector`). Every other list is
//!    atomic and every other map granular. Custom resources are handled the same way with only
//!    the `metadata` rules: the CRD's `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`
//!    and `x-kubernetes-map-type` are not read, so a CR's lists are always atomic.
//! 2. **No defaulting, conversion or validation.** The applied configuration is merged as sent;
//!    the server does not fill defaults before computing ownership, except the `protocol: TCP`
//!    default of port list keys. Entries are never converted between API versions: an entry's
//!    `apiVersion` is recorded, but its field paths are compared as they are.
//! 3. **Explicit `null`s** in the applied configuration are dropped before applying (the field
//!    is treated as not specified), where Kubernetes may treat them as a request to remove.
//! 4. **Entry identity** is (`manager`, `operation`); Kubernetes also keys `Update` entries by
//!    `apiVersion` and by `subresource`. There is no `subresource` field: changes made through
//!    `/status` are recorded like any other update, and status fields are owned like spec ones
//!    (the server, not this module, decides which fields an endpoint may change).
//! 5. **Conflicts** are reported for every field the apply would add or change that another
//!    entry owns (the same rule as Kubernetes). A field applied with the value it already has
//!    becomes shared without conflict. Type changes between a scalar and a map report the
//!    changed node only, not the other manager's fields beneath it.
//! 6. **Removal.** A field this manager applied before and omits now is removed unless another
//!    entry owns it or anything beneath it; in that case only the parts nobody else owns are
//!    removed. Maps emptied by that removal are removed too (Kubernetes keeps an empty map for
//!    custom resources).
//! 7. **User-supplied `managedFields`.** [`apply`] ignores `metadata.managedFields` in the
//!    applied configuration (Kubernetes rejects it). [`record_update`] takes the new object's
//!    `managedFields` when present and different from the old object's (so a client can reset
//!    them, e.g. to `[]`), like Kubernetes, but does not validate them.
//! 8. **Server-owned metadata** (`uid`, `resourceVersion`, `generation`, timestamps) in the
//!    applied configuration is ignored; the server must check a `resourceVersion` precondition
//!    itself if it wants one.
//!
//! # Errors
//!
//! [`ApplyError::Conflict`] is a `409 Conflict` whose `details.causes` are
//! [`FieldConflict::status_cause`]; every other variant is a `400 BadRequest`.

use serde_json::{Map, Value, json};

use super::fields::{FieldSet, display_path, field_element, key_element, value_element};
use super::schema::{ListType, Schema, element_key};

/// The parameters of one server-side apply request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyRequest {
    /// The `fieldManager` query parameter; required and non-empty.
    pub field_manager: String,
    /// The `force` query parameter: take ownership of conflicting fields instead of failing.
    pub force: bool,
    /// The time to record in the manager's entry, RFC 3339 (`2024-01-02T03:04:05Z`).
    pub now: String,
    /// The `apiVersion` of the endpoint (`v1`, `apps/v1`, `example.com/v1`).
    pub api_version: String,
    /// The `kind` served by the endpoint (`ConfigMap`, `Deployment`, ...).
    pub kind: String,
}

impl ApplyRequest {
    /// A request without `force`.
    pub fn new(
        field_manager: impl Into<String>,
        api_version: impl Into<String>,
        kind: impl Into<String>,
        now: impl Into<String>,
    ) -> Self {
        ApplyRequest {
            field_manager: field_manager.into(),
            force: false,
            now: now.into(),
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// Sets `force`.
    #[must_use]
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The owning manager's name.
    pub manager: String,
    /// The owning entry's operation, `Apply` or `Update`.
    pub operation: String,
    /// The owning entry's `apiVersion`.
    pub api_version: String,
    /// The owning entry's `time`, if it has one.
    pub time: Option<String>,
    /// The field, as Kubernetes prints it: `.spec.replicas`,
    /// `.spec.containers[name="web"].image`.
    pub field: String,
}

impl FieldConflict {
    /// The manager as Kubernetes describes it in conflict messages: `"kubectl"` for an `Apply`
    /// entry, `"kubectl-edit" using apps/v1 at 2024-01-02T03:04:05Z` for an `Update` entry.
    pub fn manager_description(&self) -> String {
        let name = format!("{:?}", self.manager);
        if self.operation != "Update" {
            return name;
        }
        match &self.time {
            Some(time) => format!("{name} using {} at {time}", self.api_version),
            None => format!("{name} using {}", self.api_version),
        }
    }

    /// The `metav1.StatusCause` for this conflict, for the 409 Status's `details.causes`:
    /// `{"type": "FieldManagerConflict", "message": "conflict with \"m\"", "field": ".spec.x"}`.
    pub fn status_cause(&self) -> Value {
        json!({
            "type": "FieldManagerConflict",
            "message": format!("conflict with {}", self.manager_description()),
            "field": self.field,
        })
    }
}

/// The Status message Kubernetes gives an apply conflict.
fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description(),
            only.field
        );
    }
    let mut managers: Vec<String> = conflicts.iter().map(|c| c.manager_description()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in &managers {
        lines.push(format!("conflicts with {manager}:"));
        for conflict in conflicts
            .iter()
            .filter(|c| &c.manager_description() == manager)
        {
            lines.push(format!("- {}", conflict.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Why a server-side apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The `fieldManager` query parameter is missing or empty; apply requires it.
    #[error("fieldManager is required for apply requests: pass ?fieldManager=<name>")]
    MissingFieldManager,
    /// The applied configuration is not a JSON object.
    #[error("the applied configuration must be an object")]
    NotAnObject,
    /// The applied configuration lacks `apiVersion` or `kind`, or they differ from the endpoint.
    #[error(
        "the applied configuration has apiVersion {found_api_version:?} and kind {found_kind:?}, \
         but this endpoint serves {api_version} {kind}"
    )]
    TypeMismatch {
        /// The endpoint's `apiVersion`.
        api_version: String,
        /// The endpoint's `kind`.
        kind: String,
        /// The configuration's `apiVersion` (empty when missing).
        found_api_version: String,
        /// The configuration's `kind` (empty when missing).
        found_kind: String,
    },
    /// An element of a keyed list lacks a key field, or two elements have the same key.
    #[error("invalid applied configuration at `{path}`: {reason}")]
    InvalidList {
        /// Dotted path of the list, e.g. `spec.containers`.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Fields the apply would change are owned by other managers and `force` is not set.
    /// Answer `409 Conflict` with one `FieldManagerConflict` cause per entry.
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Each conflicting field with its owner, in path order.
        conflicts: Vec<FieldConflict>,
    },
}

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

/// Whether the field `name` of the map at `path` is excluded from ownership.
fn ignored(path: &[&str], name: &str) -> bool {
    match path {
        [] => name == "apiVersion" || name == "kind",
        ["metadata"] => name == "name" || name == "namespace" || SERVER_METADATA.contains(&name),
        _ => false,
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn parse(value: &Value) -> Option<Entry> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
        Some(Entry {
            manager: text("manager")?,
            operation: text("operation").unwrap_or_else(|| "Update".into()),
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            fields: value
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        })
    }

    fn to_value(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), self.manager.clone().into());
        entry.insert("operation".into(), self.operation.clone().into());
        entry.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(time) = &self.time {
            entry.insert("time".into(), time.clone().into());
        }
        entry.insert("fieldsType".into(), "FieldsV1".into());
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        Value::Object(entry)
    }

    fn is(&self, manager: &str, operation: &str) -> bool {
        self.manager == manager && self.operation == operation
    }
}

fn managed_fields_of(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

fn parse_entries(managed_fields: Option<&Value>) -> Vec<Entry> {
    managed_fields
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

/// Writes `entries` into `object.metadata.managedFields` (removing the key when there are none).
fn store_entries(object: &mut Value, entries: &[Entry]) {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_value).collect()),
        );
    }
}

/// Walks values along the kind's schema to compute field sets.
struct Walker {
    schema: Schema,
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

    /// The fields an applied configuration sets: leaves, atomic values and keyed list elements
    /// (Kubernetes' `ToFieldSet`). Maps and lists with content are not members themselves.
    fn applied_set<'a>(&self, value: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
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
                if map.is_empty() {
                    set = FieldSet::leaf();
                }
            }
            Shape::Keyed(items) => {
                for (element, item) in &items {
                    let mut item_set = self.applied_set(item, path);
                    item_set.union_with(&FieldSet::leaf());
                    set.attach(element.clone(), item_set);
                }
                if items.is_empty() {
                    set = FieldSet::leaf();
                }
            }
            Shape::Set(items) => {
                for item in items {
                    set.attach(value_element(item), FieldSet::leaf());
                }
                if items.is_empty() {
                    set = FieldSet::leaf();
                }
            }
            Shape::Atomic => set = FieldSet::leaf(),
        }
        set
    }

    /// Every path of a value, the value's own node included (what an update adds).
    fn full_set<'a>(&self, value: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
        let mut set = self.applied_set(value, path);
        // Below the root and `metadata`, the maps an update creates are owned as members.
        set.union_with(&self.map_members(value, path));
        if path.as_slice() != ["metadata"] {
            set.union_with(&FieldSet::leaf());
        }
        set
    }

    fn map_members<'a>(&self, value: &'a Value, path: &mut Vec<&'a str>) -> FieldSet {
        let mut set = FieldSet::new();
        match self.shape(value, path) {
            Shape::Map(map) => {
                for (name, child) in map {
                    if ignored(path, name) {
                        continue;
                    }
                    path.push(name);
                    let mut child_set = self.map_members(child, path);
                    if child.is_object() && !(path.len() == 1 && name == "metadata") {
                        child_set.union_with(&FieldSet::leaf());
                    }
                    set.attach(field_element(name), child_set);
                    path.pop();
                }
            }
            Shape::Keyed(items) => {
                for (element, item) in items {
                    set.attach(element, self.map_members(item, path));
                }
            }
            Shape::Set(_) | Shape::Atomic => {}
        }
        set
    }

    /// The paths added or changed (first) and removed (second) from `old` to `new`, relative
    /// to the node at `path`.
    fn compare<'a>(
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
                    let (c, r) = self.compare(Some(item), find(&new, element), path);
                    changed.attach(element.clone(), c);
                    removed.attach(element.clone(), r);
                }
                for (element, item) in &new {
                    if find(&old, element).is_none() {
                        changed.attach(element.clone(), self.full_set(item, path));
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
fn strip_nulls(value: &mut Value) {
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
    fn merge<'a>(
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

    /// Removes from `object` the paths of `remove` that nobody in `others` owns (neither the
    /// path nor anything beneath it). Maps and lists emptied by the removal are removed too.
    /// `keys` names the key fields of `object` when it is a keyed list element: those stay as
    /// long as the element does.
    fn prune<'a>(
        &self,
        object: &mut Value,
        remove: &'a FieldSet,
        others: Option<&FieldSet>,
        path: &mut Vec<&'a str>,
        keys: &[&str],
    ) {
        for (element, child_remove) in remove.children() {
            let child_others = others.and_then(|o| o.child(element));
            let owned_by_others = child_others.is_some_and(|o| !o.is_empty());
            let whole = child_remove.is_member() && !owned_by_others;
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
                    self.prune(child, child_remove, child_others, path, &[]);
                    path.pop();
                    if !was_empty && !owned_by_others && is_empty_container(child) {
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
                        self.prune(&mut items[index], child_remove, child_others, path, &names);
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

/// Server-side apply: merges `applied` into `live` (`None` when the object does not exist yet,
/// which creates it) on behalf of `request.field_manager`, and returns the new object with its
/// `metadata.managedFields` updated.
///
/// # Errors
///
/// - [`ApplyError::MissingFieldManager`], [`ApplyError::NotAnObject`],
///   [`ApplyError::TypeMismatch`], [`ApplyError::InvalidList`]: a bad request (400).
/// - [`ApplyError::Conflict`]: the apply would change fields other managers own and
///   `request.force` is false (409). With `force`, those managers lose the fields instead.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    request: &ApplyRequest,
) -> Result<Value, ApplyError> {
    if request.field_manager.is_empty() {
        return Err(ApplyError::MissingFieldManager);
    }
    if !applied.is_object() {
        return Err(ApplyError::NotAnObject);
    }
    let text = |name: &str| {
        applied
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if text("apiVersion") != request.api_version || text("kind") != request.kind {
        return Err(ApplyError::TypeMismatch {
            api_version: request.api_version.clone(),
            kind: request.kind.clone(),
            found_api_version: text("apiVersion").to_owned(),
            found_kind: text("kind").to_owned(),
        });
    }
    let walker = Walker {
        schema: Schema::for_kind(&request.api_version, &request.kind),
    };
    let mut applied = applied.clone();
    strip_nulls(&mut applied);
    if let Some(Value::Object(metadata)) = applied.get_mut("metadata") {
        metadata.remove("managedFields");
    }

    let mut entries = parse_entries(live.and_then(managed_fields_of));
    let mut live = live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(Value::Object(metadata)) = live.get_mut("metadata") {
        metadata.remove("managedFields");
    }

    let mut merged = live.clone();
    walker.merge(&mut merged, &applied, &mut Vec::new())?;
    let applied_set = walker.applied_set(&applied, &mut Vec::new());
    let (changed, _) = walker.compare(Some(&live), Some(&merged), &mut Vec::new());

    let manager = request.field_manager.as_str();
    let mut conflicts = Vec::new();
    for entry in entries.iter_mut().filter(|e| !e.is(manager, "Apply")) {
        let taken = entry.fields.intersection(&changed);
        if taken.is_empty() {
            continue;
        }
        for path in taken.paths() {
            conflicts.push(FieldConflict {
                manager: entry.manager.clone(),
                operation: entry.operation.clone(),
                api_version: entry.api_version.clone(),
                time: entry.time.clone(),
                field: display_path(&path),
            });
        }
        entry.fields = entry.fields.difference(&taken);
    }
    if !conflicts.is_empty() && !request.force {
        return Err(ApplyError::Conflict { conflicts });
    }

    let previous = entries
        .iter()
        .find(|e| e.is(manager, "Apply"))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut others = FieldSet::new();
    for entry in entries.iter().filter(|e| !e.is(manager, "Apply")) {
        others.union_with(&entry.fields);
    }
    let to_remove = previous.difference(&applied_set);
    walker.prune(&mut merged, &to_remove, Some(&others), &mut Vec::new(), &[]);

    let mine = Entry {
        manager: manager.to_owned(),
        operation: "Apply".into(),
        api_version: request.api_version.clone(),
        time: Some(request.now.clone()),
        fields: applied_set,
    };
    match entries.iter_mut().find(|e| e.is(manager, "Apply")) {
        Some(entry) => *entry = mine,
        None => entries.push(mine),
    }
    entries.retain(|e| e.is(manager, "Apply") || !e.fields.is_empty());
    store_entries(&mut merged, &entries);
    Ok(merged)
}

/// Records an update (PUT, or a JSON, merge or strategic merge PATCH) of `old` into `new` by
/// `manager` at `now` (RFC 3339) in `new.metadata.managedFields`. `old` is `None` for a create.
///
/// The fields the update added or changed join `manager`'s `Update` entry and leave every other
/// entry; removed fields leave all entries; entries left empty are dropped. Updates never
/// conflict. The entries come from `old`, unless `new` carries different `managedFields`
/// (a client resetting them), which are then taken as the starting point.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, now: &str) {
    let old_managed = old.and_then(managed_fields_of);
    let new_managed = managed_fields_of(new);
    let mut entries = match new_managed {
        Some(managed) if Some(managed) != old_managed => parse_entries(Some(managed)),
        _ => parse_entries(old_managed),
    };
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let walker = Walker {
        schema: Schema::for_kind(&api_version, kind),
    };
    let (changed, removed) = walker.compare(
        Some(old.unwrap_or(&Value::Object(Map::new()))),
        Some(new),
        &mut Vec::new(),
    );

    for entry in entries.iter_mut() {
        if entry.is(manager, "Update") {
            entry.fields.union_with(&changed);
        } else {
            entry.fields = entry.fields.difference(&changed);
        }
        entry.fields = entry.fields.difference(&removed);
    }
    if !changed.is_empty() && !entries.iter().any(|e| e.is(manager, "Update")) {
        entries.push(Entry {
            manager: manager.to_owned(),
            operation: "Update".into(),
            api_version: api_version.clone(),
            time: None,
            fields: changed.clone(),
        });
    }
    if !changed.is_empty()
        && let Some(entry) = entries.iter_mut().find(|e| e.is(manager, "Update"))
    {
        entry.time = Some(now.to_owned());
        entry.api_version = api_version;
    }
    entries.retain(|e| !e.fields.is_empty());
    store_entries(new, &entries);
}
