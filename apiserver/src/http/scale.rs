//! The `/scale` subresource (`autoscaling/v1` Scale) of Deployments, ReplicaSets,
//! StatefulSets, ReplicationControllers and custom resources whose CRD version declares
//! `subresources.scale`: `kubectl scale`, HorizontalPodAutoscalers and KEDA read and write the
//! replicas through it. GET shows the object's replicas and selector; PUT and PATCH (merge,
//! JSON and strategic merge patches, and apply, all applied to the Scale as a merge of its
//! fields) write the new `spec.replicas` into the object, at the version read (a concurrent
//! write makes it 409 Conflict), and answer the Scale afterwards.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::request::{App, Query, Target};
use super::response::json_response;
use crate::cluster::{Part, PatchKind};
use crate::error::ApiError;
use crate::faults::Verb;
use crate::resources::ScalePaths;

/// Serves `verb` on `target`'s scale subresource.
pub(super) fn serve(
    app: &App,
    verb: Verb,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let res = &target.res;
    let paths = res.scale.as_ref().ok_or_else(|| not_found(target))?;
    let name = target.name.as_deref().unwrap_or_default();
    let current: Value = serde_json::from_slice(&app.cluster.get(res, &target.ns, name)?)
        .map_err(|e| ApiError::Internal(format!("a stored object is not JSON: {e}")))?;
    let shown = scale_of(&current, paths);
    // The version the write is based on: the Scale's when it names one, else the one read.
    let mut based_on = None;
    let replicas = match verb {
        Verb::Get => return Ok(json_response(StatusCode::OK, shown.to_string())),
        Verb::Update => {
            let sent: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("the Scale body is not JSON: {e}")))?;
            based_on = sent
                .pointer("/metadata/resourceVersion")
                .filter(|v| v.as_str().is_some_and(|v| !v.is_empty()))
                .cloned();
            replicas_of(&sent)?
        }
        Verb::Patch => {
            let patch: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!("the patch body is not valid JSON: {e}"))
            })?;
            let mut patched = shown.clone();
            match super::objects::patch_kind(headers, query)? {
                PatchKind::Json => crate::patch::json_patch(&mut patched, &patch)
                    .map_err(|e| ApiError::invalid("Scale.autoscaling", name, e.to_string()))?,
                _ => crate::patch::merge_patch(&mut patched, &patch),
            }
            replicas_of(&patched)?
        }
        _ => {
            return Err(ApiError::MethodNotAllowed(format!(
                "the scale subresource of {} serves get, update and patch",
                res.group_resource()
            )));
        }
    };
    let mut next = current;
    set_at(&mut next, &paths.spec_replicas, json!(replicas));
    if let Some(version) = based_on {
        set_at(&mut next, "/metadata/resourceVersion", version);
    }
    let opts = super::objects::write_options(query, headers, verb);
    let stored = app
        .cluster
        .update(res, &target.ns, name, next, Part::Main, &opts)?;
    let stored: Value = serde_json::from_slice(&stored)
        .map_err(|e| ApiError::Internal(format!("a stored object is not JSON: {e}")))?;
    Ok(json_response(
        StatusCode::OK,
        scale_of(&stored, paths).to_string(),
    ))
}

fn not_found(target: &Target) -> ApiError {
    ApiError::not_found(
        &format!("{}/scale", target.res.group_resource()),
        target.name.as_deref().unwrap_or_default(),
    )
}

/// The Scale's `spec.replicas`: a number not below 0.
fn replicas_of(scale: &Value) -> Result<i64, ApiError> {
    let name = scale
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(value) => match value.as_i64() {
            Some(n) if n >= 0 => Ok(n),
            _ => Err(ApiError::invalid(
                "Scale.autoscaling",
                name,
                format!(
                    "spec.replicas: Invalid value: {value}: must be greater than or equal to 0"
                ),
            )),
        },
    }
}

/// The Scale of `obj`.
pub(crate) fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let mut metadata = Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.into(), v.clone());
        }
    }
    let mut spec = Map::new();
    if let Some(replicas) = obj.pointer(&paths.spec_replicas) {
        spec.insert("replicas".into(), replicas.clone());
    }
    let mut status = json!({
        "replicas": obj.pointer(&paths.status_replicas).cloned().unwrap_or(json!(0)),
    });
    if let Some(selector) = paths
        .selector
        .as_deref()
        .and_then(|p| obj.pointer(p))
        .and_then(selector_string)
    {
        status["selector"] = selector.into();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    })
}

/// A selector in its string form (`app=web,tier in (a,b)`): a string as it is, a
/// `LabelSelector`, or a label map (a ReplicationController's).
fn selector_string(selector: &Value) -> Option<String> {
    if let Some(text) = selector.as_str() {
        return Some(text.to_string());
    }
    let object = selector.as_object()?;
    let is_label_selector =
        object.contains_key("matchLabels") || object.contains_key("matchExpressions");
    let labels = if is_label_selector {
        object.get("matchLabels").and_then(Value::as_object)
    } else {
        Some(object)
    };
    let mut parts: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for (key, operator, values) in crate::kind_rules::expressions(selector) {
        parts.push(match operator {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        });
    }
    parts.sort();
    Some(parts.join(","))
}

/// Sets the value at `pointer` in `obj`, creating the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut at = obj;
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, key) in keys.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        let Some(object) = at.as_object_mut() else {
            return;
        };
        if i + 1 == keys.len() {
            object.insert((*key).to_string(), value);
            return;
        }
        at = object.entry(*key).or_insert_with(|| json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_scale_shows_its_replicas_and_selector() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7", "labels": {"x": "y"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
            "status": {"replicas": 1},
        });
        let paths = ScalePaths {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
        };
        assert_eq!(
            scale_of(&deployment, &paths),
            json!({
                "kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
                "spec": {"replicas": 2},
                "status": {"replicas": 1, "selector": "app=web,tier in (a,b)"},
            })
        );
    }

    #[test]
    fn replicas_are_written_where_the_paths_say_creating_parents() {
        let mut widget = json!({"metadata": {"name": "w"}});
        set_at(&mut widget, "/spec/size", json!(3));
        assert_eq!(widget["spec"], json!({"size": 3}));
        assert!(replicas_of(&json!({"spec": {"replicas": -1}})).is_err());
        assert_eq!(replicas_of(&json!({"spec": {}})).ok(), Some(0));
    }
}
