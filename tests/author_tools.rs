//! `check` and `reconcile`, the plugin authors' tools: the real binary on the real example and
//! test components, no cluster.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::common::host::{component, manifest, scratch, tool, workspace};
use serde_json::{Value, json};

/// Runs the binary with `args` (and the tests' module cache), feeding `stdin` if given.
fn host(args: &[&str], stdin: Option<&str>) -> Output {
    let (subcommand, args) = args.split_first().expect("a subcommand");
    let mut command = tool(subcommand);
    command
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the host spawns");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin piped");
        pipe.write_all(text.as_bytes()).expect("stdin written");
    }
    child.wait_with_output().expect("the host exits")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// `examples/<name>/plugin.yaml` copied into `dir`, pointing at the built component.
fn example(dir: &Path, name: &str) -> PathBuf {
    manifest(
        dir,
        &format!("examples/{name}/plugin.yaml"),
        &component(name),
        &[],
    )
}

fn sample(relative: &str) -> String {
    path(&workspace().join(relative)).to_owned()
}

/// `reconcile --output json` of `manifest` with `extra` arguments: the exit code and the
/// document printed.
fn reconcile_json(manifest: &Path, extra: &[&str], stdin: Option<&str>) -> (i32, Value) {
    let mut args = vec!["reconcile", path(manifest), "--output", "json"];
    args.extend(extra);
    let output = host(&args, stdin);
    let document = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "stdout is not JSON ({error}): {}\nstderr: {}",
            stdout(&output),
            stderr(&output)
        )
    });
    (output.status.code().expect("exit code"), document)
}

/// `(verb, kind, namespace/name, subresource)` of each recorded call.
fn calls(document: &Value, field: &str) -> Vec<(String, String, String, Option<String>)> {
    document[field]
        .as_array()
        .expect("a list of calls")
        .iter()
        .map(|call| {
            let text = |key: &str| call[key].as_str().map(str::to_owned);
            (
                text("verb").unwrap(),
                format!("{} {}", text("apiVersion").unwrap(), text("kind").unwrap()),
                format!(
                    "{}/{}",
                    text("namespace").unwrap_or_default(),
                    text("name").unwrap()
                ),
                text("subresource"),
            )
        })
        .collect()
}

fn call(
    verb: &str,
    kind: &str,
    key: &str,
    sub: Option<&str>,
) -> (String, String, String, Option<String>) {
    (verb.into(), kind.into(), key.into(), sub.map(Into::into))
}

/// A testbed ConfigMap `default/<name>` with `data.behave = behave`.
fn testbed_object(dir: &Path, name: &str, behave: &str) -> PathBuf {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  \
             labels: {{testbed: \"true\"}}\ndata:\n  behave: {behave}\n"
        ),
    )
    .unwrap();
    file
}

#[test]
fn check_prints_the_website_modules_digest_imports_and_grants() {
    let dir = scratch("tools-check-website");
    let manifest = example(&dir, "website");
    let website = sample("examples/website/samples/website.yaml");
    let output = host(&["check", path(&manifest), "--sample", &website], None);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    for part in [
        "plugin    website",
        "sha256 ",
        "for       example.com/v1 Website",
        "owns      apps/v1 Deployment, v1 Service",
        "kube:reconcile/client@0.1.0",
        "wasi:cli/",
        "KIND",
        "SUBRESOURCES",
        "example.com/v1 Website  patch  *           status",
        "ok: plugin `website` is valid",
    ] {
        assert!(out.contains(part), "missing {part:?} in:\n{out}");
    }
    assert!(!out.contains("warning"), "{out}");
}

#[test]
fn check_prints_the_replicators_cache_kinds_and_grants() {
    let dir = scratch("tools-check-replicator");
    let manifest = example(&dir, "configmap-replicator");
    let output = host(&["check", path(&manifest)], None);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    for part in [
        "plugin    configmap-replicator",
        "selector  replicator.example.com/replicate=true",
        "cache     v1 ConfigMap, v1 Namespace",
        "kube:reconcile/cache@0.1.0",
        "kube:reconcile/client@0.1.0",
        "v1 ConfigMap  get, create, patch, delete  *",
    ] {
        assert!(out.contains(part), "missing {part:?} in:\n{out}");
    }
}

