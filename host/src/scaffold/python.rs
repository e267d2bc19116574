//! The files of a Python project (`new --lang python`): the templates under `host/templates/python`
//! and the SDK `reconcile_guest` from `guest-sdk/python`.

use super::File;

/// Every file of the project but the WIT and [`super::COMMON`].
pub(super) const FILES: &[File] = &[
    template!("python", "README.md", false),
    template!("python", "plugin.yaml", false),
    template!("python", "build.sh", true),
    template!("python", "test.sh", true),
    template!("python", ".gitignore", "gitignore", false),
    template!("python", "src/reconciler.py", false),
    template!("python", "tests/test_reconciler.py", false),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "__init__.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "cache.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "client.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "errors.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "events.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "finalizer.py"
    ),
    sdk!("python/reconcile_guest/", "src/reconcile_guest/", "log.py"),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "objects.py"
    ),
    sdk!(
        "python/reconcile_guest/",
        "src/reconcile_guest/",
        "testing.py"
    ),
];
