//! Tests of fetches: pinned digests served from the disk cache, abandoned fetches.

use std::sync::Arc;

use serde_json::json;

use super::fetch::{Fetcher, Job};
use super::fetched::{Bytes, FetchError};
use super::files::Files;
use super::known::Known;
use crate::config::OciSettings;
use crate::delivery::oci::Registry;
use crate::manifest::ReconcilerPlugin;
use crate::wasm::module::hex_sha256;

/// A client of an address nobody listens on.
fn unreachable_client() -> kube::Client {
    kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:1".parse().expect("a URL"),
    ))
    .expect("a client")
}

/// The object `web`: its module, shadow and canary tags in a registry nobody answers on, and a
/// status recording `digests` (module, shadow, canary) for `generation`.
fn object(generation: i64, digests: [Option<&str>; 3]) -> ReconcilerPlugin {
    let [module, shadow, canary] = digests;
    serde_json::from_value(json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": "web", "generation": 1},
        "spec": {
            "oci": "127.0.0.1:1/plugins/web:v1",
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "shadow": {"oci": "127.0.0.1:1/plugins/web:shadow"},
            "canary": {"selector": "track=canary", "oci": "127.0.0.1:1/plugins/web:canary"},
        },
        "status": {
            "observedGeneration": generation,
            "resolvedDigest": module,
            "shadowDigest": shadow,
            "canaryDigest": canary,
        },
    }))
    .expect("a ReconcilerPlugin")
}

#[tokio::test]
async fn shadow_and_canary_tags_are_pinned_to_the_digests_status_recorded() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let registry = Registry::new(&OciSettings::default(), tmp.path().join("cache"))
        .expect("a registry client");
    // Three modules pulled before: each manifest digest recorded with its layer.
    std::fs::create_dir_all(registry.store().dir()).expect("cache dir");
    let mut digests = Vec::new();
    let mut layers = Vec::new();
    for (manifest, bytes) in [
        ("a", &b"\0asm module"[..]),
        ("b", b"\0asm shadow"),
        ("c", b"\0asm canary"),
    ] {
        let layer = hex_sha256(bytes);
        std::fs::write(registry.store().module_path(&layer), bytes).expect("module cached");
        let manifest = manifest.repeat(64);
        registry
            .store()
            .record_manifest(&manifest, &format!("sha256:{layer}"))
            .expect("manifest recorded");
        digests.push(format!("sha256:{manifest}"));
        layers.push(layer);
    }
    let fetcher = Arc::new(Fetcher::new(unreachable_client(), Some(Arc::new(registry))));
    let known = Known::new(tmp.path());
    let fetch = |object: ReconcilerPlugin| {
        let job = Job {
            refused: None,
            spec: serde_json::to_value(&object.spec).expect("a spec"),
            name: "web".to_owned(),
            pins: known.pins("web", &object),
            step: Arc::default(),
        };
        Arc::clone(&fetcher).run(job)
    };
    let [module, shadow, canary] = [0, 1, 2].map(|i| Some(digests[i].as_str()));

    // Every tag pinned for this generation: served from the cache, no request made.
    let prepared = fetch(object(1, [module, shadow, canary]))
        .await
        .expect("served from the disk cache");
    assert_eq!(prepared.module.resolved, digests[0]);
    assert_eq!(prepared.module.shadow.as_ref(), Some(&digests[1]));
    assert_eq!(prepared.module.canary.as_ref(), Some(&digests[2]));
    let files: Vec<(&str, &str)> = (prepared.files.iter())
        .map(|f| (f.file, f.sha256.as_str()))
        .collect();
    assert_eq!(
        files,
        [
            ("module.wasm", layers[0].as_str()),
            ("shadow.wasm", layers[1].as_str()),
            ("canary.wasm", layers[2].as_str()),
        ]
    );
    assert!(
        (prepared.files.iter()).all(|f| matches!(f.bytes, Bytes::Cached(_))),
        "every module comes from the cache"
    );
    // Written as the plugin's files, verified as they are copied.
    let out = tmp.path().join("objects");
    std::fs::create_dir_all(&out).expect("objects dir");
    let mut written = Files::new(out.clone());
    written.write("web", &prepared).await.expect("written");
    assert_eq!(
        std::fs::read(out.join("web/shadow.wasm")).expect("shadow"),
        b"\0asm shadow"
    );
    let manifest = std::fs::read_to_string(out.join("web/plugin.yaml")).expect("manifest");
    assert!(manifest.contains("module: shadow.wasm"), "{manifest}");
    assert!(manifest.contains("module: canary.wasm"), "{manifest}");

    // The shadow's or the canary's tag not pinned: resolving it needs the registry, which is
    // unreachable.
    for pins in [[module, None, canary], [module, shadow, None]] {
        let error = fetch(object(1, pins))
            .await
            .err()
            .expect("a fetch that needs the registry fails");
        assert!(matches!(error, FetchError::Registry(_)), "{error}");
        assert_eq!(error.reason(), "RegistryUnreachable", "{error}");
    }
    // Digests recorded for another generation pin nothing.
    let error = fetch(object(0, [module, shadow, canary]))
        .await
        .err()
        .expect("unpinned: the registry is needed");
    assert_eq!(error.reason(), "RegistryUnreachable", "{error}");
}

