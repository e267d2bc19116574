//! Plugin modules through a real OCI registry (`docker-registry`, the CNCF distribution
//! registry, on loopback): `reconcile-host push`, then pulls by tag, by digest and by pin as the
//! host does them, with the digests verified, the registry down and up again, htpasswd auth,
//! the disk cache, and the 18 MB Python component.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::common::host::{HOST_BINARY, component, scratch, scripted_component};
use crate::common::registry::Registry;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

/// What the binary printed and how it ended.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    millis: f64,
}

fn run(args: &[&str]) -> Run {
    let started = Instant::now();
    let output = Command::new(HOST_BINARY)
        .args(args)
        .output()
        .expect("reconcile-host runs");
    Run {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        millis: started.elapsed().as_secs_f64() * 1e3,
    }
}

fn push(module: &Path, reference: &str, extra: &[&str]) -> Run {
    let mut args = vec!["push", path_str(module), reference];
    args.extend_from_slice(extra);
    run(&args)
}

/// `push`, which must succeed; the digest reference it printed.
fn pushed(module: &Path, reference: &str, extra: &[&str]) -> String {
    let result = push(module, reference, extra);
    assert!(result.ok, "push {reference} failed: {}", result.stderr);
    let printed = result.stdout.trim().to_owned();
    let (repository, _tag) = reference.rsplit_once(':').expect("a tag");
    assert!(
        printed.starts_with(&format!("{repository}@sha256:"))
            && printed.len() == repository.len() + 72,
        "push printed {printed:?}"
    );
    printed
}

/// A successful pull's fields.
#[derive(Debug)]
struct Pulled {
    digest: String,
    layer: String,
    path: PathBuf,
    from_cache: bool,
    /// The whole process, wall clock.
    millis: f64,
    /// The pull inside the process, as it printed.
    pull_millis: f64,
}

fn pull(reference: &str, cache: &Path, extra: &[&str]) -> Result<Pulled, String> {
    let mut args = vec!["pull", reference, "--cache-dir", path_str(cache)];
    args.extend_from_slice(extra);
    let result = run(&args);
    if !result.ok {
        return Err(result.stderr);
    }
    let field = |name: &str| {
        result
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_owned()))
            .unwrap_or_else(|| panic!("pull printed no {name}: {}", result.stdout))
    };
    Ok(Pulled {
        digest: field("digest "),
        layer: field("layer "),
        path: PathBuf::from(field("path ")),
        from_cache: field("from-cache ") == "true",
        millis: result.millis,
        pull_millis: field("elapsed-ms ")
            .parse()
            .expect("elapsed-ms is a number"),
    })
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The body of `GET path` from the registry at `host`, accepting OCI manifests (the registry
/// refuses to serve one to a client that does not say so).
fn get(host: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(host).expect("registry reachable");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "GET {path}: {head}\n{body}"
    );
    body.to_owned()
}

fn digest_of(reference: &str) -> &str {
    reference.rsplit_once('@').expect("a digest reference").1
}

