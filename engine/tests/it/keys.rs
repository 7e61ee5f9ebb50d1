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
    let err = db.execute("INSERT INTO kv VALUES (0, 'dup')").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    db.execute("INSERT INTO kv VALUES (1000, 'new') ON CONFLICT DO NOTHING").await.unwrap();
    let count = rows(&db, "SELECT count(*) FROM kv").await;
    assert_eq!(count[0][0], (table.len() + 1).to_string());
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
        let (x, y) = tokio::join!(a.execute(&first), b.execute(&second));
        for result in [&x, &y] {
            if let Err(e) = result {
                assert!(["23505", "40001"].contains(&e.sqlstate()), "round {round}: {e}");
            }
        }
    }
    let counts = rows(&a, "SELECT count(DISTINCT k), count(*) FROM kv").await;
    assert_eq!(counts[0][0], counts[0][1], "a key is there twice");
}
