//! What host processes killed before they could clean up leave behind: directories and files
//! whose names carry the pid of the process that made them. A later process of the same user
//! removes them once `/proc` shows that pid no longer runs.

use std::path::{Path, PathBuf};

/// Which entries [`abandoned`] looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Directories only.
    Dir,
    /// Regular files only.
    File,
}

/// The entries of `parent` of `kind` named `<prefix><pid>` or `<prefix><pid>-<anything>` whose
/// pid is not this process's and no longer runs, and that belong to this process's user. Empty
/// where `/proc` cannot tell which processes run.
#[must_use]
pub fn abandoned(parent: &Path, prefix: &str, kind: Kind) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(me) = std::fs::metadata("/proc/self") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|name| name.strip_prefix(prefix))
                .map(|rest| rest.split_once('-').map_or(rest, |(pid, _)| pid))
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                return false;
            };
            pid != std::process::id()
                && !Path::new("/proc").join(pid.to_string()).exists()
                && entry.metadata().is_ok_and(|meta| {
                    meta.uid() == me.uid()
                        && match kind {
                            Kind::Dir => meta.is_dir(),
                            Kind::File => meta.is_file(),
                        }
                })
        })
        .map(|entry| entry.path())
        .collect()
}

/// Removes what [`abandoned`] finds, logging each removal as `what`.
pub fn remove(parent: &Path, prefix: &str, kind: Kind, what: &str) {
    for path in abandoned(parent, prefix, kind) {
        let removed = match kind {
            Kind::Dir => std::fs::remove_dir_all(&path),
            Kind::File => std::fs::remove_file(&path),
        };
        match removed {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed {what} of a host process that is gone")
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot remove {what} of a host process that is gone")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_entries_of_processes_that_are_gone_are_abandoned() {
        let parent = tempfile::tempdir().expect("temporary directory");
        let at = |name: &str| parent.path().join(name);
        // A pid above any kernel's pid_max never runs; pid 1 always does.
        for name in [
            "left-4294967290",
            "left-1",
            &format!("left-{}", std::process::id()),
            "left-not-a-pid",
            "other-4294967290",
        ] {
            std::fs::create_dir(at(name)).expect("a directory");
        }
        for name in ["left-4294967291-7-0", "left-4294967292"] {
            std::fs::write(at(name), "").expect("a file");
        }
        assert_eq!(
            abandoned(parent.path(), "left-", Kind::Dir),
            vec![at("left-4294967290")]
        );
        let mut files = abandoned(parent.path(), "left-", Kind::File);
        files.sort();
        assert_eq!(
            files,
            vec![at("left-4294967291-7-0"), at("left-4294967292")]
        );
        remove(parent.path(), "left-", Kind::File, "a file");
        assert!(!at("left-4294967291-7-0").exists() && !at("left-4294967292").exists());
        assert!(at("left-4294967290").exists(), "directories untouched");
    }
}
