//! PATCH: JSON merge, JSON patch, strategic merge and server-side apply, on the main
//! endpoint or the status subresource.

use axum::body::Bytes;

use crate::cluster::{Cluster, Part, PatchKind, PatchRequest, WriteOptions, str_at};
use crate::error::ApiError;
use crate::patch;
use crate::resources::Resource;
use crate::update::check_rv;
use crate::util::now_rfc3339;

impl Cluster {
    /// `PATCH` of the object or its status.
    pub fn patch(
        &self,
        res: &Resource,
        ns: &str,
        name: &str,
        request: PatchRequest,
        part: Part,
        opts: &WriteOptions,
    ) -> Result<(Bytes, bool), ApiError> {
        let PatchRequest { kind, body } = request;
        // The code a real server answers: 400 for a malformed patch document, 415 for a patch
        // type the kind does not support, 422 for a well-formed patch that cannot be applied.
        let invalid = |e: patch::PatchError| match e.status_code() {
            400 => ApiError::BadRequest(e.to_string()),
            415 => ApiError::UnsupportedMediaType(e.to_string()),
            _ => ApiError::invalid(&res.kind, name, e.to_string()),
        };
        if let PatchKind::Apply { force } = kind {
            let opts = &WriteOptions {
                applied: true,
                ..opts.clone()
            };
            if opts.field_manager.is_empty() {
                // Upstream's 422 on the PatchOptions: "fieldManager: Required value".
                return Err(ApiError::invalid(
                    "PatchOptions.meta.k8s.io",
                    "",
                    "fieldManager: Required value: is required for apply patch",
                ));
            }
            check_apply_type(&body)?;
            let body = applied_part(res, part, body);
            let ns_key = if res.namespaced { ns } else { "" };
            let exists = self.store.get(&res.table(), ns_key, name).is_some();
            if !exists {
                if part == Part::Status {
                    return Err(ApiError::not_found(&res.group_resource(), name));
                }
                let mut applied = body;
                Self::check_type(res, &mut applied)?;
                let request = apply_request(res, opts, force);
                let created = patch::apply(None, &applied, &request)
                    .map_err(|e| apply_error(res, name, e))?;
                check_name(res, ns, name, &created)?;
                return self.create(res, ns, created, opts).map(|b| (b, true));
            }
            let out = self.write(
                res,
                ns,
                name,
                opts,
                |current| {
                    let mut applied = body;
                    Self::check_type(res, &mut applied)?;
                    let sent_rv = str_at(&applied, "/metadata/resourceVersion");
                    check_rv(res, name, current, sent_rv)?;
                    let request = apply_request(res, opts, force);
                    let out = patch::apply(Some(current), &applied, &request)
                        .map_err(|e| apply_error(res, name, e))?;
                    check_name(res, ns, name, &out)?;
                    Ok(out)
                },
                part,
            )?;
            return Ok((out.bytes, false));
        }
        let out = self.write(res, ns, name, opts, |current| {
            let mut patched = current.clone();
            match kind {
                PatchKind::Merge => patch::merge_patch(&mut patched, &body),
                PatchKind::Json => patch::json_patch(&mut patched, &body).map_err(invalid)?,
                PatchKind::Strategic => {
                    let api_version = res.api_version();
                    if res.crd.is_some() {
                        return Err(ApiError::UnsupportedMediaType(format!(
                            "strategic merge patch is not supported for custom resource {}; use \
                             application/merge-patch+json or server-side apply",
                            res.group_resource()
                        )));
                    }
                    patch::strategic_merge_patch(&mut patched, &body, &api_version, &res.kind)
                        .map_err(invalid)?
                }
                PatchKind::Apply { .. } => unreachable!("handled above"),
            }
            let sent = str_at(&patched, "/metadata/resourceVersion");
            let live = str_at(current, "/metadata/resourceVersion");
            if sent.is_some() && sent != live {
                check_rv(res, name, current, sent)?;
            }
            check_name(res, ns, name, &patched)?;
            crate::typed::check_patched(res, &patched)?;
            Ok(patched)
        }, part)?;
        Ok((out.bytes, false))
    }
}

/// The part of an apply configuration the endpoint writes, so the applier owns only that: its
/// `status` (with `apiVersion`, `kind` and `metadata`) through `/status`, all but `status`
/// through the main endpoint of a kind with a status subresource (upstream resets the other
/// part's fields before it computes ownership).
fn applied_part(res: &Resource, part: Part, body: serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(mut fields) = body else {
        return body;
    };
    match part {
        Part::Status => {
            fields
                .retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
        }
        Part::Main if res.status => {
            fields.remove("status");
        }
        Part::Main => {}
    }
    serde_json::Value::Object(fields)
}

/// An apply configuration names its `apiVersion` and `kind` (upstream's version check of
/// apply answers 400 `invalid object type` without them).
fn check_apply_type(body: &serde_json::Value) -> Result<(), ApiError> {
    let text = |key: &str| {
        body.get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if !api_version.is_empty() && !kind.is_empty() {
        return Ok(());
    }
    // Upstream prints the group-version-kind as Go does: `group/version, Kind=kind`.
    let group_version = if api_version.contains('/') {
        api_version.to_string()
    } else {
        format!("/{api_version}")
    };
    Err(ApiError::BadRequest(format!(
        "invalid object type: {group_version}, Kind={kind}; an apply configuration names its \
         apiVersion and kind"
    )))
}

/// The patched object keeps the URL's name and namespace (upstream's `checkName` after the
/// patch): a patch that renames it is 400.
fn check_name(
    res: &Resource,
    ns: &str,
    name: &str,
    patched: &serde_json::Value,
) -> Result<(), ApiError> {
    if let Some(patched_name) = str_at(patched, "/metadata/name")
        && patched_name != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({patched_name}) does not match the name on the URL \
             ({name}); an object cannot be renamed: create one under the new name"
        )));
    }
    crate::update::check_namespace(res, ns, patched)
}

fn apply_request(res: &Resource, opts: &WriteOptions, force: bool) -> patch::ApplyRequest {
    let mut request = patch::ApplyRequest::new(
        &opts.field_manager,
        res.api_version(),
        &res.kind,
        now_rfc3339(),
    );
    request.force = force;
    request.schema.clone_from(&res.schema);
    request
}

fn apply_error(res: &Resource, name: &str, e: patch::ApplyError) -> ApiError {
    match &e {
        patch::ApplyError::Conflict { conflicts } => ApiError::FieldConflict {
            resource: res.group_resource(),
            name: name.to_string(),
            message: e.to_string(),
            causes: conflicts
                .iter()
                .map(patch::FieldConflict::status_cause)
                .collect(),
        },
        _ => ApiError::BadRequest(e.to_string()),
    }
}
