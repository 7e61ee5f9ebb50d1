//! Temporary tables across sessions and restarts: each session sees only its own, they go with
//! the session (files too), and the warehouse's catalog never names them.

use std::time::Duration;

use sluice::Database;

use crate::common::{rows, wait_for};

/// Every file under `dir` whose path contains `part`.
fn files_containing(dir: &std::path::Path, part: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().contains(part) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[tokio::test]
async fn each_session_sees_its_own_temporary_tables_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warehouse");
    let path = path.to_str().unwrap();
    let db = Database::open(path).await.unwrap();
    let a = db.session();
    let b = db.session();
    a.execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('permanent')").await.unwrap();
    a.execute("CREATE TEMP TABLE t (v text); INSERT INTO t VALUES ('a''s')").await.unwrap();
    b.execute("CREATE TEMP TABLE t AS SELECT 'b''s' AS v").await.unwrap();
    assert_eq!(rows(&a.query("SELECT v FROM t").await.unwrap()), ["a's"]);
    assert_eq!(rows(&b.query("SELECT v FROM t").await.unwrap()), ["b's"]);
    assert_eq!(rows(&b.query("SELECT v FROM public.t").await.unwrap()), ["permanent"]);
    // Another session's temporary schema is out of reach, by any name.
    let schema = a.temporary_schema().to_string();
    let refused = b.query(&format!("SELECT * FROM {schema}.t")).await.unwrap_err();
    assert_eq!(refused.sqlstate(), "0A000", "{refused}");
    let refused = b.execute(&format!("INSERT INTO {schema}.t VALUES ('x')")).await.unwrap_err();
    assert_eq!(refused.sqlstate(), "0A000", "{refused}");
    // The Rust API's insert finds the session's temporary table first, as SQL does.
    let batch = a.query("SELECT 'inserted' AS v").await.unwrap();
    a.insert("t", batch).await.unwrap();
    assert_eq!(rows(&a.query("SELECT v FROM t").await.unwrap()), ["a's", "inserted"]);
    assert_eq!(rows(&a.query("SELECT v FROM public.t").await.unwrap()), ["permanent"]);

    // The warehouse's catalog files never name a temporary table.
    let catalog = dir.path().join("warehouse/_sluice/catalog");
    for file in std::fs::read_dir(&catalog).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!text.contains("pg_temp"), "a catalog version names a temporary schema:\n{text}");
    }
    assert!(!files_containing(dir.path(), "pg_temp").is_empty(), "the temporary tables' files are in the warehouse");

    // A session that ends takes its temporary tables, files and all.
    drop(a);
    let temporary = wait_for("the ended session's temporary tables to go", Duration::from_secs(10), || async {
        let left = db.session().query("SELECT v FROM t").await.map(|b| rows(&b));
        let files = files_containing(dir.path(), &schema);
        (left.as_deref().ok() == Some(&["permanent".to_string()][..]) && files.is_empty()).then_some(())
    })
    .await;
    assert_eq!(temporary, ());
    assert_eq!(rows(&b.query("SELECT v FROM t").await.unwrap()), ["b's"]);

    // Reopened (b's session gone with its process), the warehouse has only the permanent table.
    drop(b);
    drop(db);
    let db = Database::open(path).await.unwrap();
    let session = db.session();
    assert_eq!(rows(&session.query("SELECT v FROM t").await.unwrap()), ["permanent"]);
    let schemas =
        session.query("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'pg_temp%'");
    assert!(rows(&schemas.await.unwrap()).is_empty());
}

#[tokio::test]
async fn a_rollback_undoes_the_creation_of_temporary_tables_only() {
    let db = Database::open("memory://").await.unwrap();
    let session = db.session();
    session.execute("CREATE TABLE kept (a int)").await.unwrap();
    session
        .execute("BEGIN; CREATE TEMP TABLE gone (a int); INSERT INTO gone VALUES (1); INSERT INTO kept VALUES (1)")
        .await
        .unwrap();
    assert_eq!(rows(&session.query("SELECT count(*) FROM gone").await.unwrap()), ["1"]);
    session.execute("ROLLBACK").await.unwrap();
    let missing = session.query("SELECT * FROM gone").await.unwrap_err();
    assert_eq!(missing.sqlstate(), "42P01", "{missing}");
    assert_eq!(rows(&session.query("SELECT count(*) FROM kept").await.unwrap()), ["0"]);
}
