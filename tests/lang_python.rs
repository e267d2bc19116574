//! Reconcilers written in Python: the configmap-replicator-python example and the noop-python
//! test guest, built by their `build.sh` (componentize-py 0.25.1, a plain build importing WASI
//! 0.2), loaded into the real host next to the Rust replicator they port; and what that WASI
//! gives a Python reconcile. Runs against the embedded API server, or a real kube-apiserver with
//! `E2E_BACKEND=real` (the replicator's finalizer deletes every copy, so no test needs the
//! garbage collector a real server here lacks).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::backend::Backend as ApiServer;
use crate::common::host::{
    Host, component, manifest, scratch, scripted_component, target_dir, tool, workspace,
};
use crate::common::{ACCEPT_COPIES, WAIT, config_maps, eventually_async, namespace};
use embedded_apiserver::Config;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const MANIFEST: &str = "examples/configmap-replicator-python/plugin.yaml";
const RUST_MANIFEST: &str = "examples/configmap-replicator/plugin.yaml";
const PLUGIN: &str = "configmap-replicator-python";
const FINALIZER: &str = "replicator.example.com/cleanup";
const COPY_OF: &str = "replicator.example.com/copy-of";
/// The WASI interfaces a plain componentize-py 0.25.1 build imports, whatever the Python code
/// uses: the host links all of them, satisfying `wasi:sockets` with stubs that trap.
const PYTHON_WASI: [&str; 25] = [
    "wasi:cli/environment@0.2.9",
    "wasi:cli/exit@0.2.9",
    "wasi:cli/stderr@0.2.9",
    "wasi:cli/stdin@0.2.9",
    "wasi:cli/stdout@0.2.9",
    "wasi:cli/terminal-input@0.2.9",
    "wasi:cli/terminal-output@0.2.9",
    "wasi:cli/terminal-stderr@0.2.9",
    "wasi:cli/terminal-stdin@0.2.9",
    "wasi:cli/terminal-stdout@0.2.9",
    "wasi:clocks/monotonic-clock@0.2.9",
    "wasi:clocks/wall-clock@0.2.9",
    "wasi:filesystem/preopens@0.2.9",
    "wasi:filesystem/types@0.2.9",
    "wasi:io/error@0.2.9",
    "wasi:io/poll@0.2.9",
    "wasi:io/streams@0.2.9",
    "wasi:random/random@0.2.9",
    "wasi:sockets/instance-network@0.2.9",
    "wasi:sockets/ip-name-lookup@0.2.9",
    "wasi:sockets/network@0.2.9",
    "wasi:sockets/tcp-create-socket@0.2.9",
    "wasi:sockets/tcp@0.2.9",
    "wasi:sockets/udp-create-socket@0.2.9",
    "wasi:sockets/udp@0.2.9",
];
/// How long a host may take to load (and here refuse) an 18 MB component on a busy machine.
const LOAD_WAIT: Duration = Duration::from_secs(120);

/// The replicator's component, built once, its compiled code in the module cache the test hosts
/// use (an 18 MB component takes seconds to compile: longer than a test should wait for the
/// host to start reconciling).
fn replicator() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let module = scripted_component(
                "examples/configmap-replicator-python/build.sh",
                "configmap-replicator-python",
            );
            let out = check(&workspace().join(MANIFEST));
            assert!(
                out.contains("ok: plugin `configmap-replicator-python` is valid"),
                "{out}"
            );
            module
        })
        .clone()
}

/// The noop guest's component, built and compiled into the module cache once.
fn noop() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let module =
                scripted_component("host/tests/guests/noop-python/build.sh", "noop-python");
            check(&workspace().join("host/tests/guests/noop-python/plugin.yaml"));
            module
        })
        .clone()
}

/// `reconcile-host check` of `manifest` with the tests' module cache; its stdout. Fails the test
/// unless it exits 0.
fn check(manifest: &Path) -> String {
    let out = tool("check")
        .arg(manifest)
        .output()
        .expect("reconcile-host runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "check {} failed:\n{stdout}\n{}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn server() -> ApiServer {
    ApiServer::start(Config::default())
        .await
        .expect("API server starts")
}

/// Creates the source `default/<name>` labelled `replicator.example.com/replicate=<replicate>`
/// (`python` for the Python replicator, `true` for the Rust one), listing `namespaces`.
async fn source(server: &ApiServer, name: &str, replicate: &str, namespaces: &str) {
    let object: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {"replicator.example.com/replicate": replicate},
            "annotations": {"replicator.example.com/namespaces": namespaces},
        },
        "data": {"log-level": "info", "feature-flags": "search,dark-mode"},
        "binaryData": {"logo.png": "iVBORw0KGgo="},
    }))
    .expect("a ConfigMap");
    config_maps(server, "default")
        .create(&PostParams::default(), &object)
        .await
        .expect("source created");
}

