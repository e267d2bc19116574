//! Embeds the Go runtime package that wit-bindgen's Go bindings import
//! (`go.bytecodealliance.org/pkg`, shipped inside the wit-bindgen-go crate's sources; the Go
//! module proxy does not serve the version the bindings name), so `wit-c go-runtime` and the
//! host's `reconcile-host bindings --lang go` can write it out with no cargo registry around.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate whose sources carry the package, at the version of the `wit-bindgen-go` dependency.
const CRATE: &str = "wit-bindgen-go";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--manifest-path",
        ])
        .arg(manifest.join("Cargo.toml"))
        .output()
        .unwrap_or_else(|error| panic!("cannot run `{cargo} metadata`: {error}"));
    assert!(
        output.status.success(),
        "`{cargo} metadata` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let crate_manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|package| package["name"] == CRATE)
        .and_then(|package| package["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{CRATE} is not a dependency of wit-c any more"));
    let pkg = Path::new(crate_manifest)
        .parent()
        .expect("a crate directory")
        .join("src/pkg");

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
