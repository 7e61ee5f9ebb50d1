//! The durable event log: `sluice.events` survives restarts, names DDL with its role, keeps no
//! password, is a Delta table that delta-rs reads, and forgets events past its retention.

use std::time::Duration;

use sluice::{Database, DatabaseOptions};

use crate::common::{rows, run_python};

async fn one(db: &Database, sql: &str) -> Vec<String> {
    rows(&db.query(sql).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_survive_a_restart_and_delta_rs_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let before = {
        let db = Database::open(&path).await.unwrap();
        db.execute(
            "CREATE TABLE orders (id bigint, amount double precision);
             CREATE STREAMING TABLE readings (id bigint, amount double precision,
                CONSTRAINT positive EXPECT (amount > 0));
             INSERT INTO readings VALUES (1, -1), (2, 3);
             CREATE STREAMING TABLE bronze (id bigint, amount double precision)
                PUSH INTO silver AS SELECT id, amount FROM bronze WHERE amount > 10;
             INSERT INTO bronze VALUES (1, 5), (2, 50);
             CREATE ROLE analyst LOGIN PASSWORD 'do-not-log-me';",
        )
        .await
        .unwrap();
        let events =
            one(&db, "SELECT kind, flow, rows_in, rows_out FROM sluice.events WHERE kind IN ('run', 'ddl')").await;
        assert!(events.iter().any(|e| e.starts_with("run|bronze_to_silver|2|1")), "{events:?}");
        assert!(events.iter().any(|e| e.starts_with("ddl|orders|")), "{events:?}");
        // The expectation's pass rate: 2 rows checked, 1 violated.
        assert_eq!(one(&db, "SELECT violations, rows_checked, passed FROM sluice.expectations").await, ["1|2|1"]);
        one(&db, "SELECT count(*) FROM sluice.events").await
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let db = Database::open(&path).await.unwrap();
    // Everything from before the restart is there (and the reopen added nothing of its own yet).
    let after = one(&db, "SELECT count(*) FROM sluice.events").await;
    assert_eq!(after, before);
    let ddl = one(&db, "SELECT message FROM sluice.events WHERE kind = 'ddl' ORDER BY at").await;
    assert!(ddl.iter().any(|m| m == "CREATE TABLE orders"), "{ddl:?}");
    assert!(ddl.iter().any(|m| m == "CREATE ROLE analyst"), "{ddl:?}");
    assert!(!ddl.iter().any(|m| m.contains("do-not-log-me")), "a password reached the event log: {ddl:?}");
    assert!(ddl.iter().all(|m| !m.is_empty()));
    drop(db);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The log is a Delta table other engines read.
    let log = dir.path().join("_sluice/event_log");
    let out = run_python(
        "import sys, deltalake\n\
         t = deltalake.DeltaTable(sys.argv[1]).to_pyarrow_table()\n\
         kinds = t.column('kind').to_pylist()\n\
         print(t.num_rows, kinds.count('ddl'), kinds.count('run'))",
        &[log.to_str().unwrap()],
    );
    let counts: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert_eq!(counts.first().map(|n| n.to_string()), before.first().cloned());
    assert!(counts.get(1).is_some_and(|&n| n >= 3), "delta-rs read {out}");
    assert!(counts.get(2).is_some_and(|&n| n >= 1), "delta-rs read {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_past_the_retention_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let options = DatabaseOptions { event_retention_ms: 5_000, ..Default::default() };
    {
        let db = Database::open_with(&path, options.clone()).await.unwrap();
        db.execute("CREATE TABLE old_one (id bigint)").await.unwrap();
        assert_eq!(one(&db, "SELECT count(*) FROM sluice.events WHERE flow = 'old_one'").await, ["1"]);
    }
    tokio::time::sleep(Duration::from_millis(6_000)).await;
    // A new process deletes what is past the retention with its first write of the log.
    let db = Database::open_with(&path, options).await.unwrap();
    db.execute("CREATE TABLE new_one (id bigint)").await.unwrap();
    assert_eq!(one(&db, "SELECT flow FROM sluice.events WHERE kind = 'ddl' ORDER BY at").await, ["new_one"]);
}
