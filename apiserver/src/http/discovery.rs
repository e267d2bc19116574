//! Discovery documents (`/version`, `/api`, `/apis`, group versions), health endpoints, and a
//! minimal OpenAPI v3 document that tells kubectl which kinds accept server-side validation.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::json_response;
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
    if wants_aggregated(headers) {
        match segments {
            ["api"] => return Some(aggregated(cluster, true)),
            ["apis"] => return Some(aggregated(cluster, false)),
            _ => {}
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
        })),
        ["healthz" | "livez" | "readyz", ..] => {
            let mut resp = Response::new("ok".into());
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, "text/plain".parse().ok()?);
            Some(resp)
        }
        ["api"] => ok(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        })),
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
        ["openapi", "v3"] => ok(openapi_index(cluster)),
        ["openapi", "v3", rest @ ..] => {
            let (group, version) = match rest {
                ["api", v] => ("", *v),
                ["apis", g, v] => (*g, *v),
                _ => return None,
            };
            let resources = cluster.registry.in_group_version(group, version);
            if resources.is_empty() {
                return None;
            }
            ok(openapi_group_version(&resources))
        }
        _ => None,
    }
}

/// The media type of aggregated discovery (`apidiscovery.k8s.io/v2`).
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split(',').next())
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2"))
}

/// The aggregated discovery document of the core group (`core`) or of all named groups.
fn aggregated(cluster: &Cluster, core: bool) -> Response {
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
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    let doc = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    });
    let mut resp = json_response(StatusCode::OK, doc.to_string());
    if let Ok(v) = AGGREGATED.parse() {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn aggregated_resource(r: &Resource) -> Value {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
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
    if r.status {
        doc["subresources"] = json!([{"subresource": "status", "responseKind": gvk,
                                      "verbs": ["get", "patch", "update"]}]);
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
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

fn openapi_index(cluster: &Cluster) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
    for g in cluster.registry.groups() {
        for v in g.versions {
            gvs.push((g.name.clone(), v));
        }
    }
    for (group, version) in gvs {
        let key = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        let doc = openapi_group_version(&cluster.registry.in_group_version(&group, &version));
        let mut hasher = DefaultHasher::new();
        doc.to_string().hash(&mut hasher);
        let url = format!("/openapi/v3/{key}?hash={:016X}", hasher.finish());
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// A group-version document declaring, per kind, that PATCH accepts `fieldValidation` (so
/// kubectl leaves validation to the server) without schemas (so kubectl builds strategic
/// merge patches from its compiled-in types).
fn openapi_group_version(resources: &[std::sync::Arc<Resource>]) -> Value {
    let mut paths = serde_json::Map::new();
    for r in resources {
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            path,
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (embedded)", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": {}},
    })
}
