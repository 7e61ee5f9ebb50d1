//! Transaction blocks over several tables: killed in the middle of COMMITs, and run by concurrent
//! clients moving money between two tables.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sluice::Database;

use crate::common::rows;

/// The tables every transaction of the crash test writes, one row each.
const CRASH_TABLES: [&str; 3] = ["ta", "tb", "tc"];

/// Transaction `n` of the crash child: the same row into each table, and a counter moved.
fn crash_transaction(n: u64) -> String {
    let inserts: Vec<String> = CRASH_TABLES.iter().map(|t| format!("INSERT INTO {t} VALUES ({n})")).collect();
    format!("BEGIN; {}; UPDATE counter SET c = c + 1; COMMIT", inserts.join("; "))
}

#[test]
#[ignore]
fn crash_child() {
    let Ok(path) = std::env::var("SLUICE_TXN_CRASH_WAREHOUSE") else { return };
    let start: u64 = std::env::var("SLUICE_TXN_CRASH_START").unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        let session = db.session();
        for n in start.. {
            session.execute(&crash_transaction(n)).await.unwrap_or_else(|e| panic!("transaction {n}: {e}"));
            println!("ok {n}");
        }
    });
}

/// The rows of each crash table, and the counter.
async fn crash_state(path: &str) -> (Vec<Vec<u64>>, u64) {
    let db = Database::open(path).await.unwrap_or_else(|e| panic!("the warehouse does not open: {e}"));
    let mut tables = Vec::new();
    for table in CRASH_TABLES {
        let values = rows(&db.query(&format!("SELECT a FROM {table} ORDER BY a")).await.unwrap());
        let mut values: Vec<u64> = values.iter().map(|v| v.parse().unwrap()).collect();
        values.sort_unstable();
        tables.push(values);
    }
    let counter = rows(&db.query("SELECT c FROM counter").await.unwrap());
    (tables, counter.first().and_then(|c| c.parse().ok()).unwrap_or(u64::MAX))
}

#[tokio::test]
async fn killing_during_multi_table_commits_applies_each_transaction_wholly_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    {
        let db = Database::open(&path).await.unwrap();
        for table in CRASH_TABLES {
            db.execute(&format!("CREATE TABLE {table} (a bigint PRIMARY KEY)")).await.unwrap();
        }
        db.execute("CREATE TABLE counter (c bigint); INSERT INTO counter VALUES (0)").await.unwrap();
    }
    let mut done = 0u64;
    let mut rng = crate::common::rng_from(crate::common::seed("transactions crash"));
    let kills = 30;
    for round in 0..kills {
        let child = crate::common::ChildTest::spawn(
            "transactions::crash_child",
            &[("SLUICE_TXN_CRASH_WAREHOUSE", path.clone()), ("SLUICE_TXN_CRASH_START", done.to_string())],
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(150..900)));
        let acknowledged = crate::common::last_ok(&child.kill()).map_or(done, |n| n + 1);
        let (tables, counter) = crash_state(&path).await;
        // The open completed or undid the record of a transaction cut short, and removed it.
        assert_eq!(record_files(&path), Vec::<(String, u64)>::new(), "round {round}: records stay after an open");
        // Every transaction is in every table or in none, and the counter counts them.
        let first = &tables[0];
        for (table, values) in CRASH_TABLES.iter().zip(&tables) {
            assert_eq!(values, first, "round {round}: {table} holds other transactions than {}", CRASH_TABLES[0]);
        }
        let expected: Vec<u64> = (0..first.len() as u64).collect();
        assert_eq!(first, &expected, "round {round}: the transactions are not a prefix");
        assert_eq!(counter, first.len() as u64, "round {round}: the counter disagrees with the rows");
        let seen = first.len() as u64;
        assert!(
            seen == acknowledged || seen == acknowledged + 1,
            "round {round}: {acknowledged} COMMITs acknowledged, {seen} transactions in the tables"
        );
        done = seen;
    }
    assert!(done > kills, "transactions ran between the kills ({done})");
}

/// The files in a warehouse's folder of transaction records, with their sizes.
fn record_files(path: &str) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(std::path::Path::new(path).join("_sluice/transactions")) else {
        return Vec::new();
    };
    entries
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len())
        })
        .collect()
}

/// Transactions committed one after the other reuse one record file, emptied after each
/// (with the journal; without it each record is a file of its own, deleted after).
#[tokio::test]
async fn multi_table_commits_leave_no_record_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    db.execute("CREATE TABLE ra (a bigint PRIMARY KEY); CREATE TABLE rb (a bigint PRIMARY KEY)").await.unwrap();
    for n in 0..20 {
        db.execute(&format!("BEGIN; INSERT INTO ra VALUES ({n}); INSERT INTO rb VALUES ({n}); COMMIT")).await.unwrap();
    }
    let files = record_files(&path);
    assert!(files.len() <= 1 && files.iter().all(|(_, size)| *size == 0), "{files:?}");
    assert_eq!(rows(&db.query("SELECT count(*) FROM ra JOIN rb USING (a)").await.unwrap()), vec!["20"]);
    drop(db);
    // The next open deletes the emptied file.
    let db = Database::open(&path).await.unwrap();
    assert_eq!(record_files(&path), Vec::<(String, u64)>::new());
    assert_eq!(rows(&db.query("SELECT count(*) FROM rb").await.unwrap()), vec!["20"]);
}

/// Accounts per table, and the money each starts with.
const ACCOUNTS: i64 = 10;
const START: i64 = 1_000;

