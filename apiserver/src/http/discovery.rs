//! Discovery documents (`/version`, `/api`, `/apis`, group versions) and health endpoints; the
//! OpenAPI documents are [`super::openapi`]'s.

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::response::json_response;
use crate::cluster::Cluster;
use crate::resources::Resource;

/// The Kubernetes version reported by `/version`.
pub const KUBERNETES_MINOR: &str = "34";

/// Serves discovery paths; `None` when `segments` is not one.
pub(crate) fn serve(
    cluster: &Cluster,
    method: &Method,
    segments: &[&str],
    headers: &HeaderMap,
) -> Option<Response> {
    if *method != Method::GET {
        return None;
    }
    if let ["api" | "apis"] = segments {
        match negotiate(headers) {
            Form::Plain => {}
            Form::Aggregated(version) => {
                return Some(aggregated(cluster, segments[0] == "api", version));
            }
        }
    }
    let ok = |v: Value| Some(json_response(StatusCode::OK, v.to_string()));
    match segments {
        ["version"] => ok(json!({
            "major": "1", "minor": KUBERNETES_MINOR,
            "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-embedded"),
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z", "goVersion": "n/a", "compiler": "rustc",
            "platform": "linux/amd64",
            "emulationMajor": "1", "emulationMinor": KUBERNETES_MINOR,
            "minCompatibilityMajor": "1", "minCompatibilityMinor": KUBERNETES_MINOR,
        })),
        ["metrics"] => {
            let mut resp = Response::new(storage_metrics(cluster).into());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
                    .parse()
                    .ok()?,
            );
            Some(resp)
        }
        ["healthz" | "livez" | "readyz", ..] => {
            let mut resp = Response::new("ok".into());
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, "text/plain".parse().ok()?);
            Some(resp)
        }
        ["api"] => {
            // Upstream names its address with the port; here, the one the client reached.
            let address = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .filter(|h| h.contains(':'))
                .unwrap_or("127.0.0.1");
            ok(json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
            }))
        }
        ["api", "v1"] => ok(resource_list(cluster, "", "v1")),
        ["apis"] => ok(json!({
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": cluster.registry.groups().iter().map(|g| group_doc(&g.name, &g.versions)).collect::<Vec<_>>(),
        })),
        ["apis", group] => {
            let g = cluster
                .registry
                .groups()
                .into_iter()
                .find(|g| g.name == *group)?;
            let mut doc = group_doc(&g.name, &g.versions);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            ok(doc)
        }
        ["apis", group, version] => {
            if cluster.registry.in_group_version(group, version).is_empty() {
                return None;
            }
            ok(resource_list(cluster, group, version))
        }
        _ => None,
    }
}

/// The form of `/api` and `/apis` a client's `Accept` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `APIVersions` / `APIGroupList` as plain JSON.
    Plain,
    /// Aggregated discovery (`APIGroupDiscoveryList`) of this `apidiscovery.k8s.io` version.
    Aggregated(&'static str),
}

/// Picks the form as upstream's content negotiation does: the media types of `Accept` by
/// descending `q` (ties keep the client's order), the first one served wins. Served:
/// `application/json` with `g=apidiscovery.k8s.io;as=APIGroupDiscoveryList` and `v=v2` (not
/// `v=v2beta1`, which a real 1.33+ server no longer serves either), and plain JSON (`application/json`, `application/*`, `*/*`, no `as`). Protobuf
/// and any other `as=` are skipped. No `Accept`, or none served, means plain JSON (upstream
/// would answer protobuf to a protobuf-only client; this server answers JSON to everything).
fn negotiate(headers: &HeaderMap) -> Form {
    let Some(accept) = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.trim().is_empty())
    else {
        return Form::Plain;
    };
    let mut ranges: Vec<(f32, Option<Form>)> = accept
        .split(',')
        .map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let (mut q, mut g, mut v, mut as_) = (1.0_f32, None, None, None);
            for param in parts {
                let Some((key, value)) = param.split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match key.trim() {
                    "q" => q = value.parse().unwrap_or(0.0),
                    "g" => g = Some(value),
                    "v" => v = Some(value),
                    "as" => as_ = Some(value),
                    _ => {}
                }
            }
            let json = matches!(media.as_str(), "application/json" | "application/*" | "*/*");
            let form = match (json, as_, g, v) {
                (false, _, _, _) => None,
                (true, None, _, _) => Some(Form::Plain),
                (true, Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                    Some(Form::Aggregated("v2"))
                }
                // `v2beta1` is no longer served (Kubernetes 1.33+): kubectl 1.27–1.29 then
                // take the plain JSON they also list and discover group by group.
                _ => None,
            };
            (q, form)
        })
        .filter(|(q, _)| *q > 0.0)
        .collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges
        .into_iter()
        .find_map(|(_, form)| form)
        .unwrap_or(Form::Plain)
}

