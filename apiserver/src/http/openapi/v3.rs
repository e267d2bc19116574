//! `/openapi/v3`: an index of one document per group version, and the documents: each kind's
//! paths (declaring that writes take `fieldValidation`, so kubectl leaves validation to the
//! server) and the schemas of its kinds (`kubectl explain`, and the patches of `kubectl apply`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use super::paths::item_paths;
use crate::cluster::Cluster;
use crate::resources::Resource;
use crate::schemas::for_resources;

/// The index: each group version's document with a hash of its content (clients cache by it).
pub(crate) fn index(cluster: &Cluster, version: &str) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
    for g in cluster.registry.groups() {
        for v in g.versions {
            gvs.push((g.name.clone(), v));
        }
    }
    for (group, gv_version) in gvs {
        let key = if group.is_empty() {
            format!("api/{gv_version}")
        } else {
            format!("apis/{group}/{gv_version}")
        };
        let doc = group_version(
            &cluster.registry.in_group_version(&group, &gv_version),
            version,
        );
        let mut hasher = DefaultHasher::new();
        doc.to_string().hash(&mut hasher);
        let url = format!("/openapi/v3/{key}?hash={:016X}", hasher.finish());
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// One group version's document.
pub(crate) fn group_version(resources: &[std::sync::Arc<Resource>], version: &str) -> Value {
    let paths = item_paths(
        resources,
        |name| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    );
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (embedded)", "version": version},
        "paths": paths,
        "components": {"schemas": for_resources(resources)},
    })
}
