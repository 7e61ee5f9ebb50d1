//! Standalone sequences across restarts and crashes: a value handed out is never handed out
//! again, whether the warehouse was closed or its process killed, and a restart skips at most the
//! values a mark reserved (`sluice::sequence::LOGGED_VALUES`).
//!
//! The crash test's child is this test binary (`--ignored --exact sequences::child`), calling
//! `nextval` in a loop and printing `ok <value>` after each call returns.

use std::time::Duration;

use sluice::sequence::LOGGED_VALUES;
use sluice::Database;

use crate::common::rows;

async fn next(db: &Database, sequence: &str) -> i64 {
    let batches = db.query(&format!("SELECT nextval('{sequence}')")).await.unwrap();
    rows(&batches).first().unwrap().parse().unwrap()
}

#[tokio::test]
async fn values_never_repeat_after_reopening_the_warehouse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warehouse");
    let path = path.to_str().unwrap();
    let mut handed: Vec<i64> = Vec::new();
    {
        let db = Database::open(path).await.unwrap();
        db.execute("CREATE SEQUENCE s INCREMENT 3").await.unwrap();
        db.execute("CREATE TABLE t (id bigint DEFAULT nextval('s'), note text)").await.unwrap();
        for _ in 0..5 {
            handed.push(next(&db, "s").await);
        }
        // A block that rolls back keeps the values it took taken.
        let session = db.session();
        session.execute("BEGIN").await.unwrap();
        let batches = session.query("SELECT nextval('s')").await.unwrap();
        handed.push(rows(&batches).first().unwrap().parse().unwrap());
        session.execute("INSERT INTO t (note) VALUES ('a'), ('b')").await.unwrap();
        session.execute("ROLLBACK").await.unwrap();
        handed.push(next(&db, "s").await);
        assert_eq!(handed.last(), Some(&(1 + 3 * 8)), "the rolled-back rows' defaults took two values");
    }
    for round in 0..4 {
        let db = Database::open(path).await.unwrap();
        let before = *handed.last().unwrap();
        let first = next(&db, "s").await;
        assert!(first > before, "round {round}: {first} after {before} was handed out before the restart");
        assert!(
            first <= before + 3 * (LOGGED_VALUES + 1),
            "round {round}: the restart skipped more than the reserved values ({before} to {first})"
        );
        handed.push(first);
        db.execute("INSERT INTO t (note) VALUES ('x'), ('y')").await.unwrap();
        for _ in 0..(round * 20) {
            handed.push(next(&db, "s").await);
        }
    }
    let mut sorted = handed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), handed.len(), "a value was handed out twice: {handed:?}");
    // The rows' defaults took values of the same sequence, none of them handed out elsewhere.
    let db = Database::open(path).await.unwrap();
    let ids = rows(&db.query("SELECT id FROM t").await.unwrap());
    for id in &ids {
        assert!(!handed.contains(&id.parse().unwrap()), "row id {id} was also handed out by nextval");
    }
    assert_eq!(ids.len(), 8);

    // setval is written at once: a restart continues after it exactly.
    db.execute("SELECT setval('s', 10000)").await.unwrap();
    drop(db);
    let db = Database::open(path).await.unwrap();
    assert_eq!(next(&db, "s").await, 10003);
    // DROP SEQUENCE takes the sequence's mark with it; one created under the name starts anew.
    db.execute("ALTER TABLE t ALTER COLUMN id DROP DEFAULT").await.unwrap();
    db.execute("DROP SEQUENCE s").await.unwrap();
    db.execute("CREATE SEQUENCE s").await.unwrap();
    drop(db);
    let db = Database::open(path).await.unwrap();
    assert_eq!(next(&db, "s").await, 1);
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var("SLUICE_SEQUENCE_WAREHOUSE") else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        loop {
            let value = next(&db, "s").await;
            println!("ok {value}");
        }
    });
}

#[tokio::test]
async fn a_killed_process_never_hands_out_a_value_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute("CREATE SEQUENCE s").await.unwrap();
    let mut rng = crate::common::rng_from(crate::common::seed("sequences"));
    let mut handed: u64 = 0;
    let kills: u64 = 8;
    for round in 0..kills {
        let child = crate::common::ChildTest::spawn("sequences::child", &[("SLUICE_SEQUENCE_WAREHOUSE", path.clone())]);
        std::thread::sleep(Duration::from_millis(rand::Rng::random_range(&mut rng, 200..900)));
        let acknowledged = crate::common::last_ok(&child.kill());
        let Some(acknowledged) = acknowledged else { continue };
        assert!(acknowledged > handed, "round {round}: the child handed out {acknowledged} after {handed}");
        // A call in flight when the child was killed may have taken one more value.
        let db = Database::open(&path).await.unwrap();
        let value = u64::try_from(next(&db, "s").await).unwrap();
        assert!(value > acknowledged, "round {round}: {value} was handed out again after a kill");
        handed = value;
    }
    assert!(handed > kills, "values were handed out between the kills ({handed})");
}
