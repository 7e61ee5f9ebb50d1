//! pgjdbc against `sluice serve`: tests/jdbc/JdbcTransactions.java (run by Java's source
//! launcher with Debian's libpostgresql-jdbc-java, which ./scripts/test installs) drives
//! transactions as a JDBC application does: setAutoCommit(false), rollback(), commit(),
//! savepoints, errors inside a transaction, read-only transactions and batches. The same program
//! passes against PostgreSQL 15.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::serve::serve;

const DRIVER: &str = "/usr/share/java/postgresql.jar";

#[test]
fn jdbc_transactions_commit_and_roll_back() {
    assert!(
        Path::new(DRIVER).exists(),
        "{DRIVER} is missing: run ./scripts/test, which installs libpostgresql-jdbc-java"
    );
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jdbc/JdbcTransactions.java");
    let output = Command::new("java")
        .args(["-cp", DRIVER])
        .arg(&program)
        .arg(server.port.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run java (a JDK is needed for the JDBC test): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("jdbc ok"), "{stdout}");
}