/// Waits until ConfigMap `namespace/name` exists and `accept` takes it.
async fn config_map_when(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    accept: impl Fn(&ConfigMap) -> bool,
) -> ConfigMap {
    let api = config_maps(server, namespace);
    eventually_async(&format!("ConfigMap {namespace}/{name}"), || async {
        let object = api.get_opt(name).await.ok()??;
        accept(&object).then_some(object)
    })
    .await
}

async fn gone(server: &ApiServer, namespace: &str, name: &str) {
    let api = config_maps(server, namespace);
    eventually_async(&format!("ConfigMap {namespace}/{name} deleted"), || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

/// Waits for a `NamespaceNotFound` Warning event about `default/<name>`; its note.
async fn namespace_not_found_note(server: &ApiServer, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(server.kube_client().expect("client"), "default");
    eventually_async(
        &format!("a NamespaceNotFound event about {name}"),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|event| {
                let about = event.regarding.as_ref()?.name.as_deref() == Some(name);
                let warning = event.type_.as_deref() == Some("Warning");
                let reason = event.reason.as_deref() == Some("NamespaceNotFound");
                (about && warning && reason).then(|| event.note.unwrap_or_default())
            })
        },
    )
    .await
}

/// The data of a ConfigMap as `key=value` pairs.
fn data(object: &ConfigMap) -> BTreeMap<String, String> {
    object.data.clone().unwrap_or_default()
}

#[test]
fn python_unit_tests_of_the_replicator_pass() {
    replicator();
    let example = workspace().join("examples/configmap-replicator-python");
    let bindings = target_dir().join("guests/configmap-replicator-python/bindings");
    let sdk = workspace().join("guest-sdk/python");
    let path = std::env::join_paths([example.join("src"), sdk, example.join("tests"), bindings])
        .expect("a PYTHONPATH");
    let out = Command::new(workspace().join(".toolchains/python/bin/python"))
        .args(["-B", "-m", "unittest", "discover", "-s", "tests"])
        .current_dir(&example)
        .env("PYTHONPATH", path)
        .output()
        .expect("the toolchain's python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python unit tests failed:\n{stderr}"
    );
    assert!(stderr.contains("\nOK"), "{stderr}");
}

/// The interfaces `reconcile-host check` lists under `imports`.
fn imports(check: &str) -> Vec<&str> {
    let mut lines = check.lines().skip_while(|l| !l.starts_with("imports "));
    let first = lines.next().map(|l| l.trim_start_matches("imports").trim());
    let rest = lines.take_while(|l| l.starts_with(' ')).map(str::trim);
    first.into_iter().chain(rest).collect()
}

