//! Where a plugin's recordings go: a bounded ring of the latest (served on the telemetry port
//! when `recording.serve` allows), and optionally a directory, one file a bundle, of which each
//! plugin keeps at most [`MAX_DIR_FILES`] files and [`MAX_DIR_BYTES`] bytes (its oldest files
//! are removed first).

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::config::RecordingConfig;
use crate::controller::ObjectKey;
use crate::wasm::record::Bundle;

/// Enqueues a key of the plugin (set once its controller runs).
pub type Enqueue = Box<dyn Fn(ObjectKey) + Send + Sync>;

/// One plugin's recordings.
pub struct PluginRecordings {
    plugin: String,
    settings: RecordingConfig,
    every_call: bool,
    ring: Mutex<VecDeque<(usize, Arc<Bundle>)>>,
    requested: Mutex<HashSet<ObjectKey>>,
    enqueue: Mutex<Option<Enqueue>>,
    written: AtomicU64,
    files: Arc<Mutex<DirFiles>>,
}

/// The files a plugin wrote into the recording directory, oldest first, with their sizes.
#[derive(Debug, Default)]
struct DirFiles {
    files: VecDeque<(PathBuf, u64)>,
    bytes: u64,
}

impl DirFiles {
    /// Notes `path` (`size` bytes) as written, then removes the oldest files until the plugin's
    /// files are within [`MAX_DIR_FILES`] and [`MAX_DIR_BYTES`]; returns how many it removed.
    fn written(&mut self, path: PathBuf, size: u64) -> usize {
        self.files.push_back((path, size));
        self.bytes += size;
        let mut removed = 0;
        while self.files.len() > MAX_DIR_FILES
            || (self.bytes > MAX_DIR_BYTES && self.files.len() > 1)
        {
            let Some((oldest, size)) = self.files.pop_front() else {
                break;
            };
            self.bytes -= size;
            if let Err(error) = std::fs::remove_file(&oldest)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %oldest.display(), %error,
                    "cannot remove an old recorded reconcile; check recording.directory");
            }
            removed += 1;
        }
        removed
    }
}

impl std::fmt::Debug for PluginRecordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRecordings")
            .field("plugin", &self.plugin)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Most keys waiting to be recorded on request, per plugin.
pub const MAX_REQUESTED: usize = 1024;

/// Most bytes of bundles a plugin keeps in memory (about: answers, random bytes and object).
pub const MAX_KEPT_BYTES: usize = 32 << 20;

/// Most files a plugin keeps in the recording directory; past it, its oldest go.
pub const MAX_DIR_FILES: usize = 1000;

/// Most bytes of files a plugin keeps in the recording directory; past it, its oldest go.
pub const MAX_DIR_BYTES: u64 = 256 << 20;

fn size_of(bundle: &Bundle) -> usize {
    let calls: usize = bundle
        .calls
        .iter()
        .map(|call| call.args.to_string().len() + call.result.to_string().len())
        .sum();
    calls
        + bundle.random.len()
        + bundle.insecure_random.len()
        + bundle.request.object.as_ref().map_or(0, String::len)
        + 8 * (bundle.wall_clock.len() + bundle.monotonic_clock.len())
}

impl PluginRecordings {
    /// Recordings of `plugin` as `settings` say: failed calls and requested keys are kept.
    #[must_use]
    pub fn new(plugin: &str, settings: RecordingConfig) -> Self {
        Self {
            plugin: plugin.to_owned(),
            settings,
            every_call: false,
            ring: Mutex::default(),
            requested: Mutex::default(),
            enqueue: Mutex::default(),
            written: AtomicU64::new(0),
            files: Arc::default(),
        }
    }

    /// Keeps every call, not only failures (the `reconcile --record` tool).
    #[must_use]
    pub fn every_call(mut self) -> Self {
        self.every_call = true;
        self
    }

