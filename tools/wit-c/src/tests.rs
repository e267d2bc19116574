use super::*;

fn wit() -> Wit {
    Wit::from_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit")).expect("the WIT")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wit-c-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn text(files: &[(String, Vec<u8>)], name: &str) -> String {
    let (_, contents) = files
        .iter()
        .find(|(path, _)| path == name)
        .unwrap_or_else(|| panic!("no {name} among the bindings"));
    String::from_utf8(contents.clone()).expect("text")
}

#[test]
fn bindings_of_the_reconciler_world_declare_the_export_and_every_import() {
    let files = bindings(&wit(), Language::C).expect("bindings generated");
    let header = text(&files, "reconciler.h");
    for declaration in [
        "bool exports_reconciler_reconcile(reconciler_request_t *request",
        "kube_reconcile_cache_get(",
        "kube_reconcile_cache_list(",
        "kube_reconcile_client_apply(",
        "kube_reconcile_client_delete(",
        "kube_reconcile_events_record_event(",
        "kube_reconcile_log_log(",
        "void reconciler_request_free(",
    ] {
        assert!(
            header.contains(declaration),
            "reconciler.h lacks `{declaration}`"
        );
    }
    let names: Vec<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
    assert!(names.contains(&"reconciler.c"), "{names:?}");
    assert!(names.contains(&"reconciler_component_type.o"), "{names:?}");
}

#[test]
fn go_bindings_are_a_main_package_exporting_reconcile_with_every_import() {
    let files = bindings(&wit(), Language::Go).expect("bindings generated");
    let go: String = files
        .iter()
        .filter(|(path, _)| path.ends_with(".go"))
        .map(|(_, contents)| String::from_utf8_lossy(contents).into_owned())
        .collect();
    let module = text(&files, "go.mod");
    assert!(module.starts_with("module wit_component"), "{module}");
    for needle in [
        "package main",
        "//go:wasmexport reconcile",
        "//go:wasmimport kube:reconcile/cache@0.1.0 get",
        "//go:wasmimport kube:reconcile/cache@0.1.0 list",
        "//go:wasmimport kube:reconcile/client@0.1.0 apply",
        "//go:wasmimport kube:reconcile/client@0.1.0 delete",
        "//go:wasmimport kube:reconcile/events@0.1.0 record-event",
        "//go:wasmimport kube:reconcile/log@0.1.0 log",
    ] {
        assert!(go.contains(needle), "the Go bindings lack `{needle}`");
    }
}

#[test]
fn the_wit_from_text_is_the_wit_from_its_directory() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    let text = std::fs::read_to_string(dir.join("reconcile.wit")).expect("the WIT");
    let from_text = Wit::from_text("reconcile.wit", &text).expect("parsed");
    assert_eq!(
        bindings(&from_text, Language::C).expect("generated"),
        bindings(&wit(), Language::C).expect("generated")
    );
    let error = Wit::from_text("other.wit", "package a:b;\nworld w {}\n").err();
    let error = format!("{:#}", error.expect("no reconciler world"));
    assert!(error.contains("other.wit has no world"), "{error}");
}

#[test]
fn the_go_runtime_is_patched_and_declares_the_pinned_go() {
    let files = go_runtime().expect("patched");
    let file = |name: &str| {
        files
            .iter()
            .find(|(path, _)| path == name)
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| panic!("no {name} in the runtime package"))
    };
    let module = file("go.mod");
    assert!(
        module.starts_with("module go.bytecodealliance.org/pkg\n"),
        "{module}"
    );
    assert!(module.contains("\ngo 1.26\n"), "{module}");
    let runtime = file("wit/runtime/runtime.go");
    assert!(runtime.contains("kept = append(kept, pointer)"), "patched");
    assert!(
        !runtime.contains("Allocate(&pinner, newSize, align)"),
        "patched"
    );
    assert!(files.iter().any(|(path, _)| path == "LICENSE"));
    assert!(files.iter().any(|(path, _)| path == "wit/types/result.go"));
}

#[test]
fn a_patch_that_no_longer_fits_is_refused_naming_the_file() {
    let mut files = vec![("a.go".to_owned(), "one\ntwo\n".to_owned())];
    let patch = "--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,2 @@\n one\n-three\n+four\n";
    let error = format!("{:#}", go_runtime::apply(patch, &mut files).unwrap_err());
    assert!(error.contains("matches 0 places of a.go"), "{error}");
    let fits = "--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,2 @@\n one\n-two\n+four\n";
    go_runtime::apply(fits, &mut files).expect("applied");
    assert_eq!(files[0].1, "one\nfour\n");
}

#[test]
fn a_component_or_garbage_is_refused_with_the_file_named() {
    let error = format!(
        "{:#}",
        component(b"\0asm\x0d\0\x01\0".to_vec(), "already.wasm", None).expect_err("refused")
    );
    assert!(
        error.contains("already.wasm is already a component"),
        "{error}"
    );
    let error = format!(
        "{:#}",
        component(b"not wasm".to_vec(), "garbage.wasm", None).expect_err("refused")
    );
    assert!(
        error.contains("garbage.wasm is not a core module with the reconciler's component type"),
        "{error}"
    );
}

#[test]
fn unchanged_output_is_not_rewritten() {
    let dir = scratch("unchanged");
    let path = dir.join("file");
    write_if_changed(&path, b"one").expect("written");
    let past = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|file| file.set_modified(past))
        .expect("mtime set");
    write_if_changed(&path, b"one").expect("unchanged");
    let modified = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    assert_eq!(
        modified, past,
        "an identical write must leave the file alone"
    );
    write_if_changed(&path, b"two").expect("changed");
    assert_eq!(std::fs::read(&path).expect("read"), b"two");
}
