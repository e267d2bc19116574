//! The objects' plugin directory: each object's `<name>/module.wasm` (and `shadow.wasm`,
//! `canary.wasm`) and `<name>/plugin.yaml`, written from what a fetch prepared. Each written
//! file's digest is remembered, so a file that would not change is neither read nor written
//! again; a module copied from the registry's disk cache is verified (hashed) as it is copied.
//! File work runs on a blocking thread.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::fetched::{Bytes, FetchError, Prepared};
use crate::bounded_read::MAX_MODULE_BYTES;
use crate::wasm::module::hex_sha256;

/// The digests (hex) of the files written for one object, by file name.
type Written = BTreeMap<&'static str, String>;

/// The plugin directory and what was written into it.
pub(super) struct Files {
    dir: PathBuf,
    written: BTreeMap<String, Written>,
}

impl Files {
    /// The files under `dir` (which exists).
    pub(super) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            written: BTreeMap::new(),
        }
    }

    /// Writes what `prepared` holds for the object `name`: its modules, then the manifest that
    /// names them, each only when its digest differs from what was written there.
    pub(super) async fn write(
        &mut self,
        name: &str,
        prepared: &Prepared,
    ) -> Result<(), FetchError> {
        let dir = self.dir.join(name);
        let mut written = self.written.remove(name).unwrap_or_default();
        let mut work = Vec::new();
        for file in &prepared.files {
            if written.get(file.file) != Some(&file.sha256) {
                let bytes = match &file.bytes {
                    Bytes::Memory(bytes) => Source::Memory(bytes.clone()),
                    Bytes::Cached(path) => Source::Cached(path.clone()),
                };
                work.push((file.file, file.sha256.clone(), bytes));
            }
        }
        let manifest = prepared.module.manifest.clone();
        let (result, written) = blocking(move || {
            let result = (|| {
                for (file, sha256, bytes) in work {
                    // Unknown until written: a failure leaves it to be written again.
                    written.remove(file);
                    write_module(&dir, file, &sha256, bytes)?;
                    written.insert(file, sha256);
                }
                let sha256 = hex_sha256(manifest.as_bytes());
                if written.get("plugin.yaml") != Some(&sha256) {
                    written.remove("plugin.yaml");
                    write_file(&dir, "plugin.yaml", manifest.as_bytes())?;
                    written.insert("plugin.yaml", sha256);
                }
                Ok(())
            })();
            (result, written)
        })
        .await;
        self.written.insert(name.to_owned(), written);
        result
    }

    /// Removes the files of every object `keep` does not name.
    pub(super) fn keep_only(&mut self, keep: impl Fn(&str) -> bool) {
        self.written.retain(|name, _| keep(name));
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !keep(&name)
                && !name.starts_with('.')
                && let Err(error) = std::fs::remove_dir_all(entry.path())
            {
                tracing::warn!(plugin = %name, %error,
                    "cannot remove a deleted ReconcilerPlugin's files");
            }
        }
    }
}

/// Runs `work` on a blocking thread (a panic in it is resumed here).
pub(super) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()))
}

/// A module's bytes, owned by the blocking thread.
enum Source {
    Memory(Vec<u8>),
    Cached(PathBuf),
}

/// Writes the module `file` into `dir`: bytes read from a ConfigMap as they are, a cached
/// module once its bytes hash to `sha256` (a cached file that does not is removed, so that the
/// next fetch pulls it again).
fn write_module(dir: &Path, file: &str, sha256: &str, source: Source) -> Result<(), FetchError> {
    let bytes = match source {
        Source::Memory(bytes) => bytes,
        Source::Cached(path) => {
            let bytes =
                crate::bounded_read::read(&path, MAX_MODULE_BYTES, "module").map_err(|source| {
                    FetchError::Write {
                        path: path.clone(),
                        source,
                    }
                })?;
            let actual = hex_sha256(&bytes);
            if actual != sha256 {
                tracing::warn!(path = %path.display(),
                    "removing a cached module whose bytes do not match its digest");
                let _ = std::fs::remove_file(&path);
                return Err(FetchError::CacheCorrupt {
                    path,
                    expected: format!("sha256:{sha256}"),
                    actual: format!("sha256:{actual}"),
                });
            }
            bytes
        }
    };
    write_file(dir, file, &bytes)
}

/// Writes `contents` to `file` in `dir` through a temporary file and a rename, so that the
/// supervisor never reads half a file.
fn write_file(dir: &Path, file: &str, contents: &[u8]) -> Result<(), FetchError> {
    let path = dir.join(file);
    let error = |source| FetchError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(error)?;
    let temporary = dir.join(".writing");
    std::fs::write(&temporary, contents).map_err(error)?;
    std::fs::rename(&temporary, &path).map_err(error)
}
