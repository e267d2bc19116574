//! The files of a Rust project (`new --lang rust`): the templates under `host/templates/rust`
//! and the SDK `reconcile-guest` from `guest-sdk/src`, a path dependency in `sdk/`.

use super::File;

/// Every file of the project but the WIT and [`super::COMMON`].
pub(super) const FILES: &[File] = &[
    template!("rust", "README.md", false),
    template!("rust", "Cargo.toml", "Cargo.toml.tmpl", false),
    template!("rust", ".gitignore", "gitignore", false),
    template!("rust", "plugin.yaml", false),
    template!("rust", "build.sh", true),
    template!("rust", "test.sh", true),
    template!("rust", "src/lib.rs", false),
    template!("rust", "sdk/Cargo.toml", "sdk/Cargo.toml.tmpl", false),
    sdk!("src/", "sdk/src/", "action.rs"),
    sdk!("src/", "sdk/src/", "bindings.rs"),
    sdk!("src/", "sdk/src/", "cache.rs"),
    sdk!("src/", "sdk/src/", "client.rs"),
    sdk!("src/", "sdk/src/", "error.rs"),
    sdk!("src/", "sdk/src/", "events.rs"),
    sdk!("src/", "sdk/src/", "finalizer.rs"),
    sdk!("src/", "sdk/src/", "host.rs"),
    sdk!("src/", "sdk/src/", "lib.rs"),
    sdk!("src/", "sdk/src/", "log.rs"),
    sdk!("src/", "sdk/src/", "object.rs"),
    sdk!("src/", "sdk/src/", "request.rs"),
    sdk!("src/", "sdk/src/", "testing.rs"),
];
