//! Build tool for reconcilers written in C: generates the C bindings of the `reconciler` world
//! from `wit/` and turns a linked core module into a component, with the same wit-bindgen and
//! wit-component versions as the rest of the workspace (no separately installed CLIs).
//!
//! ```text
//! wit-c bindings <WIT_DIR> <OUT_DIR>     reconciler.h, reconciler.c, reconciler_component_type.o
//! wit-c component <CORE_WASM> <OUT_WASM> the component, WASI preview1 imports adapted to preview2
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
use wit_bindgen_core::Files;
use wit_parser::Resolve;

/// The world every reconciler implements (wit/reconcile.wit).
const WORLD: &str = "kube:reconcile/reconciler";

const USAGE: &str = "usage:
  wit-c bindings <WIT_DIR> <OUT_DIR>      generate the C bindings of the reconciler world
  wit-c component <CORE_WASM> <OUT_WASM>  turn a core module (wasm32-wasi, reactor) into a component";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bindings", wit, out] => bindings(Path::new(wit), Path::new(out)),
        ["component", core, out] => component(Path::new(core), Path::new(out)),
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

/// Writes the C header, source and component-type object of the reconciler world to `out`.
fn bindings(wit: &Path, out: &Path) -> Result<()> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(wit)
        .with_context(|| format!("cannot parse the WIT package in {}", wit.display()))?;
    let world = resolve
        .select_world(&[package], Some(WORLD))
        .with_context(|| format!("{} has no world `{WORLD}`", wit.display()))?;
    let mut files = Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .context("cannot generate the C bindings")?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the bindings directory {}", out.display()))?;
    for (name, contents) in files.iter() {
        write_if_changed(&out.join(name), contents)?;
    }
    Ok(())
}

/// Encodes the core module at `core` as a component at `out`. The module must carry the
/// component-type section of the bindings (link `reconciler_component_type.o`); its WASI
/// preview1 imports, if any, are satisfied by wasmtime's preview1 reactor adapter.
fn component(core: &Path, out: &Path) -> Result<()> {
    let module = std::fs::read(core)
        .with_context(|| format!("cannot read the core module {}", core.display()))?;
    if is_component(&module) {
        bail!(
            "{} is already a component, not a core module",
            core.display()
        );
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