#[test]
fn python_components_import_kube_reconcile_and_wasi_0_2_with_sockets() {
    replicator();
    noop();
    let kube = [
        "kube:reconcile/cache@0.1.0",
        "kube:reconcile/client@0.1.0",
        "kube:reconcile/events@0.1.0",
        "kube:reconcile/log@0.1.0",
        "kube:reconcile/types@0.1.0",
    ];
    let expected: Vec<&str> = kube.into_iter().chain(PYTHON_WASI).collect();
    for manifest in [MANIFEST, "host/tests/guests/noop-python/plugin.yaml"] {
        let out = check(&workspace().join(manifest));
        assert_eq!(imports(&out), expected, "{manifest}:\n{out}");
        assert!(out.contains("\nok: plugin `"), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_replicator_copies_syncs_prunes_and_cleans_up_with_its_finalizer() {
    let server = server().await;
    let dir = scratch("python-replicator");
    for ns in ["team-a", "team-b"] {
        namespace(&server, ns, &[ACCEPT_COPIES]).await;
    }
    let plugin = manifest(&dir, MANIFEST, &replicator(), &[]);
    let host = Host::start(&server, &dir, &[plugin]);
    let sample = std::fs::read_to_string(
        workspace().join("examples/configmap-replicator-python/samples/configmap.yaml"),
    )
    .expect("sample");
    let sample: ConfigMap = serde_yaml_ng::from_str(&sample).expect("sample parses");
    let sources = config_maps(&server, "default");
    sources
        .create(&PostParams::default(), &sample)
        .await
        .expect("created");
    let name = "shared-settings-python";
    for ns in ["team-a", "team-b"] {
        let copy = config_map_when(&server, ns, name, |c| {
            data(c).get("log-level").map(String::as_str) == Some("info")
        })
        .await;
        let labels = copy.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels,
            BTreeMap::from([(COPY_OF.to_owned(), format!("default.{name}"))])
        );
    }
    let stored = sources.get(name).await.expect("source");
    assert_eq!(stored.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));

    // A change of the source reaches the copies.
    let patch = json!({"data": {"log-level": "debug"}});
    sources
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    for ns in ["team-a", "team-b"] {
        config_map_when(&server, ns, name, |c| {
            data(c).get("log-level").map(String::as_str) == Some("debug")
        })
        .await;
    }

    // A namespace dropped from the annotation loses its copy, found through the cache, and the
    // guest says so through the log import.
    let patch =
        json!({"metadata": {"annotations": {"replicator.example.com/namespaces": "team-a"}}});
    sources
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    gone(&server, "team-b", name).await;
    host.wait_log(&[
        "plugin=\"configmap-replicator-python\"",
        "key=default/shared-settings-python",
        "deleted the copy of v1 ConfigMap default/shared-settings-python in team-b, no longer listed",
    ])
    .await;

    // Deleting the source removes every copy, then the source itself.
    sources
        .delete(name, &DeleteParams::default())
        .await
        .expect("deleted");
    gone(&server, "team-a", name).await;
    gone(&server, "default", name).await;
    host.wait_log(&["deleted v1 ConfigMap team-a/shared-settings-python, the copy of"])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_replicator_warns_of_a_missing_namespace_and_requeues_after_the_delay_from_its_env()
{
    let server = server().await;
    let dir = scratch("python-missing-namespace");
    namespace(&server, "team-a", &[ACCEPT_COPIES]).await;
    // The manifest's `env:` reaches `os.environ` in the component (WASI cli/environment):
    // 8 s instead of the replicator's default 30 s.
    let env = [("env", "{REPLICATOR_RETRY_SECONDS: '8'}")];
    let plugin = manifest(&dir, MANIFEST, &replicator(), &env);
    let _host = Host::start(&server, &dir, &[plugin]);
    source(&server, "late", "python", "team-a, team-late").await;

    let note = namespace_not_found_note(&server, "late").await;
    assert_eq!(
        note,
        "Cannot copy to namespaces that do not exist: team-late; retrying in 8s"
    );
    let warned = tokio::time::Instant::now();
    config_map_when(&server, "team-a", "late", |_| true).await;

    // Nothing reconciles the source when the namespace appears: the copy there comes from the
    // requeue-after(8 s) the guest answered.
    namespace(&server, "team-late", &[ACCEPT_COPIES]).await;
    let api = config_maps(&server, "team-late");
    let deadline = warned + Duration::from_secs(8) + WAIT;
    while api
        .get_opt("late")
        .await
        .expect("API server answers")
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no copy in team-late within {:?} of the warning",
            deadline - warned
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = warned.elapsed();
    assert!(
        after >= Duration::from_secs(5),
        "the copy came {after:?} after the warning: sooner than the requeue-after of 8 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_replicator_errors_are_wit_errors_counted_and_logged() {
    let server = server().await;
    let dir = scratch("python-denied");
    namespace(&server, "team-a", &[ACCEPT_COPIES]).await;
    // Without grants, adding the finalizer (a patch) is denied.
    let plugin = manifest(&dir, MANIFEST, &replicator(), &[("grants", "[]")]);
    let host = Host::start(&server, &dir, &[plugin]);
    source(&server, "ungranted", "python", "team-a").await;

    host.wait_metric(
        "reconcile_host_plugin_failures_total{plugin=\"configmap-replicator-python\",reason=\"error\"}",
        2.0,
    )
    .await;
    host.wait_log(&[
        "key=default/ungranted",
        "plugin `configmap-replicator-python`",
        "failed to add finalizer `replicator.example.com/cleanup`: failed to patch v1 ConfigMap \
         default/ungranted: the plugin may not make the call: plugin \
         `configmap-replicator-python` has no grant to `patch` v1 ConfigMap",
    ])
    .await;
    let traps = host
        .metric("reconcile_host_plugin_failures_total{plugin=\"configmap-replicator-python\",reason=\"trap\"}")
        .await;
    assert_eq!(
        traps, 0.0,
        "a Python exception must be an error, not a trap"
    );
}

/// The toolchain's componentize-py (installed by the build scripts).
fn componentize_py() -> PathBuf {
    noop();
    workspace().join(".toolchains/python/bin/componentize-py")
}

/// Componentizes the app module `app` in `dir` against the world `reconciler` of `wit` to
/// `dir/<app>.wasm`; removes the bytecode pre-initialisation leaves behind.
fn componentize(dir: &Path, wit: &Path, app: &str) -> PathBuf {
    let module = dir.join(format!("{app}.wasm"));
    let status = Command::new(componentize_py())
        .arg("-q")
        .arg("-d")
        .arg(wit)
        .args(["-w", "reconciler", "componentize", "-p"])
        .arg(dir)
        .arg(app)
        .arg("-o")
        .arg(&module)
        .status()
        .expect("componentize-py runs");
    assert!(status.success(), "componentize-py failed for {app}");
    let _ = std::fs::remove_dir_all(dir.join("__pycache__"));
    module
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_build_against_another_world_is_refused_at_load_naming_the_file_and_the_mismatch()
{
    let server = server().await;
    let dir = scratch("python-other-world");
    // A realistic mistake: the app written and componentized against a stale or foreign WIT
    // (the wrong-world test guest's: `reconcile: func(request: string) -> u32`).
    std::fs::write(
        dir.join("other_world.py"),
        "class WitWorld:\n    def reconcile(self, request: str) -> int:\n        \
         return len(request)\n",
    )
    .expect("written");
    let wit = workspace().join("host/tests/guests/wrong-world/wit");
    let module = componentize(&dir, &wit, "other_world");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-python/plugin.yaml",
        &module,
        &[],
    );
    let path = module.display().to_string();
    let expected = [
        path.as_str(),
        "does not match the `reconciler` world",
        "rebuild it against wit/",
        "type-checking export func `reconcile`: expected `record` found `string`",
    ];

    // `check` refuses it (and leaves its compiled code in the module cache, so the host below
    // does not spend the test's time compiling 18 MB again).
    let out = tool("check")
        .arg(&plugin)
        .output()
        .expect("reconcile-host runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "expected `{part}` in:\n{stderr}");
    }

    // `run` exits 2 naming the plugin, the file and the mismatch. Loading an 18 MB component can
    // take longer than the usual wait on a busy machine, hence a wait of its own.
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut host = tool("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--leader-elect",
            "false",
            "--metrics-address",
            "127.0.0.1:0",
        ])
        .arg("--plugin")
        .arg(&plugin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reconcile-host runs");
    let deadline = tokio::time::Instant::now() + LOAD_WAIT;
    let status = loop {
        if let Some(status) = host.try_wait().expect("wait") {
            break status;
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = host.kill();
            panic!("reconcile-host run did not exit within {LOAD_WAIT:?} of starting");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut log = String::new();
    host.stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut log)
        .expect("stderr readable");
    assert_eq!(status.code(), Some(2), "log:\n{log}");
    for part in expected.into_iter().chain(["plugin `noop-python`"]) {
        assert!(log.contains(part), "expected `{part}` in:\n{log}");
    }
}

/// `reconcile-host reconcile --output json` of `plugin` on a ConfigMap named `name`: the exit
/// code, the report and the log (the guest's log and stdio).
fn reconcile_named(dir: &Path, plugin: &Path, name: &str) -> (Option<i32>, Value, String) {
    let object = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &object,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n"
        ),
    )
    .expect("written");
    let out = tool("reconcile")
        .args(["--output", "json", "--object"])
        .arg(&object)
        .arg(plugin)
        .output()
        .expect("reconcile-host runs");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{log}"));
    (out.status.code(), report, log)
}

/// The result the WASI probe logged for `check` (`<check>: <result>`, through the log import).
fn probed<'a>(log: &'a str, check: &str) -> &'a str {
    // Guest text is the last field of its line, quoted: `... text="<check>: <result>"`.
    let prefix = format!("text=\"{check}: ");
    log.lines()
        .find_map(|line| {
            let (_, rest) = line.split_once(&prefix)?;
            rest.trim_end().strip_suffix('"')
        })
        .unwrap_or_else(|| panic!("the probe logged no `{check}`:\n{log}"))
}

