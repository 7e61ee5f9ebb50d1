//! Differential tests against a real PostgreSQL 15 (STYLE.md 17): each case file under
//! `tests/differential/` runs statement by statement on a fresh PostgreSQL cluster and on
//! `sluice serve`, and `tests/differential/run.py` compares the outcomes (SQLSTATE, or command
//! status and rows) against the case's list of known differences.
//!
//! This module owns the two servers: it makes a throwaway cluster with `initdb` (as the `postgres`
//! OS user when the test runs as root, since PostgreSQL refuses to run as root), starts both on
//! free loopback ports and stops them when the test ends, also when it fails. PostgreSQL 15 must be
//! installed (`scripts/test` installs Debian's `postgresql-15`); without it the test fails.
//!
//! `DIFFERENTIAL_REPORT=1` makes the runner print every mismatch and a suggested list of known
//! differences, which this module writes to `target/tmp/differential/CASE.expected-differences`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's postgresql-15 package puts the server programs.
const POSTGRES_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// The OS user that runs PostgreSQL when the test runs as root.
const POSTGRES_OS_USER: &str = "postgres";
const SERVER_START_TIMEOUT_S: u64 = 60;
const POSTGRES_STOP_TIMEOUT_S: u64 = 10;
/// A whole case file; a statement that hangs Sluice ends the run here instead of hanging CI.
const RUNNER_TIMEOUT_S: u64 = 300;

#[test]
fn keys() {
    run_case("keys");
}

#[test]
fn transactions() {
    run_case("transactions");
}

#[test]
fn temporary() {
    run_case("temporary");
}

#[test]
fn values() {
    run_case("values");
}

#[test]
fn documents() {
    run_case("documents");
}

#[test]
fn functions() {
    run_case("functions");
}

#[test]
fn foreign_keys() {
    run_case("foreign_keys");
}

#[test]
fn comments() {
    run_case("comments");
}

#[test]
fn sequences() {
    run_case("sequences");
}

#[test]
fn whole_rows() {
    run_case("whole_rows");
}

#[test]
fn collations() {
    run_case("collations");
}

#[test]
fn time_types() {
    run_case("time_types");
}

#[test]
fn intervals() {
    run_case("intervals");
}

#[test]
fn enums() {
    run_case("enums");
}

#[test]
fn prepared() {
    run_case("prepared");
}

#[test]
fn subqueries() {
    run_case("subqueries");
}

#[test]
fn views() {
    run_case("views");
}

#[test]
fn cursors() {
    run_case("cursors");
}

#[test]
fn point_updates() {
    run_case("point_updates");
}

#[test]
fn point_queries() {
    run_case("point_queries");
}

