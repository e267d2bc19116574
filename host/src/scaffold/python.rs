//! The files of a Python project (`new --lang python`): the templates under `host/templates/python`
//! and the SDK `reconcile_guest` from `guest-sdk/python`.

use super::File;

/// A template of `host/templates/python`, written to `$path` (`$source` when they differ).
macro_rules! template {
    ($path:literal, $executable:literal) => {
        template!($path, $path, $executable)
    };
    ($path:literal, $source:literal, $executable:literal) => {
        File {
            path: $path,
            text: include_str!(concat!("../../templates/python/", $source)),
            executable: $executable,
        }
    };
}

/// A module of the SDK, written to `src/reconcile_guest/`.
macro_rules! sdk {
    ($module:literal) => {
        File {
            path: concat!("src/reconcile_guest/", $module),
            text: include_str!(concat!(
                "../../../guest-sdk/python/reconcile_guest/",
                $module
            )),
            executable: false,
        }
    };
}

/// Every file of the project but the WIT.
pub(super) const FILES: &[File] = &[
    template!("README.md", false),
    template!("plugin.yaml", false),
    template!("build.sh", true),
    template!("test.sh", true),
    template!("ship.sh", true),
    template!(".gitignore", "gitignore", false),
    template!("src/reconciler.py", false),
    template!("tests/test_reconciler.py", false),
    template!("samples/configmap.yaml", false),
    sdk!("__init__.py"),
    sdk!("cache.py"),
    sdk!("client.py"),
    sdk!("errors.py"),
    sdk!("events.py"),
    sdk!("finalizer.py"),
    sdk!("log.py"),
    sdk!("objects.py"),
    sdk!("testing.py"),
];
