//! The settings of mimalloc, the allocator of Sluice's programs (`sluice`, `sluice-bench`); the
//! library leaves the allocator to the application that embeds it.

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (libmimalloc-sys names no constant
/// for it): how long freed memory stays committed before it is returned to the OS.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay, in milliseconds (mimalloc's default is 10; arenas wait 10 times as long).
const PURGE_DELAY_MS: std::os::raw::c_long = 10_000;

/// Keeps freed memory for 10 s before returning it to the OS, where mimalloc's default is 10 ms.
///
/// A view's checkpoint encodes its state into one buffer (about 400 MB for the join of the
/// views benchmark) and frees it. With the default, mimalloc returned those pages to the OS at
/// once, and the maintenance that followed took fresh pages from the same region and faulted them
/// in again: `perf record -e page-faults` counted 28,634 faults in the join's maintenance over 200
/// changes, and its 1,000-row changes took 1.5 to 6 ms for about 17 changes after each checkpoint,
/// against 0.5 to 0.8 ms otherwise. Memory freed and not reused within the delay still goes back.
pub fn keep_freed_memory() {
    // SAFETY: mi_option_set stores an option's value; it takes any option number and value, and
    // the allocator reads it when it next considers purging.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}
