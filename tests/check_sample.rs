//! `check` calls `reconcile` once with a sample object: the real binary on broken guests in
//! every language (a wrong return type, a missing export, a forgotten registration, a failed
//! assert, a panic) fails with the guest's own words and the fix; so does a reconcile error,
//! unless `--allow-failure`; a correct plugin passes.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::common::host::{component, manifest, scratch, scripted_component, tool, workspace};

/// `check MANIFEST [--sample FILE]` with the tests' module cache.
fn check(manifest: &Path, sample: Option<&Path>) -> Output {
    check_with(manifest, sample, &[])
}

/// `check MANIFEST [--sample FILE] FLAGS…` with the tests' module cache.
fn check_with(manifest: &Path, sample: Option<&Path>, flags: &[&str]) -> Output {
    let mut command = tool("check");
    command.arg(manifest).args(flags);
    if let Some(sample) = sample {
        command.arg("--sample").arg(sample);
    }
    command
        .stdin(Stdio::null())
        .output()
        .expect("the host runs")
}

/// The exit code, stdout and stderr of `output`.
fn parts(output: &Output) -> (i32, String, String) {
    (
        output.status.code().expect("an exit code"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The broken guest `name`'s manifest (`host/tests/guests/<dir>/plugin.yaml`) copied into
/// `dir`, pointing at `module`.
fn broken(dir: &Path, guest_dir: &str, module: &Path) -> PathBuf {
    manifest(
        dir,
        &format!("host/tests/guests/{guest_dir}/plugin.yaml"),
        module,
        &[],
    )
}

/// A ConfigMap `default/<fault>` labelled `<label>` with `data.<key> = <fault>`, as a file.
fn sample(dir: &Path, label: &str, key: &str, fault: &str) -> PathBuf {
    let file = dir.join(format!("{fault}.yaml"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {fault}\n  namespace: default\n  \
             labels: {{{label}}}\ndata:\n  {key}: {fault}\n"
        ),
    )
    .expect("sample written");
    file
}

/// Asserts that `check` failed on a trap with `explanation` in its report.
fn assert_trap(output: &Output, plugin: &str, explanation: &str) {
    let (code, out, err) = parts(output);
    assert_eq!(code, 1, "a trap exits 1\nstdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!(
            "check failed: plugin `{plugin}`'s reconcile trapped"
        )),
        "{err}"
    );
    assert!(
        err.contains(explanation),
        "missing {explanation:?} in:\n{err}"
    );
    assert!(!out.contains("is valid"), "{out}");
}

/// Asserts that `check` failed (exit 1, `not ok` last) on a reconcile error whose message
/// has `message`, and passes with `--allow-failure`, showing it.
fn assert_error_fails_unless_allowed(manifest: &Path, sample: &Path, plugin: &str, message: &str) {
    let (code, out, err) = parts(&check(manifest, Some(sample)));
    assert_eq!(
        code, 1,
        "a reconcile error exits 1\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        err.contains(&format!(
            "check failed: plugin `{plugin}`'s reconcile returned an error on the sample"
        )) && err.contains(message)
            && err.contains("--allow-failure accepts a reconcile error"),
        "missing {message:?} in:\n{err}"
    );
    assert!(
        out.trim_end().ends_with(&format!(
            "not ok: plugin `{plugin}`: its reconcile returned an error"
        )),
        "{out}"
    );
    assert_passed(
        &check_with(manifest, Some(sample), &["--allow-failure"]),
        plugin,
        &format!("(allowed by --allow-failure): {message}"),
    );
}

/// Asserts that `check` passed with `line` in its report.
fn assert_passed(output: &Output, plugin: &str, line: &str) {
    let (code, out, err) = parts(output);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(line), "missing {line:?} in:\n{out}");
    assert!(
        out.contains(&format!("ok: plugin `{plugin}` is valid")),
        "{out}"
    );
}

#[test]
fn a_python_return_that_is_not_an_action_fails_check_and_a_raised_error_only_unless_allowed() {
    let module = scripted_component("host/tests/guests/broken-python/build.sh", "broken-python");
    let dir = scratch("check-python");
    let manifest = broken(&dir, "broken-python", &module);
    let wrong = sample(&dir, "broken: python", "fault", "wrong-type");
    assert_trap(
        &check(&manifest, Some(&wrong)),
        "broken-python",
        "returned str ('done') where an Action was expected; return done(), requeue() or \
         requeue_after(seconds) from reconcile_guest",
    );
    let error = sample(&dir, "broken: python", "fault", "error");
    assert_error_fails_unless_allowed(
        &manifest,
        &error,
        "broken-python",
        "RuntimeError: broken-python: asked to fail",
    );
}

#[test]
fn a_denied_call_the_guest_ignores_fails_check_naming_the_grant_unless_allowed() {
    let module = scripted_component("host/tests/guests/broken-python/build.sh", "broken-python");
    let dir = scratch("check-python-denied");
    let manifest = broken(&dir, "broken-python", &module);
    let swallowed = sample(&dir, "broken: python", "fault", "swallow-denied");
    let (code, out, err) = parts(&check(&manifest, Some(&swallowed)));
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("reconcile answered done; 0 calls recorded (not applied), 1 denied")
            && out
                .trim_end()
                .ends_with("not ok: plugin `broken-python`: 1 call denied"),
        "{out}"
    );
    assert!(
        err.contains("check failed: plugin `broken-python`'s grants refused 1 of its calls")
            && err.contains("  1. get v1 Secret default/credentials")
            && err.contains("has no grant to `get` v1 Secret"),
        "{err}"
    );
    assert_passed(
        &check_with(&manifest, Some(&swallowed), &["--allow-failure"]),
        "broken-python",
        "reconcile answered done; 0 calls recorded (not applied), 1 denied",
    );
}