fn run_case(case: &str) {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential");
    let postgres = Postgres::start();
    let sluice_dir = tempfile::tempdir().unwrap();
    let mut sluice = Sluice::start(&sluice_dir.path().join("data"));
    let python = std::env::var("SLUICE_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let report = std::env::var("DIFFERENTIAL_REPORT").is_ok_and(|v| v == "1");
    let runner = Command::new(&python)
        .arg(cases.join("run.py"))
        .args(["--postgres", &postgres.dsn(), "--sluice", &sluice.dsn()])
        .arg(cases.join(format!("{case}.sql")))
        .env("DIFFERENTIAL_REPORT", if report { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} (run ./scripts/test, which makes the venv): {e}"));
    let output = wait_with_deadline(runner, Duration::from_secs(RUNNER_TIMEOUT_S));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    if report && !stdout.is_empty() {
        let suggested = Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential");
        std::fs::create_dir_all(&suggested).unwrap();
        let suggested = suggested.join(format!("{case}.expected-differences"));
        std::fs::write(&suggested, stdout.as_bytes()).unwrap();
        eprintln!("suggested list written; to adopt it:\n  cp {} {}", suggested.display(), cases.display());
    }
    assert!(
        output.status.success(),
        "differential run of {case}.sql failed ({}); see the lines above{}",
        output.status,
        sluice.exit_note()
    );
}

/// Waits for `child`, killing it once `deadline` has passed; returns what it wrote.
fn wait_with_deadline(mut child: Child, deadline: Duration) -> std::process::Output {
    // Read the pipes on threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut bytes).map(|_| bytes)
    });
    let stderr = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut bytes).map(|_| bytes)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the differential runner took longer than {deadline:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::process::Output { status, stdout: stdout.join().unwrap().unwrap(), stderr: stderr.join().unwrap().unwrap() }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until `ready` says yes, failing with `what` (and the log) if `child` exits first or the
/// start takes too long.
fn wait_until_ready(child: &mut Child, what: &str, log: &Path, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{what} exited ({status}) before accepting connections:\n{}", read_log(log));
        }
        assert!(
            started.elapsed() < Duration::from_secs(SERVER_START_TIMEOUT_S),
            "{what} did not accept connections within {SERVER_START_TIMEOUT_S} s:\n{}",
            read_log(log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_else(|e| format!("(no log at {}: {e})", log.display()))
}

/// `sluice serve` on a fresh data directory, killed on drop.
struct Sluice {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Sluice {
    fn start(data: &Path) -> Sluice {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let log = data.with_extension("log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--data", data.to_str().unwrap(), "--listen", &listen])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut sluice = Sluice { child, port, log };
        let log = sluice.log.clone();
        wait_until_ready(&mut sluice.child, "sluice serve", &log, || std::net::TcpStream::connect(&listen).is_ok());
        sluice
    }

    fn dsn(&self) -> String {
        format!("host=127.0.0.1 port={} user=differential dbname=sluice sslmode=disable", self.port)
    }

    /// If the server died during the run, says so with its log: the mismatches then stem from that.
    fn exit_note(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                format!("\nsluice serve exited during the run ({status}); its log:\n{}", read_log(&self.log))
            }
            _ => String::new(),
        }
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A throwaway PostgreSQL 15 cluster: `initdb` into a temporary directory, `postgres` on a free
/// loopback port. Dropping it shuts the server down (immediate mode) and removes the directory.
struct Postgres {
    child: Child,
    port: u16,
    // Dropped after `child` is stopped (see `Drop`), which removes the cluster.
    _dir: tempfile::TempDir,
}

impl Postgres {
    fn start() -> Postgres {
        let bin = Path::new(POSTGRES_BIN_DIR);
        assert!(
            bin.join("postgres").exists() && bin.join("initdb").exists(),
            "PostgreSQL 15 is not installed ({POSTGRES_BIN_DIR}/postgres and initdb are missing); \
             the differential tests need it as the reference: run ./scripts/test, which installs \
             Debian's postgresql-15, or `apt-get install postgresql-15`"
        );
        let dir = tempfile::tempdir().unwrap();
        let owner = postgres_owner();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let log = dir.path().join("postgres.log");
        let initdb = as_owner(Command::new(bin.join("initdb")), owner, dir.path())
            .args(["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres", "--no-sync"])
            .output()
            .unwrap();
        assert!(
            initdb.status.success(),
            "initdb failed:\n{}\n{}",
            String::from_utf8_lossy(&initdb.stdout),
            String::from_utf8_lossy(&initdb.stderr)
        );
        let port = free_port();
        let log_file = std::fs::File::create(&log).unwrap();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&log, Some(uid), Some(gid)).unwrap();
        }
        let child = as_owner(Command::new(bin.join("postgres")), owner, dir.path())
            .args(["-D", data.to_str().unwrap(), "-k", dir.path().to_str().unwrap()])
            .args(["-c", "listen_addresses=127.0.0.1", "-p", &port.to_string(), "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut postgres = Postgres { child, port, _dir: dir };
        // The port opens before recovery ends; pg_isready says when sessions are accepted.
        let is_ready = bin.join("pg_isready");
        wait_until_ready(&mut postgres.child, "postgres", &log, || {
            Command::new(&is_ready)
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
                .status()
                .is_ok_and(|s| s.success())
        });
        postgres
    }

    fn dsn(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres sslmode=disable", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGQUIT is PostgreSQL's immediate shutdown: the postmaster stops its children too, which
        // a SIGKILL would leave running.
        let _ = Command::new("kill").args(["-QUIT", &self.child.id().to_string()]).status();
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if started.elapsed() > Duration::from_secs(POSTGRES_STOP_TIMEOUT_S) {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.wait();
    }
}

/// The uid and gid to run PostgreSQL as: the `postgres` OS user when this process is root (initdb
/// and postgres refuse to run as root), else none (run as ourselves).
fn postgres_owner() -> Option<(u32, u32)> {
    let id = |flag: &str, user: Option<&str>| -> Option<u32> {
        let output = Command::new("id").arg(flag).args(user).output().ok()?;
        String::from_utf8_lossy(&output.stdout).trim().parse().ok()
    };
    if id("-u", None) != Some(0) {
        return None;
    }
    let uid = id("-u", Some(POSTGRES_OS_USER));
    let gid = id("-g", Some(POSTGRES_OS_USER));
    match (uid, gid) {
        (Some(uid), Some(gid)) => Some((uid, gid)),
        _ => panic!("running as root, but there is no `{POSTGRES_OS_USER}` OS user to run PostgreSQL as"),
    }
}

/// `command` set to run as `owner` (the same as `setpriv`/`runuser` would, without a process in
/// between that a kill would miss), in `dir` so it never needs access to our working directory.
fn as_owner(mut command: Command, owner: Option<(u32, u32)>, dir: &Path) -> Command {
    if let Some((uid, gid)) = owner {
        // std drops the supplementary groups when a root process sets uid.
        command.uid(uid).gid(gid).env("HOME", dir).env_remove("PGDATA");
    }
    command.current_dir(dir);
    command
}
