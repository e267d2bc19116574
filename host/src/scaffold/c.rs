//! The files of a C project (`new --lang c`): the templates under `host/templates/c` and the C
//! SDK from `guest-sdk/c` in `sdk/` (the JSON scanner, bounded text, and the fake host the unit
//! tests link).

use super::File;

/// Every file of the project but the WIT and [`super::COMMON`].
pub(super) const FILES: &[File] = &[
    template!("c", "README.md", false),
    template!("c", ".gitignore", "gitignore", false),
    template!("c", "plugin.yaml", false),
    template!("c", "build.sh", true),
    template!("c", "test.sh", true),
    template!("c", "src/reconciler.c", false),
    template!("c", "tests/reconciler_test.c", false),
    sdk!("c/", "sdk/", "json.c"),
    sdk!("c/", "sdk/", "json.h"),
    sdk!("c/", "sdk/", "text.c"),
    sdk!("c/", "sdk/", "text.h"),
    sdk!("c/", "sdk/", "fake_host.c"),
    sdk!("c/", "sdk/", "fake_host.h"),
];