#[test]
fn a_javascript_return_that_is_not_an_action_fails_check_and_a_thrown_error_only_unless_allowed() {
    let module = scripted_component("host/tests/guests/broken-js/build.sh", "broken-js");
    let dir = scratch("check-javascript");
    let manifest = broken(&dir, "broken-js", &module);
    let wrong = sample(&dir, "broken: js", "fault", "wrong-type");
    let output = check(&manifest, Some(&wrong));
    assert_trap(
        &output,
        "broken-js",
        "reconcileBroken returned string \"done\" where an action was expected; return \
         {tag: 'done'}, {tag: 'requeue'} or {tag: 'requeue-after', val: milliseconds}",
    );
    let error = sample(&dir, "broken: js", "fault", "error");
    assert_error_fails_unless_allowed(
        &manifest,
        &error,
        "broken-js",
        "Error: broken-js: asked to fail",
    );
}

#[test]
fn a_misspelled_javascript_export_fails_check_naming_the_likely_spelling() {
    scripted_component("host/tests/guests/broken-js/build.sh", "broken-js");
    let module = workspace_target_guest("broken-js-export");
    let dir = scratch("check-javascript-export");
    let manifest = broken(&dir, "broken-js/export", &module);
    assert_trap(
        &check(&manifest, None),
        "broken-js-export",
        "the JavaScript module exports no function `reconcile`; did you mean `reconcle`? \
         Write `export function reconcile(request)`",
    );
}

#[test]
fn a_go_package_that_never_registers_fails_check_naming_guest_register() {
    let module = scripted_component("host/tests/guests/broken-go/build.sh", "broken-go");
    let dir = scratch("check-go");
    let manifest = broken(&dir, "broken-go", &module);
    let output = check(&manifest, None);
    assert_trap(
        &output,
        "broken-go",
        "no reconciler registered: the component's reconcile export has nothing to call; \
         call guest.Register(yourFunc) in an init function of the reconciler's package",
    );
    let (_, _, err) = parts(&output);
    assert!(
        err.contains("sample    v1 ConfigMap default/check-sample (a minimal object"),
        "without --sample, a minimal object of the `for` kind: {err}"
    );
}

#[test]
fn a_failed_c_assert_fails_check_with_its_message_and_a_returned_error_only_unless_allowed() {
    let module = scripted_component("host/tests/guests/broken-c/build.sh", "broken-c");
    let dir = scratch("check-c");
    let manifest = broken(&dir, "broken-c", &module);
    let assert = sample(&dir, "broken: c", "fault", "assert");
    let output = check(&manifest, Some(&assert));
    assert_trap(
        &output,
        "broken-c",
        "the C reconciler stopped: a failed assert()",
    );
    assert_trap(
        &output,
        "broken-c",
        "| Assertion failed: !broken_invariant && \"broken-c: asked to break an invariant\"",
    );
    let error = sample(&dir, "broken: c", "fault", "error");
    assert_error_fails_unless_allowed(&manifest, &error, "broken-c", "broken-c: asked to fail");
}

#[test]
fn a_rust_panic_fails_check_with_the_panic_message() {
    let dir = scratch("check-rust-panic");
    let manifest = manifest(
        &dir,
        "host/tests/guests/testbed/plugin.yaml",
        &component("testbed"),
        &[],
    );
    let panic = sample(&dir, "testbed: \"true\"", "behave", "panic");
    assert_trap(
        &check(&manifest, Some(&panic)),
        "testbed",
        "the Rust reconciler panicked",
    );
    assert_trap(
        &check(&manifest, Some(&panic)),
        "testbed",
        "testbed: asked to panic",
    );
}

#[test]
fn a_correct_plugin_passes_check_with_its_own_sample_and_with_the_minimal_one() {
    let dir = scratch("check-website");
    let manifest = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let website = workspace().join("examples/website/samples/website.yaml");
    assert_passed(
        &check(&manifest, Some(&website)),
        "website",
        "exercise  reconcile answered requeue-after 60000 ms; 3 calls recorded (not applied), \
         0 denied",
    );
    // The minimal Website has no spec: the example answers with a reconcile error, which
    // fails check unless allowed; the report says to pass a sample of one's own.
    let (code, out, err) = parts(&check(&manifest, None));
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("sample    example.com/v1 Website default/check-sample")
            && err.contains("pass --sample FILE with an object it reconciles"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    assert_passed(
        &check_with(&manifest, None, &["--allow-failure"]),
        "website",
        "sample    example.com/v1 Website default/check-sample",
    );
    let noop = manifest_for(&dir, "noop");
    assert_passed(
        &check(&noop, None),
        "noop",
        "exercise  reconcile answered done; 0 calls recorded (not applied), 0 denied",
    );
}

#[test]
fn a_sample_of_another_kind_is_refused_naming_the_flag() {
    let dir = scratch("check-sample-kind");
    let manifest = manifest(
        &dir,
        "examples/website/plugin.yaml",
        &component("website"),
        &[],
    );
    let other = sample(&dir, "a: b", "x", "other");
    let (code, _, err) = parts(&check(&manifest, Some(&other)));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("but plugin `website` reconciles example.com/v1 Website (its `for`); pass an object of that kind with --sample"),
        "{err}"
    );
}

/// `<target>/guests/<name>.wasm`, written by a build script run before.
fn workspace_target_guest(name: &str) -> PathBuf {
    common::host::target_dir()
        .join("guests")
        .join(format!("{name}.wasm"))
}

/// The noop guest's manifest, pointing at its built component.
fn manifest_for(dir: &Path, guest: &str) -> PathBuf {
    manifest(
        dir,
        &format!("host/tests/guests/{guest}/plugin.yaml"),
        &component(guest),
        &[],
    )
}
