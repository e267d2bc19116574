//! The compiled-module cache: each component compiled once per content digest and engine, kept as
//! a file and mapped from it, so that only the pages of code a plugin runs are resident, and
//! they are shared with the page cache (and with every other host on the node mapping the same
//! file) and evictable under memory pressure.
//!
//! # Layout
//! `<dir>/engine-<key>/<digest>.cwasm`, where `<key>` names the engine's compiler settings and
//! wasmtime version ([`Engine::precompile_compatibility_hash`]) and `<digest>` is the SHA-256 of
//! the component. A file is written under a temporary name and renamed into place, so a file
//! that has a final name is complete and never written again: a mapped file does not change.
//! The least recently used files beyond [`SIZE_LIMIT`] are removed after each write (a mapped
//! file that is removed stays valid for as long as it is mapped).
//!
//! # Trust
//! The directory holds native code the host runs, as wasmtime's own cache does: it must be
//! writable only by the host's user. A file that cannot be used (from another build, truncated,
//! corrupt in its headers) is compiled again and replaced.

use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The compiled files kept, in bytes, across every engine's directory; beyond it the least
/// recently used are removed.
pub const SIZE_LIMIT: u64 = 1 << 30;

/// Compiled components on disk for one engine.
#[derive(Debug)]
pub struct CompiledCache {
    engine: Engine,
    root: PathBuf,
    dir: PathBuf,
    size_limit: u64,
}

