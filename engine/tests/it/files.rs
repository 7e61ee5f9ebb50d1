//! File sources end to end: CSV, JSON-lines and Parquet files landing in nested folders while a
//! process ingests them and is killed at random, schema evolution, `_rescued_data`, `_metadata`,
//! Hive partitions, dead letters, `read_files` against the table, and bad input.
//!
//! The crash child is this test binary (`--ignored --exact files::child`): it opens the warehouse
//! and lets the ingest tasks run until it is killed.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::Rng;
use sluice::Database;

use crate::common::rows;

const FORMATS: [&str; 3] = ["csv", "json", "parquet"];
const ROWS_PER_FILE: u64 = 10;

async fn one(db: &Database, sql: &str) -> String {
    rows(&db.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))).join(",")
}

/// Writes a file the way a landing job should: under a hidden name, then renamed.
fn land(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let hidden = path.with_file_name(format!(".{}.tmp", path.file_name().unwrap().to_string_lossy()));
    std::fs::write(&hidden, bytes).unwrap();
    std::fs::rename(&hidden, path).unwrap();
}

fn parquet_bytes(batch: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    out
}

/// What file `k` holds: its format, relative path, and the good and bad lines it has.
struct Plan {
    format: &'static str,
    relative: String,
    /// (id, line) of its good rows.
    good: Vec<(u64, i64)>,
    /// Lines of its bad rows (None: the whole file is bad).
    bad: Vec<Option<i64>>,
}

/// File `k` of 1,000: a third each CSV, JSON lines and Parquet, in `region=r<k%4>/batch<k/100>/`;
/// files from 500 on have a new column `coupon`; every tenth CSV and JSON file has a bad row
/// (line 5); file 997 is empty, file 998 a truncated Parquet file.
fn plan(k: u64) -> Plan {
    let format = FORMATS[(k % 3) as usize];
    let relative = format!("region=r{}/batch{}/file{k:04}.{format}", k % 4, k / 100);
    let mut good = Vec::new();
    let mut bad = Vec::new();
    if k == 997 {
        return Plan { format, relative, good, bad };
    }
    if k == 998 {
        bad.push(None);
        return Plan { format, relative, good, bad };
    }
    let broken = format != "parquet" && k % 10 < 3;
    let mut line = if format == "csv" { 2 } else { 1 };
    for i in 0..ROWS_PER_FILE {
        if broken && i == 3 {
            bad.push(Some(line));
            line += 1;
        }
        good.push((k * 1000 + i, line));
        line += 1;
    }
    Plan { format, relative, good, bad }
}

fn file_bytes(k: u64) -> Vec<u8> {
    let plan = plan(k);
    if k == 997 {
        return Vec::new();
    }
    let drift = k >= 500;
    let ids: Vec<u64> = plan.good.iter().map(|(id, _)| *id).collect();
    match plan.format {
        "csv" => {
            let mut text = if drift { "id,name,amount,coupon\n".to_string() } else { "id,name,amount\n".to_string() };
            for (n, id) in ids.iter().enumerate() {
                if !plan.bad.is_empty() && n == 3 {
                    text.push_str("999999,only two fields\n");
                }
                if drift {
                    text.push_str(&format!("{id},\"n,{id}\",{}.5,SAVE{}\n", id % 100, id % 7));
                } else {
                    text.push_str(&format!("{id},\"n,{id}\",{}.5\n", id % 100));
                }
            }
            text.into_bytes()
        }
        "json" => {
            let mut text = String::new();
            for (n, id) in ids.iter().enumerate() {
                if !plan.bad.is_empty() && n == 3 {
                    text.push_str("{\"id\": 999999, \"name\": \n");
                }
                let coupon = if drift { format!(", \"coupon\": \"SAVE{}\"", id % 7) } else { String::new() };
                text.push_str(&format!("{{\"id\": {id}, \"name\": \"n,{id}\", \"amount\": {}.5{coupon}}}\n", id % 100));
            }
            text.into_bytes()
        }
        _ => {
            let mut fields = vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
                Field::new("amount", DataType::Float64, true),
            ];
            let mut columns: Vec<arrow::array::ArrayRef> = vec![
                Arc::new(Int64Array::from(ids.iter().map(|i| *i as i64).collect::<Vec<_>>())),
                Arc::new(StringArray::from(ids.iter().map(|i| format!("n,{i}")).collect::<Vec<_>>())),
                Arc::new(Float64Array::from(ids.iter().map(|i| (i % 100) as f64 + 0.5).collect::<Vec<_>>())),
            ];
            if drift {
                fields.push(Field::new("coupon", DataType::Utf8, true));
                columns.push(Arc::new(StringArray::from(
                    ids.iter().map(|i| format!("SAVE{}", i % 7)).collect::<Vec<_>>(),
                )));
            }
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
            let bytes = parquet_bytes(&batch);
            if k == 998 {
                bytes[..bytes.len() / 2].to_vec()
            } else {
                bytes
            }
        }
    }
}

