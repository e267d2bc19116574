//! The disk store of pulled modules: `<dir>/<sha256 hex>.wasm` by layer digest, and
//! `<dir>/manifests/<sha256 hex>` naming the layer of a manifest digest, so a pull by digest
//! that was pulled before needs no request. Files are written to a temporary name, synced and
//! renamed: a crash leaves no half-written module under a digest's name.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Where pulled modules are kept.
#[derive(Clone, Debug)]
pub struct ModuleStore {
    dir: PathBuf,
}

impl ModuleStore {
    /// A store in `dir` (created on first write).
    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the module with layer digest `hex` (whether or not it exists).
    #[must_use]
    pub fn module_path(&self, hex: &str) -> PathBuf {
        self.dir.join(format!("{hex}.wasm"))
    }

    fn manifest_path(&self, hex: &str) -> PathBuf {
        self.dir.join("manifests").join(hex)
    }

    /// The layer digest (`sha256:…`) recorded for manifest digest `hex`, if any.
    #[must_use]
    pub fn layer_of(&self, manifest_hex: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.manifest_path(manifest_hex)).ok()?;
        let layer = text.trim();
        super::digest_hex(layer).is_some().then(|| layer.to_owned())
    }

    /// Whether the module with layer digest `hex` is on disk with the bytes it should have (a
    /// corrupt file is removed).
    #[must_use]
    pub fn has_module(&self, hex: &str) -> bool {
        let path = self.module_path(hex);
        match std::fs::read(&path) {
            Ok(bytes) if hex_encode(Sha256::digest(&bytes)) == hex => true,
            Ok(_) => {
                tracing::warn!(path = %path.display(), "removing a cached module whose bytes do not match its digest");
                let _ = std::fs::remove_file(&path);
                false
            }
            Err(_) => false,
        }
    }

    /// Records that manifest `manifest_hex` has layer `layer` (`sha256:…`).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn record_manifest(&self, manifest_hex: &str, layer: &str) -> std::io::Result<()> {
        let path = self.manifest_path(manifest_hex);
        write_atomically(&path, layer.as_bytes())
    }

    /// A temporary file in the store's directory, for a module being downloaded.
    ///
    /// # Errors
    /// When the directory cannot be created or the file opened.
    pub fn temp_file(&self) -> std::io::Result<(PathBuf, std::fs::File)> {
        std::fs::create_dir_all(&self.dir)?;
        crate::leftovers::remove(
            &self.dir,
            PARTIAL_PREFIX,
            crate::leftovers::Kind::File,
            "a partial download",
        );
        temp_in(&self.dir)
    }
}

/// Lowercase hex of a digest's bytes.
pub(super) fn hex_encode(bytes: impl AsRef<[u8]>) -> String {
    bytes.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Temporary files are named `.partial-<pid>-<random>-<attempt>`: the pid tells a later process
/// which ones a killed process left.
const PARTIAL_PREFIX: &str = ".partial-";

fn temp_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    for attempt in 0..16u32 {
        let name = format!(
            "{PARTIAL_PREFIX}{}-{}-{attempt}",
            std::process::id(),
            rand::random::<u64>()
        );
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let (temp, mut file) = temp_in(dir)?;
    let result = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_removes_the_partial_files_of_processes_that_are_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(tmp.path().to_owned());
        // A pid above any kernel's pid_max never runs.
        let gone = tmp.path().join(format!("{PARTIAL_PREFIX}4294967290-17-0"));
        std::fs::write(&gone, b"half a module").unwrap();
        let (mine, _file) = store.temp_file().unwrap();
        assert!(!gone.exists());
        assert!(mine.exists());
        let (other, _file) = store.temp_file().unwrap();
        assert!(
            mine.exists() && other.exists(),
            "this process's own are kept"
        );
    }

    #[test]
    fn a_corrupt_cached_module_is_not_used_and_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let store = ModuleStore::new(dir.clone());
        let hex = hex_encode(Sha256::digest(b"module"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(store.module_path(&hex), b"module").unwrap();
        assert!(store.has_module(&hex));
        std::fs::write(store.module_path(&hex), b"altered").unwrap();
        assert!(!store.has_module(&hex));
        assert!(!store.module_path(&hex).exists());
        let layer = format!("sha256:{hex}");
        store.record_manifest(&"a".repeat(64), &layer).unwrap();
        assert_eq!(store.layer_of(&"a".repeat(64)), Some(layer));
        assert_eq!(store.layer_of(&"b".repeat(64)), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