/// 8 clients move money from an account of one table to an account of the other for a while
/// (retrying on 40001); readers check the total at every look, and it holds after the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_transfers_between_two_tables_conserve_the_total() {
    let db = Database::open("memory://transfers").await.unwrap();
    db.execute("CREATE TABLE checking (id int PRIMARY KEY, balance bigint)").await.unwrap();
    db.execute("CREATE TABLE savings (id int PRIMARY KEY, balance bigint)").await.unwrap();
    for id in 0..ACCOUNTS {
        db.execute(&format!("INSERT INTO checking VALUES ({id}, {START}); INSERT INTO savings VALUES ({id}, {START})"))
            .await
            .unwrap();
    }
    let total = 2 * ACCOUNTS * START;
    let seed = crate::common::seed("transfers");
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let run_for = Duration::from_secs(10);
    let mut clients = Vec::new();
    for client in 0..8u64 {
        let session = db.session();
        let (stop, committed, retried) = (stop.clone(), committed.clone(), retried.clone());
        clients.push(tokio::spawn(async move {
            let mut rng = crate::common::rng_from(seed.wrapping_add(client));
            while !stop.load(Ordering::Relaxed) {
                let (from, to, amount) =
                    (rng.random_range(0..ACCOUNTS), rng.random_range(0..ACCOUNTS), rng.random_range(1..50));
                let (debit, credit) =
                    if rng.random_bool(0.5) { ("checking", "savings") } else { ("savings", "checking") };
                let script = format!(
                    "BEGIN; UPDATE {debit} SET balance = balance - {amount} WHERE id = {from}; \
                     UPDATE {credit} SET balance = balance + {amount} WHERE id = {to}; COMMIT"
                );
                match session.execute(&script).await {
                    Ok(_) => {
                        committed.fetch_add(1, Ordering::Relaxed);
                    }
                    // A lost race, or two transfers that lock the same two rows in opposite
                    // orders (a deadlock, as in PostgreSQL): the client tries again.
                    Err(e) if matches!(e.sqlstate(), "40001" | "40P01") => {
                        retried.fetch_add(1, Ordering::Relaxed);
                        // The failed COMMIT ended the block; a failed UPDATE left it aborted.
                        let _ = session.execute("ROLLBACK").await;
                    }
                    Err(e) => panic!("client {client} (seed {seed}): {e}"),
                }
            }
        }));
    }
    let reader = {
        let session = db.session();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut looks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let sum = rows(
                    &session
                        .query(
                            "SELECT (SELECT sum(balance) FROM checking) + (SELECT sum(balance) FROM savings) AS total",
                        )
                        .await
                        .unwrap(),
                );
                assert_eq!(sum, vec![total.to_string()], "a reader saw a transfer half done (seed {seed})");
                looks += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            looks
        })
    };
    let started = Instant::now();
    tokio::time::sleep(run_for).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let looks = reader.await.unwrap();
    let sum = rows(
        &db.query("SELECT (SELECT sum(balance) FROM checking) + (SELECT sum(balance) FROM savings) AS total")
            .await
            .unwrap(),
    );
    assert_eq!(sum, vec![total.to_string()]);
    let committed = committed.load(Ordering::Relaxed);
    println!(
        "transfers: {committed} committed, {} retried on 40001 or 40P01, {looks} reads, in {:?}",
        retried.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert!(committed > 0 && looks > 0);
}

/// A block that stages more than the limit fails at the statement that goes past it, and
/// nothing of it is committed; a session that ends inside a block leaves nothing behind.
#[tokio::test]
async fn a_block_past_its_staging_limit_fails_and_commits_nothing() {
    let options = sluice::DatabaseOptions { transaction_bytes_max: 64 * 1024, ..Default::default() };
    let db = Database::open_with("memory://staging-limit", options).await.unwrap();
    db.execute("CREATE TABLE big (id bigint, payload text)").await.unwrap();
    let session = db.session();
    session.execute("BEGIN; INSERT INTO big VALUES (1, 'small')").await.unwrap();
    let err = session
        .execute("INSERT INTO big SELECT i, repeat('x', 100) || i FROM generate_series(1, 20000) AS t(i)")
        .await
        .unwrap_err();
    assert_eq!(err.sqlstate(), "54000", "{err}");
    let err = session.execute("SELECT 1").await.unwrap_err();
    assert_eq!(err.sqlstate(), "25P02", "{err}");
    let tags = session.execute("COMMIT").await.unwrap();
    assert!(format!("{tags:?}").contains("ROLLBACK"), "{tags:?}");
    assert_eq!(rows(&db.query("SELECT count(*) FROM big").await.unwrap()), vec!["0"]);
    // A session dropped in a block: its rows never appear.
    let session = db.session();
    session.execute("BEGIN; INSERT INTO big VALUES (2, 'dropped with the session')").await.unwrap();
    drop(session);
    assert_eq!(rows(&db.query("SELECT count(*) FROM big").await.unwrap()), vec!["0"]);
}

/// Views are kept in the catalog: they survive a restart, and a block reads its own rows
/// through them.
#[tokio::test]
async fn views_survive_a_restart_and_show_a_blocks_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    {
        let db = Database::open(&path).await.unwrap();
        db.execute("CREATE TABLE base (a int); INSERT INTO base VALUES (1), (2)").await.unwrap();
        db.execute("CREATE VIEW doubled AS SELECT a * 2 AS d FROM base").await.unwrap();
    }
    let db = Database::open(&path).await.unwrap();
    assert_eq!(rows(&db.query("SELECT sum(d) FROM doubled").await.unwrap()), vec!["6"]);
    let session = db.session();
    session.execute("BEGIN; INSERT INTO base VALUES (10)").await.unwrap();
    assert_eq!(rows(&session.query("SELECT sum(d) FROM doubled").await.unwrap()), vec!["26"]);
    assert_eq!(rows(&db.query("SELECT sum(d) FROM doubled").await.unwrap()), vec!["6"]);
    session.execute("ROLLBACK").await.unwrap();
    assert_eq!(rows(&session.query("SELECT sum(d) FROM doubled").await.unwrap()), vec!["6"]);
}

