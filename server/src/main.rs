//! The `sluice` command: see `sluice --help`.

/// mimalloc rather than the system allocator: view state and query plans make many small
/// allocations, and glibc's free of large batches stalls on heap consolidation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_server::allocator::keep_freed_memory();
    sluice_server::cli::main()
}
