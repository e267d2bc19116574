//! What `check` prints: the module, the kinds, the imports it uses and the grants it has.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use super::fixtures::describe;
use super::load::{CLIENT_IMPORT, Loaded};
use crate::manifest::Grant;
use crate::runtime::KindRef;

/// What `check` prints for a usable plugin, before it exercises the export.
pub(super) fn check_report(path: &Path, loaded: &Loaded) -> String {
    let Loaded {
        manifest,
        module,
        size,
        ..
    } = loaded;
    let kinds = |kinds: &[KindRef]| match kinds {
        [] => "-".to_owned(),
        kinds => kinds.iter().map(describe).collect::<Vec<_>>().join(", "),
    };
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        let _ = writeln!(out, "{label:<10}{value}");
    };
    line("plugin", &manifest.name);
    line("manifest", &path.display().to_string());
    line("module", &manifest.module.display().to_string());
    line("", &format!("sha256 {}, {}", module.digest(), bytes(*size)));
    line("for", &describe(&manifest.for_kind));
    if let Some(selector) = &manifest.label_selector {
        line("selector", &selector.to_string());
    }
    line(
        "namespace",
        manifest.namespace.as_deref().unwrap_or("* (all)"),
    );
    line("owns", &kinds(&manifest.owns));
    line("cache", &kinds(&manifest.cache));
    let imports: BTreeSet<&str> = module.imports().iter().map(String::as_str).collect();
    for (i, import) in imports.iter().enumerate() {
        line(if i == 0 { "imports" } else { "" }, import);
    }
    if manifest.grants.is_empty() {
        line("grants", "none");
    } else {
        let mut rows = vec![[
            "KIND".to_owned(),
            "VERBS".to_owned(),
            "NAMESPACES".to_owned(),
            "SUBRESOURCES".to_owned(),
        ]];
        rows.extend(manifest.grants.iter().map(grant_row));
        let widths: Vec<usize> = (0..4)
            .map(|c| rows.iter().map(|row| row[c].len()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let text = format!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
            );
            line(if i == 0 { "grants" } else { "" }, &text);
        }
    }
    let client = imports.iter().any(|i| i.starts_with(CLIENT_IMPORT));
    match (client, manifest.grants.is_empty()) {
        (true, true) => out.push_str(
            "warning: the component imports kube:reconcile/client but the manifest grants \
             nothing, so every client call will be denied; add `grants:` for what it writes or \
             reads live\n",
        ),
        (false, false) => out.push_str(
            "warning: the manifest has grants but the component does not import \
             kube:reconcile/client, so they are never used; remove `grants:`\n",
        ),
        _ => {}
    }
    out
}

pub(super) fn grant_row(grant: &Grant) -> [String; 4] {
    let verbs: Vec<&str> = grant.verbs.iter().map(|verb| verb.as_str()).collect();
    let subresources = if grant.subresources.is_empty() {
        "-".to_owned()
    } else {
        grant.subresources.join(", ")
    };
    [
        describe(&grant.kind),
        verbs.join(", "),
        grant
            .namespaces
            .as_ref()
            .map_or_else(|| "*".to_owned(), |list| list.join(", ")),
        subresources,
    ]
}

pub(super) fn bytes(size: usize) -> String {
    let kib = size as f64 / 1024.0;
    if kib < 1024.0 {
        format!("{kib:.1} KiB")
    } else {
        format!("{:.1} MiB", kib / 1024.0)
    }
}
