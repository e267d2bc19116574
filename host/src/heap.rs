//! Handing freed heap memory back to the kernel.
//!
//! glibc's allocator keeps memory a program frees for its next allocations, in every thread's
//! arena, and returns to the kernel only what lies at the top of the main heap. A loaded module's
//! tables (function and trap metadata, types, the linked imports) are allocated among
//! everything else; when idle modules are unloaded, their freed pages would stay resident in the
//! arenas without a trim (100 QuickJS modules: 28 MiB; README, "Density").

/// Returns the free pages of every allocator arena to the kernel (glibc's `malloc_trim`); a
/// no-op with other allocators. Takes a few milliseconds with a large heap: call it after a
/// batch of work, not per call.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointer and only walks glibc's own free lists, under each
    // arena's lock; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
