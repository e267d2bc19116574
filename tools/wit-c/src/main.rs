//! Build tool for reconcilers written in C and Go: generates the bindings of the `reconciler`
//! world from `wit/` and turns a linked core module into a component, with the same wit-bindgen
//! and wit-component versions as the rest of the workspace (no separately installed CLIs).
//!
//! ```text
//! wit-c bindings <WIT_DIR> <OUT_DIR>     reconciler.h, reconciler.c, reconciler_component_type.o
//! wit-c go-bindings <WIT_DIR> <OUT_DIR>  the Go bindings (`wit-bindgen go`'s output: a `main`
//!                                        package, module wit_component)
//! wit-c component <CORE_WASM> <OUT_WASM> the component, WASI preview1 imports adapted to preview2
//! wit-c component --wit <WIT_DIR> <CORE_WASM> <OUT_WASM>
//!                                        the same for a module without the world's type section
//!                                        (Go: wit-bindgen go does not emit one), embedding it first
//! ```
//!
//! Both commands rewrite an output file only when its content changes, so timestamps stay put
//! and incremental builds stay incremental.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_bindgen_core::{Files, WorldGenerator};
use wit_parser::Resolve;

/// The world every reconciler implements (wit/reconcile.wit).
const WORLD: &str = "kube:reconcile/reconciler";

const USAGE: &str = "usage:
  wit-c bindings <WIT_DIR> <OUT_DIR>      generate the C bindings of the reconciler world
  wit-c go-bindings <WIT_DIR> <OUT_DIR>   generate the Go bindings of the reconciler world
  wit-c component <CORE_WASM> <OUT_WASM>  turn a core module (wasm32-wasi, reactor) into a component
  wit-c component --wit <WIT_DIR> <CORE_WASM> <OUT_WASM>
                                          the same, embedding the reconciler world's type first";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bindings", wit, out] => bindings(
            wit_bindgen_c::Opts::default().build(),
            "C",
            Path::new(wit),
            Path::new(out),
        ),
        ["go-bindings", wit, out] => bindings(
            wit_bindgen_go::Opts::default().build(),
            "Go",
            Path::new(wit),
            Path::new(out),
        ),
        ["component", core, out] => component(Path::new(core), Path::new(out), None),
        ["component", "--wit", wit, core, out] => {
            component(Path::new(core), Path::new(out), Some(Path::new(wit)))
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wit-c: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the bindings `generator` makes for the reconciler world to `out`: for C
/// (`wit_bindgen_c`) the header, source and component-type object; for Go (`wit_bindgen_go`) a
/// module of packages, in subdirectories.
fn bindings(
    mut generator: Box<dyn WorldGenerator>,
    language: &str,
    wit: &Path,
    out: &Path,
) -> Result<()> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("cannot parse the WIT package in {}", wit.display()))?;
    let world = resolve
        .select_world(&[package], Some(WORLD))
        .with_context(|| format!("{} has no world `{WORLD}`", wit.display()))?;
    let mut files = Files::default();
    generator
        .generate(&mut resolve, world, &mut files)
        .with_context(|| format!("cannot generate the {language} bindings"))?;
    for (name, contents) in files.iter() {
        let path = out.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| {
                format!("cannot create the bindings directory {}", parent.display())
            })?;
        }
        write_if_changed(&path, contents)?;
    }
    Ok(())
}

/// Encodes the core module at `core` as a component at `out`. The module must carry the
/// component-type section of the bindings (link `reconciler_component_type.o`); its WASI
/// preview1 imports, if any, are satisfied by wasmtime's preview1 reactor adapter. With `wit`,
/// the reconciler world's type from that WIT directory is embedded first.
fn component(core: &Path, out: &Path, wit: Option<&Path>) -> Result<()> {
    let mut module = std::fs::read(core)
        .with_context(|| format!("cannot read the core module {}", core.display()))?;
    if is_component(&module) {
        bail!(
            "{} is already a component, not a core module",
            core.display()
        );
    }
    if let Some(wit) = wit {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_path(wit)
            .with_context(|| format!("cannot parse the WIT package in {}", wit.display()))?;
        let world = resolve
            .select_world(&[package], Some(WORLD))
            .with_context(|| format!("{} has no world `{WORLD}`", wit.display()))?;
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .with_context(|| format!("cannot embed the reconciler world into {}", core.display()))?;
    }
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .with_context(|| {
            format!(
                "{} is not a core module with the reconciler's component type \
                 (was reconciler_component_type.o linked in?)",
                core.display()
            )
        })?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("cannot load the WASI preview1 reactor adapter")?
        .encode()
        .with_context(|| format!("cannot encode {} as a component", core.display()))?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    write_if_changed(out, &component)
}

/// True when `bytes` starts with the preamble of a component rather than a core module.
fn is_component(bytes: &[u8]) -> bool {
    // magic, then version 0x0d (component) with layer 1, versus version 1 layer 0 (module)
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

/// Writes `contents` to `path` unless the file already holds exactly that.
fn write_if_changed(path: &Path, contents: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    let temporary = PathBuf::from(format!("{}.tmp", path.display()));
    std::fs::write(&temporary, contents)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot move {} into place", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wit() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit")
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wit-c-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn bindings_of_the_reconciler_world_declare_the_export_and_every_import() {
        let out = scratch("bindings");
        bindings(wit_bindgen_c::Opts::default().build(), "C", &wit(), &out)
            .expect("bindings generated");
        let header = std::fs::read_to_string(out.join("reconciler.h")).expect("header");
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
        assert!(out.join("reconciler.c").is_file());
        assert!(out.join("reconciler_component_type.o").is_file());
    }

    #[test]
    fn go_bindings_are_a_main_package_exporting_reconcile_with_every_import() {
        let out = scratch("go-bindings");
        bindings(wit_bindgen_go::Opts::default().build(), "Go", &wit(), &out)
            .expect("bindings generated");
        let mut go = String::new();
        let mut stack = vec![out.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("bindings dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "go") {
                    go.push_str(&std::fs::read_to_string(&path).expect("go source"));
                }
            }
        }
        let module = std::fs::read_to_string(out.join("go.mod")).expect("go.mod");
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
    fn a_component_or_garbage_is_refused_with_the_file_named() {
        let dir = scratch("refused");
        let component = dir.join("already.wasm");
        std::fs::write(&component, b"\0asm\x0d\0\x01\0").expect("written");
        let error = format!(
            "{:#}",
            super::component(&component, &dir.join("out.wasm"), None).expect_err("refused")
        );
        assert!(
            error.contains("already.wasm is already a component"),
            "{error}"
        );

        let garbage = dir.join("garbage.wasm");
        std::fs::write(&garbage, b"not wasm").expect("written");
        let error = format!(
            "{:#}",
            super::component(&garbage, &dir.join("out.wasm"), None).expect_err("refused")
        );
        assert!(
            error
                .contains("garbage.wasm is not a core module with the reconciler's component type"),
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
}
