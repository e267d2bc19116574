//! The files of a Rust project (`new --lang rust`): the templates under `host/templates/rust`
//! and the SDK `reconcile-guest` from `guest-sdk/src`, a path dependency in `sdk/`.

use super::File;

/// A template of `host/templates/rust`, written to `$path` (`$source` when they differ).
macro_rules! template {
    ($path:literal, $executable:literal) => {
        template!($path, $path, $executable)
    };
    ($path:literal, $source:literal, $executable:literal) => {
        File {
            path: $path,
            text: include_str!(concat!("../../templates/rust/", $source)),
            executable: $executable,
        }
    };
}

/// A source file of the SDK, written to `sdk/src/`.
macro_rules! sdk {
    ($file:literal) => {
        File {
            path: concat!("sdk/src/", $file),
            text: include_str!(concat!("../../../guest-sdk/src/", $file)),
            executable: false,
        }
    };
}

/// Every file of the project but the WIT.
pub(super) const FILES: &[File] = &[
    template!("README.md", false),
    template!("Cargo.toml", "Cargo.toml.tmpl", false),
    template!(".gitignore", "gitignore", false),
    template!("plugin.yaml", false),
    template!("build.sh", true),
    template!("test.sh", true),
    template!("ship.sh", true),
    template!("src/lib.rs", false),
    template!("samples/configmap.yaml", false),
    template!("sdk/Cargo.toml", "sdk/Cargo.toml.tmpl", false),
    sdk!("action.rs"),
    sdk!("bindings.rs"),
    sdk!("cache.rs"),
    sdk!("client.rs"),
    sdk!("error.rs"),
    sdk!("events.rs"),
    sdk!("finalizer.rs"),
    sdk!("host.rs"),
    sdk!("lib.rs"),
    sdk!("log.rs"),
    sdk!("object.rs"),
    sdk!("request.rs"),
    sdk!("testing.rs"),
];
