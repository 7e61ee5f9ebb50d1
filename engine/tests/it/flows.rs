//! Streaming flows end to end: exactly once across SIGKILLs, restarts that resume without
//! replaying, a failing route that is fixed and resumed, async flows, and REFRESH ... FULL.
//!
//! The crash child is this test binary (`--ignored --exact flows::child`), inserting into bronze
//! and printing `ok <n>` after insert n returns.

use std::time::{Duration, Instant};

use rand::Rng;
use sluice::Database;

use crate::common::rows;

const PIPELINE: &str = "
CREATE STREAMING TABLE bronze (id bigint NOT NULL, topic text NOT NULL, payload text)
PUSH INTO silver_orders AS
  SELECT id, CAST(payload->>'amount' AS BIGINT) AS amount FROM bronze WHERE topic = 'orders'
PUSH INTO silver_payments AS
  SELECT id, CAST(payload->>'paid' AS BIGINT) AS paid FROM bronze WHERE topic = 'payments'
PUSH INTO silver_clicks WHERE topic = 'clicks';
CREATE STREAMING TABLE gold AS
  SELECT id, amount AS value FROM STREAM(silver_orders)
  UNION ALL SELECT id, paid AS value FROM STREAM(silver_payments);
";

/// Insert `n` of the writer: one row per topic.
fn insert(n: u64) -> String {
    format!(
        "INSERT INTO bronze VALUES ({}, 'orders', '{{\"amount\": {n}}}'), ({}, 'payments', '{{\"paid\": {n}}}'), ({}, 'clicks', '{{}}')",
        3 * n,
        3 * n + 1,
        3 * n + 2
    )
}

/// The history of a table: (version, operation) per commit.
async fn history(db: &Database, table: &str) -> Vec<(u64, String)> {
    let batches = db.query(&format!("DESCRIBE HISTORY {table}")).await.unwrap();
    rows(&batches)
        .iter()
        .map(|r| {
            let parts: Vec<&str> = r.split('|').collect();
            (parts[0].parse().unwrap(), parts[2].to_string())
        })
        .collect()
}

async fn ids(db: &Database, sql: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = rows(&db.query(sql).await.unwrap()).iter().map(|r| r.parse().unwrap()).collect();
    ids.sort_unstable();
    ids
}

