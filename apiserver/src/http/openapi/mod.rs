//! The OpenAPI documents: `/openapi/v3` (an index, and one document per group version) and
//! `/openapi/v2` (one document, as JSON or gnostic protobuf), with the schemas of the kinds
//! served: k8s-openapi's for built-in kinds, the CRD's for custom resources.

mod paths;
mod proto;
mod v2;
mod v3;

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;

use super::response::json_response;
use crate::cluster::Cluster;

/// Serves `GET openapi/...`; `None` for anything else. `version` is the server's, e.g. `v1.34.0`.
pub(crate) fn serve(
    cluster: &Cluster,
    method: &Method,
    segments: &[&str],
    headers: &HeaderMap,
    version: &str,
) -> Option<Response> {
    if *method != Method::GET {
        return None;
    }
    let json = |v: serde_json::Value| Some(json_response(StatusCode::OK, v.to_string()));
    match segments {
        ["openapi", "v2"] => {
            let document = v2::document(&cluster.registry.all(), version);
            let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
            if !v2::protobuf_first(accept.unwrap_or("*/*")) {
                return json(document);
            }
            let mut resp = Response::new(v2::protobuf(&document).into());
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, v2::PROTOBUF.parse().ok()?);
            Some(resp)
        }
        ["openapi", "v3"] => json(v3::index(cluster, version)),
        ["openapi", "v3", rest @ ..] => {
            let (group, gv_version) = match rest {
                ["api", v] => ("", *v),
                ["apis", g, v] => (*g, *v),
                _ => return None,
            };
            let resources = cluster.registry.in_group_version(group, gv_version);
            if resources.is_empty() {
                return None;
            }
            json(v3::group_version(&resources, version))
        }
        _ => None,
    }
}
