//! pgjdbc against `sluice serve`, with Debian's libpostgresql-jdbc-java (which ./scripts/test
//! installs), each program run by Java's source launcher. Both programs pass against
//! PostgreSQL 15 unchanged.
//!
//! - tests/jdbc/JdbcTransactions.java drives transactions as a JDBC application does:
//!   setAutoCommit(false), rollback(), commit(), savepoints, errors inside a transaction,
//!   read-only transactions and batches.
//! - tests/jdbc/JdbcMetadata.java reads the catalog as DBeaver and Metabase do: every
//!   DatabaseMetaData call they make, a query's ResultSetMetaData, uuid and jsonb parameters,
//!   and Metabase's own sync queries, each checked against PostgreSQL 15's answer (the ones
//!   Sluice answers otherwise are listed in the program, with why).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::serve::serve;

const DRIVER: &str = "/usr/share/java/postgresql.jar";

/// Runs tests/jdbc/<program> with `args`; its standard output, once it exited successfully.
fn run_java(program: &str, args: &[&str]) -> String {
    assert!(
        Path::new(DRIVER).exists(),
        "{DRIVER} is missing: run ./scripts/test, which installs libpostgresql-jdbc-java"
    );
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jdbc").join(program);
    let output = Command::new("java")
        .args(["-cp", DRIVER])
        .arg(&program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run java (a JDK is needed for the JDBC tests): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn jdbc_transactions_commit_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let stdout = run_java("JdbcTransactions.java", &[&server.port.to_string()]);
    assert!(stdout.contains("jdbc ok"), "{stdout}");
}

#[test]
fn jdbc_metadata_answers_as_postgres_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let port = server.port.to_string();
    let stdout = run_java("JdbcMetadata.java", &["127.0.0.1", &port, "sluice", "sluice", "unused"]);
    assert!(stdout.contains("jdbc metadata ok"), "{stdout}");
}
