//! Handlers for single-object verbs (get, create, update, patch, delete) and deletecollection.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::field_validation;
use super::list;
use super::protobuf;
use super::request::{App, Query, Target};
use super::response::{json_response, render, wants_metadata, wants_table};
use super::table;
use crate::cluster::{DeleteOptions, Part, PatchKind, PatchRequest, WriteOptions};
use crate::error::ApiError;
use crate::faults::Verb;

pub(super) fn serve(
    app: &Arc<App>,
    verb: Verb,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let cluster = &app.cluster;
    let res = &target.res;
    let name = target.name.as_deref().unwrap_or_default();
    let part = if target.sub.is_some() {
        Part::Status
    } else {
        Part::Main
    };
    check_dry_run(query, verb)?;
    let opts = write_options(query, headers, verb);
    let metadata_only = wants_metadata(headers);
    if res.namespaced && target.ns.is_empty() && verb == Verb::Create {
        return Err(ApiError::MethodNotAllowed(format!(
            "create {} in a namespace: POST to /…/namespaces/{{namespace}}/{}",
            res.group_resource(),
            res.plural
        )));
    }
    match verb {
        Verb::Get => {
            let bytes = cluster.get(res, &target.ns, name)?;
            if wants_table(headers) {
                let rv = cluster.store.current_rv();
                return Ok(json_response(
                    StatusCode::OK,
                    table::table(
                        res,
                        &[bytes],
                        rv,
                        None,
                        true,
                        table::Form::of(query, headers),
                    ),
                ));
            }
            Ok(json_response(
                StatusCode::OK,
                render(res, metadata_only, bytes),
            ))
        }
        Verb::Create => {
            let obj = decode(&body, headers, res.kind.as_str())?;
            let warnings = field_validation::check(
                field_validation::mode(query, verb)?,
                res,
                &obj,
                field_validation::Body::Object,
            )?;
            let bytes = cluster.create(res, &target.ns, obj, &opts)?;
            Ok(field_validation::warn(
                json_response(StatusCode::CREATED, render(res, metadata_only, bytes)),
                &warnings,
            ))
        }
        Verb::Update => {
            let obj = decode(&body, headers, res.kind.as_str())?;
            let warnings = field_validation::check(
                field_validation::mode(query, verb)?,
                res,
                &obj,
                field_validation::Body::Object,
            )?;
            let bytes = cluster.update(res, &target.ns, name, obj, part, &opts)?;
            Ok(field_validation::warn(
                json_response(StatusCode::OK, render(res, metadata_only, bytes)),
                &warnings,
            ))
        }
        Verb::Patch => {
            let kind = patch_kind(headers, query)?;
            let patch: Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                // Apply bodies are YAML; JSON (the common form) is tried first.
                Err(_) if matches!(kind, PatchKind::Apply { .. }) => {
                    serde_yaml_ng::from_slice(&body).map_err(|e| {
                        ApiError::BadRequest(format!(
                            "the apply body is neither JSON nor YAML: {e}; send the applied \
                             object as JSON or YAML"
                        ))
                    })?
                }
                Err(e) => {
                    return Err(ApiError::BadRequest(format!(
                        "the patch body is not valid JSON: {e}"
                    )));
                }
            };
            let form = match kind {
                PatchKind::Apply { .. } => field_validation::Body::Apply,
                _ => field_validation::Body::Patch,
            };
            let warnings =
                field_validation::check(field_validation::mode(query, verb)?, res, &patch, form)?;
            let (bytes, created) = cluster.patch(
                res,
                &target.ns,
                name,
                PatchRequest { kind, body: patch },
                part,
                &opts,
            )?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(field_validation::warn(
                json_response(code, render(res, metadata_only, bytes)),
                &warnings,
            ))
        }
        Verb::Delete => {
            let opts = delete_options(&body, query)?;
            let (bytes, gone) = cluster.delete(res, &target.ns, name, &opts)?;
            // Upstream answers 200 for a pending deletion too, unless orphanDependents=false.
            let code = if gone || !opts.cascade_requested {
                StatusCode::OK
            } else {
                StatusCode::ACCEPTED
            };
            Ok(json_response(code, render(res, metadata_only, bytes)))
        }
        Verb::DeleteCollection => {
            let opts = delete_options(&body, query)?;
            let filter = list::Filter::from_query(query, res)?;
            let ns = (!target.ns.is_empty()).then_some(target.ns.as_str());
            let page = cluster
                .store
                .list(&res.table(), ns, None, 0, &|b: &Bytes| filter.keep(b));
            let mut deleted = Vec::new();
            for (key, _) in page.items {
                // As upstream, the list names the deleted objects themselves.
                match cluster.delete_with_object(res, &key.ns, &key.name, &opts) {
                    Ok((_, _, object)) => deleted.push(render(res, false, object)),
                    Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let rv = cluster.store.current_rv();
            Ok(json_response(
                StatusCode::OK,
                list::list_body(res, &deleted, rv, None, None),
            ))
        }
        Verb::List | Verb::Watch => unreachable!("dispatched to list/watch"),
    }
}

/// `dryRun` takes only `All`, as upstream: any other value is 422 against the verb's options kind.
fn check_dry_run(query: &Query, verb: Verb) -> Result<(), ApiError> {
    let Some(value) = query.get("dryRun").filter(|v| *v != "All") else {
        return Ok(());
    };
    let options = match verb {
        Verb::Create => "CreateOptions",
        Verb::Update => "UpdateOptions",
        Verb::Patch => "PatchOptions",
        _ => "DeleteOptions",
    };
    Err(ApiError::invalid(
        &format!("{options}.meta.k8s.io"),
        "",
        format!("dryRun: Unsupported value: [\"{value}\"]: supported values: \"All\""),
    ))
}

pub(super) fn write_options(query: &Query, headers: &HeaderMap, verb: Verb) -> WriteOptions {
    let field_manager = query.get("fieldManager").cloned().unwrap_or_else(|| {
        if verb == Verb::Patch && is_apply(headers) {
            return String::new();
        }
        headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string()
    });
    WriteOptions {
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
        field_manager,
        applied: false,
    }
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or("")
}

/// Whether the request body is protobuf.
pub(super) fn is_protobuf(headers: &HeaderMap) -> bool {
    content_type(headers) == protobuf::MEDIA_TYPE
}

fn is_apply(headers: &HeaderMap) -> bool {
    content_type(headers) == "application/apply-patch+yaml"
}

pub(super) fn patch_kind(headers: &HeaderMap, query: &Query) -> Result<PatchKind, ApiError> {
    Ok(match content_type(headers) {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" => PatchKind::Strategic,
        "application/apply-patch+yaml" => PatchKind::Apply {
            force: query.get("force").is_some_and(|v| v == "true"),
        },
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format `{other}`; accepted media \
                 types are application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml, application/strategic-merge-patch+json"
            )));
        }
    })
}

fn decode(body: &[u8], headers: &HeaderMap, kind: &str) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    if ct == protobuf::MEDIA_TYPE {
        return protobuf::decode(body);
    }
    if !ct.is_empty() && ct != "application/json" && ct != "*/*" {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format `{ct}`; this server reads \
             application/json (and protobuf for a few kinds); send JSON"
        )));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the request body is not a valid {kind} in JSON: {e}"
        ))
    })
}

fn delete_options(body: &[u8], query: &Query) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        propagation: query.get("propagationPolicy").cloned(),
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
        ..DeleteOptions::default()
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(opts);
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the DELETE body is not valid DeleteOptions JSON: {e}"
        ))
    })?;
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    if let Some(p) = s("/propagationPolicy") {
        opts.propagation = Some(p);
    }
    match v.get("orphanDependents").and_then(Value::as_bool) {
        Some(true) => opts.propagation = Some("Orphan".into()),
        Some(false) => opts.cascade_requested = true,
        None => {}
    }
    opts.uid = s("/preconditions/uid");
    opts.resource_version = s("/preconditions/resourceVersion");
    if v.get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == "All"))
    {
        opts.dry_run = true;
    }
    Ok(opts)
}
