//! `reconcile-host new` in Python, Rust, JavaScript, Go and C: a project of one's own, from an empty
//! directory outside the repository, with only the language's toolchain and the host binary on
//! `PATH` — its unit tests against the SDK's fake host, its build, `check`, one `reconcile` of its sample, a push to a real
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

/// What a language's project needs besides the host: directories for `PATH` before the
/// system's (Debian's python3; no cargo, go or node) and variables.
#[derive(Clone, Default)]
struct Toolchain {
    path: Vec<PathBuf>,
    env: Vec<(String, String)>,
}

/// `program args` in `dir` with `PATH` = the host's directory, the toolchain's, then the
/// system's, the tests' module cache, the toolchain's variables and `env`; fails the test unless
/// it exits 0; its output.
fn run(
    dir: &Path,
    bin: &Path,
    toolchain: &Toolchain,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut path: Vec<PathBuf> = vec![bin.to_owned()];
    path.extend(toolchain.path.iter().cloned());
    path.extend(["/usr/bin", "/bin"].map(PathBuf::from));
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::join_paths(path).expect("a PATH"))
        .env("HOME", dir)
        .env("RECONCILE_HOST_MODULE_CACHE", module_cache())
        .envs(toolchain.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
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

/// The Python toolchain: the pinned componentize-py, which a project's `build.sh` takes through
/// `COMPONENTIZE_PY` instead of installing its own.
fn python() -> Toolchain {
    Toolchain {
        path: Vec::new(),
        env: vec![("COMPONENTIZE_PY".to_owned(), componentize_py())],
    }
}

/// The Rust toolchain: cargo and rustup from `CARGO_HOME` (default `~/.cargo`), and a target
/// directory kept between runs, so only the first run compiles the dependencies.
fn rust() -> Toolchain {
    let home = std::env::var("HOME").expect("HOME");
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{home}/.cargo"));
    let mut env = vec![
        ("CARGO_HOME".to_owned(), cargo_home.clone()),
        (
            "CARGO_TARGET_DIR".to_owned(),
            crate::common::host::target_dir()
                .join("new-plugin-rust")
                .display()
                .to_string(),
        ),
    ];
    let rustup_home = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{home}/.rustup"));
    env.push(("RUSTUP_HOME".to_owned(), rustup_home));
    Toolchain {
        path: vec![PathBuf::from(cargo_home).join("bin")],
        env,
    }
}

/// The JavaScript toolchain: Debian's node (on the system's `PATH`) and the pinned
/// componentize-qjs, which a project's `build.sh` takes through `COMPONENTIZE_QJS` instead of
/// installing its own with npm.
fn javascript() -> Toolchain {
    let script = workspace().join("examples/website-js/toolchain.sh");
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && js_toolchain quickjs",
            script.display()
        ))
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "the JavaScript toolchain installs");
    let dir = String::from_utf8(output.stdout).expect("UTF-8");
    let tool = PathBuf::from(dir.trim()).join("node_modules/.bin/componentize-qjs");
    Toolchain {
        path: Vec::new(),
        env: vec![("COMPONENTIZE_QJS".to_owned(), tool.display().to_string())],
    }
}

