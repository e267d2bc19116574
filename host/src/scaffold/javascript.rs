//! The files of a JavaScript project (`new --lang javascript`): the templates under
//! `host/templates/javascript`, the SDK `reconciler.js` and its fake host from
//! `guest-sdk/javascript`, and componentize-qjs pinned as the website-js example pins it.

use super::File;

/// Every file of the project but the WIT and [`super::COMMON`].
pub(super) const FILES: &[File] = &[
    template!("javascript", "README.md", false),
    template!("javascript", "package.json", "package.json.tmpl", false),
    template!(
        "javascript",
        "package-lock.json",
        "package-lock.json.tmpl",
        false
    ),
    template!("javascript", ".gitignore", "gitignore", false),
    template!("javascript", "plugin.yaml", false),
    template!("javascript", "build.sh", true),
    template!("javascript", "test.sh", true),
    template!("javascript", "src/reconciler.js", false),
    template!("javascript", "tests/reconciler.test.mjs", false),
    sdk!("javascript/", "src/sdk/", "reconciler.js"),
    sdk!("javascript/", "src/sdk/", "testing/host.mjs"),
    sdk!("javascript/", "src/sdk/", "testing/client.mjs"),
    sdk!("javascript/", "src/sdk/", "testing/cache.mjs"),
    sdk!("javascript/", "src/sdk/", "testing/events.mjs"),
    sdk!("javascript/", "src/sdk/", "testing/log.mjs"),
    sdk!("javascript/", "src/sdk/", "testing/hooks.mjs"),
];