fn pipeline() -> String {
    let mut sql = String::new();
    for format in FORMATS {
        sql.push_str(&format!(
            "CREATE SOURCE landing_{format} FROM FILES (path 'landing', format '{format}', pattern '*.{format}', \
             header 'true', batch_files '2', interval_ms '100');
             CREATE STREAMING TABLE bronze_{format} FROM SOURCE landing_{format};"
        ));
    }
    sql
}

/// Every good row of the files landed so far is in its bronze table once (by file and line),
/// with its id, and every bad row or file is in the dead-letter table once.
async fn assert_exactly_once(db: &Database, landed: u64) {
    for format in FORMATS {
        let plans: Vec<Plan> = (0..landed).map(plan).filter(|p| p.format == format).collect();
        let good: Vec<&(u64, i64)> = plans.iter().flat_map(|p| p.good.iter()).collect();
        let ids: u64 = good.iter().map(|(id, _)| id).sum();
        let lines: i64 = good.iter().map(|(_, line)| line).sum();
        assert_eq!(
            one(
                db,
                &format!(
                    "SELECT count(*), count(DISTINCT (_metadata.file_path, _metadata.line)), sum(id), sum(_metadata.line) \
                     FROM bronze_{format}"
                )
            )
            .await,
            format!("{}|{}|{ids}|{lines}", good.len(), good.len()),
            "bronze_{format}"
        );
        let bad: Vec<Option<i64>> = plans.iter().flat_map(|p| p.bad.iter().copied()).collect();
        let whole = bad.iter().filter(|b| b.is_none()).count();
        assert_eq!(
            one(
                db,
                &format!(
                    "SELECT count(*), count(DISTINCT (file_path, line)), count(*) FILTER (WHERE line IS NULL) \
                     FROM bronze_{format}_errors"
                )
            )
            .await,
            format!("{}|{}|{whole}", bad.len(), bad.len()),
            "bronze_{format}_errors"
        );
    }
}

