//! node-postgres (npm `pg`, pinned by tests/node/package-lock.json; ./scripts/test installs it
//! with `npm ci`) against `sluice serve`: tests/node/clients.js drives it as a Node application
//! does: `$n` parameters of every everyday type (numbers, BigInt, strings, Buffers, Dates, objects
//! for json/jsonb, arrays), values read back through its default type parsers (so the type OIDs
//! in RowDescription decide what JavaScript gets), `= ANY($1)` with int, text and uuid arrays,
//! jsonb operators with parameters, a named prepared statement, transactions, SQLSTATEs in
//! `err.code` and a Pool. The same script passes against PostgreSQL 15; the checks Sluice still
//! answers differently are named in its KNOWN_SLUICE_DIFFERENCES, printed when skipped.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::serve::serve;

#[test]
fn node_postgres_parameters_types_and_errors() {
    let node_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node");
    assert!(
        node_dir.join("node_modules/pg").exists(),
        "{} is missing node-postgres: run ./scripts/test, which installs it (npm ci)",
        node_dir.join("node_modules").display()
    );
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let output = Command::new("node")
        .arg(node_dir.join("clients.js"))
        .arg(server.port.to_string())
        // The script's connection comes from its arguments and defaults, not from the environment.
        .env_remove("PGHOST")
        .env_remove("PGUSER")
        .env_remove("PGDATABASE")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run node (Node.js is needed for the node-postgres test): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("node ok"), "{stdout}");
}
