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

use serde_json::{Map, Value, json};

use super::fields::{FieldSet, display_path};
use super::ownership::{Walker, strip_nulls};
use super::schema::Schema;

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
        /// Each conflicting field with its owner: entry by entry, each in path order.
        conflicts: Vec<FieldConflict>,
    },
}

impl ApplyError {
    /// The HTTP status code a Kubernetes API server answers this error with: 409 for
    /// [`ApplyError::Conflict`], 400 otherwise.
    pub fn status_code(&self) -> u16 {
        match self {
            ApplyError::Conflict { .. } => 409,
            _ => 400,
        }
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

/// Writes `entries` into `object.metadata.managedFields` (removing the key when there are none),
/// in Kubernetes' order: by operation (`Apply` first), time, manager, then `apiVersion`.
fn store_entries(object: &mut Value, entries: &mut [Entry]) {
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
        ))
    });
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
    store_entries(new, &mut entries);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-02T00:00:00Z";

    fn request(manager: &str) -> ApplyRequest {
        ApplyRequest::new(manager, "apps/v1", "Deployment", T1)
    }

    fn deployment(spec: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": spec
        })
    }

    fn config_map(metadata_extra: Value, data: Value) -> Value {
        let mut metadata = json!({"name": "cm", "namespace": "default"});
        merge_patch_into(&mut metadata, &metadata_extra);
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
    }

    fn merge_patch_into(target: &mut Value, patch: &Value) {
        super::super::merge_patch(target, patch);
    }

    fn cm_request(manager: &str) -> ApplyRequest {
        ApplyRequest::new(manager, "v1", "ConfigMap", T1)
    }

    /// The `fieldsV1` of `manager`'s entry with `operation`.
    fn fields_of(object: &Value, manager: &str, operation: &str) -> Option<Value> {
        object["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|e| e["manager"] == manager && e["operation"] == operation)
            .map(|e| e["fieldsV1"].clone())
    }

    fn conflicts(error: ApplyError) -> Vec<(String, String)> {
        match error {
            ApplyError::Conflict { conflicts } => conflicts
                .into_iter()
                .map(|c| (c.manager, c.field))
                .collect(),
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn applying_to_an_absent_object_creates_it_with_an_apply_entry() {
        let config = config_map(json!({"labels": {"app": "web"}}), json!({"a": "1"}));
        let created = apply(None, &config, &cm_request("kubectl")).unwrap();
        assert_eq!(created["data"], json!({"a": "1"}));
        assert_eq!(created["metadata"]["name"], "cm");
        assert_eq!(
            created["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "v1",
                "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
            }])
        );
    }

    #[test]
    fn managed_fields_use_the_kubernetes_fields_v1_encoding() {
        let config = deployment(json!({
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": "nginx",
                    "ports": [{"containerPort": 80}]
                }]}
            }
        }));
        let created = apply(None, &config, &request("kubectl")).unwrap();
        assert_eq!(
            fields_of(&created, "kubectl", "Apply").unwrap(),
            json!({
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {},
                                "f:containerPort": {}
                            }}
                        }}}
                    }
                }
            })
        );
    }

    #[test]
    fn second_manager_changing_an_owned_field_conflicts() {
        let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
        let error = apply(
            Some(&live),
            &deployment(json!({"replicas": 2})),
            &request("b"),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
        );
        assert_eq!(
            conflicts(error),
            vec![("a".into(), ".spec.replicas".into())]
        );
    }

    #[test]
    fn conflicts_are_409_and_other_apply_errors_400() {
        let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
        let conflict = apply(
            Some(&live),
            &deployment(json!({"replicas": 2})),
            &request("b"),
        );
        assert_eq!(conflict.unwrap_err().status_code(), 409);
        assert_eq!(ApplyError::MissingFieldManager.status_code(), 400);
    }

    #[test]
    fn force_takes_ownership_from_the_other_manager() {
        let live = apply(
            None,
            &deployment(json!({"replicas": 1, "paused": false})),
            &request("a"),
        )
        .unwrap();
        let forced = apply(
            Some(&live),
            &deployment(json!({"replicas": 2})),
            &request("b").force(true),
        )
        .unwrap();
        assert_eq!(forced["spec"], json!({"replicas": 2, "paused": false}));
        assert_eq!(
            fields_of(&forced, "a", "Apply").unwrap(),
            json!({"f:spec": {"f:paused": {}}})
        );
        assert_eq!(
            fields_of(&forced, "b", "Apply").unwrap(),
            json!({"f:spec": {"f:replicas": {}}})
        );
        // `a` no longer owns replicas: dropping it from its config leaves b's value alone.
        let again = apply(
            Some(&forced),
            &deployment(json!({"paused": false})),
            &request("a"),
        )
        .unwrap();
        assert_eq!(again["spec"]["replicas"], 2);
    }

    #[test]
    fn omitted_field_is_removed_when_no_one_else_owns_it() {
        let first = config_map(json!({"labels": {"x": "1", "y": "2"}}), json!({"a": "1"}));
        let live = apply(None, &first, &cm_request("m")).unwrap();
        let second = config_map(json!({"labels": {"x": "1"}}), json!({}));
        let next = apply(Some(&live), &second, &cm_request("m")).unwrap();
        assert_eq!(next["metadata"]["labels"], json!({"x": "1"}));
        // `data: {}` owns nothing, and the map emptied by removing `a` goes.
        assert_eq!(next.get("data"), None);
        assert_eq!(
            fields_of(&next, "m", "Apply").unwrap(),
            json!({"f:metadata": {"f:labels": {"f:x": {}}}})
        );
    }

    #[test]
    fn a_field_applied_as_a_scalar_then_as_a_map_keeps_its_new_fields() {
        let widget = |spec: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w"}, "spec": spec})
        };
        let request = ApplyRequest::new("m", "example.com/v1", "Widget", T1);
        let live = apply(None, &widget(json!({"size": "small"})), &request).unwrap();
        let next = apply(Some(&live), &widget(json!({"size": {"cpu": 2}})), &request).unwrap();
        assert_eq!(next["spec"], json!({"size": {"cpu": 2}}));
        assert_eq!(
            fields_of(&next, "m", "Apply").unwrap(),
            json!({"f:spec": {"f:size": {"f:cpu": {}}}})
        );
    }

    #[test]
    fn two_managers_applying_the_same_value_share_the_field() {
        let live = apply(None, &deployment(json!({"replicas": 3})), &request("a")).unwrap();
        let shared = apply(
            Some(&live),
            &deployment(json!({"replicas": 3})),
            &request("b"),
        )
        .expect("an equal value is no conflict");
        let owns_replicas = json!({"f:spec": {"f:replicas": {}}});
        assert_eq!(fields_of(&shared, "a", "Apply").unwrap(), owns_replicas);
        assert_eq!(fields_of(&shared, "b", "Apply").unwrap(), owns_replicas);
        // A changing the shared field conflicts with b.
        let error = apply(
            Some(&shared),
            &deployment(json!({"replicas": 4})),
            &request("a"),
        )
        .unwrap_err();
        assert_eq!(
            conflicts(error),
            vec![("b".into(), ".spec.replicas".into())]
        );
        // `a` dropping it keeps it, since b still owns it; then b alone may change it.
        let dropped = apply(Some(&shared), &deployment(json!({})), &request("a")).unwrap();
        assert_eq!(dropped["spec"]["replicas"], 3);
        let changed = apply(
            Some(&dropped),
            &deployment(json!({"replicas": 5})),
            &request("b"),
        )
        .expect("b is the only owner now");
        assert_eq!(changed["spec"]["replicas"], 5);
    }

    #[test]
    fn containers_from_two_managers_merge_by_name_and_leave_with_their_owner() {
        let web = deployment(json!({"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx"}
        ]}}}));
        let sidecar = deployment(json!({"template": {"spec": {"containers": [
            {"name": "sidecar", "image": "envoy"}
        ]}}}));
        let live = apply(None, &web, &request("a")).unwrap();
        let both = apply(Some(&live), &sidecar, &request("b")).unwrap();
        assert_eq!(
            both["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}])
        );
        let without_web = deployment(json!({"template": {"spec": {"containers": []}}}));
        let after = apply(Some(&both), &without_web, &request("a")).unwrap();
        assert_eq!(
            after["spec"]["template"]["spec"]["containers"],
            json!([{"name": "sidecar", "image": "envoy"}])
        );
    }

    #[test]
    fn element_dropped_by_its_applier_keeps_the_fields_another_manager_owns() {
        let config = deployment(json!({"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "args": ["-v"]}
        ]}}}));
        let applied = apply(None, &config, &request("a")).unwrap();
        let mut edited = applied.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        record_update(Some(&applied), &mut edited, "kubectl-edit", T2);
        let after = apply(Some(&edited), &deployment(json!({})), &request("a")).unwrap();
        assert_eq!(
            after["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "nginx:2"}])
        );
    }

    #[test]
    fn update_takes_ownership_and_a_later_apply_conflicts_with_it() {
        let live = apply(None, &deployment(json!({"replicas": 1})), &request("a")).unwrap();
        let mut scaled = live.clone();
        scaled["spec"]["replicas"] = json!(5);
        record_update(Some(&live), &mut scaled, "kubectl-scale", T2);
        assert_eq!(
            fields_of(&scaled, "kubectl-scale", "Update").unwrap(),
            json!({"f:spec": {"f:replicas": {}}})
        );
        assert_eq!(
            fields_of(&scaled, "a", "Apply"),
            None,
            "an entry left without fields is dropped"
        );
        let error = apply(
            Some(&scaled),
            &deployment(json!({"replicas": 1})),
            &request("a"),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1 at \
             2024-01-02T00:00:00Z: .spec.replicas"
        );
    }

    #[test]
    fn conflict_status_cause_is_a_field_manager_conflict() {
        let conflict = FieldConflict {
            manager: "kubectl-edit".into(),
            operation: "Update".into(),
            api_version: "v1".into(),
            time: Some(T1.into()),
            field: ".data.a".into(),
        };
        assert_eq!(
            conflict.status_cause(),
            json!({
                "type": "FieldManagerConflict",
                "message": "conflict with \"kubectl-edit\" using v1 at 2024-01-01T00:00:00Z",
                "field": ".data.a"
            })
        );
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager_in_the_message() {
        let live = apply(
            None,
            &config_map(json!({}), json!({"a": "1", "b": "1"})),
            &cm_request("one"),
        )
        .unwrap();
        let live = apply(
            Some(&live),
            &config_map(json!({}), json!({"c": "1"})),
            &cm_request("two"),
        )
        .unwrap();
        let error = apply(
            Some(&live),
            &config_map(json!({}), json!({"a": "2", "b": "2", "c": "2"})),
            &cm_request("three"),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"one\":\n- .data.a\n- .data.b\n\
             conflicts with \"two\":\n- .data.c"
        );
    }

    #[test]
    fn applying_the_same_configuration_twice_changes_only_the_time() {
        let config = deployment(json!({"replicas": 1, "template": {"spec": {"containers": [
            {"name": "web", "image": "nginx"}
        ]}}}));
        let first = apply(None, &config, &request("a")).unwrap();
        let mut later = request("a");
        later.now = T2.into();
        let second = apply(Some(&first), &config, &later).unwrap();
        let mut expected = first.clone();
        expected["metadata"]["managedFields"][0]["time"] = json!(T2);
        assert_eq!(second, expected);
    }

    #[test]
    fn finalizers_apply_as_a_set_owned_value_by_value() {
        let config = config_map(json!({"finalizers": ["example.com/a"]}), json!({}));
        let live = apply(None, &config, &cm_request("a")).unwrap();
        let other = config_map(json!({"finalizers": ["example.com/b"]}), json!({}));
        let both = apply(Some(&live), &other, &cm_request("b")).unwrap();
        assert_eq!(
            both["metadata"]["finalizers"],
            json!(["example.com/a", "example.com/b"])
        );
        assert_eq!(
            fields_of(&both, "b", "Apply").unwrap(),
            json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
        );
        let dropped = apply(
            Some(&both),
            &config_map(json!({}), json!({})),
            &cm_request("a"),
        )
        .unwrap();
        assert_eq!(dropped["metadata"]["finalizers"], json!(["example.com/b"]));
    }

    #[test]
    fn custom_resource_lists_are_atomic() {
        let widget = |items: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w"}, "spec": {"items": items}})
        };
        let request = |m: &str| ApplyRequest::new(m, "example.com/v1", "Widget", T1);
        let live = apply(None, &widget(json!([{"name": "a"}])), &request("a")).unwrap();
        assert_eq!(
            fields_of(&live, "a", "Apply").unwrap(),
            json!({"f:spec": {"f:items": {}}})
        );
        let error = apply(Some(&live), &widget(json!([{"name": "b"}])), &request("b")).unwrap_err();
        assert_eq!(conflicts(error), vec![("a".into(), ".spec.items".into())]);
    }

    #[test]
    fn server_owned_metadata_and_nulls_in_the_configuration_are_ignored() {
        let live = apply(
            None,
            &config_map(json!({}), json!({"a": "1"})),
            &cm_request("a"),
        )
        .unwrap();
        let mut live = live;
        live["metadata"]["uid"] = json!("u-1");
        live["metadata"]["resourceVersion"] = json!("7");
        let config = config_map(
            json!({"uid": "other", "resourceVersion": "1", "managedFields": [{"manager": "x"}]}),
            json!({"a": "1", "b": null}),
        );
        let next = apply(Some(&live), &config, &cm_request("a")).unwrap();
        assert_eq!(next["metadata"]["uid"], "u-1");
        assert_eq!(next["metadata"]["resourceVersion"], "7");
        assert_eq!(next["data"], json!({"a": "1"}));
        assert_eq!(
            next["metadata"]["managedFields"].as_array().unwrap().len(),
            1
        );
    }

    #[test]
    fn bad_requests_are_rejected_before_anything_is_merged() {
        let config = deployment(json!({}));
        assert_eq!(
            apply(None, &config, &request("")),
            Err(ApplyError::MissingFieldManager)
        );
        assert_eq!(
            apply(None, &json!([1]), &request("a")),
            Err(ApplyError::NotAnObject)
        );
        assert!(matches!(
            apply(None, &config, &cm_request("a")),
            Err(ApplyError::TypeMismatch { found_kind, .. }) if found_kind == "Deployment"
        ));
        let duplicate = deployment(json!({"template": {"spec": {"containers": [
            {"name": "web"}, {"name": "web", "image": "x"}
        ]}}}));
        assert!(matches!(
            apply(None, &duplicate, &request("a")),
            Err(ApplyError::InvalidList { path, .. }) if path == "spec.template.spec.containers"
        ));
        let keyless = deployment(json!({"template": {"spec": {"containers": [{"image": "x"}]}}}));
        assert!(matches!(
            apply(None, &keyless, &request("a")),
            Err(ApplyError::InvalidList { .. })
        ));
    }

    #[test]
    fn record_update_on_create_owns_added_maps_with_dot_markers() {
        let mut created = config_map(json!({"labels": {"app": "web"}}), json!({"a": "1"}));
        record_update(None, &mut created, "kubectl-create", T1);
        assert_eq!(
            created["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "v1",
                "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:data": {".": {}, "f:a": {}},
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}}
                }
            }])
        );
    }

    #[test]
    fn record_update_moves_changed_fields_and_drops_removed_ones() {
        let mut created = config_map(json!({}), json!({"a": "1", "b": "1"}));
        record_update(None, &mut created, "one", T1);
        let mut updated = created.clone();
        updated["data"] = json!({"a": "2"});
        record_update(Some(&created), &mut updated, "two", T2);
        assert_eq!(
            fields_of(&updated, "one", "Update").unwrap(),
            json!({"f:data": {}})
        );
        assert_eq!(
            fields_of(&updated, "two", "Update").unwrap(),
            json!({"f:data": {"f:a": {}}})
        );
        // An update that changes nothing records nothing.
        let mut same = updated.clone();
        record_update(Some(&updated), &mut same, "three", T2);
        assert_eq!(same, updated);
    }

    #[test]
    fn managed_fields_entries_are_sorted_like_kubernetes() {
        let mut object = config_map(json!({}), json!({"a": "1"}));
        record_update(None, &mut object, "creator", T2);
        let applied = apply(
            Some(&object),
            &config_map(json!({"labels": {"x": "y"}}), json!({})),
            &cm_request("zeta"),
        )
        .unwrap();
        // Applied after `zeta`: time orders before the manager name does.
        let mut after_zeta = cm_request("alpha");
        after_zeta.now = "2025-01-01T00:00:00Z".into();
        let both = apply(
            Some(&applied),
            &config_map(json!({"annotations": {"n": "1"}}), json!({})),
            &after_zeta,
        )
        .unwrap();
        let order: Vec<(&str, &str)> = both["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["operation"].as_str().unwrap(),
                    e["manager"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            order,
            vec![("Apply", "zeta"), ("Apply", "alpha"), ("Update", "creator")]
        );
    }

    #[test]
    fn record_update_honours_managed_fields_reset_by_the_client() {
        let mut created = config_map(json!({}), json!({"a": "1"}));
        record_update(None, &mut created, "one", T1);
        let mut reset = created.clone();
        reset["metadata"]["managedFields"] = json!([]);
        record_update(Some(&created), &mut reset, "two", T2);
        assert!(reset["metadata"].get("managedFields").is_none());
    }

    proptest! {
        #[test]
        fn a_sole_applier_ends_with_exactly_its_last_labels(
            label_sets in prop::collection::vec(
                prop::collection::btree_map("[a-e]", "[x-z]", 0..4), 1..5)
        ) {
            let mut live: Option<Value> = None;
            for labels in &label_sets {
                let labels: Map<String, Value> =
                    labels.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
                let config = config_map(json!({"labels": labels}), json!({}));
                live = Some(apply(live.as_ref(), &config, &cm_request("m")).unwrap());
            }
            let last: Map<String, Value> = label_sets.last().unwrap()
                .iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
            let live = live.unwrap();
            let labels = live["metadata"].get("labels").cloned().unwrap_or(json!({}));
            prop_assert_eq!(labels, Value::Object(last));
        }

        #[test]
        fn a_forced_apply_always_leaves_its_whole_configuration_in_place(
            steps in prop::collection::vec(
                ("[a-c]", prop::collection::btree_map("[d-g]", "[x-z]", 0..4)), 1..8)
        ) {
            let mut live: Option<Value> = None;
            let mut ever_applied = std::collections::BTreeSet::new();
            for (manager, labels) in &steps {
                let labels: Map<String, Value> =
                    labels.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
                ever_applied.extend(labels.keys().cloned());
                let config = config_map(json!({"labels": labels.clone()}), json!({}));
                let next = apply(live.as_ref(), &config, &cm_request(manager).force(true))
                    .unwrap();
                let now = next["metadata"].get("labels").cloned().unwrap_or(json!({}));
                for (key, value) in &labels {
                    prop_assert_eq!(&now[key], value);
                }
                let now = now.as_object().unwrap();
                prop_assert!(now.keys().all(|k| ever_applied.contains(k)));
                live = Some(next);
            }
        }
    }
}