/// Waits until the bronze tables and their dead letters hold every file landed.
async fn ingested(db: &Database, landed: u64, timeout: Duration) {
    let started = Instant::now();
    let expected: usize = (0..landed).map(|k| plan(k).good.len() + plan(k).bad.len()).sum();
    loop {
        let held: usize = one(
            db,
            "SELECT (SELECT count(*) FROM bronze_csv) + (SELECT count(*) FROM bronze_csv_errors) \
             + (SELECT count(*) FROM bronze_json) + (SELECT count(*) FROM bronze_json_errors) \
             + (SELECT count(*) FROM bronze_parquet) + (SELECT count(*) FROM bronze_parquet_errors)",
        )
        .await
        .parse()
        .unwrap();
        if held >= expected {
            return;
        }
        if started.elapsed() > timeout {
            let sources = one(db, "SELECT name, state, files_seen, files_done, error FROM sluice.sources").await;
            panic!("ingested {held} of {expected} rows in {timeout:?}; sources: {sources}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var("SLUICE_FILES_WAREHOUSE") else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        loop {
            if let Ok(batches) = db
                .query("SELECT (SELECT count(*) FROM bronze_csv) + (SELECT count(*) FROM bronze_json) + (SELECT count(*) FROM bronze_parquet)")
                .await
            {
                println!("held {}", rows(&batches).join(""));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

/// The case: 1,000 CSV, JSON-lines and Parquet files (some with a new column, some with
/// bad rows, one truncated, one empty) land in nested folders in twenty waves while a process
/// ingesting them is killed 20 times at random; afterwards every good row is in bronze once by
/// file and line, every bad row or file is a dead letter once, the schema history shows the added
/// column, and `read_files` over the folder returns the table's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_files_exactly_once_across_kills() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let landing = dir.path().join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    {
        let db = Database::open(&path).await.unwrap();
        db.execute(&pipeline()).await.unwrap();
    }
    let mut rng = crate::common::rng_from(crate::common::seed("files"));
    let (mut landed, mut held_before, mut mid_ingestion) = (0u64, 0u64, 0);
    let kills = 20;
    for round in 0..kills {
        if landed < 1000 {
            for k in landed..landed + 50 {
                land(&landing.join(plan(k).relative), &file_bytes(k));
            }
            landed += 50;
        }
        let child = crate::common::ChildTest::spawn("files::child", &[("SLUICE_FILES_WAREHOUSE", path.clone())]);
        let report = |line: &str| line.strip_prefix("held ").and_then(|n| n.parse::<u64>().ok());
        // Kill at a random moment soon after the child has committed part of the new wave (each
        // commit takes two files of one format, so a wave takes dozens of commits).
        let mut held = held_before;
        let deadline = Instant::now() + Duration::from_secs(10);
        while held <= held_before && Instant::now() < deadline {
            if let Some(n) = child.lines.recv_timeout(Duration::from_millis(5)).ok().as_deref().and_then(report) {
                held = n;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..40)));
        held = child.kill().iter().filter_map(|line| report(line)).next_back().unwrap_or(held);
        eprintln!("round {round}: landed {landed}, held {held_before} -> {held}");
        let expected: u64 = (0..landed).map(|k| plan(k).good.len() as u64).sum();
        if held > held_before && held < expected {
            mid_ingestion += 1;
        }
        held_before = held;
    }
    assert!(mid_ingestion >= 10, "only {mid_ingestion} of {kills} kills landed while the child was ingesting");
    let db = Database::open(&path).await.unwrap();
    ingested(&db, landed, Duration::from_secs(300)).await;
    assert_exactly_once(&db, landed).await;
    // The new column, added in its own commit, and the rows before it without it.
    for format in FORMATS {
        let history = rows(&db.query(&format!("DESCRIBE HISTORY bronze_{format}")).await.unwrap());
        assert!(history.iter().any(|r| r.contains("ADD COLUMNS")), "{format}: {history:?}");
        let drifted: u64 = (500..landed).map(plan).filter(|p| p.format == format).map(|p| p.good.len() as u64).sum();
        assert_eq!(
            one(&db, &format!("SELECT count(*) FROM bronze_{format} WHERE coupon LIKE 'SAVE%'")).await,
            drifted.to_string(),
            "{format}"
        );
        // Partition folders are columns.
        assert_eq!(
            one(&db, &format!("SELECT count(*) FROM bronze_{format} WHERE region <> 'r' || ((id / 1000) % 4)")).await,
            "0"
        );
    }
    assert_eq!(one(&db, "SELECT error LIKE '%Parquet%' FROM bronze_parquet_errors WHERE line IS NULL").await, "true");
    // read_files returns what the source's table holds.
    for format in FORMATS {
        let from_table = rows(
            &db.query(&format!("SELECT id, name, amount, coupon, region, _metadata.line FROM bronze_{format}"))
                .await
                .unwrap(),
        );
        let read = rows(
            &db.query(&format!(
                "SELECT id, name, amount, coupon, region, _metadata.line FROM read_files('landing/**/*.{format}', format => '{format}', header => 'true')"
            ))
            .await
            .unwrap(),
        );
        assert_eq!(from_table.len(), read.len(), "{format}");
        assert_eq!(from_table, read, "{format}");
    }
    let files = |format: &str| (0..landed).filter(|k| plan(*k).format == format).count();
    let (csv, json, parquet) = (files("csv"), files("json"), files("parquet"));
    // The sources' progress is updated just after the commit that made the rows visible.
    wait_for(
        &db,
        "SELECT name, state, files_seen, files_done, files_pending FROM sluice.sources ORDER BY name",
        &format!(
            "landing_csv|running|{csv}|{csv}|0,landing_json|running|{json}|{json}|0,landing_parquet|running|{parquet}|{parquet}|0"
        ),
    )
    .await;
}

/// One folder, step by step: sniffing, evolution, rescued values, restarts that ingest nothing
/// twice, and `sluice.sources`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_sniffed_evolved_and_rescued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let landing = dir.path().join("in");
    land(
        &landing.join("day=2026-12-01/a.csv"),
        b"id;when;ok\n1;2026-12-01 10:00:00;true\n2;2026-12-01 11:30:00;false\n",
    );
    {
        let db = Database::open(&path).await.unwrap();
        db.execute(
            "CREATE SOURCE s FROM FILES (path 'in', format 'csv', interval_ms '50');
             CREATE STREAMING TABLE bronze FROM SOURCE s
               PUSH INTO oks AS SELECT id, \"when\" FROM bronze WHERE ok;",
        )
        .await
        .unwrap();
        let columns = one(
            &db,
            "SELECT string_agg(column_name, ', ' ORDER BY ordinal_position) \
             FROM information_schema.columns WHERE table_name = 'bronze'",
        )
        .await;
        assert_eq!(columns, "id, when, ok, day, _rescued_data, _metadata");
        wait_for(&db, "SELECT count(*) FROM bronze", "2").await;
        // The types sniffed: bigint, timestamp, boolean, and a date from the partition folder.
        assert_eq!(
            one(&db, "SELECT id + 1, \"when\" + INTERVAL '1 hour', NOT ok, day + 1 FROM bronze WHERE id = 1").await,
            "2|2026-12-01T11:00:00|false|2026-12-02"
        );
        assert_eq!(one(&db, "SELECT id FROM oks").await, "1");
        // A value that does not fit, and a new column.
        land(&landing.join("day=2026-12-02/b.csv"), b"id;when;ok;note\nx;2026-12-02 09:00:00;true;hello\n");
        wait_for(&db, "SELECT count(*) FROM bronze", "3").await;
        assert_eq!(
            one(
                &db,
                "SELECT id IS NULL, _rescued_data, note, day, _metadata.file_name FROM bronze WHERE note IS NOT NULL"
            )
            .await,
            "true|{\"id\":\"x\"}|hello|2026-12-02|b.csv"
        );
        // The source's progress is updated just after the commit that made the rows visible.
        wait_for(
            &db,
            "SELECT kind, format, path, files_seen, files_done, files_failed FROM sluice.sources",
            "files|csv|in|2|2|0",
        )
        .await;
    }
    // A restart ingests nothing twice; a file that changed after it was ingested is not read again.
    land(&landing.join("day=2026-12-01/a.csv"), b"id;when;ok\n7;2026-12-01 10:00:00;true\n");
    let db = Database::open(&path).await.unwrap();
    land(&landing.join("c.csv"), b"id;when;ok\n3;2026-12-03 10:00:00;true\n");
    wait_for(&db, "SELECT count(*) FROM bronze", "4").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(one(&db, "SELECT string_agg(CAST(id AS TEXT), ',' ORDER BY id) FROM bronze").await, "1,2,3");
    assert_eq!(one(&db, "SELECT count(*) FROM oks").await, "3");
}

async fn wait_for(db: &Database, sql: &str, expected: &str) {
    let started = Instant::now();
    loop {
        // A table a route makes may not be there yet.
        let got = match db.query(sql).await {
            Ok(batches) => rows(&batches).join(","),
            Err(e) => e.to_string(),
        };
        if got == expected {
            return;
        }
        // A guard against a hang, not a timing: 200 tables made by one route took over 30 s on
        // this machine with a release build running beside the suite.
        if started.elapsed() > Duration::from_secs(120) {
            let sources = one(db, "SELECT state, error FROM sluice.sources").await;
            let events = one(db, "SELECT flow, kind, message FROM sluice.events WHERE kind = 'failed'").await;
            panic!("{sql}: {got}, expected {expected}; sources: {sources}; failures: {events}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a client may not do, and what it gets told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_file_sources_are_refused_and_nothing_is_half_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.path().join("in")).unwrap();
    let db = Database::open(&path).await.unwrap();
    let error = |sql: &'static str| {
        let db = &db;
        async move { db.execute(sql).await.map(|_| ()).unwrap_err() }
    };
    let missing = error("CREATE SOURCE s FROM FILES (path 'nowhere', format 'csv')").await;
    assert_eq!(missing.sqlstate(), "58P01", "{missing}");
    let unknown = error("CREATE SOURCE s FROM FILES (path 'in', format 'csv', colour 'red')").await;
    assert_eq!(unknown.sqlstate(), "22023", "{unknown}");
    assert!(unknown.to_string().contains("unknown option colour"), "{unknown}");
    let format = error("CREATE SOURCE s FROM FILES (path 'in', format 'xml')").await;
    assert_eq!(format.sqlstate(), "22023", "{format}");
    let internal = error("CREATE SOURCE s FROM FILES (path '_sluice', format 'csv')").await;
    assert_eq!(internal.sqlstate(), "42501", "{internal}");
    let whole = error("CREATE SOURCE s FROM FILES (path '.', format 'csv')").await;
    assert_eq!(whole.sqlstate(), "42501", "{whole}");
    let read = error("SELECT * FROM read_files('nowhere/*.csv', format => 'csv')").await;
    assert_eq!(read.sqlstate(), "58P01", "{read}");
    let named = error("SELECT * FROM read_files('in/*.csv', 'csv')").await;
    assert!(named.to_string().contains("options by name"), "{named}");
    assert_eq!(one(&db, "SELECT count(*) FROM sluice.sources").await, "0");
    // A role that is not the owner: only inside the data folder (and the allowed folders).
    let session = db.session();
    session.set_privileges(sluice::Privileges::NORMAL);
    let outside =
        session.execute("CREATE SOURCE s FROM FILES (path '/etc', format 'csv')").await.map(|_| ()).unwrap_err();
    assert_eq!(outside.sqlstate(), "42501", "{outside}");
    let outside =
        session.query("SELECT * FROM read_files('/etc/*.conf', format => 'csv')").await.map(|_| ()).unwrap_err();
    assert_eq!(outside.sqlstate(), "42501", "{outside}");
    let url = session
        .execute("CREATE SOURCE s FROM FILES (path 's3://bucket/x', format 'csv')")
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(url.sqlstate(), "42501", "{url}");
    assert_eq!(one(&db, "SELECT count(*) FROM sluice.sources").await, "0");
}

/// One per-value route over a landing folder with 200 subfolders, one per "ERP table": 200 tables,
/// each with its own columns and rows, in `sluice.flows` like hand-written routes; a value that
/// cannot name a table, and two values that name the same one, are refused (an event says why)
/// and nothing else stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_route_makes_a_table_per_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let landing = dir.path().join("erp");
    for t in 0..200 {
        // Each "ERP table" has its own columns: key_<t> and one more.
        land(
            &landing.join(format!("Table{t:03}/part-0.csv")),
            format!("key_{t},v{}\n{t},x\n{t},y\n", t % 5).as_bytes(),
        );
    }
    let db = Database::open(&path).await.unwrap();
    db.execute(
        "CREATE SOURCE erp FROM FILES (path 'erp', format 'csv', header 'true', interval_ms '50');
         CREATE STREAMING TABLE bronze FROM SOURCE erp
           PUSH INTO TABLE PER split_part(_metadata.file_path, '/', -2) NAMED 'erp_{table}';",
    )
    .await
    .unwrap();
    wait_for(&db, "SELECT count(*) FROM sluice.flows WHERE name LIKE 'bronze_to_erp_%'", "200").await;
    wait_for(&db, "SELECT count(*) FROM bronze", "400").await;
    for t in [0, 57, 199] {
        // The bronze commit is visible a moment before its routes have run.
        wait_for(&db, &format!("SELECT count(*) FROM erp_table{t:03}"), "2").await;
        assert_eq!(
            one(
                &db,
                &format!(
                    "SELECT string_agg(CAST(key_{t} AS TEXT) || ':' || v{}, ',' ORDER BY v{}) FROM erp_table{t:03}",
                    t % 5,
                    t % 5
                )
            )
            .await,
            format!("{t}:x,{t}:y")
        );
        let columns = one(
            &db,
            &format!(
                "SELECT string_agg(column_name, ',' ORDER BY column_name) FROM information_schema.columns \
                 WHERE table_name = 'erp_table{t:03}'"
            ),
        )
        .await;
        // Its own columns only (in the order bronze has them: the union of every folder's).
        assert_eq!(columns, format!("_metadata,key_{t},v{}", t % 5));
    }
    let lineage = one(&db, "SELECT count(*) FROM sluice.lineage WHERE source = 'public.bronze'").await;
    assert!(lineage.parse::<u64>().unwrap() >= 200, "{lineage}");
    // Values that cannot be names, and a collision.
    land(&landing.join("---/a.csv"), b"k\n1\n");
    land(&landing.join("TABLE000/a.csv"), b"k\n2\n");
    land(&landing.join("late/a.csv"), b"k\n3\n");
    wait_for(&db, "SELECT count(*) FROM erp_late", "1").await;
    let refused = one(
        &db,
        "SELECT string_agg(message, ' | ' ORDER BY message) FROM sluice.events WHERE flow = 'bronze_per_value' AND kind = 'failed'",
    )
    .await;
    assert!(refused.contains("'---'") && refused.contains("no letter or digit"), "{refused}");
    assert!(refused.contains("'TABLE000'") && refused.contains("'Table000'"), "{refused}");
    assert_eq!(one(&db, "SELECT count(*) FROM erp_table000").await, "2");
}
