//! Bindings of the `reconciler` world for C and Go guests, and core modules turned into
//! components, with the same wit-bindgen and wit-component versions as the rest of the workspace
//! (no separately installed CLIs). The `wit-c` binary is the repository's build tool for them;
//! `reconcile-host bindings` and `reconcile-host componentize` are the same functions for
//! projects outside the repository.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_bindgen_core::{Files, WorldGenerator};
use wit_parser::{Resolve, WorldId};

mod go_runtime;
pub use go_runtime::{GO_RUNTIME_GO_VERSION, go_runtime};

/// The world every reconciler implements (wit/reconcile.wit).
pub const WORLD: &str = "kube:reconcile/reconciler";

/// The languages bindings are generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// `reconciler.h`, `reconciler.c` and `reconciler_component_type.o`.
    C,
    /// wit-bindgen's Go generator: a `main` package, module `wit_component`, in subdirectories.
    Go,
}

/// A parsed WIT package and its `reconciler` world.
#[derive(Clone)]
pub struct Wit {
    resolve: Resolve,
    world: WorldId,
}

impl Wit {
    /// The WIT package in the directory `dir` (`wit/`).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_path(dir)
            .with_context(|| format!("cannot parse the WIT package in {}", dir.display()))?;
        Self::select(resolve, package, &dir.display().to_string())
    }

    /// The WIT package in `text`, a single file called `name` (for messages).
    pub fn from_text(name: &str, text: &str) -> Result<Self> {
        let mut resolve = Resolve::default();
        let package = resolve
            .push_str(name, text)
            .with_context(|| format!("cannot parse the WIT package {name}"))?;
        Self::select(resolve, package, name)
    }

    fn select(resolve: Resolve, package: wit_parser::PackageId, name: &str) -> Result<Self> {
        let world = resolve
            .select_world(&[package], Some(WORLD))
            .with_context(|| format!("{name} has no world `{WORLD}`"))?;
        Ok(Self { resolve, world })
    }
}

/// The bindings of `wit`'s reconciler world in `language`: each file's path and contents.
pub fn bindings(wit: &Wit, language: Language) -> Result<Vec<(String, Vec<u8>)>> {
    let (mut generator, name): (Box<dyn WorldGenerator>, _) = match language {
        Language::C => (wit_bindgen_c::Opts::default().build(), "C"),
        Language::Go => (wit_bindgen_go::Opts::default().build(), "Go"),
    };
    let mut resolve = wit.resolve.clone();
    let mut files = Files::default();
    generator
        .generate(&mut resolve, wit.world, &mut files)
        .with_context(|| format!("cannot generate the {name} bindings"))?;
    Ok(files
        .iter()
        .map(|(path, contents)| (path.to_owned(), contents.to_vec()))
        .collect())
}

/// Writes each of `files` under `out`, creating directories, leaving unchanged files alone.
pub fn write_files<C: AsRef<[u8]>>(out: &Path, files: &[(String, C)]) -> Result<()> {
    for (name, contents) in files {
        let path = out.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create the directory {}", parent.display()))?;
        }
        write_if_changed(&path, contents.as_ref())?;
    }
    Ok(())
}

/// Encodes the core module `module` (read from `name`, for messages) as a component. The module
/// carries the component-type section of the bindings (C: link `reconciler_component_type.o`),
/// or `wit` is given and its reconciler world's type is embedded first when the module has none
/// (Go: wit-bindgen's Go generator emits none). Its WASI preview1 imports, if any, are
/// satisfied by wasmtime's preview1 reactor adapter.
pub fn component(mut module: Vec<u8>, name: &str, wit: Option<&Wit>) -> Result<Vec<u8>> {
    if is_component(&module) {
        bail!("{name} is already a component, not a core module");
    }
    if let Some(wit) = wit.filter(|_| !has_component_type(&module)) {
        wit_component::embed_component_metadata(
            &mut module,
            &wit.resolve,
            wit.world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .with_context(|| format!("cannot embed the reconciler world into {name}"))?;
    }
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .with_context(|| {
            format!(
                "{name} is not a core module with the reconciler's component type \
                 (C: was reconciler_component_type.o linked in? Go: give the WIT to embed)"
            )
        })?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("cannot load the WASI preview1 reactor adapter")?
        .encode()
        .with_context(|| format!("cannot encode {name} as a component"))
}

/// True when the core module `module` has a component-type custom section (what
/// `wit-bindgen` emits, and `embed_component_metadata` adds).
fn has_component_type(module: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(module).any(|payload| {
        matches!(payload, Ok(wasmparser::Payload::CustomSection(section))
            if section.name().starts_with("component-type"))
    })
}

/// True when `bytes` starts with the preamble of a component rather than a core module.
fn is_component(bytes: &[u8]) -> bool {
    // magic, then version 0x0d (component) with layer 1, versus version 1 layer 0 (module)
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

/// Writes `contents` to `path` unless the file already holds exactly that (timestamps stay put,
/// so incremental builds stay incremental).
pub fn write_if_changed(path: &Path, contents: &[u8]) -> Result<()> {
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
mod tests;