#[test]
fn a_pushed_component_is_pulled_by_tag_and_by_digest_in_the_cncf_layout() {
    let dir = scratch("oci-push-pull");
    let registry = Registry::start(&dir.join("registry"));
    let host = registry.host();
    let website = component("website");
    let reference = format!("{host}/plugins/website:v1");
    let by_digest = pushed(&website, &reference, &["--insecure"]);
    let digest = digest_of(&by_digest);

    let by_tag = pull(&reference, &dir.join("cache-a"), &["--insecure"]).expect("pull by tag");
    assert_eq!(
        by_tag.digest, digest,
        "the tag resolves to the pushed digest"
    );
    let bytes = std::fs::read(&website).unwrap();
    assert_eq!(by_tag.layer, sha256(&bytes));
    assert_eq!(std::fs::read(&by_tag.path).unwrap(), bytes);
    assert_eq!(
        by_tag.path,
        dir.join("cache-a")
            .join(format!("{}.wasm", &by_tag.layer["sha256:".len()..])),
        "stored by layer digest"
    );
    assert!(!by_tag.from_cache);

    let fresh = pull(&by_digest, &dir.join("cache-b"), &["--insecure"]).expect("pull by digest");
    assert_eq!(
        (fresh.digest.as_str(), fresh.layer.as_str()),
        (digest, by_tag.layer.as_str())
    );
    assert!(!fresh.from_cache);

    // The CNCF wasm layout: the manifest and the config as the registry holds them.
    let manifest = get(&host, &format!("/v2/plugins/website/manifests/{digest}"));
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config = get(&host, &format!("/v2/plugins/website/blobs/{config_digest}"));
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(
        config["component"]["target"],
        "kube:reconcile/reconciler@0.1.0"
    );
    assert_eq!(config["layerDigests"][0], by_tag.layer.as_str());
    let exports = config["component"]["exports"].to_string();
    assert!(exports.contains("reconcile"), "{config}");
    let imports = config["component"]["imports"].to_string();
    assert!(imports.contains("kube:reconcile/client@0.1.0"), "{config}");

    // A pin keeps the digest recorded earlier when the tag moves on.
    let moved = pushed(&component("noop"), &reference, &["--insecure"]);
    assert_ne!(digest_of(&moved), digest);
    let pinned = pull(
        &reference,
        &dir.join("cache-c"),
        &["--insecure", "--pin", digest],
    )
    .expect("pull with a pin");
    assert_eq!(pinned.digest, digest);
    assert_eq!(std::fs::read(&pinned.path).unwrap(), bytes);
    let latest = pull(&reference, &dir.join("cache-c"), &["--insecure"]).expect("pull the tag");
    assert_eq!(latest.digest, digest_of(&moved));
}

#[test]
fn a_wrong_digest_is_refused_naming_both_digests() {
    let dir = scratch("oci-wrong-digest");
    let registry = Registry::start(&dir.join("registry"));
    let host = registry.host();
    let by_digest = pushed(
        &component("noop"),
        &format!("{host}/plugins/noop:v1"),
        &["--insecure"],
    );

    let absent = format!("{host}/plugins/noop@sha256:{}", "0".repeat(64));
    let error = pull(&absent, &dir.join("cache"), &["--insecure"]).unwrap_err();
    assert!(
        error.contains(&format!("registry {host} has no {absent}")),
        "{error}"
    );

    // The registry serves altered bytes for the layer: one byte flipped in its storage.
    let layer = sha256(&std::fs::read(component("noop")).unwrap());
    let hex = &layer["sha256:".len()..];
    let data = registry
        .storage()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut bytes = std::fs::read(&data).expect("the layer in the registry's storage");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let altered = sha256(&bytes);
    std::fs::write(&data, &bytes).unwrap();
    let error = pull(&by_digest, &dir.join("cache"), &["--insecure"]).unwrap_err();
    assert!(
        error.contains(&format!(
            "has digest {altered}, not the {layer} asked for: refused"
        )),
        "{error}"
    );
    let kept: Vec<_> = std::fs::read_dir(dir.join("cache"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !kept
            .iter()
            .any(|name| name.to_string_lossy().ends_with(".wasm")),
        "nothing kept under a digest's name: {kept:?}"
    );
}

#[test]
fn a_registry_that_is_down_is_unreachable_then_pulls_succeed_when_it_is_back() {
    let dir = scratch("oci-down-up");
    let mut registry = Registry::start(&dir.join("registry"));
    let host = registry.host();
    let by_digest = pushed(
        &component("noop"),
        &format!("{host}/plugins/noop:v1"),
        &["--insecure"],
    );
    registry.stop();
    let error = pull(&by_digest, &dir.join("cache"), &["--insecure"]).unwrap_err();
    assert!(
        error.contains(&format!("cannot reach registry {host} for {by_digest}")),
        "{error}"
    );
    registry.restart();
    assert_eq!(registry.host(), host, "same port");
    let pulled = pull(&by_digest, &dir.join("cache"), &["--insecure"]).expect("pull when back");
    assert_eq!(pulled.digest, digest_of(&by_digest));
}

#[test]
fn plain_http_is_used_only_for_registries_listed_as_insecure() {
    let dir = scratch("oci-insecure");
    let registry = Registry::start(&dir.join("registry"));
    let reference = format!("{}/plugins/noop:v1", registry.host());
    // The registry is asked first: refused, nothing was compiled into the module cache.
    let modules = dir.join("modules");
    let refused = push(
        &component("noop"),
        &reference,
        &["--module-cache", path_str(&modules)],
    );
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains("`oci.insecureRegistries`"),
        "{}",
        refused.stderr
    );
    let compiled = |dir: &Path| std::fs::read_dir(dir).map_or(0, Iterator::count);
    assert_eq!(
        compiled(&modules),
        0,
        "compiled before the registry answered"
    );
    let error = pull(&reference, &dir.join("cache"), &[]).unwrap_err();
    assert!(error.contains("`oci.insecureRegistries`"), "{error}");
    // The same setting from the host's configuration file.
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!("oci:\n  insecureRegistries: [\"{}\"]\n", registry.host()),
    )
    .unwrap();
    pushed(
        &component("noop"),
        &reference,
        &[
            "--config",
            path_str(&config),
            "--module-cache",
            path_str(&modules),
        ],
    );
    // Compiled into the module cache given, where `check` and a host find it.
    assert!(compiled(&modules) > 0, "push left no compiled module");
    pull(
        &reference,
        &dir.join("cache"),
        &["--config", path_str(&config)],
    )
    .expect("pull");
}

