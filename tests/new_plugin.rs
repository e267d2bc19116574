//! `reconcile-host new`: a project of one's own, from an empty directory outside the repository,
//! with only the language's toolchain and the host binary on `PATH` — its unit tests against
//! the SDK's fake host, its build, `check`, one `reconcile` of its sample, a push to a real
//! registry (`docker-registry`), its `ReconcilerPlugin` applied with kubectl, Ready, and the
//! ConfigMap it reconciles marked, with its Event in `kubectl describe`. On both API server
//! backends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::common::backend::{Backend, Cluster};
use crate::common::host::{HOST_BINARY, Host, module_cache, scratch, workspace};
use crate::common::registry::Registry;
use crate::common::{config_maps, crd_established, eventually_async};
use embedded_apiserver::Config;
use kube::api::DeleteParams;

/// A directory holding only `reconcile-host`, for `PATH`.
fn host_bin(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let link = bin.join("reconcile-host");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(HOST_BINARY, &link).expect("symlink");
    bin
}

/// `program args` in `dir` with `PATH` = the host's directory, then the system's (Debian's
/// python3; no cargo, go or node), the tests' module cache and `env`; fails the test unless it
/// exits 0; its output.
fn run(dir: &Path, bin: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", dir)
        .env("RECONCILE_HOST_MODULE_CACHE", module_cache())
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|error| panic!("{program} runs: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The pinned componentize-py (installed into the repository's toolchains when missing): a
/// project's `build.sh` takes it through `COMPONENTIZE_PY` instead of installing its own.
fn componentize_py() -> String {
    let script = workspace().join("examples/configmap-replicator-python/toolchain.sh");
    let output = Command::new(script).output().expect("toolchain.sh runs");
    assert!(output.status.success(), "the Python toolchain installs");
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_python_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir() {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch("new-python");
    let bin = host_bin(&dir);
    let tool = componentize_py();
    let with_tool = [("COMPONENTIZE_PY", tool.as_str())];
    let started = Instant::now();

    // new, then the README's first command: unit tests, build, check.
    run(
        &dir,
        &bin,
        "reconcile-host",
        &["new", "demo", "--lang", "python"],
        &[],
    );
    let project = dir.join("demo");
    let tested = run(&project, &bin, "./test.sh", &[], &with_tool);
    let out = String::from_utf8_lossy(&tested.stdout);
    let err = String::from_utf8_lossy(&tested.stderr);
    assert!(err.contains("Ran 3 tests") && err.contains("\nOK"), "{err}");
    assert!(
        out.trim_end().ends_with("ok: plugin `demo` is valid"),
        "{out}"
    );

    // One reconcile of the sample: a patch of its annotation and an Event.
    let reconciled = run(
        &project,
        &bin,
        "reconcile-host",
        &[
            "reconcile",
            "plugin.yaml",
            "--object",
            "samples/configmap.yaml",
            "--output",
            "json",
        ],
        &[],
    );
    let outcome: serde_json::Value =
        serde_json::from_slice(&reconciled.stdout).expect("reconcile's JSON");
    assert_eq!(outcome["action"]["type"], "done", "{outcome}");
    let verbs: Vec<&str> = (outcome["calls"].as_array().expect("calls").iter())
        .filter_map(|call| call["verb"].as_str())
        .collect();
    assert_eq!(verbs, ["patch", "create"], "{outcome}");

    // Shipped: pushed to a real registry, declared with kubectl, served by a host.
    let registry = Registry::start(&dir.join("registry"));
    let reference = format!("{}/plugins/demo:v1", registry.host());
    let shipped = run(
        &project,
        &bin,
        "./ship.sh",
        &[&reference],
        &[("INSECURE", "1")],
    );
    let object = dir.join("demo-plugin.yaml");
    std::fs::write(&object, &shipped.stdout).expect("object written");
    let crd = run(&dir, &bin, "reconcile-host", &["crd"], &[]);
    std::fs::write(dir.join("crd.yaml"), &crd.stdout).expect("crd written");
    backend.kubectl_ok(
        &dir,
        &["apply", "-f", &dir.join("crd.yaml").display().to_string()],
    );
    crd_established(&backend.client(), "reconcilerplugins.reconcile-host.dev").await;
    backend.kubectl_ok(&dir, &["apply", "-f", &object.display().to_string()]);
    let config = dir.join("host.yaml");
    std::fs::write(
        &config,
        format!(
            "pluginObjects: true\noci:\n  insecureRegistries: [\"{}\"]\n  cacheDir: {}\n",
            registry.host(),
            dir.join("oci-cache").display()
        ),
    )
    .expect("config written");
    let host = Host::start_with(
        &backend,
        &dir,
        &[],
        &["--config", &config.display().to_string()],
    );
    backend.kubectl_ok(
        &dir,
        &[
            "wait",
            "--for=condition=Ready",
            "reconcilerplugin/demo",
            "--timeout=120s",
        ],
    );
    let sample = project.join("samples/configmap.yaml");
    backend.kubectl_ok(&dir, &["apply", "-f", &sample.display().to_string()]);
    let config_maps = config_maps(&backend, "default");
    eventually_async("demo-sample marked by the plugin", || async {
        let object = config_maps.get_opt("demo-sample").await.ok()??;
        let annotations = object.metadata.annotations?;
        (annotations.get("demo.reconcile-host.dev/reconciled")? == "true").then_some(())
    })
    .await;
    eventually_async("kubectl describe lists the plugin's Event", || async {
        let out = backend.kubectl_ok(&dir, &["describe", "configmap", "demo-sample"]);
        let (_, events) = out.split_once("\nEvents:")?;
        events
            .lines()
            .any(|row| row.split_whitespace().take(2).eq(["Normal", "Reconciled"]))
            .then_some(())
    })
    .await;
    eprintln!(
        "new → Ready → reconciled in {:.1} s (componentize-py installed beforehand)",
        started.elapsed().as_secs_f64()
    );
    drop(host);
    let _ = config_maps
        .delete("demo-sample", &DeleteParams::default())
        .await;
    backend.kubectl_ok(&dir, &["delete", "-f", &object.display().to_string()]);
}
