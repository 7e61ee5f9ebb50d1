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

/// Polls `check` until it returns a value, every 50 ms; panics naming `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "waited {timeout:?} for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
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

/// One of this binary's ignored `child` tests, run in its own process to be killed: the
/// kill-and-reopen loops of the crash tests (crash, flows, view_crash, kafka).
pub struct ChildTest {
    process: std::process::Child,
    /// The lines the child prints, as it prints them.
    pub lines: std::sync::mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ChildTest {
    /// Starts the test `name` (such as `crash::child`) of this binary with `env`.
    pub fn spawn(name: &str, env: &[(&str, String)]) -> Self {
        use std::io::BufRead;
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut process = command.spawn().unwrap();
        let stdout = process.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self { process, lines, reader: Some(reader) }
    }

    /// Whether the child is still running.
    pub fn running(&mut self) -> bool {
        self.process.try_wait().unwrap().is_none()
    }

    /// Kills the child; returns the lines it printed that were not received yet.
    pub fn kill(mut self) -> Vec<String> {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.lines.try_iter().collect()
    }
}

/// The number of the last `ok N` line (the child's last acknowledged statement).
pub fn last_ok(lines: &[String]) -> Option<u64> {
    lines.iter().filter_map(|l| l.strip_prefix("ok ").and_then(|n| n.parse::<u64>().ok())).next_back()
}

/// Waits until every flow has applied its source's latest version.
pub async fn caught_up(db: &sluice::Database) {
    let started = std::time::Instant::now();
    loop {
        let behind = rows(
            &db.query(
                "SELECT count(*) FROM sluice.flows WHERE lag_versions IS NULL OR lag_versions > 0 OR state <> 'idle'",
            )
            .await
            .unwrap(),
        );
        if behind == ["0"] {
            return;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let flows = rows(
                &db.query("SELECT name, state, last_source_version, source_version, error FROM sluice.flows")
                    .await
                    .unwrap(),
            );
            panic!("flows did not catch up: {flows:#?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