/// The aggregated discovery document of the core group (`core`) or of all named groups.
fn aggregated(cluster: &Cluster, core: bool, version: &str) -> Response {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        cluster
            .registry
            .groups()
            .into_iter()
            .map(|g| (g.name, g.versions))
            .collect()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = cluster
                        .registry
                        .in_group_version(group, v)
                        .iter()
                        .map(|r| aggregated_resource(r))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            // The core group is nameless: upstream leaves `name` out (omitempty).
            let metadata = if group.is_empty() {
                json!({})
            } else {
                json!({"name": group})
            };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    let doc = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let mut resp = json_response(StatusCode::OK, doc.to_string());
    let content_type =
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp.headers_mut()
        .insert(header::VARY, header::HeaderValue::from_static("Accept"));
    resp
}

fn aggregated_resource(r: &Resource) -> Value {
    // Empty group and version mean "this group version", as upstream writes them for every
    // resource (and status subresource) whose kind lives in the group version it is served in.
    // Upstream's built-in kinds leave the group and version empty; a CRD's names them.
    let gvk = if r.crd.is_some() {
        json!({"group": r.group, "version": r.version, "kind": r.kind})
    } else {
        json!({"group": "", "version": "", "kind": r.kind})
    };
    let mut doc = json!({
        "resource": r.plural,
        "responseKind": gvk,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    let mut subresources = Vec::new();
    if r.status {
        subresources.push(json!({"subresource": "status", "responseKind": gvk,
                                 "verbs": ["get", "patch", "update"]}));
    }
    if r.scale.is_some() {
        subresources.push(json!({"subresource": "scale",
                                 "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                 "verbs": ["get", "patch", "update"]}));
    }
    if !subresources.is_empty() {
        doc["subresources"] = json!(subresources);
    }
    doc
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "preferredVersion": versions[0], "versions": versions})
}

/// `/metrics` in Prometheus text: upstream's `apiserver_storage_objects` (objects stored, per
/// resource, `deployments.apps` for a named group), the one series this server can answer as a
/// real one does.
fn storage_metrics(cluster: &Cluster) -> String {
    let mut text = String::from(
        "# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last \
         check split by kind.\n# TYPE apiserver_storage_objects gauge\n",
    );
    // One count per resource (a resource served in several versions is stored once).
    let seen: std::collections::BTreeMap<String, usize> = cluster
        .registry
        .all()
        .iter()
        .map(|res| {
            let count = cluster.store.keys_in(&res.table(), None).len();
            (res.group_resource(), count)
        })
        .collect();
    for (resource, count) in seen {
        text.push_str(&format!(
            "apiserver_storage_objects{{resource=\"{resource}\"}} {count}\n"
        ));
    }
    text
}

fn resource_list(cluster: &Cluster, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = cluster
        .registry
        .in_group_version(group, version)
        .iter()
        .flat_map(|r| r.discovery())
        .collect();
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    // Upstream's core `/api/v1` list carries no apiVersion; the groups' lists do.
    let mut list = json!({"kind": "APIResourceList", "groupVersion": gv, "resources": resources});
    if !group.is_empty() {
        list["apiVersion"] = "v1".into();
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(accept: &str) -> Form {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, accept.parse().expect("header"));
        negotiate(&headers)
    }

    const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    const V2BETA1: &str =
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    const PB_V2: &str =
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

    #[test]
    fn each_client_gets_a_form_it_listed() {
        assert_eq!(
            form(&format!("{V2},{V2BETA1},application/json")),
            Form::Aggregated("v2")
        );
        assert_eq!(
            form(&format!("{PB_V2},{V2},application/json")),
            Form::Aggregated("v2")
        );
        assert_eq!(form("application/json, */*"), Form::Plain);
        assert_eq!(form("application/vnd.kubernetes.protobuf"), Form::Plain);
        assert_eq!(negotiate(&HeaderMap::new()), Form::Plain);
    }

    #[test]
    fn a_client_listing_only_v2beta1_gets_plain_json_as_from_a_1_36_server() {
        assert_eq!(form(&format!("{V2BETA1},application/json")), Form::Plain);
        assert_eq!(
            form(&format!("{PB_V2},{V2BETA1},application/json")),
            Form::Plain
        );
        assert_eq!(
            form(&format!("application/json;q=0.9,{V2BETA1}")),
            Form::Plain
        );
    }
}
