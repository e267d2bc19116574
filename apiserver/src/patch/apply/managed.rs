//! `metadata.managedFields` entries: read from an object, and written back sorted and trimmed.

use serde_json::{Map, Value};

use super::super::fields::FieldSet;

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) fields: FieldSet,
}

impl Entry {
    pub(super) fn parse(value: &Value) -> Option<Entry> {
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

    pub(super) fn to_value(&self) -> Value {
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

    pub(super) fn is(&self, manager: &str, operation: &str) -> bool {
        self.manager == manager && self.operation == operation
    }
}

pub(super) fn managed_fields_of(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

pub(super) fn parse_entries(managed_fields: Option<&Value>) -> Vec<Entry> {
    managed_fields
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

/// Writes `entries` into `object.metadata.managedFields` (removing the key when there are none),
/// in Kubernetes' order: by operation (`Apply` first), time, manager, then `apiVersion`.
pub(super) fn store_entries(object: &mut Value, entries: &mut [Entry]) {
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
