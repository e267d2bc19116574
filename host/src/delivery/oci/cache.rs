//! The disk store of pulled modules: `<dir>/<sha256 hex>.wasm` by layer digest, and
//! `<dir>/manifests/<sha256 hex>` naming the layer of a manifest digest, so a pull by digest
//! that was pulled before needs no request. Files are written to a temporary name, synced and
//! renamed: a crash leaves no half-written module under a digest's name.
//!
//! # Guarantees
//! - A cached module is hashed on its first use in this process, on a blocking thread; the
//!   process remembers what it verified by (device, inode, size, mtime, ctime) and hashes again
//!   when any of them changes.
//! - A module file that is not a regular file (a symlink, a FIFO, …), is larger than
//!   [`MAX_MODULE_BYTES`](super::MAX_MODULE_BYTES) or does not hash to its name is removed (and
//!   pulled again); so is a manifest record that does not hold one digest. Files are opened
//!   without following links and without blocking on a FIFO.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sha2::{Digest as _, Sha256};

use super::MAX_MODULE_BYTES;

/// The largest manifest record read (`sha256:` and 64 hex digits, and a newline or so).
const MAX_RECORD_BYTES: u64 = 1 << 10;

/// Where pulled modules are kept.
#[derive(Clone, Debug)]
pub struct ModuleStore {
    dir: PathBuf,
    /// Modules this process verified, by layer hex: what each file looked like then.
    verified: Arc<Mutex<HashMap<String, Stamp>>>,
}

/// What a file looked like: any change of these means it may hold other bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

impl ModuleStore {
    /// A store in `dir` (created on first write).
    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            verified: Arc::default(),
        }
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

    /// The layer digest (`sha256:…`) recorded for manifest digest `hex`, if any; a record that
    /// is not a regular file holding one digest is removed.
    #[must_use]
    pub fn layer_of(&self, manifest_hex: &str) -> Option<String> {
        let path = self.manifest_path(manifest_hex);
        let layer = match open_regular(&path, MAX_RECORD_BYTES) {
            Ok(Some((file, _))) => {
                let mut text = String::new();
                file.take(MAX_RECORD_BYTES)
                    .read_to_string(&mut text)
                    .ok()
                    .map(|_| text.trim().to_owned())
                    .filter(|layer| super::digest_hex(layer).is_some())
            }
            Ok(None) => return None,
            Err(_) => None,
        };
        if layer.is_none() {
            discard(&path, "a malformed manifest record");
        }
        layer
    }

    /// Whether the module with layer digest `hex` is on disk with the bytes it should have,
    /// hashed on a blocking thread unless this process verified the same file before (a file
    /// that is not a regular file, is too large or holds other bytes is removed).
    pub async fn has_module(&self, hex: &str) -> bool {
        let store = self.clone();
        let hex = hex.to_owned();
        tokio::task::spawn_blocking(move || store.verify(&hex))
            .await
            .unwrap_or(false)
    }

    /// Remembers the module `hex` just written and verified as it is now on disk.
    pub(super) fn remember(&self, hex: &str) {
        if let Ok(metadata) = std::fs::symlink_metadata(self.module_path(hex)) {
            self.verified
                .lock()
                .insert(hex.to_owned(), Stamp::of(&metadata));
        }
    }

    /// [`has_module`](Self::has_module)'s work, blocking.
    fn verify(&self, hex: &str) -> bool {
        let path = self.module_path(hex);
        let known = self.verified.lock().get(hex).copied();
        let (file, stamp) = match open_regular(&path, MAX_MODULE_BYTES) {
            Ok(Some(opened)) => opened,
            Ok(None) => return false,
            Err(problem) => {
                self.verified.lock().remove(hex);
                discard(&path, problem);
                return false;
            }
        };
        if known == Some(stamp) {
            return true;
        }
        let mut hasher = Sha256::new();
        let hashed = std::io::copy(&mut file.take(MAX_MODULE_BYTES + 1), &mut hasher);
        if hashed.is_ok_and(|size| size == stamp.size) && hex_encode(hasher.finalize()) == hex {
            self.verified.lock().insert(hex.to_owned(), stamp);
            true
        } else {
            self.verified.lock().remove(hex);
            discard(&path, "a cached module whose bytes do not match its digest");
            false
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

/// Opens `path` for reading if it is a regular file of at most `max` bytes: without following
/// a symlink and without blocking on a FIFO. `Ok(None)`: there is no such file; `Err`: what else
/// is there.
fn open_regular(path: &Path, max: u64) -> Result<Option<(std::fs::File, Stamp)>, &'static str> {
    use rustix::fs::{Mode, OFlags};
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if !metadata.file_type().is_file() => return Err("not a regular file"),
        Ok(metadata) if metadata.len() > max => return Err("a file larger than the host accepts"),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err("a file that cannot be read"),
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(errno) if errno == rustix::io::Errno::NOENT => return Ok(None),
        Err(_) => return Err("a file that cannot be opened as a regular file"),
    };
    // What was opened, not what the path named a moment before.
    let metadata = file.metadata().map_err(|_| "a file that cannot be read")?;
    if !metadata.file_type().is_file() {
        return Err("not a regular file");
    }
    if metadata.len() > max {
        return Err("a file larger than the host accepts");
    }
    Ok(Some((file, Stamp::of(&metadata))))
}

