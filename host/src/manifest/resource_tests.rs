//! Tests of the `ReconcilerPlugin` custom resource: its CRD is generated from the manifest's own
//! types, so a file and an object carry the same fields.

use std::collections::BTreeSet;

use kube::CustomResourceExt;
use serde_json::Value;

use super::tests::FULL;
use super::*;

/// The CRD as JSON.
fn crd() -> Value {
    serde_json::to_value(ReconcilerPlugin::crd()).expect("the CRD serializes")
}

/// The keys of a JSON or YAML mapping.
fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .expect("a mapping")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn the_crd_spec_has_every_field_of_a_manifest_file_but_name_and_module_plus_the_sources() {
    let file: Value = serde_yaml_ng::from_str(FULL).expect("the full example parses");
    let spec = &crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut expected = keys(&file);
    expected.retain(|key| key != "name" && key != "module");
    expected.extend(["oci", "configMap", "shadow", "canary"].map(str::to_owned));
    assert_eq!(keys(&spec["properties"]), expected);
    // Nested mappings too: what a file may write under each, the object may.
    for field in ["rateLimiter", "limits", "apiRateLimit", "instanceReuse"] {
        let written = keys(&file[field]);
        let schema = keys(&spec["properties"][field]["properties"]);
        assert!(
            written.is_subset(&schema),
            "{field}: {written:?} ⊄ {schema:?}"
        );
    }
    // An object's shadow and canary name their component with `oci`, never a path.
    assert_eq!(
        keys(&spec["properties"]["shadow"]["properties"]),
        ["env", "limits", "oci", "sample"].map(str::to_owned).into()
    );
    assert_eq!(
        keys(&spec["properties"]["canary"]["properties"]),
        ["oci", "selector"].map(str::to_owned).into()
    );
    let grant = keys(&spec["properties"]["grants"]["items"]["properties"]);
    assert_eq!(
        grant,
        [
            "apiVersion",
            "kind",
            "namespaces",
            "resource",
            "subresources",
            "verbs"
        ]
        .map(str::to_owned)
        .into()
    );
    // The manifest's bounds are the schema's, so the API server refuses what the host would.
    assert_eq!(
        spec["properties"]["concurrency"]["minimum"].as_f64(),
        Some(1.0)
    );
    assert_eq!(
        spec["properties"]["concurrency"]["maximum"].as_f64(),
        Some(64.0)
    );
    assert!(spec["properties"]["resync"]["pattern"].is_string());
    // `kubectl explain` reads the fields' descriptions.
    assert!(
        spec["properties"]["generationChanged"]["description"]
            .as_str()
            .is_some_and(|text| text.contains("metadata.generation"))
    );
}

#[test]
fn the_crd_is_cluster_scoped_with_status_printer_columns_and_one_module_source() {
    let crd = crd();
    assert_eq!(
        crd["metadata"]["name"],
        "reconcilerplugins.reconcile-host.dev"
    );
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "rplugin");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let columns: Vec<&str> = (version["additionalPrinterColumns"]
        .as_array()
        .expect("columns"))
    .iter()
    .map(|column| column["name"].as_str().expect("named"))
    .collect();
    assert_eq!(columns, ["Ready", "Degraded", "Digest", "Age"]);
    let rules = &version["schema"]["openAPIV3Schema"]["x-kubernetes-validations"];
    assert_eq!(
        rules[0]["rule"],
        "has(self.spec.oci) != has(self.spec.configMap)"
    );
}

/// Equal JSON values, numbers compared by value (a rate of 20 reads back as 20.0).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            keys(a) == keys(b) && x.iter().all(|(key, value)| same(value, &y[key]))
        }
        _ => a == b,
    }
}

#[test]
fn an_object_reads_into_the_same_fields_as_a_file() {
    let object = format!(
        "apiVersion: reconcile-host.dev/v1alpha1\nkind: ReconcilerPlugin\nmetadata: {{name: website}}\n\
         spec:\n  oci: registry.example.com/website@sha256:{}\n{}",
        "0".repeat(64),
        FULL.lines()
            .filter(|line| !line.is_empty()
                && !line.starts_with("name:")
                && !line.starts_with("module:"))
            .map(|line| format!("  {line}\n"))
            .collect::<String>()
    );
    let plugin: ReconcilerPlugin = serde_yaml_ng::from_str(&object).expect("the object parses");
    let back = serde_json::to_value(&plugin.spec).expect("serializes");
    let mut file: Value = serde_yaml_ng::from_str(FULL).expect("parses");
    let file = file.as_object_mut().expect("a mapping");
    file.remove("name");
    file.remove("module");
    for (field, value) in file.iter() {
        assert!(
            same(&back[field], value),
            "{field}: {} ≠ {value}",
            back[field]
        );
    }
    // A field the schema does not have is refused as in a file.
    let typo = object.replace("  concurrency:", "  concurency:");
    let error = serde_yaml_ng::from_str::<ReconcilerPlugin>(&typo).unwrap_err();
    assert!(
        error.to_string().contains("unknown field `concurency`"),
        "{error}"
    );
}

#[test]
fn a_manifest_file_names_its_component_with_module_not_a_registry() {
    let text = format!("{FULL}oci: registry.example.com/website:v1\n");
    let error = Manifest::parse(&text, Path::new("/plugins")).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`oci`"), "{message}");
    assert!(message.contains("`module: <path>`"), "{message}");
}

#[test]
fn a_memory_size_in_an_objects_json_may_be_a_number_of_bytes() {
    let object = serde_json::json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": "web"},
        "spec": {
            "oci": "registry.example.com/web:v1",
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "limits": {"memory": 67_108_864},
            "instanceReuse": {"maxMemory": "32Mi"},
        },
    });
    let plugin: ReconcilerPlugin = serde_json::from_value(object).expect("parses");
    let spec = serde_json::to_value(&plugin.spec).expect("serializes");
    assert_eq!(spec["limits"]["memory"], "67108864");
    assert_eq!(spec["instanceReuse"]["maxMemory"], "32Mi");
}

#[test]
fn an_objects_shadow_and_canary_come_from_registries() {
    let object = |extra: &str| {
        format!(
            "apiVersion: reconcile-host.dev/v1alpha1\nkind: ReconcilerPlugin\nmetadata: {{name: web}}\n\
             spec:\n  oci: registry.example.com/web@sha256:{}\n  for: {{apiVersion: v1, kind: ConfigMap}}\n{extra}",
            "0".repeat(64)
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.yaml");
    let load = |text: String| {
        std::fs::write(&path, text).unwrap();
        Manifest::load_object(&path)
    };
    let (manifest, _) = load(object(
        "  shadow: {oci: registry.example.com/web@sha256:1, sample: 0.5}\n  \
         canary: {selector: track=canary, oci: registry.example.com/web:v2}\n",
    ))
    .expect("an object with a shadow and a canary loads");
    assert!((manifest.shadow.expect("a shadow").sample - 0.5).abs() < f64::EPSILON);
    assert!(manifest.canary.is_some());
    for (yaml, fragment) in [
        (
            "  shadow: {module: v2.wasm}\n",
            "`spec.shadow.module`: is a manifest file's field; an object names the shadow's component with `shadow.oci`",
        ),
        (
            "  canary: {selector: a=b}\n",
            "`spec.canary.oci`: missing; add the canary's component as a registry reference",
        ),
    ] {
        let error = load(object(yaml)).unwrap_err().to_string();
        assert!(error.contains(fragment), "{error}");
    }
}
