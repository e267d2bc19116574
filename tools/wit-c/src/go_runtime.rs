//! The Go runtime package the Go bindings import, `go.bytecodealliance.org/pkg`, from the
//! wit-bindgen-go crate's sources (embedded by build.rs), with the SDK's patch
//! `guest-sdk/go/component/cabi-realloc-keep.patch` applied.

use anyhow::{Result, bail};

include!(concat!(env!("OUT_DIR"), "/go_runtime_files.rs"));

/// The patch applied to the package: why, in its header.
const PATCH: &str = include_str!("../../../guest-sdk/go/component/cabi-realloc-keep.patch");

/// The `go` line the package's go.mod gets: it declares a newer Go than it needs, and builds
/// with the Go the SDK pins.
pub const GO_RUNTIME_GO_VERSION: &str = "1.26";

/// The package's files (paths relative to its module root), patched.
pub fn go_runtime() -> Result<Vec<(String, String)>> {
    let mut files: Vec<(String, String)> = GO_RUNTIME_FILES
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect();
    for (path, text) in &mut files {
        if path == "go.mod" {
            *text = text
                .lines()
                .map(|line| {
                    if line.starts_with("go ") {
                        format!("go {GO_RUNTIME_GO_VERSION}")
                    } else {
                        line.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        }
    }
    apply(PATCH, &mut files)?;
    Ok(files)
}

/// Applies the unified diff `patch` to `files`: each hunk's old lines (context and `-`) must
/// occur exactly once in its file, and become its new lines (context and `+`).
pub(crate) fn apply(patch: &str, files: &mut [(String, String)]) -> Result<()> {
    let mut target: Option<usize> = None;
    let mut lines = patch.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(path) = line.strip_prefix("+++ b/") {
            let Some(index) = files.iter().position(|(name, _)| name == path) else {
                bail!("the patch names {path}, which the Go runtime package has not");
            };
            target = Some(index);
        } else if line.starts_with("@@") {
            let Some(index) = target else {
                bail!("the patch has a hunk before any file header");
            };
            let (mut old, mut new) = (String::new(), String::new());
            let in_hunk = |l: &&str| {
                !l.starts_with("---")
                    && !l.starts_with("+++")
                    && (l.is_empty() || l.starts_with([' ', '-', '+']))
            };
            while let Some(body) = lines.next_if(in_hunk) {
                let (kind, rest) = body.split_at(body.len().min(1));
                match kind {
                    "-" => old.push_str(&format!("{rest}\n")),
                    "+" => new.push_str(&format!("{rest}\n")),
                    _ => {
                        old.push_str(&format!("{rest}\n"));
                        new.push_str(&format!("{rest}\n"));
                    }
                }
            }
            let text = &mut files[index].1;
            let found = text.matches(old.as_str()).count();
            if found != 1 {
                bail!(
                    "a hunk of the patch matches {found} places of {} (exactly one expected): \
                     the wit-bindgen-go version changed; update the patch",
                    files[index].0
                );
            }
            *text = text.replacen(old.as_str(), &new, 1);
        }
    }
    Ok(())
}