/// Row-level conflicts: two blocks that change other rows of one keyed table both commit (the
/// later one's commit is moved onto the earlier's); the same row, the same new key, or a block
/// that read the table by a scan, do not.
#[tokio::test]
async fn blocks_that_change_other_rows_of_a_keyed_table_both_commit() {
    // A short wait for the rows a block left idle holds (READ COMMITTED's row locks).
    let db = open_with_row_lock_wait("memory://row-level", Duration::from_millis(100)).await;
    db.execute("CREATE TABLE acc (id bigint PRIMARY KEY, v bigint); INSERT INTO acc VALUES (1, 0), (2, 0), (3, 0)")
        .await
        .unwrap();
    let all = |db: &Database| {
        let db = db.clone();
        async move { rows(&db.query("SELECT id || ':' || v FROM acc ORDER BY id").await.unwrap()) }
    };
    let (a, b) = (db.session(), db.session());
    a.execute("BEGIN; UPDATE acc SET v = v + 1 WHERE id = 1").await.unwrap();
    b.execute("BEGIN; UPDATE acc SET v = v + 10 WHERE id = 2; INSERT INTO acc VALUES (4, 0)").await.unwrap();
    b.execute("COMMIT").await.unwrap();
    a.execute("UPDATE acc SET v = v + 1 WHERE id = 1; DELETE FROM acc WHERE id = 3").await.unwrap();
    a.execute("COMMIT").await.unwrap();
    assert_eq!(all(&db).await, vec!["1:2", "2:10", "4:0"]);

    // The same row: the later COMMIT fails, and what the earlier wrote stays (the later UPDATE
    // waited for the row until the wait ran out).
    a.execute("BEGIN; UPDATE acc SET v = 100 WHERE id = 4").await.unwrap();
    b.execute("BEGIN; UPDATE acc SET v = 200 WHERE id = 4; COMMIT").await.unwrap();
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(all(&db).await, vec!["1:2", "2:10", "4:200"]);

    // The same new key: the later COMMIT is a unique violation.
    a.execute("BEGIN; INSERT INTO acc VALUES (5, 1)").await.unwrap();
    b.execute("BEGIN; INSERT INTO acc VALUES (5, 2); COMMIT").await.unwrap();
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    assert!(format!("{err:?}").contains("(id)=(5)"), "{err:?}");
    assert_eq!(all(&db).await, vec!["1:2", "2:10", "4:200", "5:2"]);

    // A key the earlier one deleted and the later one re-inserts after deleting it too.
    a.execute("BEGIN; DELETE FROM acc WHERE id = 5; INSERT INTO acc VALUES (5, 9)").await.unwrap();
    b.execute("BEGIN; DELETE FROM acc WHERE id = 5; COMMIT").await.unwrap();
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");

    // A REPEATABLE READ block that read the whole table (its sum) conflicts with any change to
    // it; at READ COMMITTED, only the statement that read it depended on it.
    a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT sum(v) FROM acc; UPDATE acc SET v = v + 1 WHERE id = 1")
        .await
        .unwrap();
    b.execute("UPDATE acc SET v = v + 1 WHERE id = 2").await.unwrap();
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(all(&db).await, vec!["1:2", "2:11", "4:200"]);
    a.execute("BEGIN; SELECT sum(v) FROM acc; UPDATE acc SET v = v + 1 WHERE id = 1").await.unwrap();
    b.execute("UPDATE acc SET v = v - 1 WHERE id = 2").await.unwrap();
    a.execute("UPDATE acc SET v = v - 1 WHERE id = 1; COMMIT").await.unwrap();
    assert_eq!(all(&db).await, vec!["1:2", "2:10", "4:200"]);

    // An autocommit statement between: the block still commits, and sees its own row after.
    a.execute("BEGIN; UPDATE acc SET v = 7 WHERE id = 1").await.unwrap();
    db.execute("INSERT INTO acc VALUES (6, 6); UPDATE acc SET v = 0 WHERE id = 4").await.unwrap();
    a.execute("COMMIT").await.unwrap();
    assert_eq!(all(&db).await, vec!["1:7", "2:10", "4:0", "6:6"]);
    // The key index is right after the moved commits: a duplicate is still refused.
    let err = db.execute("INSERT INTO acc VALUES (1, 0)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
}

/// Autocommit UPDATEs by concurrent sessions, of other rows and of the same row, never fail (as
/// in PostgreSQL, where each waits for the other and reads the row anew), and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_autocommit_updates_neither_fail_nor_lose_one() {
    let db = Database::open("memory://autocommit-updates").await.unwrap();
    db.execute("CREATE TABLE counters (id bigint PRIMARY KEY, n bigint); INSERT INTO counters VALUES (0, 0), (1, 0)")
        .await
        .unwrap();
    let mut clients = Vec::new();
    for client in 0..4i64 {
        let session = db.session();
        clients.push(tokio::spawn(async move {
            for i in 0..25i64 {
                let id = (client + i) % 2;
                session.execute(&format!("UPDATE counters SET n = n + 1 WHERE id = {id}")).await?;
            }
            Ok::<_, sluice::Error>(())
        }));
    }
    for client in clients {
        client.await.unwrap().unwrap();
    }
    assert_eq!(rows(&db.query("SELECT sum(n) FROM counters").await.unwrap()), vec!["100"]);
}