/// The Go toolchain: the Go the repository's Go guests build with (the `go` on `PATH` when it
/// is the version guest-sdk/go/build-component.sh pins, else the one it installed under
/// `.toolchains/go`), with Go's build cache shared with those builds, so the standard library
/// for wasip1 is compiled once.
fn go() -> Toolchain {
    let script = std::fs::read_to_string(workspace().join("guest-sdk/go/build-component.sh"))
        .expect("the Go build script");
    let version = script
        .lines()
        .find_map(|line| line.strip_prefix("GO_VERSION="))
        .expect("the script pins a Go version");
    let installed = workspace().join(format!(".toolchains/go/go{version}/bin"));
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .find(|dir| dir.join("go").is_file());
    let bin = if installed.join("go").is_file() {
        installed
    } else {
        on_path.expect("a go on PATH, or the pinned one under .toolchains/go (make guests)")
    };
    let go_env = |name: &str| {
        let output = Command::new(bin.join("go"))
            .args(["env", name])
            .output()
            .expect("go env runs");
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .trim()
            .to_owned()
    };
    Toolchain {
        env: vec![
            ("GOCACHE".to_owned(), go_env("GOCACHE")),
            ("GOMODCACHE".to_owned(), go_env("GOMODCACHE")),
            ("GOTOOLCHAIN".to_owned(), "local".to_owned()),
        ],
        path: vec![bin],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_go_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir() {
    from_new_to_reconciled("go", "demo-go", &go(), "ok  \tdemo-go").await;
}

/// The C toolchain: Debian's clang 19, lld and wasi-libc on the system's `PATH` (the packages
/// the C guests' build installs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_c_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir() {
    let toolchain = Toolchain::default();
    from_new_to_reconciled("c", "demo-c", &toolchain, "reconciler: 4 tests passed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_javascript_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir()
{
    from_new_to_reconciled("javascript", "demo-js", &javascript(), "# pass 3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_python_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir() {
    from_new_to_reconciled("python", "demo-py", &python(), "Ran 3 tests").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_rust_plugin_is_tested_built_checked_shipped_and_reconciles_from_an_empty_dir() {
    from_new_to_reconciled("rust", "demo-rs", &rust(), "test result: ok. 3 passed").await;
}

/// `new NAME --lang LANG` in an empty directory, then its README's commands: `test.sh` (whose
/// output has `tested`: the unit tests ran), one `reconcile` of the sample, `ship.sh` to a real
/// registry with kubectl apply, Ready in a host, and the sample ConfigMap marked, with its Event
/// in `kubectl describe`.
async fn from_new_to_reconciled(lang: &str, name: &str, toolchain: &Toolchain, tested: &str) {
    let backend = Backend::start(Config::default())
        .await
        .expect("API server starts");
    let dir = scratch(&format!("new-{lang}"));
    let bin = host_bin(&dir);
    let started = Instant::now();

    // new, then the README's first command: unit tests, build, check.
    let none = Toolchain::default();
    let new = ["new", name, "--lang", lang];
    run(&dir, &bin, &none, "reconcile-host", &new, &[]);
    let project = dir.join(name);
    let output = run(&project, &bin, toolchain, "./test.sh", &[], &[]);
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        out.contains(tested) || err.contains(tested),
        "no {tested:?} in:\n{out}\n{err}"
    );
    let valid = format!("ok: plugin `{name}` is valid");
    assert!(out.trim_end().ends_with(&valid), "{out}");

    // One reconcile of the sample: a patch of its annotation and an Event.
    let reconciled = run(
        &project,
        &bin,
        &none,
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
    let reference = format!("{}/plugins/{name}:v1", registry.host());
    let insecure = [("INSECURE", "1")];
    let shipped = run(&project, &bin, &none, "./ship.sh", &[&reference], &insecure);
    let object = dir.join("plugin-object.yaml");
    std::fs::write(&object, &shipped.stdout).expect("object written");
    let crd = run(&dir, &bin, &none, "reconcile-host", &["crd"], &[]);
    std::fs::write(dir.join("crd.yaml"), &crd.stdout).expect("crd written");
    backend.kubectl_ok(
        &dir,
        &["apply", "-f", &dir.join("crd.yaml").display().to_string()],
    );
    crd_established(&backend.client(), "reconcilerplugins.reconcile-host.dev").await;
    backend.kubectl_ok(&dir, &["apply", "-f", &object.display().to_string()]);
    let config = registry.host_config(&dir);
    let host = Host::start_with(&backend, &dir, &[], &["--config", &config]);
    backend.kubectl_ok(
        &dir,
        &[
            "wait",
            "--for=condition=Ready",
            &format!("reconcilerplugin/{name}"),
            "--timeout=120s",
        ],
    );
    let sample = project.join("samples/configmap.yaml");
    backend.kubectl_ok(&dir, &["apply", "-f", &sample.display().to_string()]);
    let config_maps = config_maps(&backend, "default");
    let sample_name = format!("{name}-sample");
    let mark = format!("{name}.reconcile-host.dev/reconciled");
    eventually_async(&format!("{sample_name} marked by the plugin"), || async {
        let object = config_maps.get_opt(&sample_name).await.ok()??;
        let annotations = object.metadata.annotations?;
        (annotations.get(&mark)? == "true").then_some(())
    })
    .await;
    eventually_async("kubectl describe lists the plugin's Event", || async {
        let out = backend.kubectl_ok(&dir, &["describe", "configmap", &sample_name]);
        let (_, events) = out.split_once("\nEvents:")?;
        events
            .lines()
            .any(|row| row.split_whitespace().take(2).eq(["Normal", "Reconciled"]))
            .then_some(())
    })
    .await;
    eprintln!(
        "{lang}: new → Ready → reconciled in {:.1} s (the toolchain installed beforehand)",
        started.elapsed().as_secs_f64()
    );
    drop(host);
    let _ = config_maps
        .delete(&sample_name, &DeleteParams::default())
        .await;
    backend.kubectl_ok(&dir, &["delete", "-f", &object.display().to_string()]);
}