#[test]
fn wasi_gives_a_python_reconcile_the_clock_env_entropy_and_stdio_but_no_files_or_network() {
    let dir = scratch("python-wasi-probe");
    std::fs::copy(
        workspace().join("host/tests/guests/noop-python/wasi_probe.py"),
        dir.join("wasi_probe.py"),
    )
    .expect("copied");
    let module = componentize(&dir, &workspace().join("wit"), "wasi_probe");
    let plugin = dir.join("plugin.yaml");
    std::fs::write(
        &plugin,
        format!(
            "name: wasi-probe-python\nmodule: {}\nfor: {{apiVersion: v1, kind: ConfigMap}}\n\
             env: {{PROBE_SETTING: from-the-manifest}}\n",
            module.display()
        ),
    )
    .expect("written");
    check(&plugin);

    let mut entropy = Vec::new();
    for name in ["first", "second"] {
        let (code, report, log) = reconcile_named(&dir, &plugin, name);
        assert_eq!(code, Some(0), "{report}\n{log}");
        assert_eq!(report["action"], json!({"type": "done"}));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let clock: f64 = probed(&log, "wall-clock").parse().expect("seconds");
        assert!(
            (clock - now).abs() < 300.0,
            "time.time() = {clock}, now {now}"
        );
        assert_eq!(probed(&log, "env"), "from-the-manifest");
        assert_eq!(
            probed(&log, "open"),
            "FileNotFoundError: [Errno 44] No such file or directory: '/etc/hostname'"
        );
        for (stream, text) in [
            ("stderr", "WARNING a warning from logging\""),
            ("stdout", "text=\"a line from print\""),
        ] {
            let field = format!("plugin=\"wasi-probe-python\" stream=\"{stream}\" text=");
            assert!(
                log.lines()
                    .any(|line| line.contains(&field) && line.ends_with(text)),
                "expected a line with `{field}` ending in `{text}` in:\n{log}"
            );
        }
        entropy.push((
            probed(&log, "urandom").to_owned(),
            probed(&log, "random").to_owned(),
        ));
    }
    // Each call is a fresh instance of the same pre-initialised snapshot: different bytes and a
    // differently seeded `random` show both come from the host at run time.
    assert_ne!(entropy[0].0, entropy[1].0, "os.urandom repeated itself");
    assert_ne!(
        entropy[0].1, entropy[1].1,
        "random was seeded at build time"
    );

    let (code, report, log) = reconcile_named(&dir, &plugin, "socket");
    assert_eq!(code, Some(1), "{report}\n{log}");
    let error = report["error"].as_str().expect("an error");
    for part in [
        "the guest trapped",
        "`wasi:sockets/tcp-create-socket@0.2.9#create-tcp-socket` called: plugins have no network \
         access",
    ] {
        assert!(error.contains(part), "expected `{part}` in:\n{error}");
    }
}