/// Removes `path`, a cached file that cannot be used, saying so.
fn discard(path: &Path, problem: &str) {
    tracing::warn!(path = %path.display(), problem, "removing an unusable file from the OCI module cache; it is pulled again");
    let _ = std::fs::remove_file(path);
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

    fn store_with(bytes: &[u8]) -> (tempfile::TempDir, ModuleStore, String) {
        let tmp = tempfile::tempdir().unwrap();
        let store = ModuleStore::new(tmp.path().join("store"));
        std::fs::create_dir_all(store.dir()).unwrap();
        let hex = hex_encode(Sha256::digest(bytes));
        (tmp, store, hex)
    }

    #[tokio::test]
    async fn a_corrupt_cached_module_is_not_used_and_is_removed() {
        let (_tmp, store, hex) = store_with(b"module");
        std::fs::write(store.module_path(&hex), b"module").unwrap();
        assert!(store.has_module(&hex).await);
        // Other bytes under a new inode, as a rename leaves them.
        std::fs::write(store.dir().join("other"), b"altered").unwrap();
        std::fs::rename(store.dir().join("other"), store.module_path(&hex)).unwrap();
        assert!(!store.has_module(&hex).await);
        assert!(!store.module_path(&hex).exists());
        let layer = format!("sha256:{hex}");
        store.record_manifest(&"a".repeat(64), &layer).unwrap();
        assert_eq!(store.layer_of(&"a".repeat(64)), Some(layer));
        assert_eq!(store.layer_of(&"b".repeat(64)), None);
    }

    /// A module verified once is hashed again when the file changes in place: same inode and
    /// size, another modification time.
    #[tokio::test]
    async fn a_module_changed_in_place_after_it_was_verified_is_hashed_again() {
        let (_tmp, store, hex) = store_with(b"module");
        std::fs::write(store.module_path(&hex), b"module").unwrap();
        assert!(store.has_module(&hex).await);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(store.module_path(&hex))
            .unwrap();
        let modified = file.metadata().unwrap().modified().unwrap();
        (&file).write_all(b"MODULE").unwrap();
        file.set_modified(modified + std::time::Duration::from_secs(1))
            .unwrap();
        drop(file);
        assert!(!store.has_module(&hex).await);
        assert!(!store.module_path(&hex).exists());
    }

    #[tokio::test]
    async fn a_symlink_in_the_cache_is_removed_not_followed() {
        let (tmp, store, hex) = store_with(b"module");
        let elsewhere = tmp.path().join("elsewhere.wasm");
        std::fs::write(&elsewhere, b"module").unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.module_path(&hex)).unwrap();
        assert!(!store.has_module(&hex).await);
        assert!(std::fs::symlink_metadata(store.module_path(&hex)).is_err());
        assert_eq!(
            std::fs::read(&elsewhere).unwrap(),
            b"module",
            "its target is kept"
        );
    }

    /// A FIFO under a module's name is removed without being opened for a blocking read (a
    /// read would wait for a writer forever).
    #[test]
    fn a_fifo_in_the_cache_is_removed_without_hanging() {
        let (_tmp, store, hex) = store_with(b"module");
        make_fifo(&store.module_path(&hex));
        let record = store.manifest_path(&"a".repeat(64));
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        make_fifo(&record);
        let (sender, receiver) = std::sync::mpsc::channel();
        let checked = store.clone();
        let hex_checked = hex.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let module = runtime.block_on(checked.has_module(&hex_checked));
            let layer = checked.layer_of(&"a".repeat(64));
            let _ = sender.send((module, layer));
        });
        let (module, layer) = receiver
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the checks end instead of waiting on the FIFOs");
        assert!(!module);
        assert_eq!(layer, None);
        assert!(std::fs::symlink_metadata(store.module_path(&hex)).is_err());
        assert!(std::fs::symlink_metadata(&record).is_err());
    }

    #[tokio::test]
    async fn an_oversize_module_is_removed_unread() {
        let (_tmp, store, hex) = store_with(b"module");
        let file = std::fs::File::create(store.module_path(&hex)).unwrap();
        file.set_len(MAX_MODULE_BYTES + 1).unwrap();
        drop(file);
        assert!(!store.has_module(&hex).await);
        assert!(!store.module_path(&hex).exists());
    }

    #[test]
    fn a_malformed_manifest_record_is_removed() {
        let (_tmp, store, _) = store_with(b"module");
        store
            .record_manifest(&"a".repeat(64), "sha256:not-a-digest")
            .unwrap();
        assert_eq!(store.layer_of(&"a".repeat(64)), None);
        assert!(!store.manifest_path(&"a".repeat(64)).exists());
    }

    fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }
}