#[test]
fn check_warns_about_grants_a_component_without_the_client_import_cannot_use() {
    let dir = scratch("tools-check-unused-grants");
    let manifest = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("noop"),
        &[],
    );
    let output = host(&["check", path(&manifest)], None);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    assert!(
        out.contains("warning: the manifest has grants but the component does not import kube:reconcile/client"),
        "{out}"
    );
    assert!(!out.contains("kube:reconcile/client@"), "{out}");
}

#[test]
fn check_warns_when_the_component_imports_the_client_but_nothing_is_granted() {
    let dir = scratch("tools-check-no-grants");
    let manifest = dir.join("website.yaml");
    std::fs::write(
        &manifest,
        format!(
            "name: website\nmodule: {}\nfor: {{apiVersion: example.com/v1, kind: Website}}\n",
            component("website").display()
        ),
    )
    .unwrap();
    let website = sample("examples/website/samples/website.yaml");
    let output = host(&["check", path(&manifest), "--sample", &website], None);
    let (out, err) = (stdout(&output), stderr(&output));
    // Its first write is denied and it returns the error: check fails, listing the denied
    // call with the grant it lacks.
    assert_eq!(output.status.code(), Some(1), "{out}{err}");
    assert!(
        out.trim_end()
            .ends_with("not ok: plugin `website`: its reconcile returned an error"),
        "{out}"
    );
    assert!(
        err.contains("  denied: apply apps/v1 Deployment default/hello")
            && err.contains("has no grant to `patch` apps/v1 Deployment"),
        "{err}"
    );
    assert!(out.contains("grants    none"), "{out}");
    assert!(
        out.contains(
            "warning: the component imports kube:reconcile/client but the manifest grants nothing"
        ),
        "{out}"
    );
}

#[test]
fn check_refuses_a_bad_field_naming_it() {
    let dir = scratch("tools-check-bad-field");
    let manifest = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[("concurrency", "0")],
    );
    let output = host(&["check", path(&manifest)], None);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "plugin manifest {}: `concurrency`: `0` is out of range",
            manifest.display()
        )),
        "{err}"
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn check_refuses_a_component_of_another_world() {
    let dir = scratch("tools-check-wrong-world");
    let manifest = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("wrong-world"),
        &[],
    );
    let output = host(&["check", path(&manifest)], None);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(&manifest.display().to_string()), "{err}");
    assert!(
        err.contains("does not match the `reconciler` world"),
        "{err}"
    );
    assert!(err.contains("rebuild it against wit/"), "{err}");
}

#[test]
fn check_refuses_a_missing_module_saying_what_to_do() {
    let dir = scratch("tools-check-missing");
    let missing = dir.join("missing.wasm");
    let manifest = manifest(&dir, "examples/website/plugin.yaml", &missing, &[]);
    let output = host(&["check", path(&manifest)], None);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(
        err.contains("build the component, or fix `module:`"),
        "{err}"
    );
    assert!(err.contains("No such file"), "{err}");
}

#[test]
fn a_website_reconcile_applies_deployment_service_and_status_then_requeues_after_a_minute() {
    let dir = scratch("tools-reconcile-website");
    let manifest = example(&dir, "website");
    let object = sample("examples/website/samples/website.yaml");
    let (code, document) = reconcile_json(&manifest, &["--object", &object], None);
    assert_eq!(code, 0, "{document:#}");
    assert_eq!(
        document["action"],
        json!({"type": "requeue-after", "afterMs": 60000})
    );
    assert_eq!(document["error"], Value::Null);
    assert_eq!(
        calls(&document, "calls"),
        [
            call("apply", "apps/v1 Deployment", "default/hello", None),
            call("apply", "v1 Service", "default/hello", None),
            call(
                "apply",
                "example.com/v1 Website",
                "default/hello",
                Some("status")
            ),
        ]
    );
    let deployment = &document["calls"][0]["body"];
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    let owner = &deployment["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Website");
    assert!(owner["uid"].as_str().is_some_and(|uid| !uid.is_empty()));
    assert_eq!(
        document["calls"][2]["body"]["status"]["image"],
        "nginx:1.27"
    );
    assert_eq!(document["denied"], json!([]));
}

