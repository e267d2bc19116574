//! Embeds the Go runtime package that wit-bindgen's Go bindings import
//! (`go.bytecodealliance.org/pkg`, shipped inside the wit-bindgen-go crate's sources; the Go
//! module proxy does not serve the version the bindings name), so `wit-c go-runtime` and the
//! host's `reconcile-host bindings --lang go` can write it out with no cargo registry around.
//!
//! The crate's sources are where cargo unpacked them to compile it, this crate's dependency:
//! `$CARGO_HOME/registry/src/<index>/wit-bindgen-go-<version>/` (`CARGO_HOME` defaults to
//! `~/.cargo`), the version pinned in this crate's Cargo.toml.

use std::path::{Path, PathBuf};

/// The crate whose sources carry the package.
const CRATE: &str = "wit-bindgen-go";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let version = pinned_version(&manifest.join("Cargo.toml"));
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME or CARGO_HOME is set"))
                .join(".cargo")
        });
    let sources = home.join("registry").join("src");
    let pkg = std::fs::read_dir(&sources)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|index| {
            index
                .path()
                .join(format!("{CRATE}-{version}"))
                .join("src/pkg")
        })
        .find(|pkg| pkg.join("go.mod").is_file())
        .unwrap_or_else(|| {
            panic!(
                "no sources of {CRATE} {version} under {}/*/: cargo unpacks them there to build \
                 this crate; with vendored or relocated sources, set CARGO_HOME to the cargo \
                 home that holds registry/src",
                sources.display()
            )
        });

    let mut files = vec![pkg.join("go.mod"), pkg.join("LICENSE")];
    collect(&pkg.join("wit"), &mut files);
    let mut table = String::from(
        "/// The files of `go.bytecodealliance.org/pkg` as wit-bindgen-go ships them.\n",
    );
    table.push_str("pub(crate) const GO_RUNTIME_FILES: &[(&str, &str)] = &[\n");
    for file in &files {
        let relative = file.strip_prefix(&pkg).expect("under the package");
        table.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            relative.to_str().expect("a UTF-8 path"),
            file.to_str().expect("a UTF-8 path")
        ));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("go_runtime_files.rs"), table).expect("OUT_DIR is writable");
}

/// The version `manifest` pins for [`CRATE`] (`wit-bindgen-go = "=X.Y.Z"`).
fn pinned_version(manifest: &Path) -> String {
    let text = std::fs::read_to_string(manifest).expect("the crate's Cargo.toml");
    text.lines()
        .find_map(|line| {
            let value = line
                .strip_prefix(CRATE)?
                .trim_start()
                .strip_prefix('=')?
                .trim();
            Some(value.trim_matches('"').trim_start_matches('=').to_owned())
        })
        .unwrap_or_else(|| panic!("Cargo.toml pins no {CRATE} (`{CRATE} = \"=X.Y.Z\"`)"))
}

/// Every file under `dir`, in name order, into `files`.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