/// Every silver and gold table holds each bronze row's output exactly once.
async fn assert_exactly_once(db: &Database) {
    let orders = ids(db, "SELECT id FROM bronze WHERE topic = 'orders'").await;
    let payments = ids(db, "SELECT id FROM bronze WHERE topic = 'payments'").await;
    let clicks = ids(db, "SELECT id FROM bronze WHERE topic = 'clicks'").await;
    assert_eq!(ids(db, "SELECT id FROM silver_orders").await, orders);
    assert_eq!(ids(db, "SELECT id FROM silver_payments").await, payments);
    assert_eq!(ids(db, "SELECT id FROM silver_clicks").await, clicks);
    let mut gold = orders.clone();
    gold.extend(&payments);
    gold.sort_unstable();
    assert_eq!(ids(db, "SELECT id FROM gold").await, gold);
    // Values are the typed payloads.
    let wrong = rows(&db.query("SELECT count(*) FROM silver_orders WHERE amount * 3 <> id").await.unwrap());
    assert_eq!(wrong, ["0"]);
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var("SLUICE_FLOW_WAREHOUSE") else { return };
    let start: u64 = std::env::var("SLUICE_FLOW_START").unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        for n in start.. {
            db.execute(&insert(n)).await.unwrap_or_else(|e| panic!("insert {n}: {e}"));
            println!("ok {n}");
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_is_exactly_once_across_kills() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute(PIPELINE).await.unwrap();
    let mut next = 0u64;
    let mut rng = crate::common::rng_from(crate::common::seed("flows"));
    let kills = 30;
    for round in 0..kills {
        let child = crate::common::ChildTest::spawn(
            "flows::child",
            &[("SLUICE_FLOW_WAREHOUSE", path.clone()), ("SLUICE_FLOW_START", next.to_string())],
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(200..700)));
        let acknowledged = crate::common::last_ok(&child.kill()).map_or(next, |n| n + 1);
        let db = Database::open(&path).await.unwrap();
        crate::common::caught_up(&db).await;
        let bronze = ids(&db, "SELECT id FROM bronze").await;
        // Acknowledged inserts are all there; the one in flight may be.
        let expected: Vec<u64> = (0..3 * acknowledged).collect();
        let with_in_flight: Vec<u64> = (0..3 * (acknowledged + 1)).collect();
        assert!(bronze == expected || bronze == with_in_flight, "round {round}: bronze holds {} rows", bronze.len());
        assert_exactly_once(&db).await;
        next = bronze.len() as u64 / 3;
        drop(db);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(next > kills, "inserts ran between the kills ({next})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resumes_without_replaying() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let runs_before = {
        let db = Database::open(&path).await.unwrap();
        db.execute(PIPELINE).await.unwrap();
        for n in 0..3 {
            db.execute(&insert(n)).await.unwrap();
        }
        let runs = rows(&db.query("SELECT count(*) FROM sluice.events WHERE kind = 'run'").await.unwrap());
        assert_ne!(runs, ["0"]);
        runs
    };
    let db = Database::open(&path).await.unwrap();
    crate::common::caught_up(&db).await;
    // Nothing was applied again: the event log (which survives the restart) has no run after
    // it, and the progress in each target's log is the source's version.
    let runs = rows(&db.query("SELECT count(*) FROM sluice.events WHERE kind = 'run'").await.unwrap());
    assert_eq!(runs, runs_before);
    let bronze_version = vec![history(&db, "bronze").await.iter().map(|(v, _)| *v).max().unwrap().to_string()];
    let applied = rows(
        &db.query("SELECT last_source_version FROM sluice.flows WHERE name = 'bronze_to_silver_orders'").await.unwrap(),
    );
    assert_eq!(applied, bronze_version);
    let commits = history(&db, "silver_orders").await.len();
    db.execute(&insert(3)).await.unwrap();
    assert_exactly_once(&db).await;
    assert_eq!(history(&db, "silver_orders").await.len(), commits + 1);
    // The one run after the restart (the log keeps those from before it too).
    let next = bronze_version[0].parse::<u64>().unwrap() + 1;
    let run = rows(
        &db.query(&format!(
            "SELECT source_from, source_to, rows_in, rows_out FROM sluice.events \
             WHERE flow = 'bronze_to_silver_orders' AND kind = 'run' AND source_to >= {next}"
        ))
        .await
        .unwrap(),
    );
    assert_eq!(run, [format!("{next}|{next}|3|1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_route_is_recorded_then_fixed_and_resumed() {
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE bronze (id bigint, payload text)
         PUSH INTO silver AS SELECT id, CAST(payload AS BIGINT) AS n FROM bronze",
    )
    .await
    .unwrap();
    db.execute("INSERT INTO bronze VALUES (1, '10')").await.unwrap();
    // The bad cast fails the route, not the insert: bronze keeps its rows.
    db.execute("INSERT INTO bronze VALUES (2, 'twenty'), (3, '30')").await.unwrap();
    assert_eq!(ids(&db, "SELECT id FROM bronze").await, [1, 2, 3]);
    assert_eq!(ids(&db, "SELECT id FROM silver").await, [1]);
    let state = rows(&db.query("SELECT state, error FROM sluice.flows").await.unwrap());
    assert!(state[0].starts_with("failed|") && state[0].contains("twenty"), "{state:?}");
    let failures = rows(&db.query("SELECT count(*) FROM sluice.events WHERE kind = 'failure'").await.unwrap());
    assert_ne!(failures, ["0"]);
    // More rows arrive while the flow is failed; none is lost.
    db.execute("INSERT INTO bronze VALUES (4, '40')").await.unwrap();
    db.execute(
        "CREATE OR REPLACE STREAMING TABLE bronze (id bigint, payload text)
         PUSH INTO silver AS SELECT id, TRY_CAST(payload AS BIGINT) AS n FROM bronze",
    )
    .await
    .unwrap();
    db.execute("ALTER FLOW bronze_to_silver RESUME").await.unwrap();
    assert_eq!(ids(&db, "SELECT id FROM silver").await, [1, 2, 3, 4]);
    let nulls = rows(&db.query("SELECT id FROM silver WHERE n IS NULL").await.unwrap());
    assert_eq!(nulls, ["2"]);
    let state = rows(&db.query("SELECT state, error FROM sluice.flows").await.unwrap());
    assert_eq!(state, ["idle|NULL"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_flows_catch_up_in_the_background() {
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE bronze (id bigint) WITH (mode = 'async')
         PUSH INTO silver AS SELECT id FROM bronze WHERE id % 2 = 0",
    )
    .await
    .unwrap();
    for i in 0..20 {
        db.execute(&format!("INSERT INTO bronze VALUES ({i})")).await.unwrap();
    }
    crate::common::caught_up(&db).await;
    assert_eq!(ids(&db, "SELECT id FROM silver").await, (0..20).filter(|i| i % 2 == 0).collect::<Vec<_>>());
    // Many source commits went into fewer target commits.
    let commits = history(&db, "silver").await.iter().filter(|(_, op)| op == "WRITE").count();
    assert!(commits < 10, "{commits} commits for 10 rows");
    let mode = rows(&db.query("SELECT mode FROM sluice.flows").await.unwrap());
    assert_eq!(mode, ["async"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_full_replays_the_source() {
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE bronze (id bigint);
         CREATE STREAMING TABLE silver AS SELECT id * 10 AS v FROM STREAM(bronze);
         INSERT INTO bronze VALUES (1), (2);
         INSERT INTO bronze VALUES (3);",
    )
    .await
    .unwrap();
    db.execute("DELETE FROM silver WHERE v = 20").await.unwrap();
    assert_eq!(ids(&db, "SELECT v FROM silver").await, [10, 30]);
    db.execute("REFRESH STREAMING TABLE silver").await.unwrap();
    assert_eq!(ids(&db, "SELECT v FROM silver").await, [10, 30]);
    db.execute("REFRESH STREAMING TABLE silver FULL").await.unwrap();
    assert_eq!(ids(&db, "SELECT v FROM silver").await, [10, 20, 30]);
    db.execute("INSERT INTO bronze VALUES (4)").await.unwrap();
    assert_eq!(ids(&db, "SELECT v FROM silver").await, [10, 20, 30, 40]);
    let plan = rows(&db.query("EXPLAIN FLOW silver").await.unwrap());
    assert!(plan[0].starts_with("flow|flow silver: public.bronze -> public.silver (pull, sync)"), "{plan:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_files_of_streaming_tables_are_compacted() {
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE STREAMING TABLE bronze (id bigint) PUSH INTO silver WHERE id % 2 = 0").await.unwrap();
    for i in 0..300 {
        db.execute(&format!("INSERT INTO bronze VALUES ({i})")).await.unwrap();
    }
    let started = Instant::now();
    loop {
        let bronze = db
            .inner()
            .warehouse
            .open_table(db.inner().warehouse.catalog.current().table("public", "bronze").unwrap())
            .await
            .unwrap();
        let silver = db
            .inner()
            .warehouse
            .open_table(db.inner().warehouse.catalog.current().table("public", "silver").unwrap())
            .await
            .unwrap();
        let files = (bronze.snapshot().await.unwrap().file_count(), silver.snapshot().await.unwrap().file_count());
        if files.0 < sluice::flow::compaction::SMALL_FILES_MAX && files.1 < sluice::flow::compaction::SMALL_FILES_MAX {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "files were not compacted: {files:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ids(&db, "SELECT id FROM bronze").await, (0..300).collect::<Vec<_>>());
    assert_eq!(ids(&db, "SELECT id FROM silver").await, (0..300).filter(|i| i % 2 == 0).collect::<Vec<_>>());
    // Compaction does not feed flows again.
    db.execute("INSERT INTO bronze VALUES (1000)").await.unwrap();
    assert_eq!(ids(&db, "SELECT count(*) FROM silver").await, [151]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_and_deletes_on_a_source_are_not_appended_downstream() {
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE b (id bigint, v text);
         CREATE STREAMING TABLE s AS SELECT id FROM STREAM(b);
         INSERT INTO b VALUES (1, 'a'), (2, 'b');
         UPDATE b SET v = 'z' WHERE id = 1;
         DELETE FROM b WHERE id = 2;
         MERGE INTO b USING (SELECT 4 AS id) src ON b.id = src.id WHEN NOT MATCHED THEN INSERT VALUES (src.id, 'm');
         INSERT INTO b VALUES (3, 'c');",
    )
    .await
    .unwrap();
    assert_eq!(ids(&db, "SELECT id FROM s").await, [1, 2, 3, 4]);
}