/// Transaction `n` of the DDL crash child: a new table with one row, and that row's number in a
/// table every transaction writes.
fn ddl_crash_transaction(n: u64) -> String {
    format!(
        "BEGIN; CREATE TABLE made_{n} (a bigint); INSERT INTO made_{n} VALUES ({n}); \
         INSERT INTO made_list VALUES ({n}); COMMIT"
    )
}

#[test]
#[ignore]
fn ddl_crash_child() {
    let Ok(path) = std::env::var("SLUICE_DDL_CRASH_WAREHOUSE") else { return };
    let start: u64 = std::env::var("SLUICE_DDL_CRASH_START").unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        let session = db.session();
        for n in start.. {
            session.execute(&ddl_crash_transaction(n)).await.unwrap_or_else(|e| panic!("transaction {n}: {e}"));
            println!("ok {n}");
        }
    });
}

/// A transaction that creates a table and writes to it and to another one, killed at random
/// points of its COMMIT: after each reopen, a table `made_n` exists exactly when `made_list`
/// holds `n` (the catalog's version is the transaction's commit point), with its row, and every
/// acknowledged COMMIT is there.
#[tokio::test]
async fn killing_during_commits_with_ddl_applies_each_transaction_wholly_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute("CREATE TABLE made_list (n bigint)").await.unwrap();
    let mut done = 0u64;
    let mut rng = crate::common::rng_from(crate::common::seed("ddl crash"));
    let kills = 20;
    for round in 0..kills {
        let child = crate::common::ChildTest::spawn(
            "transactions::ddl_crash_child",
            &[("SLUICE_DDL_CRASH_WAREHOUSE", path.clone()), ("SLUICE_DDL_CRASH_START", done.to_string())],
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(150..900)));
        let acknowledged = crate::common::last_ok(&child.kill()).map_or(done, |n| n + 1);
        let db = Database::open(&path).await.unwrap_or_else(|e| panic!("round {round}: no reopen: {e}"));
        let mut listed: Vec<u64> =
            rows(&db.query("SELECT n FROM made_list").await.unwrap()).iter().map(|n| n.parse().unwrap()).collect();
        listed.sort_unstable();
        let made = rows(
            &db.query("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'made\\_%' ORDER BY 1")
                .await
                .unwrap(),
        );
        let expected: Vec<u64> = (0..listed.len() as u64).collect();
        assert_eq!(listed, expected, "round {round}: the transactions are not a prefix");
        let mut tables: Vec<String> = listed.iter().map(|n| format!("made_{n}")).collect();
        tables.push("made_list".into());
        tables.sort();
        assert_eq!(made, tables, "round {round}: the tables disagree with the list");
        for n in &listed {
            let row = rows(&db.query(&format!("SELECT a FROM made_{n}")).await.unwrap());
            assert_eq!(row, vec![n.to_string()], "round {round}: made_{n}");
        }
        let seen = listed.len() as u64;
        assert!(
            seen == acknowledged || seen == acknowledged + 1,
            "round {round}: {acknowledged} COMMITs acknowledged, {seen} transactions in the tables"
        );
        done = seen;
    }
    assert!(done > kills, "transactions ran between the kills ({done})");
}

/// The managed tables' folders of a warehouse folder (`public/<table>-<id>`).
fn table_folders(path: &str) -> Vec<String> {
    let public = std::path::Path::new(path).join("public");
    let mut names: Vec<String> = std::fs::read_dir(public)
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// DDL in a block is the block's until COMMIT: other sessions neither see its tables and views
/// nor miss the ones it dropped; ROLLBACK leaves no folder behind; after COMMIT everyone (and a
/// reopened warehouse) sees them.
#[tokio::test]
async fn ddl_in_a_block_is_seen_by_others_only_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    db.execute("CREATE TABLE old_one (a int); INSERT INTO old_one VALUES (1)").await.unwrap();
    let before = table_folders(&path);
    let (mine, other) = (db.session(), db.session());
    mine.execute("BEGIN; CREATE TABLE new_one (b int PRIMARY KEY); INSERT INTO new_one VALUES (7)").await.unwrap();
    mine.execute("CREATE VIEW new_view AS SELECT b FROM new_one; DROP TABLE old_one").await.unwrap();
    assert_eq!(rows(&mine.query("SELECT b FROM new_view").await.unwrap()), vec!["7"]);
    assert!(mine.query("SELECT * FROM old_one").await.is_err());
    for missing in ["new_one", "new_view"] {
        let err = other.query(&format!("SELECT * FROM {missing}")).await.unwrap_err();
        assert_eq!(err.sqlstate(), "42P01", "{missing}: {err}");
    }
    assert_eq!(rows(&other.query("SELECT a FROM old_one").await.unwrap()), vec!["1"]);
    // ROLLBACK: the new table's folder goes, the dropped one stays.
    mine.execute("ROLLBACK").await.unwrap();
    assert_eq!(table_folders(&path), before);
    assert_eq!(rows(&mine.query("SELECT a FROM old_one").await.unwrap()), vec!["1"]);
    // COMMIT: everyone sees the new ones, the dropped table's folder is gone.
    mine.execute("BEGIN; CREATE TABLE new_one (b int PRIMARY KEY); INSERT INTO new_one VALUES (7)").await.unwrap();
    mine.execute("CREATE VIEW new_view AS SELECT b FROM new_one; DROP TABLE old_one; COMMIT").await.unwrap();
    assert_eq!(rows(&other.query("SELECT b FROM new_view").await.unwrap()), vec!["7"]);
    assert!(other.query("SELECT * FROM old_one").await.is_err());
    let after = table_folders(&path);
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after.iter().all(|f| f.starts_with("new_one")), "{after:?}");
    // The key of the new table holds, and a reopened warehouse has it all.
    let err = other.execute("INSERT INTO new_one VALUES (7)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    drop((mine, other, db));
    let db = Database::open(&path).await.unwrap();
    assert_eq!(rows(&db.query("SELECT b FROM new_view").await.unwrap()), vec!["7"]);
}

