//! The files of a JavaScript project (`new --lang javascript`): the templates under
//! `host/templates/javascript`, the SDK `reconciler.js` and its fake host from
//! `guest-sdk/javascript`, and componentize-qjs pinned as the website-js example pins it.

use super::File;

/// A template of `host/templates/javascript`, written to `$path` (`$source` when they differ).
macro_rules! template {
    ($path:literal, $executable:literal) => {
        template!($path, $path, $executable)
    };
    ($path:literal, $source:literal, $executable:literal) => {
        File {
            path: $path,
            text: include_str!(concat!("../../templates/javascript/", $source)),
            executable: $executable,
        }
    };
}

/// A file of the SDK, written to `src/sdk/`.
macro_rules! sdk {
    ($file:literal) => {
        File {
            path: concat!("src/sdk/", $file),
            text: include_str!(concat!("../../../guest-sdk/javascript/", $file)),
            executable: false,
        }
    };
}

/// Every file of the project but the WIT.
pub(super) const FILES: &[File] = &[
    template!("README.md", false),
    template!("package.json", "package.json.tmpl", false),
    template!("package-lock.json", "package-lock.json.tmpl", false),
    template!(".gitignore", "gitignore", false),
    template!("plugin.yaml", false),
    template!("build.sh", true),
    template!("test.sh", true),
    template!("ship.sh", true),
    template!("src/reconciler.js", false),
    template!("tests/reconciler.test.mjs", false),
    template!("samples/configmap.yaml", false),
    sdk!("reconciler.js"),
    sdk!("testing/host.mjs"),
    sdk!("testing/client.mjs"),
    sdk!("testing/cache.mjs"),
    sdk!("testing/events.mjs"),
    sdk!("testing/log.mjs"),
    sdk!("testing/hooks.mjs"),
];
