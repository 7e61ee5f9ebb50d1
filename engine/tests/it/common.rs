//! Helpers shared by the engine tests.

use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

/// The seed of a random test: `SLUICE_SEED` when set (to replay a failure), else a new one. It is
/// printed, so a failing test shows it (the harness prints a failed test's output).
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SLUICE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("{test}: seed {seed} (replay with SLUICE_SEED={seed})");
    seed
}

/// A random generator from a seed.
pub fn rng_from(seed: u64) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    rand::rngs::StdRng::seed_from_u64(seed)
}

pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The Python with the pinned peers (installed by scripts/test).
pub fn python() -> PathBuf {
    if let Ok(path) = std::env::var("SLUICE_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = workspace().join(".venv/bin/python");
    assert!(venv.exists(), "the Python peers are not installed: run ./scripts/test");
    venv
}

/// Runs a Python snippet; panics with its output on failure; returns stdout.
///
/// The snippet ends with `os._exit(0)` once it has flushed its output: the `deltalake` package's
/// threads sometimes abort the interpreter's normal shutdown ("terminate called without an active
/// exception") after the work is done and printed, which failed CI once.
pub fn run_python(code: &str, args: &[&str]) -> String {
    let code =
        format!("{code}\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n");
    let output = std::process::Command::new(python()).arg("-c").arg(code).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Rows as sorted text lines (`a|b|c`), NULL as `NULL`.
pub fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for batch in batches {
        let formatters: Vec<_> =
            batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap()).collect();
        for row in 0..batch.num_rows() {
            out.push(formatters.iter().map(|f| f.value(row).to_string()).collect::<Vec<_>>().join("|"));
        }
    }
    out.sort();
    out
}