/// Two sessions making the same name: the one that commits second gets 40001 and leaves nothing.
#[tokio::test]
async fn concurrent_ddl_of_one_name_lets_the_first_commit_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    let (first, second) = (db.session(), db.session());
    second.execute("BEGIN; CREATE TABLE contested (x int); INSERT INTO contested VALUES (2)").await.unwrap();
    first.execute("CREATE TABLE contested (x int); INSERT INTO contested VALUES (1)").await.unwrap();
    let err = second.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(rows(&second.query("SELECT x FROM contested").await.unwrap()), vec!["1"]);
    assert_eq!(table_folders(&path).len(), 1, "{:?}", table_folders(&path));
    // A block that renamed a table another session dropped meanwhile conflicts too.
    second.execute("BEGIN; ALTER TABLE contested RENAME TO renamed").await.unwrap();
    first.execute("DROP TABLE contested").await.unwrap();
    let err = second.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert!(second.query("SELECT * FROM renamed").await.is_err());
}

/// ALTER TABLE and indexes in a block are the block's until COMMIT: others see the old columns
/// and can write with them; a commit of theirs to the table in between makes the block's COMMIT
/// 40001 (nothing of it applied); a key the block adds holds for everyone once it commits.
#[tokio::test]
async fn alter_table_in_a_block_is_seen_by_others_only_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    db.execute("CREATE TABLE altered (a int); INSERT INTO altered VALUES (1), (2)").await.unwrap();
    let (mine, other) = (db.session(), db.session());
    mine.execute("BEGIN; ALTER TABLE altered ADD COLUMN b int DEFAULT 5; INSERT INTO altered VALUES (3, 6)")
        .await
        .unwrap();
    mine.execute("CREATE INDEX altered_b ON altered (b); ALTER TABLE altered ADD CONSTRAINT altered_a UNIQUE (a)")
        .await
        .unwrap();
    assert_eq!(rows(&mine.query("SELECT a, b FROM altered ORDER BY a").await.unwrap()), vec!["1|5", "2|5", "3|6"]);
    let err = mine.execute("INSERT INTO altered VALUES (1, 0)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    mine.execute("ROLLBACK").await.unwrap();
    // Others never saw the column; after the rollback nobody does.
    let err = other.query("SELECT b FROM altered").await.unwrap_err();
    assert_eq!(err.sqlstate(), "42703", "{err}");
    other.execute("INSERT INTO altered VALUES (1)").await.unwrap();
    // Another writer's commit in between: 40001 at COMMIT, nothing applied.
    mine.execute("BEGIN; ALTER TABLE altered ADD COLUMN b int; ALTER TABLE altered ALTER COLUMN a SET NOT NULL")
        .await
        .unwrap();
    assert!(other.query("SELECT b FROM altered").await.is_err(), "another session sees the block's column");
    other.execute("INSERT INTO altered VALUES (NULL)").await.unwrap();
    let err = mine.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert!(mine.query("SELECT b FROM altered").await.is_err(), "a conflicting block's ALTER TABLE was applied");
    // Committed: everyone sees the column and the key, and so does a reopened warehouse.
    other.execute("DELETE FROM altered WHERE a IS NULL OR a = 1").await.unwrap();
    mine.execute("BEGIN; ALTER TABLE altered ADD COLUMN b int DEFAULT 9; ALTER TABLE altered ADD PRIMARY KEY (a)")
        .await
        .unwrap();
    mine.execute("INSERT INTO altered VALUES (4, 4); COMMIT").await.unwrap();
    assert_eq!(rows(&other.query("SELECT a, b FROM altered ORDER BY a").await.unwrap()), vec!["2|9", "4|4"]);
    let err = other.execute("INSERT INTO altered VALUES (2, 0)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    drop((mine, other, db));
    let db = Database::open(&path).await.unwrap();
    let err = db.execute("INSERT INTO altered VALUES (4, 0)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    assert_eq!(rows(&db.query("SELECT a, b FROM altered ORDER BY a").await.unwrap()), vec!["2|9", "4|4"]);
}

/// `SELECT ... FOR UPDATE` in a block: another session's commit to the table it read before the
/// block's COMMIT makes that COMMIT fail with 40001 (where PostgreSQL would have made the other
/// wait), nothing applied; untouched, the block commits. SKIP LOCKED is refused.
#[tokio::test]
async fn select_for_update_fails_the_commit_when_another_changed_the_table() {
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE TABLE jobs (id int, state text); INSERT INTO jobs VALUES (1, 'new'), (2, 'new')").await.unwrap();
    db.execute("CREATE TABLE taken (id int)").await.unwrap();
    let (mine, other) = (db.session(), db.session());
    // Untouched: the block commits.
    mine.execute("BEGIN").await.unwrap();
    assert_eq!(rows(&mine.query("SELECT id FROM jobs WHERE id = 1 FOR UPDATE").await.unwrap()), vec!["1"]);
    mine.execute("INSERT INTO taken VALUES (1); COMMIT").await.unwrap();
    // Another session changes the locked table before COMMIT: 40001, nothing applied.
    mine.execute("BEGIN").await.unwrap();
    mine.query("SELECT id FROM jobs WHERE state = 'new' FOR UPDATE").await.unwrap();
    other.execute("UPDATE jobs SET state = 'done' WHERE id = 2").await.unwrap();
    mine.execute("INSERT INTO taken VALUES (2)").await.unwrap();
    let err = mine.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(rows(&db.query("SELECT id FROM taken").await.unwrap()), vec!["1"]);
    // FOR SHARE OF locks the table it names (by its alias) and not the others; outside a block
    // the lock ends with the statement.
    mine.execute("BEGIN").await.unwrap();
    mine.query("SELECT j.id FROM jobs j JOIN taken t ON t.id = j.id FOR SHARE OF j").await.unwrap();
    other.execute("INSERT INTO taken VALUES (3)").await.unwrap();
    mine.execute("COMMIT").await.unwrap();
    mine.execute("BEGIN").await.unwrap();
    mine.query("SELECT j.id FROM jobs j JOIN taken t ON t.id = j.id FOR SHARE OF j").await.unwrap();
    other.execute("DELETE FROM jobs WHERE id = 2").await.unwrap();
    // (A block that wrote nothing commits: it is as if it ran before the other.)
    mine.execute("INSERT INTO taken VALUES (4)").await.unwrap();
    let err = mine.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(rows(&other.query("SELECT id FROM jobs WHERE id = 1 FOR UPDATE").await.unwrap()), vec!["1"]);
    let err = mine.query("SELECT id FROM jobs FOR UPDATE SKIP LOCKED").await.unwrap_err();
    assert_eq!(err.sqlstate(), "0A000", "{err}");
}

/// A REPEATABLE READ block reads every table as of one moment: a table it first
/// reads after another session committed to it is read without that commit, also when that
/// commit wrote two tables, one of which the block had read already; its own writes are seen,
/// and writing a row the other changed since is a 40001 at COMMIT.
#[tokio::test]
async fn a_block_reads_every_table_as_of_its_first_statement() {
    let db = Database::open("memory://one-snapshot").await.unwrap();
    db.execute(
        "CREATE TABLE ta (id bigint PRIMARY KEY, v bigint); CREATE TABLE tb (id bigint PRIMARY KEY, v bigint); \
         CREATE TABLE tc (v bigint); INSERT INTO ta VALUES (1, 100); INSERT INTO tb VALUES (1, 0); INSERT INTO tc VALUES (1)",
    )
    .await
    .unwrap();
    let (a, b) = (db.session(), db.session());
    a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ").await.unwrap();
    assert_eq!(rows(&a.query("SELECT sum(v) FROM ta").await.unwrap()), vec!["100"]);
    // A transfer from ta to tb in one commit, and a row into tc, after the block's first read.
    b.execute("BEGIN; UPDATE ta SET v = v - 30 WHERE id = 1; UPDATE tb SET v = v + 30 WHERE id = 1; COMMIT")
        .await
        .unwrap();
    b.execute("INSERT INTO tc VALUES (2)").await.unwrap();
    // tb and tc are first read now: as of the block's snapshot, so the total is still 100.
    assert_eq!(block_sums(&a).await, vec!["100", "0", "1"]);
    a.execute("INSERT INTO tc VALUES (3)").await.unwrap();
    assert_eq!(rows(&a.query("SELECT count(*) FROM tc").await.unwrap()), vec!["2"]);
    // The row the other session changed: first committer wins.
    a.execute("UPDATE tb SET v = v + 1 WHERE id = 1").await.unwrap();
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    // A new block sees everything committed, and a block that only appends commits.
    assert_eq!(block_sums(&a).await, vec!["70", "30", "2"]);
    a.execute("BEGIN; SELECT count(*) FROM tc").await.unwrap();
    b.execute("INSERT INTO tc VALUES (4)").await.unwrap();
    a.execute("INSERT INTO tc VALUES (5); COMMIT").await.unwrap();
    assert_eq!(rows(&db.query("SELECT count(*) FROM tc").await.unwrap()), vec!["4"]);
}

/// READ COMMITTED, PostgreSQL's default: each statement of a block reads what others committed
/// before it started (a commit to two tables wholly or not at all), and an UPDATE of a row that
/// another block changed waits until that block ends, then changes the row as that block left
/// it: neither fails, and no update is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_committed_blocks_wait_for_the_rows_another_changed() {
    // A long wait, so that the test does not depend on how fast this machine is.
    let db = open_with_row_lock_wait("memory://read-committed", Duration::from_secs(60)).await;
    db.execute(
        "CREATE TABLE ta (id bigint PRIMARY KEY, v bigint); CREATE TABLE tb (id bigint PRIMARY KEY, v bigint); \
         INSERT INTO ta VALUES (1, 100), (2, 0); INSERT INTO tb VALUES (1, 0)",
    )
    .await
    .unwrap();
    let (a, b) = (db.session(), db.session());
    assert_eq!(a.isolation(), sluice::transaction::Isolation::ReadCommitted);
    a.execute("BEGIN").await.unwrap();
    let sums = "SELECT (SELECT sum(v) FROM ta) || ' ' || (SELECT sum(v) FROM tb)";
    assert_eq!(rows(&a.query(sums).await.unwrap()), vec!["100 0"]);
    b.execute("BEGIN; UPDATE ta SET v = v - 30 WHERE id = 1; UPDATE tb SET v = v + 30 WHERE id = 1; COMMIT")
        .await
        .unwrap();
    // The next statement sees the transfer.
    assert_eq!(rows(&a.query(sums).await.unwrap()), vec!["70 30"]);
    assert_eq!(rows(&a.query("SELECT v FROM tb WHERE id = 1").await.unwrap()), vec!["30"]);
    // a changes row 1 of ta and holds it; b's change of the same row waits for a's COMMIT.
    a.execute("UPDATE ta SET v = v + 1 WHERE id = 1").await.unwrap();
    let waiter = tokio::spawn(async move {
        b.execute("BEGIN; UPDATE ta SET v = v * 2 WHERE id = 1; UPDATE ta SET v = v + 5 WHERE id = 2").await.unwrap();
        let seen = rows(&b.query("SELECT v FROM ta ORDER BY id").await.unwrap());
        b.execute("COMMIT").await.unwrap();
        seen
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b's UPDATE waits for the row a holds");
    a.execute("UPDATE tb SET v = v - 1 WHERE id = 1; COMMIT").await.unwrap();
    // b doubled the row as a left it (71), not as b first read it (70).
    assert_eq!(waiter.await.unwrap(), vec!["142", "5"]);
    let all = rows(&db.query("SELECT id || ':' || v FROM ta ORDER BY id").await.unwrap());
    assert_eq!(all, vec!["1:142", "2:5"]);
    assert_eq!(rows(&db.query("SELECT v FROM tb").await.unwrap()), vec!["29"]);
    // A table the block wrote is read as of the version its writes are staged on; a row that a
    // writer outside a block changed since is read anew when the block changes it (the UPDATE
    // runs again on the latest version, with the block's write moved onto it): the block
    // commits, and neither update is lost.
    a.execute("BEGIN; UPDATE ta SET v = v + 1 WHERE id = 2").await.unwrap();
    db.execute("UPDATE ta SET v = v + 100 WHERE id = 1").await.unwrap();
    a.execute("UPDATE ta SET v = v + 1 WHERE id = 1; COMMIT").await.unwrap();
    let all = rows(&db.query("SELECT id || ':' || v FROM ta ORDER BY id").await.unwrap());
    assert_eq!(all, vec!["1:243", "2:6"]);
}

/// An UPDATE or DELETE outside a block waits for the rows a READ COMMITTED block changed, as in
/// PostgreSQL: it then runs on the rows as the block committed them (a row the block deleted is
/// not there), and the block's COMMIT is not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_outside_a_block_wait_for_the_rows_a_block_changed() {
    // A long wait, so that the test does not depend on how fast this machine is.
    let db = open_with_row_lock_wait("memory://autocommit-waits", Duration::from_secs(60)).await;
    db.execute("CREATE TABLE acc (id bigint PRIMARY KEY, v bigint); INSERT INTO acc VALUES (1, 1), (2, 0), (3, 0)")
        .await
        .unwrap();
    let (a, b, c) = (db.session(), db.session(), db.session());
    a.execute("BEGIN; UPDATE acc SET v = v + 1 WHERE id = 1; DELETE FROM acc WHERE id = 3").await.unwrap();
    let tag = |results: Vec<sluice::StatementResult>| match results.last() {
        Some(sluice::StatementResult::Command { tag, .. }) => tag.clone(),
        other => panic!("not a command: {other:?}"),
    };
    let updater = tokio::spawn(async move { tag(b.execute("UPDATE acc SET v = v * 10 WHERE id = 1").await.unwrap()) });
    let deleter = tokio::spawn(async move { tag(c.execute("DELETE FROM acc WHERE id = 3").await.unwrap()) });
    // A row nobody holds is written at once.
    db.execute("UPDATE acc SET v = v + 5 WHERE id = 2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!updater.is_finished() && !deleter.is_finished(), "the writers wait for the rows a holds");
    a.execute("COMMIT").await.unwrap();
    // The UPDATE multiplied the row as a committed it (2), not as it first read it (1); the row
    // a deleted was not there for the DELETE.
    assert_eq!(updater.await.unwrap(), "UPDATE 1");
    assert_eq!(deleter.await.unwrap(), "DELETE 0");
    let all = rows(&db.query("SELECT id || ':' || v FROM acc ORDER BY id").await.unwrap());
    assert_eq!(all, vec!["1:20", "2:5"]);
    // The statements' locks went with them: a block takes the rows at once.
    let started = Instant::now();
    a.execute("BEGIN; UPDATE acc SET v = 0 WHERE id = 1; UPDATE acc SET v = 0 WHERE id = 2; COMMIT").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(60), "no lock was left behind");
}

/// A block left idle holds the rows it changed only for `row_lock_wait`: another block's UPDATE
/// of one of them then goes on, the first to commit wins and the other's COMMIT is 40001. Of two
/// blocks that wait for each other's rows, one fails with 40P01 (deadlock detected) as in
/// PostgreSQL, and the other takes the row it waited for and commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn row_locks_of_an_idle_block_or_a_deadlock_hold_nobody_up_for_long() {
    let db = open_with_row_lock_wait("memory://idle-holder", Duration::from_millis(200)).await;
    db.execute("CREATE TABLE acc (id bigint PRIMARY KEY, v bigint); INSERT INTO acc VALUES (1, 0), (2, 0)")
        .await
        .unwrap();
    let (a, b) = (db.session(), db.session());
    a.execute("BEGIN; UPDATE acc SET v = 1 WHERE id = 1").await.unwrap();
    let started = Instant::now();
    b.execute("BEGIN; UPDATE acc SET v = 2 WHERE id = 1; COMMIT").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200), "b waited for a's row first");
    let err = a.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    // Each holds one row and asks for the other's.
    a.execute("BEGIN; UPDATE acc SET v = 10 WHERE id = 1").await.unwrap();
    b.execute("BEGIN; UPDATE acc SET v = 20 WHERE id = 2").await.unwrap();
    let (a, b) = (Arc::new(a), Arc::new(b));
    let first = {
        let a = a.clone();
        tokio::spawn(async move { a.execute("UPDATE acc SET v = 11 WHERE id = 2").await.map(|_| ()) })
    };
    let second = {
        let b = b.clone();
        tokio::spawn(async move { b.execute("UPDATE acc SET v = 21 WHERE id = 1").await.map(|_| ()) })
    };
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    let (failed, winner, loser) = match (&first, &second) {
        (Err(e), Ok(())) => (e, &b, &a),
        (Ok(()), Err(e)) => (e, &a, &b),
        other => panic!("one of the two fails with 40P01: {other:?}"),
    };
    assert_eq!(failed.sqlstate(), "40P01", "{failed}");
    assert!(failed.to_string().contains("deadlock detected"), "{failed}");
    winner.execute("COMMIT").await.unwrap();
    // The failed block's COMMIT rolls it back, as PostgreSQL's does.
    loser.execute("COMMIT").await.unwrap();
    let expected = if std::ptr::eq(winner, &b) { vec!["1:21", "2:20"] } else { vec!["1:10", "2:11"] };
    assert_eq!(rows(&db.query("SELECT id || ':' || v FROM acc ORDER BY id").await.unwrap()), expected);
}