#[tokio::test]
async fn a_cached_module_whose_bytes_changed_is_refused_as_it_is_copied() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let registry = Registry::new(&OciSettings::default(), tmp.path().join("cache"))
        .expect("a registry client");
    std::fs::create_dir_all(registry.store().dir()).expect("cache dir");
    let layer = hex_sha256(b"\0asm module");
    let path = registry.store().module_path(&layer);
    std::fs::write(&path, b"\0asm altered").expect("cached");
    let manifest = "a".repeat(64);
    registry
        .store()
        .record_manifest(&manifest, &format!("sha256:{layer}"))
        .expect("recorded");
    let fetcher = Arc::new(Fetcher::new(unreachable_client(), Some(Arc::new(registry))));
    let mut object = object(1, [Some(&format!("sha256:{manifest}")), None, None]);
    object.spec = serde_json::from_value(json!({
        "oci": "127.0.0.1:1/plugins/web:v1",
        "for": {"apiVersion": "v1", "kind": "ConfigMap"},
    }))
    .expect("a spec");
    let known = Known::new(tmp.path());
    let job = Job {
        refused: None,
        spec: serde_json::to_value(&object.spec).expect("a spec"),
        name: "web".to_owned(),
        pins: known.pins("web", &object),
        step: Arc::default(),
    };
    let prepared = fetcher.run(job).await.expect("found in the cache");
    let out = tmp.path().join("objects");
    std::fs::create_dir_all(&out).expect("objects dir");
    let error = Files::new(out.clone())
        .write("web", &prepared)
        .await
        .expect_err("altered bytes are refused");
    assert_eq!(error.reason(), "CachedModuleCorrupt", "{error}");
    assert!(!out.join("web/module.wasm").exists(), "nothing written");
    assert!(!path.exists(), "the altered file is removed from the cache");
}

#[tokio::test]
async fn a_fetch_overtaken_by_a_new_generation_or_the_deletion_is_abandoned() {
    // A registry that accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let host = silent.local_addr().expect("an address").to_string();
    let tmp = tempfile::tempdir().expect("scratch dir");
    let settings = OciSettings {
        insecure_registries: vec![host.clone()],
        ..OciSettings::default()
    };
    let registry = Registry::new(&settings, tmp.path().join("cache")).expect("a registry client");
    let fetcher = Arc::new(Fetcher::new(unreachable_client(), Some(Arc::new(registry))));
    let mut web: ReconcilerPlugin = serde_json::from_value(json!({
        "apiVersion": "reconcile-host.dev/v1alpha1",
        "kind": "ReconcilerPlugin",
        "metadata": {"name": "web", "generation": 1, "uid": "u1"},
        "spec": {
            "oci": format!("{host}/plugins/web:v1"),
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
        },
    }))
    .expect("a ReconcilerPlugin");
    let out = tmp.path().join("objects");
    std::fs::create_dir_all(&out).expect("objects dir");
    let mut known = Known::new(&out);
    known.objects.insert("web".to_owned(), web.clone());
    known.follow(&fetcher);
    assert!(matches!(
        known.fetch("web", &web),
        Some(super::status::Fetch::Running { .. })
    ));

    // A new generation: the first fetch is abandoned, another runs for generation 2.
    web.metadata.generation = Some(2);
    known.objects.insert("web".to_owned(), web.clone());
    known.follow(&fetcher);
    let first = known.tasks.join_next_with_id().await.expect("a task");
    assert!(
        first.is_err_and(|error| error.is_cancelled()),
        "the overtaken fetch is aborted"
    );
    assert!(matches!(
        known.fetch("web", &web),
        Some(super::status::Fetch::Running {
            generation: Some(2),
            ..
        })
    ));

    // Deleted: its fetch is abandoned too, nothing left running.
    known.objects.clear();
    known.follow(&fetcher);
    let second = known.tasks.join_next_with_id().await.expect("a task");
    assert!(second.is_err_and(|error| error.is_cancelled()));
    assert!(known.tasks.is_empty());
}
