//! Finding the peer programs the test command installs (see scripts/test).

use std::path::PathBuf;

/// The Python with the pinned peers (`deltalake`, `pyarrow`, ...).
pub fn python() -> PathBuf {
    if let Ok(path) = std::env::var("SLUICE_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = crate::common::workspace().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the Python peers are not installed: run ./scripts/test, which creates .venv with scripts/requirements.txt"
    );
    venv
}

/// Runs a Python script from tests/it with arguments; panics with its output on failure.
pub fn run_python(script: &str, args: &[&str]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it").join(script);
    let path = path.to_string_lossy();
    let code = "import runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')";
    let mut with_path = vec![path.as_ref()];
    with_path.extend_from_slice(args);
    run_python_code(code, &with_path);
}

/// Runs Python code with arguments and returns what it printed; panics with its output on
/// failure. The code leaves with `os._exit(0)` once its output is flushed: the `deltalake`
/// package's threads sometimes abort the interpreter's normal shutdown ("terminate called
/// without an active exception") after the code has succeeded.
pub fn run_python_code(code: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(python())
        .arg("-c")
        .arg(format!("{code}\n{EXIT_AFTER_FLUSH}"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

const EXIT_AFTER_FLUSH: &str =
    "import os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n";
