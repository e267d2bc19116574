//! `reconcile-host new <name> --lang <python|rust|javascript|go|c>`: a project of one's own, outside this
//! repository — a reconciler that does one small thing, its manifest with the narrowest grant
//! for it, a unit test against the language's fake host, the scripts that test, build and ship
//! it with that language's toolchain and `reconcile-host` alone, and a README naming them.
//!
//! # What the host provides
//! The project is complete on its own: the interface (`wit/reconcile.wit`) and the language's
//! SDK are written into it from this binary, the same files the binary was built with, so the
//! SDK always matches the host's WIT and nothing is fetched from this repository. The SDK is
//! vendored rather than published so that a project builds offline and its SDK changes only
//! when its author runs a newer `new` (or copies the files).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};

/// Arguments of `new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name: a DNS-1123 label (lowercase letters, digits and `-`).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The language of the reconciler.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// The directory to create [default: ./NAME]; it must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The languages `new` writes projects for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// componentize-py; the SDK `reconcile_guest` and its `testing.FakeHost`.
    Python,
    /// cargo and the `wasm32-wasip2` target; the SDK `reconcile-guest` and its
    /// `testing::FakeHost`.
    Rust,
    /// Node and componentize-qjs (npm); the SDK `reconciler.js` and its fake host.
    Javascript,
    /// Go 1.26 for wasip1; the SDK `reconcile-host/guest` and its `fake` host; bindings and the
    /// component from `reconcile-host bindings` and `componentize`.
    Go,
    /// clang for wasm32-wasi with wasi-libc; the C SDK (a JSON scanner and a fake host);
    /// bindings and the component from `reconcile-host bindings` and `componentize`.
    C,
}

/// A template of `host/templates/<$dir>`, written to `$path` of the project (from `$source` when
/// they differ; `.gitignore` and manifests are stored under other names so that no tool takes
/// them for the repository's own).
macro_rules! template {
    ($dir:literal, $path:literal, $executable:literal) => {
        template!($dir, $path, $path, $executable)
    };
    ($dir:literal, $path:literal, $source:literal, $executable:literal) => {
        $crate::scaffold::File {
            path: $path,
            text: include_str!(concat!("../../templates/", $dir, "/", $source)),
            executable: $executable,
        }
    };
}

/// A file of an SDK under `guest-sdk/<$sdk>`, written to `$into` of the project.
macro_rules! sdk {
    ($sdk:literal, $into:literal, $file:literal) => {
        $crate::scaffold::File {
            path: concat!($into, $file),
            text: include_str!(concat!("../../../guest-sdk/", $sdk, $file)),
            executable: false,
        }
    };
}

/// The files every language's project has the same: `ship.sh` and the sample.
pub(crate) const COMMON: [File; 2] = [
    template!("common", "ship.sh", true),
    template!("common", "samples/configmap.yaml", false),
];

/// One file of a project: its path in the project, its text, and whether it is a script.
pub(crate) struct File {
    pub path: &'static str,
    pub text: &'static str,
    pub executable: bool,
}

/// The interface every project carries.
const WIT: File = File {
    path: "wit/reconcile.wit",
    text: include_str!("../../../wit/reconcile.wit"),
    executable: false,
};

/// Placeholder in templates for the plugin's name.
const NAME: &str = "{{name}}";

/// Placeholder in templates for the name as a Rust crate's files spell it (`-` as `_`).
const CRATE: &str = "{{crate}}";

/// Runs `new`; prints the project's directory and the commands its README names.
pub fn new(args: &NewArgs) -> ExitCode {
    match write_project(args) {
        Ok(dir) => {
            println!("created {}", dir.display());
            println!(
                "next:   cd {} && ./test.sh   (then see README.md)",
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(crate::exit::EXIT_CONFIG)
        }
    }
}

/// Writes the project of `args`; its directory.
fn write_project(args: &NewArgs) -> anyhow::Result<PathBuf> {
    let name = &args.name;
    if !label_selector::is_dns_label(name) {
        bail!(
            "`{name}` is not a plugin name; use lowercase letters, digits and `-`, at most 63 \
             characters, starting and ending with a letter or digit (e.g. `my-reconciler`)"
        );
    }
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(name));
    if std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!(
            "{} exists and is not empty; give another directory with --dir, or remove it",
            dir.display()
        );
    }
    let files = match args.lang {
        Lang::Python => python::FILES,
        Lang::Rust => rust::FILES,
        Lang::Javascript => javascript::FILES,
        Lang::Go => go::FILES,
        Lang::C => c::FILES,
    };
    for file in std::iter::once(&WIT).chain(&COMMON).chain(files) {
        write_file(&dir, file, name)?;
    }
    Ok(dir)
}

/// Writes `file` under `dir` with `name` in place of the placeholder.
fn write_file(dir: &Path, file: &File, name: &str) -> anyhow::Result<()> {
    let path = dir.join(file.path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create the directory {}", parent.display()))?;
    }
    let text = file
        .text
        .replace(NAME, name)
        .replace(CRATE, &name.replace('-', "_"));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    if file.executable {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

// After the macros they use.
mod c;
mod go;
mod javascript;
mod python;
mod rust;
#[cfg(feature = "guest-toolchain")]
pub mod toolchain;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, dir: &Path) -> NewArgs {
        NewArgs {
            name: name.to_owned(),
            lang: Lang::Python,
            dir: Some(dir.to_owned()),
        }
    }

    #[test]
    fn a_project_is_written_with_the_name_in_place_and_its_scripts_executable() {
        let dir = std::env::temp_dir().join(format!("scaffold-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_project(&args("my-plugin", &dir)).expect("written");
        let manifest = std::fs::read_to_string(dir.join("plugin.yaml")).unwrap();
        assert!(manifest.contains("name: my-plugin\n"), "{manifest}");
        assert!(!manifest.contains(NAME));
        let wit = std::fs::read_to_string(dir.join("wit/reconcile.wit")).unwrap();
        assert!(wit.contains("world reconciler"), "the WIT is the host's");
        let mode = std::fs::metadata(dir.join("build.sh"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
            0o111
        );
        assert!(dir.join("src/reconcile_guest/testing.py").is_file());
        // Not over a project that is there.
        let again = write_project(&args("my-plugin", &dir)).unwrap_err();
        assert!(
            format!("{again:#}").contains("exists and is not empty"),
            "{again:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rust_project_names_its_crate_and_vendors_the_sdk_with_its_fake_host() {
        let dir = std::env::temp_dir().join(format!("scaffold-rust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut rust = args("my-plugin", &dir);
        rust.lang = Lang::Rust;
        write_project(&rust).expect("written");
        let read = |path: &str| std::fs::read_to_string(dir.join(path)).unwrap();
        assert!(read("Cargo.toml").contains("name = \"my-plugin\""));
        assert!(read("build.sh").contains("release/my_plugin.wasm\" build/my-plugin.wasm"));
        assert!(read("plugin.yaml").contains("module: build/my-plugin.wasm"));
        assert!(read("sdk/src/testing.rs").contains("pub struct FakeHost"));
        for text in [read("src/lib.rs"), read("ship.sh"), read("README.md")] {
            assert!(!text.contains(NAME) && !text.contains(CRATE));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_that_is_no_dns_label_is_refused_naming_the_rule() {
        let dir = std::env::temp_dir().join("scaffold-never-written");
        let error = write_project(&args("My_Plugin", &dir)).unwrap_err();
        assert!(
            format!("{error:#}").contains("use lowercase letters, digits and `-`"),
            "{error:#}"
        );
        assert!(!dir.exists());
    }
}