#[test]
fn the_text_report_shows_the_action_and_each_call_with_its_body() {
    let dir = scratch("tools-reconcile-text");
    let manifest = example(&dir, "website");
    let object = sample("examples/website/samples/website.yaml");
    let output = host(&["reconcile", path(&manifest), "--object", &object], None);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}{}", stderr(&output));
    for part in [
        "reconciled example.com/v1 Website default/hello with plugin `website`",
        "action: requeue-after 60000 ms",
        "calls: 3 (recorded, not applied)",
        "1. apply apps/v1 Deployment default/hello (force)",
        "\"image\": \"nginx:1.27\"",
        "3. apply example.com/v1 Website default/hello (status subresource, force)",
        "denied: 0",
    ] {
        assert!(out.contains(part), "missing {part:?} in:\n{out}");
    }
}

#[test]
fn the_replicator_first_adds_its_finalizer_with_a_json_patch() {
    let dir = scratch("tools-reconcile-finalizer");
    let manifest = example(&dir, "configmap-replicator");
    let object = sample("examples/configmap-replicator/samples/configmap.yaml");
    let namespaces = sample("examples/configmap-replicator/samples/namespaces.yaml");
    let (code, document) = reconcile_json(
        &manifest,
        &["--object", &object, "--cache", &namespaces],
        None,
    );
    assert_eq!(code, 0, "{document:#}");
    assert_eq!(document["action"], json!({"type": "done"}));
    assert_eq!(
        calls(&document, "calls"),
        [call(
            "patch",
            "v1 ConfigMap",
            "default/shared-settings",
            None
        )]
    );
    let patch = &document["calls"][0];
    assert_eq!(patch["patchType"], "json");
    assert_eq!(
        patch["body"][1],
        json!({"op": "add", "path": "/metadata/finalizers",
               "value": ["replicator.example.com/cleanup"]})
    );
}

#[test]
fn the_replicator_with_its_finalizer_creates_a_copy_in_each_listed_namespace() {
    let dir = scratch("tools-reconcile-copies");
    let manifest = example(&dir, "configmap-replicator");
    let text = std::fs::read_to_string(
        workspace().join("examples/configmap-replicator/samples/configmap.yaml"),
    )
    .unwrap()
    .replace(
        "metadata:\n",
        "metadata:\n  finalizers: [replicator.example.com/cleanup]\n",
    );
    let namespaces = sample("examples/configmap-replicator/samples/namespaces.yaml");
    let (code, document) = reconcile_json(
        &manifest,
        &["--object", "-", "--cache", &namespaces],
        Some(&text),
    );
    assert_eq!(code, 0, "{document:#}");
    assert_eq!(document["action"], json!({"type": "done"}));
    assert_eq!(
        calls(&document, "calls"),
        [
            call("create", "v1 ConfigMap", "team-a/shared-settings", None),
            call("create", "v1 ConfigMap", "team-b/shared-settings", None),
        ]
    );
    let copy = &document["calls"][0]["body"];
    assert_eq!(copy["data"]["log-level"], "info");
    assert_eq!(
        copy["metadata"]["labels"],
        json!({"replicator.example.com/copy-of": "default.shared-settings"})
    );
}

#[test]
fn a_stale_copy_in_a_cache_directory_is_found_through_the_cache_import_and_deleted() {
    let dir = scratch("tools-reconcile-stale");
    let manifest = example(&dir, "configmap-replicator");
    let object = dir.join("source.json");
    std::fs::write(
        &object,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "shared-settings", "namespace": "default",
                            "labels": {"replicator.example.com/replicate": "true"},
                            "annotations": {"replicator.example.com/namespaces": "team-a"},
                            "finalizers": ["replicator.example.com/cleanup"]}})
        .to_string(),
    )
    .unwrap();
    let fixtures = dir.join("cache");
    std::fs::create_dir_all(&fixtures).unwrap();
    let copy = |namespace: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "shared-settings", "namespace": namespace,
                            "labels": {"replicator.example.com/copy-of": "default.shared-settings"}}})
    };
    std::fs::write(
        fixtures.join("copies.json"),
        json!({"apiVersion": "v1", "kind": "List", "items": [copy("team-a"), copy("team-old")]})
            .to_string(),
    )
    .unwrap();
    std::fs::copy(
        workspace().join("examples/configmap-replicator/samples/namespaces.yaml"),
        fixtures.join("namespaces.yaml"),
    )
    .unwrap();
    let (code, document) = reconcile_json(
        &manifest,
        &["--object", path(&object), "--cache", path(&fixtures)],
        None,
    );
    assert_eq!(code, 0, "{document:#}");
    assert_eq!(
        calls(&document, "calls"),
        [
            call("apply", "v1 ConfigMap", "team-a/shared-settings", None),
            call("get", "v1 ConfigMap", "team-old/shared-settings", None),
            call("delete", "v1 ConfigMap", "team-old/shared-settings", None),
        ]
    );
    assert_eq!(document["calls"][2]["body"], Value::Null);
}

