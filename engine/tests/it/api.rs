//! The in-process API: open, execute, query, insert, prepared statements, several handles and
//! concurrent queries.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use sluice::{Database, Error, StatementResult};

use crate::common::rows;

#[tokio::test]
async fn execute_query_and_insert() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    let results =
        db.execute("CREATE TABLE t (id bigint NOT NULL, name text); INSERT INTO t VALUES (1, 'a')").await.unwrap();
    assert!(matches!(&results[1], StatementResult::Command { tag, rows: Some(1) } if tag == "INSERT 0 1"));
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("name", DataType::Utf8, true), Field::new("id", DataType::Int64, false)])),
        vec![Arc::new(StringArray::from(vec!["b", "c"])), Arc::new(Int64Array::from(vec![2, 3]))],
    )
    .unwrap();
    assert_eq!(db.insert("t", vec![batch]).await.unwrap(), 2);
    assert_eq!(rows(&db.query("SELECT id, name FROM t").await.unwrap()), ["1|a", "2|b", "3|c"]);
    let err = db.insert("nope", vec![]).await.unwrap_err();
    assert_eq!(err.sqlstate(), "42P01");
}

#[tokio::test]
async fn prepared_statements_take_parameters() {
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE TABLE p (id bigint, name text, day date)").await.unwrap();
    let insert = db.prepare("INSERT INTO p VALUES ($1, $2, $3)").await.unwrap();
    let session = db.session();
    for i in 0..3 {
        let params = [
            ScalarValue::Int64(Some(i)),
            ScalarValue::Utf8(Some(format!("n{i}"))),
            ScalarValue::Date32(Some(19_000 + i as i32)),
        ];
        session.execute_prepared(&insert, &params).await.unwrap();
    }
    let select = db.prepare("SELECT name FROM p WHERE id > $1 AND day <= $2").await.unwrap();
    assert_eq!(select.parameter_types, vec![Some(DataType::Int64), Some(DataType::Date32)]);
    assert_eq!(select.result_schema.as_ref().unwrap().field(0).name(), "name");
    let result = session
        .execute_prepared(&select, &[ScalarValue::Int64(Some(0)), ScalarValue::Date32(Some(19_001))])
        .await
        .unwrap();
    assert_eq!(rows(result.batches()), ["n1"]);
    // A missing parameter is an error, not a panic.
    assert!(session.execute_prepared(&select, &[ScalarValue::Int64(Some(0))]).await.is_err());
}

#[tokio::test]
async fn several_handles_and_concurrent_queries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let a = Database::open(&path).await.unwrap();
    let b = Database::open(&path).await.unwrap();
    a.execute("CREATE TABLE shared (n bigint)").await.unwrap();
    b.execute("INSERT INTO shared SELECT value FROM generate_series(1, 100) AS g(value)").await.unwrap();
    assert_eq!(rows(&a.query("SELECT count(*) FROM shared").await.unwrap()), ["100"]);
    // Both handles create tables at once: the catalog keeps both.
    let (x, y) = tokio::join!(a.execute("CREATE TABLE from_a (x int)"), b.execute("CREATE TABLE from_b (y int)"));
    x.unwrap();
    y.unwrap();
    assert_eq!(
        rows(
            &b.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
                .await
                .unwrap()
        ),
        ["from_a", "from_b", "shared"]
    );
    // Concurrent writers and readers on one handle.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let db = a.clone();
        tasks.push(tokio::spawn(async move {
            db.execute(&format!("INSERT INTO shared VALUES ({})", 1000 + i)).await.unwrap();
            db.query("SELECT sum(n) FROM shared").await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(rows(&b.query("SELECT count(*) FROM shared").await.unwrap()), ["108"]);
}

#[tokio::test]
async fn reopening_keeps_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    {
        let db = Database::open(&path).await.unwrap();
        db.execute("CREATE SCHEMA s; CREATE TABLE s.t (a int, b text) PARTITIONED BY (a); INSERT INTO s.t VALUES (1, 'x'), (2, 'y')")
            .await
            .unwrap();
    }
    let db = Database::open(&path).await.unwrap();
    assert_eq!(rows(&db.query("SELECT a FROM s.t").await.unwrap()), ["1", "2"]);
    let err = db.execute("CREATE TABLE only_partitions (a int) PARTITIONED BY (a)").await.unwrap_err();
    assert!(err.to_string().contains("all columns as partition columns"), "{err}");
    let err = db.execute("CREATE TABLE only_partitions (a int) PARTITIONED BY (a)").await.unwrap_err();
    assert!(err.to_string().contains("all columns as partition columns"), "{err}");
}

#[tokio::test]
async fn memory_databases_share_by_name() {
    let a = Database::open("memory://shared-name").await.unwrap();
    a.execute("CREATE TABLE m (a int); INSERT INTO m VALUES (7)").await.unwrap();
    let b = Database::open("memory://shared-name").await.unwrap();
    assert_eq!(rows(&b.query("SELECT a FROM m").await.unwrap()), ["7"]);
    let fresh = Database::open("memory://").await.unwrap();
    assert!(matches!(fresh.query("SELECT a FROM m").await, Err(Error::UndefinedTable(_))));
}

/// Dropping the last handle frees the warehouse's shared state, though flows ran and a view was
/// loaded (their runtimes hold sessions), and the background worker, which holds it weakly, stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_frees_the_warehouse() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE bronze (id bigint NOT NULL, topic text NOT NULL) \
         PUSH INTO silver WHERE topic = 'a'; \
         CREATE STREAMING TABLE gold AS SELECT id FROM STREAM(silver); \
         CREATE MATERIALIZED VIEW per_topic AS SELECT topic, count(*) AS n FROM bronze GROUP BY topic; \
         INSERT INTO bronze VALUES (1, 'a'), (2, 'b')",
    )
    .await
    .unwrap();
    assert_eq!(rows(&db.query("SELECT id FROM gold").await.unwrap()), vec!["1"]);
    assert_eq!(rows(&db.query("SELECT topic, n FROM per_topic").await.unwrap()), vec!["a|1", "b|1"]);
    // The runtimes (which the worker holds weakly), and the warehouse under them.
    let runtimes = Arc::downgrade(db.inner());
    let warehouse = Arc::downgrade(&db.inner().warehouse);
    let copy = db.clone();
    drop(db);
    assert!(runtimes.upgrade().is_some(), "a handle is left");
    drop(copy);
    crate::common::wait_for(
        "the runtimes and the warehouse to be freed",
        std::time::Duration::from_secs(10),
        || async { (runtimes.upgrade().is_none() && warehouse.upgrade().is_none()).then_some(()) },
    )
    .await;
    // The files stay, and a new handle sees everything.
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(rows(&db.query("SELECT id FROM gold").await.unwrap()), vec!["1"]);
    assert_eq!(rows(&db.query("SELECT topic, n FROM per_topic").await.unwrap()), vec!["a|1", "b|1"]);
}

