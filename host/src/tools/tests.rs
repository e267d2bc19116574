//! Tests of the fixtures, the caches and the records of `reconcile`.

use std::path::Path;

use serde_json::{Value, json};

use super::fixtures::*;
use super::outcome::*;
use crate::manifest::Manifest;
use crate::runtime::KindRef;
use crate::wasm::api::ApiCall;
use crate::wasm::api::Target;

const MANIFEST: &str = "name: web\nmodule: web.wasm\nfor: {apiVersion: example.com/v1, \
                            kind: Website}\nowns: [{apiVersion: apps/v1, kind: Deployment}]\n\
                            labelSelector: tier=web\ngrants:\n  - {apiVersion: apps/v1, kind: \
                            Deployment, verbs: [patch], namespaces: [default]}\n";

fn manifest() -> Manifest {
    Manifest::parse(MANIFEST, Path::new("/plugins")).unwrap()
}

fn apply(api_version: &str, kind: &str, namespace: &str) -> ApiCall {
    let object = json!({"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": "x", "namespace": namespace}});
    ApiCall::Apply {
        target: Target {
            kind: KindRef::new(api_version, kind),
            namespace: Some(namespace.to_owned()),
            name: "x".to_owned(),
        },
        object,
        force: true,
        subresource: None,
        field_manager: "web".to_owned(),
    }
}

#[test]
fn documents_lists_and_empty_documents_give_one_value_per_object() {
    let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n\
                    kind: List\napiVersion: v1\nitems:\n  - {apiVersion: v1, kind: Namespace, \
                    metadata: {name: b}}\n  - {apiVersion: v1, kind: Namespace, metadata: {name: c}}\n";
    let names: Vec<Value> = objects_in(text, "f.yaml")
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("a"), json!("b"), json!("c")]);
    let json = r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "j"}}"#;
    assert_eq!(objects_in(json, "f.json").unwrap().len(), 1);
    let error = objects_in("a: [", "bad.yaml").unwrap_err();
    assert!(
        format!("{error:#}").starts_with("bad.yaml: document 1 is not valid"),
        "{error:#}"
    );
}

#[test]
fn fixtures_get_a_repeatable_uid_and_version_but_keep_what_they_set() {
    let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "namespace": "ns"}});
    let first = fixture(value.clone(), "f").unwrap();
    let second = fixture(value, "f").unwrap();
    assert_eq!(first.json, second.json);
    let parsed: Value = serde_json::from_str(&first.json).unwrap();
    let uid = parsed["metadata"]["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36, "{uid}");
    assert_eq!(parsed["metadata"]["resourceVersion"], "1");
    assert_eq!(
        parsed["metadata"].get("generation"),
        None,
        "no spec, no generation"
    );
    let set = json!({"apiVersion": "v1", "kind": "X", "spec": {},
                         "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}});
    let parsed: Value = serde_json::from_str(&fixture(set, "f").unwrap().json).unwrap();
    assert_eq!(
        parsed["metadata"],
        json!({"name": "a", "uid": "u", "resourceVersion": "7", "generation": 1})
    );
    let error = fixture(json!({"kind": "X", "metadata": {"name": "a"}}), "f.yaml");
    assert!(
        error
            .unwrap_err()
            .to_string()
            .contains("needs `apiVersion`, `kind` and `metadata.name`")
    );
}

#[test]
fn the_for_cache_holds_the_object_and_selected_fixtures_only() {
    let manifest = manifest();
    let website = |name: &str, tier: &str| {
        fixture(
            json!({"apiVersion": "example.com/v1", "kind": "Website",
                       "metadata": {"name": name, "namespace": "default",
                                    "labels": {"tier": tier}}}),
            "f",
        )
        .unwrap()
    };
    let deployment = fixture(
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "d", "namespace": "default"}}),
        "f",
    )
    .unwrap();
    let fixtures = [website("other", "web"), website("db", "db"), deployment];
    let caches = caches(&manifest, &fixtures, &website("hello", "web")).unwrap();
    let mut names: Vec<String> = caches[&manifest.for_kind]
        .list()
        .iter()
        .map(|o| o.name().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hello", "other"]);
    assert_eq!(caches[&KindRef::new("apps/v1", "Deployment")].len(), 1);
}

#[test]
fn calls_read_as_verb_kind_key_and_options() {
    let record = CallRecord::from(&apply("apps/v1", "Deployment", "default"));
    assert_eq!(
        record.headline(),
        "apply apps/v1 Deployment default/x (force)"
    );
    let json = serde_json::to_value(&record).unwrap();
    let mut fields: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    let stable = [
        "apiVersion",
        "body",
        "force",
        "kind",
        "name",
        "namespace",
        "patchType",
        "subresource",
        "verb",
    ];
    assert_eq!(fields, stable);
    assert_eq!(
        serde_json::to_value(ActionRecord::RequeueAfter { after_ms: 60_000 }).unwrap(),
        json!({"type": "requeue-after", "afterMs": 60000})
    );
}

#[test]
fn an_escaped_stack_is_shown_line_by_line_with_other_escapes_kept() {
    let text = "panic: boom\\ngoroutine 1:\\n\\tmain.go:3\\u{1b}[2J";
    assert_eq!(
        readable(text, "  "),
        "  panic: boom\n  goroutine 1:\n      main.go:3\\u{1b}[2J"
    );
}

#[test]
fn the_samples_beside_a_manifest_give_the_first_for_object_and_the_objects_it_reads() {
    let dir = std::env::temp_dir().join(format!("samples-beside-{}", std::process::id()));
    let samples = dir.join(SAMPLES_DIR);
    std::fs::create_dir_all(&samples).unwrap();
    let website = |name: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Website\nmetadata: {{name: {name}, namespace: default}}\n"
        )
    };
    std::fs::write(samples.join("a-crd.yaml"), "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: websites.example.com}\n").unwrap();
    std::fs::write(
        samples.join("b.yaml"),
        format!("{}---\n{}", website("first"), website("second")),
    )
    .unwrap();
    std::fs::write(samples.join("c.json"), r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"}}"#).unwrap();
    let manifest_path = dir.join("plugin.yaml");
    let (object, others, found) = samples_beside(&manifest_path, &manifest())
        .unwrap()
        .expect("a sample");
    assert_eq!(object.name, "first");
    assert_eq!(found, samples);
    let names: Vec<&str> = others.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["second", "d"], "the CRD is not the plugin's");
    std::fs::remove_dir_all(&samples).unwrap();
    assert!(
        samples_beside(&manifest_path, &manifest())
            .unwrap()
            .is_none()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