/// A database whose READ COMMITTED statements wait at most `wait` for a row lock.
async fn open_with_row_lock_wait(url: &str, wait: Duration) -> Database {
    let options = sluice::DatabaseOptions { row_lock_wait: wait, ..Default::default() };
    Database::open_with(url, options).await.unwrap()
}

/// The sums of ta and tb and the rows of tc, as a session reads them.
async fn block_sums(session: &sluice::Session) -> Vec<String> {
    let mut out = Vec::new();
    for sql in ["SELECT sum(v) FROM ta", "SELECT sum(v) FROM tb", "SELECT count(*) FROM tc"] {
        out.extend(rows(&session.query(sql).await.unwrap()));
    }
    out
}

/// SERIALIZABLE as PostgreSQL defines it: two blocks that each read the table the other writes
/// (write skew, which REPEATABLE READ lets both commit) cannot both commit; the later COMMIT is
/// 40001 and nothing of it applies. The level reads back as asked, and is fixed by the first
/// query (25001 after it).
#[tokio::test]
async fn serializable_blocks_that_read_what_the_other_wrote_cannot_both_commit() {
    let db = Database::open("memory://serializable").await.unwrap();
    db.execute("CREATE TABLE a (id bigint PRIMARY KEY, v bigint); CREATE TABLE b (id bigint PRIMARY KEY, v bigint)")
        .await
        .unwrap();
    db.execute("INSERT INTO a VALUES (1, 10); INSERT INTO b VALUES (1, 20)").await.unwrap();
    let sum = |db: &Database, table: &str| {
        let (db, sql) = (db.clone(), format!("SELECT sum(v) FROM {table}"));
        async move { rows(&db.query(&sql).await.unwrap()) }
    };
    let (s, t) = (db.session(), db.session());

    // READ COMMITTED (the default) and REPEATABLE READ: the write skew commits, as in PostgreSQL.
    s.execute("BEGIN; SELECT sum(v) FROM a; INSERT INTO b VALUES (2, 1)").await.unwrap();
    t.execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT sum(v) FROM b; INSERT INTO a VALUES (2, 1)")
        .await
        .unwrap();
    assert_eq!(t.isolation().name(), "repeatable read");
    s.execute("COMMIT").await.unwrap();
    t.execute("COMMIT").await.unwrap();
    assert_eq!((sum(&db, "a").await, sum(&db, "b").await), (vec!["11".to_string()], vec!["21".to_string()]));

    // SERIALIZABLE: the second COMMIT fails, whichever way the level was asked for.
    for begin in ["BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"] {
        s.execute(&format!("{begin}; SELECT sum(v) FROM a; INSERT INTO b VALUES (3, 1)")).await.unwrap();
        t.execute(&format!("{begin}; SELECT sum(v) FROM b; INSERT INTO a VALUES (3, 1)")).await.unwrap();
        assert_eq!(s.isolation().name(), "serializable");
        s.execute("COMMIT").await.unwrap();
        let err = t.execute("COMMIT").await.unwrap_err();
        assert_eq!(err.sqlstate(), "40001", "{err}");
        assert_eq!((sum(&db, "a").await, sum(&db, "b").await), (vec!["11".to_string()], vec!["22".to_string()]));
        db.execute("DELETE FROM b WHERE id = 3").await.unwrap();
    }

    // A serializable block that only reads commits, and one whose tables nobody changed too.
    s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT sum(v) FROM a").await.unwrap();
    db.execute("INSERT INTO a VALUES (4, 1)").await.unwrap();
    s.execute("COMMIT").await.unwrap();
    s.execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT sum(v) FROM a; INSERT INTO b VALUES (5, 1); COMMIT")
        .await
        .unwrap();
    assert_eq!(sum(&db, "b").await, vec!["22"]);

    // The level is fixed by the first query, and savepoints share it.
    let err = s.execute("BEGIN; SELECT 1; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").await.unwrap_err();
    assert_eq!(err.sqlstate(), "25001", "{err}");
    s.execute("ROLLBACK").await.unwrap();
    let err = s.execute("BEGIN; SAVEPOINT p; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").await.unwrap_err();
    assert_eq!(err.sqlstate(), "25001", "{err}");
    s.execute("ROLLBACK").await.unwrap();
    assert_eq!(s.isolation().name(), "read committed");

    // default_transaction_isolation = serializable: blocks and autocommit writes are serializable.
    s.set_default_isolation(sluice::transaction::Isolation::Serializable);
    s.execute("BEGIN; SELECT sum(v) FROM a; INSERT INTO b VALUES (6, 1)").await.unwrap();
    t.execute("INSERT INTO a VALUES (6, 1)").await.unwrap();
    let err = s.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    s.execute("INSERT INTO b SELECT id + 100, v FROM a").await.unwrap();
    assert_eq!(sum(&db, "b").await, vec!["35"]);
}
