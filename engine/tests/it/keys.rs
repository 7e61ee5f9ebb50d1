//! Keys under concurrent writers, and across a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use sluice::Database;

use crate::common::{rng_from, seed};

/// One acknowledged upsert: its key, value, and when it was sent and acknowledged.
struct Ack {
    key: u32,
    value: String,
    sent: Instant,
    acked: Instant,
}

/// The rows of a query, sorted, each as its cells.
async fn rows(db: &Database, sql: &str) -> Vec<Vec<String>> {
    let batches = db.query(sql).await.unwrap();
    crate::common::rows(&batches).iter().map(|line| line.split('|').map(str::to_string).collect()).collect()
}

/// Eight sessions upsert overlapping keys at once (ON CONFLICT DO UPDATE): each key is there
/// once, holding a value no acknowledged upsert of it overtook; after a restart the keys still
/// hold and are still enforced.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_upserts_keep_each_key_once_with_the_last_acknowledged_value() {
    let seed = seed("concurrent_upserts");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    db.execute("CREATE TABLE kv (k int PRIMARY KEY, v text)").await.unwrap();
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for client in 0..8u64 {
        let session = db.session();
        let acks = acks.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = rng_from(seed ^ client);
            let mut n = 0;
            while Instant::now() < deadline {
                n += 1;
                let key: u32 = rng.random_range(0..40);
                let value = format!("c{client}-{n}");
                let sent = Instant::now();
                let sql = format!(
                    "INSERT INTO kv VALUES ({key}, '{value}'), ({}, '{value}') ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                    key + 40
                );
                match session.execute(&sql).await {
                    Ok(_) => {
                        let acked = Instant::now();
                        let mut acks = acks.lock().unwrap();
                        acks.push(Ack { key, value: value.clone(), sent, acked });
                        acks.push(Ack { key: key + 40, value, sent, acked });
                    }
                    // A concurrent commit may make this one retry-worthy; never anything else.
                    Err(e) => assert_eq!(e.sqlstate(), "40001", "seed {seed}: {e}"),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    assert!(acks.len() > 16, "seed {seed}: only {} upserts went through", acks.len());
    let table = rows(&db, "SELECT k, v FROM kv ORDER BY k").await;
    let distinct = rows(&db, "SELECT count(DISTINCT k), count(*) FROM kv").await;
    assert_eq!(distinct[0][0], distinct[0][1], "seed {seed}: a key is there twice");
    let mut by_key: HashMap<u32, Vec<&Ack>> = HashMap::new();
    for ack in acks.iter() {
        by_key.entry(ack.key).or_default().push(ack);
    }
    assert_eq!(table.len(), by_key.len(), "seed {seed}: keys written {} but held {}", by_key.len(), table.len());
    for row in &table {
        let key: u32 = row[0].parse().unwrap();
        let writes = &by_key[&key];
        let winner = writes
            .iter()
            .find(|a| a.value == row[1])
            .unwrap_or_else(|| panic!("seed {seed}: key {key} holds {}, which no acknowledged upsert wrote", row[1]));
        let overtaken = writes.iter().find(|a| a.sent > winner.acked);
        assert!(
            overtaken.is_none(),
            "seed {seed}: key {key} holds {} though {} was sent after it was acknowledged",
            winner.value,
            overtaken.map(|a| a.value.as_str()).unwrap_or_default()
        );
    }
    drop(db);

    let db = Database::open(&path).await.unwrap();
    let again = rows(&db, "SELECT k, v FROM kv ORDER BY k").await;
    assert_eq!(again, table, "seed {seed}: the table changed across the restart");
    // A key that is there (a slow machine may not have drawn key 0 in the 5 s).
    let held = &table[0][0];
    let err = db.execute(&format!("INSERT INTO kv VALUES ({held}, 'dup')")).await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    db.execute("INSERT INTO kv VALUES (1000, 'new') ON CONFLICT DO NOTHING").await.unwrap();
    let count = rows(&db, "SELECT count(*) FROM kv").await;
    assert_eq!(count[0][0], (table.len() + 1).to_string());
}

/// Runs `first` on `a` and `second` on `b` at once: each succeeds, or fails with 23505 or 40001.
async fn race(a: &Database, b: &Database, first: &str, second: &str, what: &str) {
    let (x, y) = tokio::join!(a.execute(first), b.execute(second));
    for result in [&x, &y] {
        if let Err(e) = result {
            assert!(["23505", "40001"].contains(&e.sqlstate()), "{what}: {e}");
        }
    }
}

/// Two handles on one warehouse folder (as two processes would be) share no lock: a commit that
/// checked its keys conflicts with the other's concurrent append (40001) rather than leaving a
/// duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_on_one_folder_never_store_a_key_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let a = Database::open(&path).await.unwrap();
    a.execute("CREATE TABLE kv (k int PRIMARY KEY, v text)").await.unwrap();
    let b = Database::open(&path).await.unwrap();
    for round in 0..20 {
        let (first, second) =
            (format!("INSERT INTO kv VALUES ({round}, 'a')"), format!("INSERT INTO kv VALUES ({round}, 'b')"));
        race(&a, &b, &first, &second, &format!("round {round}")).await;
    }
    let counts = rows(&a, "SELECT count(DISTINCT k), count(*) FROM kv").await;
    assert_eq!(counts[0][0], counts[0][1], "a key is there twice");
    // Updates from both handles that move different rows to one new key: one of them fails.
    a.execute("INSERT INTO kv SELECT k + 100, 'moved' FROM kv").await.unwrap();
    for round in 0..20 {
        let (first, second) = (
            format!("UPDATE kv SET k = {} WHERE k = {round}", 1000 + round),
            format!("UPDATE kv SET k = {} WHERE k = {}", 1000 + round, round + 100),
        );
        race(&a, &b, &first, &second, &format!("update round {round}")).await;
    }
    let counts = rows(&a, "SELECT count(DISTINCT k), count(*) FROM kv").await;
    assert_eq!(counts[0][0], counts[0][1], "an update put a key there twice");
}

/// Random inserts, updates and deletes on a table with a composite primary key and a UNIQUE
/// column; after each, lookups by key (which read through the key index) return what the same
/// filters return when they hide the key from the index (`a + 0`, which scans the files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_by_key_agree_with_scans_through_random_changes() {
    let seed = seed("key_lookups");
    let mut rng = rng_from(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE t (a int, b text, c bigint UNIQUE, v int, PRIMARY KEY (a, b))").await.unwrap();
    let plan = rows(&db, "EXPLAIN SELECT * FROM t WHERE a = 1 AND b = 'x'").await;
    assert!(!format!("{plan:?}").contains("rows_by_key"), "an empty table needs no index: {plan:?}");
    for step in 0..60 {
        let a: i32 = rng.random_range(0..20);
        let b = ["x", "y", "z"][rng.random_range(0..3)];
        let statement = match rng.random_range(0..5) {
            0 | 1 => {
                let values: Vec<String> = (0..rng.random_range(1..6))
                    .map(|i| format!("({}, '{}', {}, {step})", a + i, b, rng.random_range(0..1000)))
                    .collect();
                format!("INSERT INTO t VALUES {} ON CONFLICT DO NOTHING", values.join(", "))
            }
            2 => format!("UPDATE t SET v = v + 1, c = c + 1000 WHERE a = {a} AND b = '{b}'"),
            3 => format!("DELETE FROM t WHERE a IN ({a}, {}) AND b = '{b}'", a + 1),
            _ => format!("DELETE FROM t WHERE c = {}", rng.random_range(0..1000)),
        };
        if let Err(e) = db.execute(&statement).await {
            assert_eq!(e.sqlstate(), "23505", "seed {seed}, step {step}: {statement}: {e}");
        }
        for (indexed, scanned) in [
            (format!("a = {a} AND b = '{b}'"), format!("a + 0 = {a} AND b = '{b}'")),
            (
                format!("a IN ({a}, {}, 99) AND b = '{b}'", a + 2),
                format!("a + 0 IN ({a}, {}, 99) AND b = '{b}'", a + 2),
            ),
            (
                format!("(a = {a} OR a = {}) AND (b = 'x' OR b = 'z')", a + 1),
                format!("(a + 0 = {a} OR a + 0 = {}) AND (b = 'x' OR b = 'z')", a + 1),
            ),
            (format!("c = {}", rng.random_range(0..2000)), String::new()),
        ] {
            let scanned = if scanned.is_empty() { indexed.replace("c = ", "c + 0 = ") } else { scanned };
            let by_key = rows(&db, &format!("SELECT * FROM t WHERE {indexed} ORDER BY a, b")).await;
            let by_scan = rows(&db, &format!("SELECT * FROM t WHERE {scanned} ORDER BY a, b")).await;
            assert_eq!(by_key, by_scan, "seed {seed}, step {step}, after {statement}: WHERE {indexed}");
        }
    }
    db.execute("INSERT INTO t VALUES (1, 'x', -1, 0) ON CONFLICT DO NOTHING").await.unwrap();
    let plan = rows(&db, "EXPLAIN SELECT * FROM t WHERE a = 1 AND b = 'x'").await;
    assert!(format!("{plan:?}").contains("rows_by_key=1"), "seed {seed}: the lookup scans: {plan:?}");
    let plan = rows(&db, "EXPLAIN SELECT * FROM t WHERE a = 1").await;
    assert!(!format!("{plan:?}").contains("rows_by_key"), "half a key cannot use the index: {plan:?}");
}

/// The child of the kill test: eight sessions upsert overlapping keys until killed, printing
/// `send <key> <value>` before each statement and `ack <key> <value>` after it returns.
#[test]
#[ignore]
fn upsert_child() {
    let Ok(path) = std::env::var("SLUICE_UPSERT_WAREHOUSE") else { return };
    let seed: u64 = std::env::var("SLUICE_UPSERT_SEED").unwrap().parse().unwrap();
    let round = std::env::var("SLUICE_UPSERT_ROUND").unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        let mut tasks = Vec::new();
        for client in 0..8u64 {
            let session = db.session();
            let round = round.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = rng_from(seed ^ client);
                for n in 0.. {
                    let key: u32 = rng.random_range(0..40);
                    let value = format!("r{round}c{client}-{n}");
                    let sql = format!(
                        "INSERT INTO kv VALUES ({key}, '{value}') ON CONFLICT (k) DO UPDATE SET v = excluded.v"
                    );
                    println!("send {key} {value}");
                    match session.execute(&sql).await {
                        Ok(_) => println!("ack {key} {value}"),
                        Err(e) => assert_eq!(e.sqlstate(), "40001", "{e}"),
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Eight sessions upsert overlapping keys in a process that is killed (SIGKILL) in the middle:
/// after a restart each key is there once, holding a value that was sent and that no
/// acknowledged upsert overtook (sent after it was acknowledged); the key still holds.
#[tokio::test]
async fn upserts_killed_in_the_middle_leave_each_key_once() {
    let seed = seed("upsert_kill");
    let mut rng = rng_from(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute("CREATE TABLE kv (k int PRIMARY KEY, v text)").await.unwrap();
    let mut lines = Vec::new();
    for round in 0..3u64 {
        let child = crate::common::ChildTest::spawn(
            "keys::upsert_child",
            &[
                ("SLUICE_UPSERT_WAREHOUSE", path.clone()),
                ("SLUICE_UPSERT_SEED", (seed ^ (round << 32)).to_string()),
                ("SLUICE_UPSERT_ROUND", round.to_string()),
            ],
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(1500..3500)));
        let early: Vec<String> = child.lines.try_iter().collect();
        lines.extend(early);
        lines.extend(child.kill());
    }
    // Line order is the order the children printed in (one stdout, rounds one after another).
    let mut sent_at: HashMap<String, usize> = HashMap::new();
    let mut acked: HashMap<u32, Vec<(String, usize)>> = HashMap::new();
    for (at, line) in lines.iter().enumerate() {
        let mut parts = line.split(' ');
        let (Some(kind), Some(key), Some(value)) = (parts.next(), parts.next(), parts.next()) else { continue };
        match kind {
            "send" => {
                sent_at.insert(value.to_string(), at);
            }
            "ack" => acked.entry(key.parse().unwrap()).or_default().push((value.to_string(), at)),
            _ => {}
        }
    }
    assert!(acked.values().map(Vec::len).sum::<usize>() > 16, "seed {seed}: few upserts went through");
    let db = Database::open(&path).await.unwrap();
    let counts = rows(&db, "SELECT count(DISTINCT k), count(*) FROM kv").await;
    assert_eq!(counts[0][0], counts[0][1], "seed {seed}: a key is there twice after the kills");
    for row in rows(&db, "SELECT k, v FROM kv ORDER BY k").await {
        let key: u32 = row[0].parse().unwrap();
        let value = &row[1];
        assert!(sent_at.contains_key(value), "seed {seed}: key {key} holds {value}, which no one sent");
        let acked_at = acked.get(&key).and_then(|a| a.iter().find(|(v, _)| v == value)).map(|(_, at)| *at);
        if let Some(acked_at) = acked_at {
            let overtaken = acked.get(&key).into_iter().flatten().find(|(v, _)| sent_at[v] > acked_at);
            assert!(overtaken.is_none(), "seed {seed}: key {key} holds {value}, overtaken by {overtaken:?}");
        }
    }
    for key in acked.keys() {
        let held = rows(&db, &format!("SELECT v FROM kv WHERE k = {key}")).await;
        assert_eq!(held.len(), 1, "seed {seed}: acknowledged key {key} is held {} times", held.len());
    }
    let err = db.execute("INSERT INTO kv SELECT k, 'dup' FROM kv LIMIT 1").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
}

/// A point query (`SELECT ... WHERE key = constant`, run without a plan: engine/src/sql/point.rs)
/// gives the columns, types, field metadata and rows of the planned query (`AND true` makes it
/// one), and the columns its prepared form describes; in a block, it sees the block's writes.
#[tokio::test]
async fn point_queries_answer_as_the_planned_query() {
    use sluice::StatementResult;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute(
        "CREATE TABLE p (id int PRIMARY KEY, s smallint, b bigint UNIQUE, n numeric(10,2), f double precision, \
         t text, v varchar(10), c char(5), ok boolean, d date, ts timestamp, tz timestamptz, a int[], by bytea)",
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO p VALUES (1, 1, 10, 1.50, 0.5, 'one', 'uno', 'ab', true, '2026-01-02', '2026-01-02 03:04:05', \
         '2026-01-02 03:04:05+00', '{1,2}', '\\x0102'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, NULL), (3, 3, 30, -3.25, -1e10, '', 'x', 'abcde', false, '1999-12-31', \
         '1999-12-31 23:59:59.5', '1999-12-31 23:59:59.5+02', '{}', '\\x')",
    )
    .await
    .unwrap();
    let run = |sql: String| {
        let db = &db;
        async move {
            match db.execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).pop() {
                Some(StatementResult::Rows { schema, batches }) => {
                    (schema.clone(), arrow::compute::concat_batches(&schema, &batches).unwrap())
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
    };
    let queries = [
        "SELECT * FROM p WHERE id = {k}",
        "SELECT t, id, n AS amount FROM p WHERE id = {k}",
        "SELECT p.c, p.v, p.ok, p.d, p.ts, p.tz FROM p WHERE p.id = {k}",
        "SELECT x.a, x.by, x.f, x.s FROM p x WHERE {k} = x.id",
        "SELECT id, id FROM p WHERE id = CAST({k} AS bigint)",
        "SELECT t FROM p WHERE b = {k}0",
    ];
    for query in queries {
        for k in [1, 2, 3, 4] {
            let point = query.replace("{k}", &k.to_string());
            let planned = format!("{point} AND true");
            let (schema, rows) = run(point.clone()).await;
            let (planned_schema, planned_rows) = run(planned).await;
            assert_eq!(schema, planned_schema, "{point}");
            assert_eq!(rows, planned_rows, "{point}");
            assert_eq!(rows.num_rows(), usize::from(k != 4 && !(k == 2 && point.contains("b = "))), "{point}");
            let described = db.prepare(&point).await.unwrap().result_schema.unwrap();
            // (The described names of duplicate columns are internal aliases, which the server
            // turns into the names; the types are the ones the rows come in.)
            let types =
                |s: &arrow::datatypes::Schema| s.fields().iter().map(|f| f.data_type().clone()).collect::<Vec<_>>();
            assert_eq!(types(&described), types(&schema), "{point}");
        }
    }
    // A block reads its own writes through the same path, and not after ROLLBACK.
    let session = db.session();
    session.execute("BEGIN").await.unwrap();
    session.execute("UPDATE p SET t = 'changed' WHERE id = 1").await.unwrap();
    session.execute("INSERT INTO p (id, t) VALUES (5, 'five')").await.unwrap();
    for (sql, expected) in [("SELECT t FROM p WHERE id = 1", "changed"), ("SELECT t FROM p WHERE id = 5", "five")] {
        let Some(StatementResult::Rows { batches, .. }) = session.execute(sql).await.unwrap().pop() else {
            panic!("{sql}")
        };
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        assert!(text.contains(expected), "{sql}: {text}");
    }
    session.execute("ROLLBACK").await.unwrap();
    assert_eq!(rows(&db, "SELECT t FROM p WHERE id = 1").await, vec![vec!["one".to_string()]]);
    assert!(rows(&db, "SELECT t FROM p WHERE id = 5").await.is_empty());
}