/// A relation that does not exist is 42P01, found in the catalog (not in DataFusion's message);
/// CTE names and table functions are not mistaken for missing tables.
#[tokio::test]
async fn missing_relations_are_named_and_ctes_are_not_missing() {
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE SCHEMA s; CREATE TABLE s.t (a int)").await.unwrap();
    for (sql, missing) in [
        ("SELECT * FROM missing", "missing"),
        ("SELECT * FROM public.missing", "missing"),
        ("SELECT * FROM s.nope", "s.nope"),
        ("SELECT * FROM generate_series(1, 3) g JOIN nope ON true", "nope"),
        ("WITH a AS (SELECT 1 AS x) SELECT * FROM a JOIN gone ON true", "gone"),
    ] {
        match db.query(sql).await {
            Err(Error::UndefinedTable(name)) => assert_eq!(name, missing, "{sql}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    let cte = db.query("WITH a AS (SELECT 1 AS x) SELECT y FROM a").await.unwrap_err();
    assert_eq!(cte.sqlstate(), "42703", "{cte}");
    assert_eq!(rows(&db.query("WITH a AS (SELECT 1 AS x) SELECT x FROM a").await.unwrap()), vec!["1"]);
}

/// A data file the log references but the store lost is 58P01 (undefined_file), naming the file.
#[tokio::test]
async fn a_lost_data_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE t (a int); INSERT INTO t VALUES (1), (2)").await.unwrap();
    let mut lost = None;
    let mut folders = vec![dir.path().to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") && !path.to_string_lossy().contains("_delta_log")
            {
                lost = Some(path);
            }
        }
    }
    let lost = lost.expect("a data file");
    // Opened anew, as after a clean stop (the journal emptied, or its replay would put the file
    // back): the process that wrote the file keeps its bytes for a while (see
    // sluice_storage::recent), and would read them from memory.
    db.checkpoint_journal().await.unwrap();
    drop(db);
    std::fs::remove_file(&lost).unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    let err = db.query("SELECT * FROM t").await.unwrap_err();
    assert_eq!(err.sqlstate(), "58P01", "{err}");
    let name = lost.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.to_string().contains(&name), "{err}");
}

/// `DROP ... IF EXISTS` of an object that is not there gives PostgreSQL's NOTICE (SQLSTATE 00000,
/// the same text), and nothing for one that is.
#[tokio::test]
async fn drop_if_exists_of_nothing_gives_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    let session = db.session();
    session.execute("CREATE TABLE here (a int)").await.unwrap();
    for (sql, message) in [
        ("DROP TABLE IF EXISTS nope", "table \"nope\" does not exist, skipping"),
        ("DROP VIEW IF EXISTS nope", "view \"nope\" does not exist, skipping"),
        ("DROP MATERIALIZED VIEW IF EXISTS nope", "materialized view \"nope\" does not exist, skipping"),
        ("DROP SCHEMA IF EXISTS nope", "schema \"nope\" does not exist, skipping"),
        ("DROP SEQUENCE IF EXISTS nope", "sequence \"nope\" does not exist, skipping"),
        ("DROP INDEX IF EXISTS nope", "index \"nope\" does not exist, skipping"),
        ("DROP SUBSCRIPTION IF EXISTS nope", "subscription \"nope\" does not exist, skipping"),
        ("DROP SOURCE IF EXISTS nope", "source \"nope\" does not exist, skipping"),
        ("DROP FLOW IF EXISTS nope", "flow \"nope\" does not exist, skipping"),
    ] {
        session.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let notices = session.take_warnings();
        assert_eq!(notices.len(), 1, "{sql}: {notices:?}");
        assert_eq!((notices[0].severity, notices[0].sqlstate), ("NOTICE", "00000"), "{sql}");
        assert_eq!(notices[0].message, message, "{sql}");
    }
    session.execute("DROP TABLE IF EXISTS here").await.unwrap();
    assert!(session.take_warnings().is_empty());
}
