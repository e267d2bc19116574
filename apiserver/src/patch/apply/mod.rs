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
//!    (`metadata.finalizers`); atomic maps (workload and Service `spec.selector`). Every other
//!    list is atomic and every other map granular. Custom resources are handled the same way
//!    with only the `metadata` rules: the CRD's `x-kubernetes-list-type`,
//!    `x-kubernetes-list-map-keys` and `x-kubernetes-map-type` are not read, so a CR's lists
//!    are always atomic, and a nested map of a CR is never owned as a node itself (Kubernetes
//!    owns the entries of a schemaless map as nodes: `f:spec: {".": {}, ...}`).
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
//! 6. **Update entries** own an added object as a node (`".": {}`) only for well-known string
//!    maps (`labels`, `annotations`, `data`, `nodeSelector`, resource `limits`/`requests`, ...)
//!    and for lists and list elements; Kubernetes decides by the Go type, so it also owns added
//!    pointer structs (e.g. `rollingUpdate`) and the maps of custom resources that way.
//! 7. **Order.** Merged keyed and set lists keep the live order and get new elements appended;
//!    Kubernetes orders a list like the applied configuration when the apply changes it.
//! 8. **Removal.** A field this manager applied before and omits now is removed unless another
//!    entry owns it or anything beneath it; in that case only the parts nobody else owns are
//!    removed. Maps and lists emptied by that removal are removed too (Kubernetes drops them
//!    for built-in kinds when it serializes, but keeps them in custom resources).
//! 9. **User-supplied `managedFields`.** [`apply`] ignores `metadata.managedFields` in the
//!    applied configuration (Kubernetes rejects it). [`record_update`] takes the new object's
//!    `managedFields` when present and different from the old object's (so a client can reset
//!    them, e.g. to `[]`), like Kubernetes, but does not validate them.
//! 10. **Server-owned metadata** (`uid`, `resourceVersion`, `generation`, timestamps) in the
//!     applied configuration is ignored; the server must check a `resourceVersion`
//!     precondition itself if it wants one.
//!
//! # Errors
//!
//! [`ApplyError::Conflict`] is a `409 Conflict` whose `details.causes` are
//! [`FieldConflict::status_cause`]; every other variant is a `400 BadRequest`.

mod managed;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use super::conflict::{ApplyError, FieldConflict};
use super::fields::display_path;
use super::ownership::{Walker, strip_nulls};
use super::schema::Schema;
use managed::{Entry, managed_fields_of, parse_entries, store_entries};

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
    /// A custom resource's `openAPIV3Schema`, whose list types the merge follows.
    pub schema: Option<std::sync::Arc<Value>>,
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
            schema: None,
        }
    }

    /// Sets `force`.
    #[must_use]
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
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
        schema: Schema::for_resource(&request.api_version, &request.kind, request.schema.clone()),
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
    // Fields some other entry owns stay, and so does everything the new configuration sets
    // (a value that was a scalar last time and is now a map with fields is not removed).
    let mut kept = applied_set.clone();
    for entry in entries.iter().filter(|e| !e.is(manager, "Apply")) {
        kept.union_with(&entry.fields);
    }
    let to_remove = previous.difference(&applied_set);
    walker.prune(&mut merged, &to_remove, Some(&kept), &mut Vec::new(), &[]);

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
    entries.retain(|e| !e.fields.is_empty());
    store_entries(&mut merged, &mut entries);
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
    record_update_with(old, new, manager, now, None);
}

/// [`record_update`] of a custom resource whose `openAPIV3Schema` is `schema`.
pub fn record_update_with(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    schema: Option<std::sync::Arc<Value>>,
) {
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
        schema: Schema::for_resource(&api_version, kind, schema),
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
    store_entries(new, &mut entries);
}
