//! `wit-c`, the repository's build tool for reconcilers written in C and Go (the library's
//! functions on files):
//!
//! ```text
//! wit-c bindings <WIT_DIR> <OUT_DIR>     reconciler.h, reconciler.c, reconciler_component_type.o
//! wit-c go-bindings <WIT_DIR> <OUT_DIR>  the Go bindings (`wit-bindgen go`'s output: a `main`
//!                                        package, module wit_component)
//! wit-c go-runtime <OUT_DIR>             the Go bindings' runtime package, patched
//! wit-c component <CORE_WASM> <OUT_WASM> the component, WASI preview1 imports adapted to preview2
//! wit-c component --wit <WIT_DIR> <CORE_WASM> <OUT_WASM>
//!                                        the same for a module without the world's type section
//!                                        (Go: wit-bindgen go does not emit one), embedding it first
//! ```
//!
//! Every command rewrites an output file only when its content changes.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use wit_c::{Language, Wit};

const USAGE: &str = "usage:
  wit-c bindings <WIT_DIR> <OUT_DIR>      generate the C bindings of the reconciler world
  wit-c go-bindings <WIT_DIR> <OUT_DIR>   generate the Go bindings of the reconciler world
  wit-c go-runtime <OUT_DIR>              write the Go bindings' runtime package (go.bytecodealliance.org/pkg)
  wit-c component <CORE_WASM> <OUT_WASM>  turn a core module (wasm32-wasi, reactor) into a component
  wit-c component --wit <WIT_DIR> <CORE_WASM> <OUT_WASM>
                                          the same, embedding the reconciler world's type first";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bindings", wit, out] => bindings(Language::C, wit, out),
        ["go-bindings", wit, out] => bindings(Language::Go, wit, out),
        ["go-runtime", out] => {
            wit_c::go_runtime().and_then(|files| wit_c::write_files(Path::new(out), &files))
        }
        ["component", core, out] => component(core, out, None),
        ["component", "--wit", wit, core, out] => component(core, out, Some(wit)),
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

fn bindings(language: Language, wit: &str, out: &str) -> Result<()> {
    let files = wit_c::bindings(&Wit::from_dir(Path::new(wit))?, language)?;
    wit_c::write_files(Path::new(out), &files)
}

fn component(core: &str, out: &str, wit: Option<&str>) -> Result<()> {
    let module =
        std::fs::read(core).with_context(|| format!("cannot read the core module {core}"))?;
    let wit = wit.map(|dir| Wit::from_dir(Path::new(dir))).transpose()?;
    let component = wit_c::component(module, core, wit.as_ref())?;
    let out = Path::new(out);
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    wit_c::write_if_changed(out, &component)
}