    /// Whether calls are recorded at all.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.settings.keep > 0 || self.settings.directory.is_some()
    }

    /// Whether Secret values are redacted.
    #[must_use]
    pub fn redact(&self) -> bool {
        !self.settings.keep_secrets
    }

    /// Sets how a requested key is queued (the plugin's controller).
    pub fn set_enqueue(&self, enqueue: Enqueue) {
        *self.enqueue.lock() = Some(enqueue);
    }

    /// Records the next reconcile of `key` whatever its outcome, and queues the key; false
    /// when recording is off or too many keys wait already.
    pub fn request(&self, key: ObjectKey) -> bool {
        if !self.enabled() {
            return false;
        }
        {
            let mut requested = self.requested.lock();
            if requested.len() >= MAX_REQUESTED {
                return false;
            }
            requested.insert(key.clone());
        }
        if let Some(enqueue) = &*self.enqueue.lock() {
            enqueue(key);
        }
        true
    }

    /// Whether the call of the key `namespace`/`name` about to run was requested (the request
    /// is then used up).
    pub fn take_request_for(&self, namespace: Option<&str>, name: &str) -> bool {
        let mut requested = self.requested.lock();
        if requested.is_empty() {
            return false;
        }
        let key = ObjectKey::in_namespace(namespace, name);
        requested.remove(&key)
    }

    /// Whether a call that ended with `outcome` is kept.
    #[must_use]
    pub fn wants(&self, outcome: &crate::wasm::record::RecordedOutcome, requested: bool) -> bool {
        requested || self.every_call || outcome.failed()
    }

    /// Keeps `bundle` (see [`wants`](Self::wants)).
    pub fn keep(&self, bundle: Bundle, requested: bool) {
        if !self.wants(&bundle.outcome, requested) {
            return;
        }
        let bundle = Arc::new(bundle);
        if self.settings.keep > 0 {
            let size = size_of(&bundle);
            let mut ring = self.ring.lock();
            while ring.len() >= self.settings.keep
                || (!ring.is_empty()
                    && ring.iter().map(|(s, _)| s).sum::<usize>() + size > MAX_KEPT_BYTES)
            {
                ring.pop_front();
            }
            ring.push_back((size, Arc::clone(&bundle)));
        }
        if let Some(directory) = &self.settings.directory {
            let n = self.written.fetch_add(1, Ordering::Relaxed);
            let safe = |text: &str| -> String {
                text.chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            };
            let target = &bundle.request.target;
            let name = format!(
                "{}-{}-{}-{}-{n}.json",
                safe(&self.plugin),
                safe(target.namespace.as_deref().unwrap_or("_")),
                safe(&target.name),
                std::process::id(),
            );
            let path = directory.join(name);
            let plugin = self.plugin.clone();
            let files = Arc::clone(&self.files);
            let write = move || {
                let text = serde_json::to_vec_pretty(&*bundle).unwrap_or_default();
                let size = text.len() as u64;
                // Written whole, then renamed: a reader never sees half a bundle.
                let partial = path.with_extension("json.partial");
                let result =
                    std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &path));
                match result {
                    Ok(()) => {
                        tracing::info!(%plugin, path = %path.display(), "reconcile recorded");
                        let removed = files.lock().written(path, size);
                        if removed > 0 {
                            tracing::debug!(%plugin, removed, "old recorded reconciles removed");
                        }
                    }
                    Err(error) => tracing::warn!(%plugin, path = %path.display(), %error,
                        "cannot write a recorded reconcile; check recording.directory"),
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => drop(handle.spawn_blocking(write)),
                Err(_) => write(),
            }
        }
    }

    /// The bundles kept in memory, oldest first.
    #[must_use]
    pub fn bundles(&self) -> Vec<Arc<Bundle>> {
        self.ring
            .lock()
            .iter()
            .map(|(_, b)| Arc::clone(b))
            .collect()
    }
}

impl crate::telemetry::recordings::RecordingSource for PluginRecordings {
    fn bundles_json(&self) -> String {
        let bundles = self.bundles();
        let list: Vec<&Bundle> = bundles.iter().map(|b| &**b).collect();
        serde_json::to_string(&list).unwrap_or_else(|_| "[]".to_owned())
    }

    fn held(&self) -> usize {
        self.ring.lock().len()
    }

    fn request(&self, namespace: Option<&str>, name: &str) -> bool {
        let key = ObjectKey::in_namespace(namespace, name);
        PluginRecordings::request(self, key)
    }

    fn served(&self) -> bool {
        self.settings.serve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_keeps_a_plugins_newest_files_within_both_bounds() {
        let dir = std::env::temp_dir().join(format!("recordings-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut files = DirFiles::default();
        let path = |n: usize| dir.join(format!("{n}.json"));
        for n in 0..MAX_DIR_FILES + 5 {
            std::fs::write(path(n), b"{}").expect("written");
            files.written(path(n), 2);
        }
        assert_eq!(files.files.len(), MAX_DIR_FILES);
        assert!(!path(4).exists() && path(5).exists());
        let count = std::fs::read_dir(&dir).expect("listed").count();
        assert_eq!(count, MAX_DIR_FILES);

        // One file past the byte bound takes the older ones with it, never itself.
        let big = dir.join("big.json");
        std::fs::write(&big, b"{}").expect("written");
        assert_eq!(files.written(big.clone(), MAX_DIR_BYTES), MAX_DIR_FILES);
        assert!(big.exists());
        assert_eq!(std::fs::read_dir(&dir).expect("listed").count(), 1);
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
