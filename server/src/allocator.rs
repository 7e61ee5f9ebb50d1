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
    no_transparent_huge_pages();
}

/// `mi_option_allow_thp` in mimalloc v3's `mi_option_e`.
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Turns transparent huge pages off for the process, as `MIMALLOC_ALLOW_THP=0` would.
///
/// mimalloc asks for huge pages on its arenas (`madvise(MADV_HUGEPAGE)`, which counts where the
/// system's setting is `madvise`, Debian's default). Each fault in memory mimalloc had not used
/// yet then zeroes 2 MiB, even for a 64 KiB page of small objects. Short transactions allocate a
/// few large buffers per statement (a Parquet writer's dictionary interners, a page's decoded
/// dictionary): in pgbench's TPC-B-like run (8 clients, 20 s, `/proc`), `clear_page_erms` under
/// `do_huge_pmd_anonymous_page` was 22% of the server's samples. With THP off, its CPU per
/// transaction went from 11.4 to 14.8 ms to 9.7 to 13.5 ms (four runs each, in turn), its
/// system time per transaction from 4.1 to 5.9 ms to 3.1 to 4.2 ms (benches/RESULTS.md).
/// `prctl(PR_SET_THP_DISABLE)` covers the mappings made before `main` too (the kernel checks the
/// flag at each fault); the mimalloc option stops the `madvise` calls on later arenas.
fn no_transparent_huge_pages() {
    // SAFETY: as above; prctl with PR_SET_THP_DISABLE takes an integer flag and the unused
    // arguments as zero, touches no memory of ours, and only sets a flag of the process.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
        if libc::prctl(
            libc::PR_SET_THP_DISABLE,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) != 0
        {
            tracing::debug!("transparent huge pages stay on: {}", std::io::Error::last_os_error());
        }
    }
}
