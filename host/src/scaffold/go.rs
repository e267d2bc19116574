//! The files of a Go project (`new --lang go`): the templates under `host/templates/go` and the
//! SDK `reconcile-host/guest` from `guest-sdk/go` in `sdk/` (the go.mod replaces the module with
//! it), with the glue its build joins to the generated bindings (`sdk/component`).

use super::File;

/// Every file of the project but the WIT and [`super::COMMON`].
pub(super) const FILES: &[File] = &[
    template!("go", "README.md", false),
    template!("go", "go.mod", "go.mod.tmpl", false),
    template!("go", ".gitignore", "gitignore", false),
    template!("go", "plugin.yaml", false),
    template!("go", "build.sh", true),
    template!("go", "test.sh", true),
    template!("go", "reconciler.go", false),
    template!("go", "reconciler_test.go", false),
    sdk!("go/", "sdk/", "go.mod"),
    sdk!("go/", "sdk/", "action.go"),
    sdk!("go/", "sdk/", "doc.go"),
    sdk!("go/", "sdk/", "errors.go"),
    sdk!("go/", "sdk/", "finalizer.go"),
    sdk!("go/", "sdk/", "host.go"),
    sdk!("go/", "sdk/", "log.go"),
    sdk!("go/", "sdk/", "reconcile.go"),
    sdk!("go/", "sdk/", "request.go"),
    sdk!("go/", "sdk/", "cache/cache.go"),
    sdk!("go/", "sdk/", "client/client.go"),
    sdk!("go/", "sdk/", "client/precondition.go"),
    sdk!("go/", "sdk/", "events/events.go"),
    sdk!("go/", "sdk/", "fake/fake.go"),
    sdk!("go/", "sdk/", "component/glue.go"),
    sdk!("go/", "sdk/", "component/argv0.go"),
];