impl CompiledCache {
    /// The cache under `root` for `engine`; creates its directory.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn open(root: &Path, engine: &Engine) -> std::io::Result<Self> {
        let root = std::path::absolute(root)?;
        let dir = root.join(format!("engine-{}", engine_key(engine)));
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            engine: engine.clone(),
            root,
            dir,
            size_limit: SIZE_LIMIT,
        })
    }

    /// The component with content `bytes` (whose SHA-256 in hex is `digest`): mapped from its
    /// file when one is usable, else compiled, written and mapped.
    ///
    /// # Errors
    /// When `bytes` is not a component wasmtime can compile. A file that cannot be written or
    /// mapped is logged and the compiled component is used from memory.
    pub fn component(&self, digest: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        if let Some(component) = self.mapped(digest) {
            return Ok(component);
        }
        let engine = &self.engine;
        let path = self.dir.join(format!("{digest}.cwasm"));
        let compiled = engine.precompile_component(bytes)?;
        match self.store(&path, &compiled) {
            Ok(()) => match map(engine, &path) {
                Ok(component) => return Ok(component),
                Err(error) => tracing::warn!(
                    path = %path.display(),
                    error = format!("{error:#}"),
                    "cannot map the compiled module just written; using it from memory"
                ),
            },
            Err(error) => tracing::warn!(
                dir = %self.dir.display(),
                error = %error,
                "cannot write the compiled module to the cache; using it from memory"
            ),
        }
        from_memory(engine, &compiled)
    }

    /// The component with SHA-256 `digest`, mapped from its file, when the cache holds a usable
    /// one (which it then marks as used); `None` otherwise, with a warning for a file that is
    /// there but unusable.
    #[must_use]
    pub fn mapped(&self, digest: &str) -> Option<Component> {
        let path = self.dir.join(format!("{digest}.cwasm"));
        if !path.is_file() {
            return None;
        }
        match map(&self.engine, &path) {
            Ok(component) => {
                touch(&path);
                Some(component)
            }
            Err(error) => {
                tracing::warn!(
                    path = %path.display(),
                    error = format!("{error:#}"),
                    "compiled module unusable; compiling it again"
                );
                None
            }
        }
    }

    /// Writes `compiled` to `path` through a temporary file in the same directory, then keeps
    /// the cache within its size limit.
    fn store(&self, path: &Path, compiled: &[u8]) -> std::io::Result<()> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let temporary = self.dir.join(format!(
            ".{}.{}.tmp",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let written =
            std::fs::write(&temporary, compiled).and_then(|()| std::fs::rename(&temporary, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written?;
        self.prune();
        Ok(())
    }

    /// Removes the least recently used compiled files, across every engine's directory, until
    /// the rest fit in the size limit.
    fn prune(&self) {
        let mut files: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let Ok(engines) = std::fs::read_dir(&self.root) else {
            return;
        };
        for engine in engines.flatten() {
            if !engine.file_name().to_string_lossy().starts_with("engine-") {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(engine.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path
                    .extension()
                    .is_none_or(|extension| extension != "cwasm")
                {
                    continue;
                }
                let Ok(metadata) = entry.metadata() else {
                    continue;
                };
                let used = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                files.push((used, metadata.len(), path));
            }
        }
        let mut total: u64 = files.iter().map(|(_, size, _)| size).sum();
        files.sort_by_key(|(used, _, _)| *used);
        for (_, size, path) in files {
            if total <= self.size_limit {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(path = %path.display(), "compiled module removed from the cache");
                total -= size;
            }
        }
    }
}

/// Marks `path` as used now, for the least-recently-used order of [`CompiledCache::prune`].
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// A short, stable name of what a compiled file must match: the engine's compiler settings and
/// wasmtime's version.
fn engine_key(engine: &Engine) -> String {
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn finish(&self) -> u64 {
            unreachable!("the digest is read with finalize")
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Sha(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hasher.0.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Maps the compiled component in `path`.
#[allow(unsafe_code)]
fn map(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires the file to hold what `precompile_component` produced (it checks
    // the header and the engine's settings and fails otherwise) and to stay unchanged while
    // mapped. Files in the cache are only ever created whole under a temporary name and renamed
    // into place, never written again; removing or replacing one leaves existing mappings on
    // the old file. The directory is trusted as the host's own (see the module docs).
    unsafe { Component::deserialize_file(engine, path) }
}

/// The component compiled into `compiled` by `engine` a moment ago, from memory.
#[allow(unsafe_code)]
fn from_memory(engine: &Engine, compiled: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `compiled` is what `engine.precompile_component` returned in this process.
    unsafe { Component::deserialize(engine, compiled) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component, `(component)`: the preamble alone.
    fn component_bytes() -> Vec<u8> {
        b"\0asm\x0d\0\x01\0".to_vec()
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("compiled-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// An empty cache in a scratch directory named for `name`, for a default engine.
    fn empty_cache(name: &str) -> (PathBuf, CompiledCache) {
        let root = scratch(name);
        let cache = CompiledCache::open(&root, &Engine::default()).expect("cache");
        (root, cache)
    }

    fn cwasm_files(root: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for engine in std::fs::read_dir(root).expect("root").flatten() {
            for entry in std::fs::read_dir(engine.path())
                .expect("engine dir")
                .flatten()
            {
                files.push(entry.path());
            }
        }
        files.sort();
        files
    }

    #[test]
    fn a_component_is_compiled_once_then_mapped_from_its_file() {
        let (root, cache) = empty_cache("once");
        let bytes = component_bytes();
        cache.component("d1", &bytes).expect("compiled and stored");
        let files = cwasm_files(&root);
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].ends_with("d1.cwasm"), "{files:?}");
        let written = std::fs::read(&files[0]).expect("the file");

        // Another cache on the same directory maps the file instead of compiling: bytes that
        // are not a component at all load, because they are never compiled.
        let again = CompiledCache::open(&root, &cache.engine).expect("cache");
        again
            .component("d1", b"not a component")
            .expect("mapped from the file");
        assert_eq!(std::fs::read(&files[0]).expect("the file"), written);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn only_a_usable_file_is_mapped_by_digest_alone() {
        let (root, cache) = empty_cache("mapped");
        assert!(cache.mapped("d4").is_none(), "nothing compiled yet");
        cache.component("d4", &component_bytes()).expect("compiled");
        assert!(cache.mapped("d4").is_some(), "the file written is mapped");
        std::fs::write(cache.dir.join("d5.cwasm"), b"truncated").expect("a broken file");
        assert!(cache.mapped("d5").is_none(), "a broken file is not used");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_unusable_file_is_compiled_again_and_replaced() {
        let (root, cache) = empty_cache("unusable");
        let path = cache.dir.join("d2.cwasm");
        std::fs::write(&path, b"truncated").expect("a broken file");
        cache
            .component("d2", &component_bytes())
            .expect("compiled again");
        let replaced = std::fs::read(&path).expect("the file");
        assert_ne!(replaced, b"truncated");
        map(&cache.engine, &path).expect("the replacement maps");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_component_that_does_not_compile_is_an_error_and_leaves_no_file() {
        let (root, cache) = empty_cache("invalid");
        assert!(cache.component("d3", b"\0asm garbage").is_err());
        assert!(cwasm_files(&root).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn engines_with_other_settings_keep_their_files_apart() {
        let root = scratch("engines");
        let plain = Engine::default();
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let interrupted = Engine::new(&config).expect("engine");
        assert_ne!(engine_key(&plain), engine_key(&interrupted));
        assert_eq!(engine_key(&plain), engine_key(&Engine::default()));
        let bytes = component_bytes();
        for engine in [&plain, &interrupted] {
            CompiledCache::open(&root, engine)
                .expect("cache")
                .component("d4", &bytes)
                .expect("compiled");
        }
        assert_eq!(cwasm_files(&root).len(), 2);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_least_recently_used_files_beyond_the_limit_are_removed() {
        let (root, mut cache) = empty_cache("prune");
        let bytes = component_bytes();
        cache.component("old", &bytes).expect("compiled");
        let size = std::fs::metadata(cache.dir.join("old.cwasm"))
            .expect("stored")
            .len();
        let past = SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .append(true)
            .open(cache.dir.join("old.cwasm"))
            .and_then(|file| file.set_modified(past))
            .expect("aged");
        cache.component("used", &bytes).expect("compiled");
        std::fs::File::options()
            .append(true)
            .open(cache.dir.join("used.cwasm"))
            .and_then(|file| file.set_modified(past))
            .expect("aged");
        // A hit marks "used" as used now; with room for two files, a third removes "old".
        cache.component("used", b"").expect("mapped");
        cache.size_limit = 2 * size;
        cache.component("new", &bytes).expect("compiled");
        let names: Vec<String> = cwasm_files(&root)
            .iter()
            .map(|path| {
                path.file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["new.cwasm", "used.cwasm"]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