#[test]
fn a_registry_with_htpasswd_auth_refuses_without_credentials_and_accepts_a_docker_config() {
    let dir = scratch("oci-auth");
    let registry = Registry::start_with(&dir.join("registry"), Some(("robot", "s3cret:pass")));
    let host = registry.host();
    let reference = format!("{host}/plugins/noop:v1");
    let modules = dir.join("modules");
    let refused = push(
        &component("noop"),
        &reference,
        &["--insecure", "--module-cache", path_str(&modules)],
    );
    assert!(!refused.ok);
    assert!(!modules.exists(), "compiled before the registry refused");
    assert!(
        refused.stderr.contains(&format!(
            "registry {host} refused {reference} without valid credentials"
        )),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("s3cret"), "{}", refused.stderr);

    let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret:pass");
    let docker = dir.join("config.json");
    std::fs::write(
        &docker,
        format!(r#"{{"auths": {{"http://{host}": {{"auth": "{auth}"}}}}}}"#),
    )
    .unwrap();
    let by_digest = pushed(
        &component("noop"),
        &reference,
        &["--insecure", "--docker-config", path_str(&docker)],
    );
    let error = pull(&by_digest, &dir.join("cache"), &["--insecure"]).unwrap_err();
    assert!(error.contains("without valid credentials"), "{error}");

    // username/password, through the host's configuration file.
    let plain = dir.join("plain.json");
    std::fs::write(
        &plain,
        format!(r#"{{"auths": {{"{host}": {{"username": "robot", "password": "s3cret:pass"}}}}}}"#),
    )
    .unwrap();
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!(
            "oci:\n  insecureRegistries: [\"{host}\"]\n  dockerConfig: {}\n",
            plain.display()
        ),
    )
    .unwrap();
    let pulled = pull(
        &by_digest,
        &dir.join("cache"),
        &["--config", path_str(&config)],
    )
    .expect("pull with credentials");
    assert_eq!(pulled.digest, digest_of(&by_digest));

    let wrong = dir.join("wrong.json");
    std::fs::write(
        &wrong,
        format!(r#"{{"auths": {{"{host}": {{"username": "robot", "password": "nope"}}}}}}"#),
    )
    .unwrap();
    let error = pull(
        &by_digest,
        &dir.join("cache-wrong"),
        &["--insecure", "--docker-config", path_str(&wrong)],
    )
    .unwrap_err();
    assert!(error.contains("without valid credentials"), "{error}");
}

#[test]
fn a_digest_pulled_before_comes_from_disk_with_no_request() {
    let dir = scratch("oci-cache");
    let mut registry = Registry::start(&dir.join("registry"));
    let host = registry.host();
    let reference = format!("{host}/plugins/noop:v1");
    let by_digest = pushed(&component("noop"), &reference, &["--insecure"]);
    let cache = dir.join("cache");
    let cold = pull(&by_digest, &cache, &["--insecure"]).expect("cold pull");
    assert!(!cold.from_cache);
    // The registry logs a request once it answered it: wait for the cold pull's last one, the
    // layer's download, before counting.
    let layer_request = format!("\"GET /v2/plugins/noop/blobs/{}", cold.layer);
    let deadline = Instant::now() + common::WAIT;
    while !registry.log().contains(&layer_request) {
        assert!(
            Instant::now() < deadline,
            "the registry never logged {layer_request}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let requests = registry.log().matches("\"GET /v2/").count();
    let warm = pull(&by_digest, &cache, &["--insecure"]).expect("warm pull");
    assert!(warm.from_cache);
    assert_eq!(
        registry.log().matches("\"GET /v2/").count(),
        requests,
        "the registry saw a request for a cached digest"
    );
    // And with the registry gone.
    registry.stop();
    let offline = pull(&by_digest, &cache, &["--insecure"]).expect("pull with the registry down");
    assert!(offline.from_cache);
    assert_eq!((offline.digest, offline.path), (cold.digest, cold.path));
    // A tag must be resolved: that needs the registry.
    let error = pull(&reference, &cache, &["--insecure"]).unwrap_err();
    assert!(error.contains("cannot reach registry"), "{error}");
}

#[test]
fn the_python_and_rust_website_components_are_pushed_and_pulled_with_their_digests_verified() {
    let dir = scratch("oci-python");
    let registry = Registry::start(&dir.join("registry"));
    let host = registry.host();
    let python = scripted_component(
        "examples/configmap-replicator-python/build.sh",
        "configmap-replicator-python",
    );
    for (name, module) in [
        ("website", component("website")),
        ("replicator-python", python),
    ] {
        let bytes = std::fs::read(&module).unwrap();
        let reference = format!("{host}/plugins/{name}:v1");
        let started = Instant::now();
        let by_digest = pushed(&module, &reference, &["--insecure"]);
        let push_ms = started.elapsed().as_secs_f64() * 1e3;
        let cache = dir.join(format!("cache-{name}"));
        let cold = pull(&by_digest, &cache, &["--insecure"]).expect("cold pull");
        let warm = pull(&by_digest, &cache, &["--insecure"]).expect("cached pull");
        assert!(!cold.from_cache && warm.from_cache);
        assert_eq!(cold.layer, sha256(&bytes));
        assert_eq!(std::fs::read(&cold.path).unwrap(), bytes);
        println!(
            "{name}: {:.1} MB, push {push_ms:.0} ms, pull cold {:.0} ms ({:.0} ms in process), \
             pull cached {:.0} ms ({:.0} ms in process); whole `reconcile-host` processes, this \
             build's profile",
            bytes.len() as f64 / 1e6,
            cold.millis,
            cold.pull_millis,
            warm.millis,
            warm.pull_millis
        );
    }
}

#[test]
fn a_registry_with_a_private_ca_is_trusted_through_ca_files_only() {
    let dir = scratch("oci-tls");
    let registry = Registry::start_tls(&dir.join("registry"));
    let reference = format!("{}/plugins/noop:v1", registry.host());
    let refused = push(&component("noop"), &reference, &[]);
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains("`oci.caFiles`"),
        "{}",
        refused.stderr
    );
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!("oci:\n  caFiles: [{}]\n", registry.ca_file().display()),
    )
    .unwrap();
    let by_digest = pushed(
        &component("noop"),
        &reference,
        &["--config", path_str(&config)],
    );
    let pulled = pull(
        &by_digest,
        &dir.join("cache"),
        &["--config", path_str(&config)],
    )
    .expect("pull over TLS");
    assert_eq!(pulled.digest, digest_of(&by_digest));
    let error = pull(&by_digest, &dir.join("cache-untrusted"), &[]).unwrap_err();
    assert!(error.contains("`oci.caFiles`"), "{error}");
}