#[test]
fn a_call_the_grants_refuse_is_listed_as_denied_and_the_failure_exits_1() {
    let dir = scratch("tools-reconcile-ungranted");
    let manifest = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let object = testbed_object(&dir, "nosy", "ungranted");
    let (code, document) = reconcile_json(&manifest, &["--object", path(&object)], None);
    assert_eq!(code, 1, "{document:#}");
    assert_eq!(document["action"], Value::Null);
    assert_eq!(
        calls(&document, "denied"),
        [call("get", "v1 Secret", "default/nosy", None)]
    );
    let message = document["denied"][0]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("plugin `testbed` has no grant to `get` v1 Secret in namespace `default`"),
        "{message}"
    );
    assert_eq!(
        calls(&document, "calls"),
        [call("apply", "v1 ConfigMap", "default/nosy-seen", None)]
    );
    assert_eq!(document["calls"][0]["body"]["data"]["denied"], message);
    let error = document["error"].as_str().unwrap();
    assert!(error.contains("the guest returned an error"), "{error}");
    assert!(error.contains("has no grant"), "{error}");
}

#[test]
fn a_panicking_guest_is_reported_as_a_trap_and_exits_1() {
    let dir = scratch("tools-reconcile-panic");
    let manifest = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let object = testbed_object(&dir, "boom", "panic");
    let output = host(
        &["reconcile", path(&manifest), "--object", path(&object)],
        None,
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}{}", stderr(&output));
    assert!(out.contains("failed: plugin `testbed`"), "{out}");
    assert!(out.contains("the guest trapped"), "{out}");
    assert!(
        stderr(&output).contains("testbed: asked to panic"),
        "the guest's panic message is logged: {}",
        stderr(&output)
    );
}

#[test]
fn an_object_of_another_kind_than_the_manifests_for_exits_2() {
    let dir = scratch("tools-reconcile-wrong-kind");
    let manifest = example(&dir, "website");
    let object = sample("examples/configmap-replicator/samples/configmap.yaml");
    let output = host(&["reconcile", path(&manifest), "--object", &object], None);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is a v1 ConfigMap, but plugin `website` reconciles example.com/v1 Website"),
        "{err}"
    );
    assert!(stdout(&output).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_with_a_kubeconfig_names_every_kind_the_api_server_does_not_serve() {
    let server = embedded_apiserver::ApiServer::start(embedded_apiserver::Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("tools-check-served");
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    // The testbed names only built-in kinds: all served.
    let testbed = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let output = host(
        &["check", path(&testbed), "--kubeconfig", path(&kubeconfig)],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("every kind named is served"),
        "{}",
        stdout(&output)
    );
    // The website's Website CRD is not installed on this server.
    let website = example(&dir, "website");
    let sample = sample("examples/website/samples/website.yaml");
    let output = host(
        &[
            "check",
            path(&website),
            "--sample",
            &sample,
            "--kubeconfig",
            path(&kubeconfig),
        ],
        None,
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "kind example.com/v1/Website (in `for`) is not served by the API server; it serves \
             no apiVersion example.com/v1: check the apiVersion's spelling, or install the \
             CustomResourceDefinition of Website"
        ),
        "{err}"
    );
    assert!(!err.contains("apps/v1/Deployment"), "{err}");
    assert!(
        stdout(&output)
            .trim_end()
            .ends_with("not ok: plugin `website`: kinds it names are not served"),
        "{}",
        stdout(&output)
    );
    // A kind of the wrong case: the served one is named.
    let misspelled = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[("for", "{apiVersion: v1, kind: Configmap}")],
    );
    let output = host(
        &[
            "check",
            path(&misspelled),
            "--kubeconfig",
            path(&kubeconfig),
        ],
        None,
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "kind v1/Configmap (in `for`) is not served by the API server; it serves v1 \
             ConfigMap: did you mean `kind: ConfigMap`?"
        ),
        "{err}"
    );
    // Without --kubeconfig, check needs no cluster and passes.
    let output = host(&["check", path(&website), "--sample", &sample], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}
