//! What a C or Go project's build takes from `reconcile-host` itself, so that it needs only its
//! language's compiler: the bindings of the `reconciler` world this host serves
//! (`reconcile-host bindings`), and the component made of the compiled core module
//! (`reconcile-host componentize`). Both use the WIT this binary was built with, wit-bindgen's
//! generators and wasmtime's WASI preview1 reactor adapter (the `wit-c` library).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use wit_c::{Language, Wit};

/// Arguments of `bindings`.
#[derive(Debug, Args)]
pub struct BindingsArgs {
    /// The language of the bindings.
    #[arg(long, value_enum)]
    pub lang: BindingsLang,
    /// The directory to write them into (created; files that are already the same are left
    /// alone, so incremental builds stay incremental).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// The languages `bindings` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BindingsLang {
    /// `reconciler.h`, `reconciler.c` and `reconciler_component_type.o` (wit-bindgen's C
    /// generator).
    C,
    /// A Go module `wit_component` (wit-bindgen's Go generator; a `main` package), and in
    /// `DIR/runtime` the module `go.bytecodealliance.org/pkg` it imports.
    Go,
}

/// Arguments of `componentize`.
#[derive(Debug, Args)]
pub struct ComponentizeArgs {
    /// The core module: wasm32-wasip1 (or no WASI), built as a reactor exporting `reconcile`.
    #[arg(value_name = "CORE_WASM")]
    pub core: PathBuf,
    /// Where to write the component.
    #[arg(long, short, value_name = "OUT_WASM")]
    pub output: PathBuf,
}

/// The WIT of this host, parsed.
fn wit() -> anyhow::Result<Wit> {
    Wit::from_text(super::WIT.path, super::WIT.text)
}

/// Runs `bindings`.
pub fn bindings(args: &BindingsArgs) -> ExitCode {
    exit(write_bindings(args.lang, &args.dir))
}

fn write_bindings(lang: BindingsLang, dir: &Path) -> anyhow::Result<()> {
    let wit = wit()?;
    match lang {
        BindingsLang::C => wit_c::write_files(dir, &wit_c::bindings(&wit, Language::C)?),
        BindingsLang::Go => {
            wit_c::write_files(dir, &wit_c::bindings(&wit, Language::Go)?)?;
            wit_c::write_files(&dir.join("runtime"), &wit_c::go_runtime()?)
        }
    }
}

/// Runs `componentize`.
pub fn componentize(args: &ComponentizeArgs) -> ExitCode {
    exit(write_component(&args.core, &args.output))
}

fn write_component(core: &Path, output: &Path) -> anyhow::Result<()> {
    let module = std::fs::read(core).with_context(|| {
        format!(
            "cannot read the core module {}; build it first (see build.sh)",
            core.display()
        )
    })?;
    let component = wit_c::component(module, &core.display().to_string(), Some(&wit()?))?;
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    wit_c::write_if_changed(output, &component)?;
    eprintln!(
        "componentize: {} -> {} ({} bytes)",
        core.display(),
        output.display(),
        component.len()
    );
    Ok(())
}

fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(crate::exit::EXIT_CONFIG)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_bindings_come_with_their_runtime_package() {
        let dir = std::env::temp_dir().join(format!("bindings-go-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_bindings(BindingsLang::Go, &dir).expect("written");
        let module = std::fs::read_to_string(dir.join("go.mod")).unwrap();
        assert!(module.starts_with("module wit_component"), "{module}");
        let runtime = std::fs::read_to_string(dir.join("runtime/go.mod")).unwrap();
        assert!(runtime.starts_with("module go.bytecodealliance.org/pkg"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_core_module_is_named_with_the_fix() {
        let error = write_component(Path::new("/nonexistent/core.wasm"), Path::new("out.wasm"))
            .unwrap_err();
        let error = format!("{error:#}");
        assert!(
            error.contains("cannot read the core module /nonexistent/core.wasm; build it first"),
            "{error}"
        );
    }
}