#[test]
fn python_noop_answers_done_and_calls_nothing() {
    let module = noop();
    let dir = scratch("python-noop");
    let object = dir.join("object.yaml");
    std::fs::write(
        &object,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: idle, namespace: default, labels: {noop: python}}\ndata: {a: '1'}\n",
    )
    .expect("written");
    let plugin = manifest(
        &dir,
        "host/tests/guests/noop-python/plugin.yaml",
        &module,
        &[],
    );
    let out = tool("reconcile")
        .args(["--output", "json", "--object"])
        .arg(&object)
        .arg(&plugin)
        .output()
        .expect("reconcile-host runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["action"], json!({"type": "done"}));
    assert_eq!(report["calls"], json!([]));
}

/// Removes what must differ between the Rust and the Python copies (names, labels, who wrote
/// them) and what the API server sets (uid, versions, times).
fn comparable(object: &ConfigMap) -> Value {
    let mut value = serde_json::to_value(object).expect("serializes");
    let metadata = value["metadata"].as_object_mut().expect("metadata");
    for field in [
        "name",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "labels",
    ] {
        metadata.remove(field);
    }
    value
}

fn managers(object: &ConfigMap) -> Vec<String> {
    let fields = object.metadata.managed_fields.clone().unwrap_or_default();
    fields.into_iter().filter_map(|f| f.manager).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_python_replicators_make_the_same_copies_side_by_side() {
    let server = server().await;
    let dir = scratch("python-vs-rust");
    for ns in ["team-a", "team-b"] {
        namespace(&server, ns, &[ACCEPT_COPIES]).await;
    }
    let plugins = [
        manifest(&dir, MANIFEST, &replicator(), &[]),
        manifest(&dir, RUST_MANIFEST, &component("configmap-replicator"), &[]),
    ];
    // The sources exist before the host starts, so they reach both guests through the host's
    // initial list, whose items a real API server sends without `apiVersion` and `kind`.
    let listed = "team-b, team-a, team-missing, default";
    source(&server, "from-rust", "true", listed).await;
    source(&server, "from-python", "python", listed).await;
    let _host = Host::start(&server, &dir, &plugins);

    for ns in ["team-a", "team-b"] {
        let rust = config_map_when(&server, ns, "from-rust", |_| true).await;
        let python = config_map_when(&server, ns, "from-python", |_| true).await;
        assert_eq!(
            comparable(&rust),
            comparable(&python),
            "the copies in {ns} differ"
        );
        assert_eq!(data(&python).len(), 2, "{python:?}");
        assert_eq!(python.binary_data.as_ref().map(BTreeMap::len), Some(1));
        for (copy, source) in [(&rust, "from-rust"), (&python, "from-python")] {
            assert_eq!(
                copy.metadata.labels.clone().unwrap_or_default(),
                BTreeMap::from([(COPY_OF.to_owned(), format!("default.{source}"))])
            );
        }
        assert_eq!(managers(&rust), ["configmap-replicator"]);
        assert_eq!(managers(&python), [PLUGIN]);
    }
    // The sources: both carry the finalizer, and neither was copied onto itself.
    for name in ["from-rust", "from-python"] {
        let stored = config_maps(&server, "default")
            .get(name)
            .await
            .expect("source");
        assert_eq!(stored.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    }
    // The same warning about the namespace that does not exist.
    let rust = namespace_not_found_note(&server, "from-rust").await;
    let python = namespace_not_found_note(&server, "from-python").await;
    assert_eq!(rust, python);
    assert_eq!(
        python,
        "Cannot copy to namespaces that do not exist: team-missing; retrying in 30s"
    );

    // Deleting both sources deletes both sets of copies, then the sources.
    for name in ["from-rust", "from-python"] {
        config_maps(&server, "default")
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    for name in ["from-rust", "from-python"] {
        for ns in ["team-a", "team-b", "default"] {
            gone(&server, ns, name).await;
        }
    }
}

/// `reconcile-host reconcile --output json` of `manifest` (for `module`) on `object` with
/// `cache`; the report.
fn reconcile_report(dir: &Path, source: &str, module: &Path, object: &Path, cache: &Path) -> Value {
    let plugin = manifest(dir, source, module, &[]);
    let out = tool("reconcile")
        .args(["--output", "json", "--object"])
        .arg(object)
        .arg("--cache")
        .arg(cache)
        .arg(&plugin)
        .output()
        .expect("reconcile-host runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn rust_and_python_replicators_make_the_same_calls_for_the_same_object() {
    let dir = scratch("python-vs-rust-calls");
    let mut reports = Vec::new();
    for (name, replicate, source, module) in [
        (
            "from-rust",
            "true",
            RUST_MANIFEST,
            component("configmap-replicator"),
        ),
        ("from-python", "python", MANIFEST, replicator()),
    ] {
        let object = dir.join(format!("{name}.yaml"));
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  \
             labels: {{replicator.example.com/replicate: '{replicate}'}}\n  \
             annotations: {{replicator.example.com/namespaces: 'team-b, team-a'}}\n  \
             finalizers: [{FINALIZER}]\ndata: {{a: '1'}}\nbinaryData: {{b: AAE=}}\n"
        );
        std::fs::write(&object, text).expect("written");
        // For the cache: a copy in a namespace no longer listed, and the listed namespaces,
        // accepting copies.
        let stale = dir.join(format!("{name}-stale.yaml"));
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: team-c\n  \
             labels: {{{COPY_OF}: default.{name}}}\n---\n{}",
            ["team-a", "team-b"]
                .map(|ns| format!(
                    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  \
                     labels: {{{}: '{}'}}\n",
                    ACCEPT_COPIES.0, ACCEPT_COPIES.1
                ))
                .join("---\n")
        );
        std::fs::write(&stale, text).expect("written");
        let report = reconcile_report(&dir, source, &module, &object, &stale);
        // The same calls once the source's name is the same.
        let text = report.to_string().replace(name, "SOURCE");
        reports.push(serde_json::from_str::<Value>(&text).expect("JSON"));
    }
    assert_eq!(reports[0], reports[1]);
    let calls: Vec<(&str, &str)> = reports[1]["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["verb"].as_str().unwrap_or_default(),
                c["namespace"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("create", "team-a"),
            ("create", "team-b"),
            ("get", "team-c"),
            ("delete", "team-c")
        ]
    );
    assert_eq!(reports[1]["action"], json!({"type": "done"}));
}
