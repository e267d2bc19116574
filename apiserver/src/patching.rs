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
                    patch::apply(Some(current), &applied, &request)
                        .map_err(|e| apply_error(res, name, e))
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
            Ok(patched)
        }, part)?;
        Ok((out.bytes, false))
    }
}

fn apply_request(res: &Resource, opts: &WriteOptions, force: bool) -> patch::ApplyRequest {
    let mut request = patch::ApplyRequest::new(
        &opts.field_manager,
        res.api_version(),
        &res.kind,
        now_rfc3339(),
    );
    request.force = force;
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
