//! Foreign keys under concurrent writers, and across a restart.

use std::time::{Duration, Instant};

use rand::Rng;
use sluice::Database;

use crate::common::{rng_from, seed};

async fn count(db: &Database, sql: &str) -> i64 {
    let batches = db.query(sql).await.unwrap();
    crate::common::rows(&batches).first().and_then(|r| r.parse().ok()).unwrap_or(-1)
}

/// Parents the writers pick from (few, so that they meet often).
const PARENTS: u32 = 6;

const ORPHANS: &str =
    "SELECT count(*) FROM child c WHERE c.pid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM parent p WHERE p.id = c.pid)";

/// Sessions insert children of random parents (one in transaction blocks) while others delete
/// and re-insert parents:
/// whatever interleaving, no child is left without its parent (`on_delete`: the constraint's
/// action; with CASCADE the deletes take the children with them).
async fn no_orphans_under_concurrent_writers(name: &str, on_delete: &str) {
    let seed = seed(name);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    db.execute("CREATE TABLE parent (id int PRIMARY KEY, note text)").await.unwrap();
    db.execute(&format!("CREATE TABLE child (id int PRIMARY KEY, pid int REFERENCES parent {on_delete})"))
        .await
        .unwrap();
    db.execute("INSERT INTO parent SELECT i, 'p' FROM generate_series(0, 5) AS s(i)").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for client in 0..4u64 {
        let session = db.session();
        tasks.push(tokio::spawn(async move {
            let mut rng = rng_from(seed ^ client);
            let mut done = 0u32;
            let mut n = 0;
            while Instant::now() < deadline {
                n += 1;
                let parent: u32 = rng.random_range(0..PARENTS);
                let sql = match client {
                    0 => format!("INSERT INTO child VALUES ({}, {parent})", client * 1_000_000 + n),
                    // In a transaction block: its check is made again at COMMIT.
                    1 => format!(
                        "BEGIN; INSERT INTO child VALUES ({}, {parent}); SELECT count(*) FROM child; COMMIT",
                        client * 1_000_000 + n
                    ),
                    2 => format!("DELETE FROM parent WHERE id = {parent}"),
                    _ => format!("INSERT INTO parent VALUES ({parent}, 'again') ON CONFLICT DO NOTHING"),
                };
                let result = session.execute(&sql).await;
                if result.is_err() && session.in_transaction_block() {
                    session.execute("ROLLBACK").await.unwrap();
                }
                match result {
                    Ok(_) => done += 1,
                    // A missing parent, a referenced one, or a lost race: nothing else.
                    Err(e) => assert!(matches!(e.sqlstate(), "23503" | "40001"), "seed {seed}: {sql}: {e}"),
                }
            }
            done
        }));
    }
    let mut done = 0;
    for task in tasks {
        done += task.await.unwrap();
    }
    assert!(done > 20, "seed {seed}: only {done} statements went through");
    assert_eq!(count(&db, ORPHANS).await, 0, "seed {seed}: a child lost its parent");
    drop(db);

    // The constraint is in the catalog: after a restart it is still there and enforced.
    let db = Database::open(&path).await.unwrap();
    assert_eq!(count(&db, ORPHANS).await, 0, "seed {seed}");
    let err = db.execute("INSERT INTO child VALUES (-1, 12345)").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23503", "seed {seed}: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn children_never_outlive_their_parents_under_concurrent_writers() {
    no_orphans_under_concurrent_writers("fk_no_action", "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cascading_deletes_take_every_child_under_concurrent_writers() {
    no_orphans_under_concurrent_writers("fk_cascade", "ON DELETE CASCADE").await;
}

/// A cascade commits with the DELETE that caused it, in one transaction: a failure in the
/// cascade (a NOT NULL column set to NULL) leaves the parent too.
#[tokio::test]
async fn a_failing_cascade_undoes_its_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE parent (id int PRIMARY KEY)").await.unwrap();
    db.execute("CREATE TABLE loose (id int, pid int REFERENCES parent ON DELETE CASCADE)").await.unwrap();
    db.execute("CREATE TABLE strict (id int, pid int NOT NULL REFERENCES parent ON DELETE SET NULL)").await.unwrap();
    db.execute("INSERT INTO parent VALUES (1), (2)").await.unwrap();
    db.execute("INSERT INTO loose VALUES (1, 1), (2, 2)").await.unwrap();
    db.execute("INSERT INTO strict VALUES (1, 1)").await.unwrap();
    let err = db.execute("DELETE FROM parent WHERE id = 1").await.unwrap_err();
    assert_eq!(err.sqlstate(), "23502", "{err}");
    assert_eq!(count(&db, "SELECT count(*) FROM parent").await, 2);
    assert_eq!(count(&db, "SELECT count(*) FROM loose").await, 2, "the cascade's delete was undone too");
    db.execute("DELETE FROM parent WHERE id = 2").await.unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM loose").await, 1);
    assert_eq!(count(&db, "SELECT count(*) FROM parent").await, 1);
}

/// A transaction block's foreign key checks see other sessions' committed rows; what they found
/// is checked again at COMMIT: a parent deleted meanwhile, or a child added meanwhile to a
/// parent the block deleted, makes the COMMIT 40001 with nothing applied.
#[tokio::test]
async fn a_block_commits_nothing_that_a_concurrent_commit_made_an_orphan() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE parent (id int PRIMARY KEY)").await.unwrap();
    db.execute("CREATE TABLE child (id int PRIMARY KEY, pid int REFERENCES parent)").await.unwrap();
    db.execute("INSERT INTO parent VALUES (1), (2), (3)").await.unwrap();
    let (block, other) = (db.session(), db.session());

    // The block's child references parent 1; another session deletes parent 1 before COMMIT.
    block.execute("BEGIN").await.unwrap();
    block.execute("INSERT INTO child VALUES (10, 1)").await.unwrap();
    other.execute("DELETE FROM parent WHERE id = 1").await.unwrap();
    let err = block.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(count(&db, ORPHANS).await, 0);
    assert_eq!(count(&db, "SELECT count(*) FROM child").await, 0);

    // The block deletes parent 2; another session adds a child of 2 before COMMIT.
    block.execute("BEGIN").await.unwrap();
    block.execute("DELETE FROM parent WHERE id = 2").await.unwrap();
    other.execute("INSERT INTO child VALUES (20, 2)").await.unwrap();
    let err = block.execute("COMMIT").await.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(count(&db, ORPHANS).await, 0);
    assert_eq!(count(&db, "SELECT count(*) FROM parent").await, 2);

    // Unrelated commits meanwhile do not stop a block: its parent is still there.
    block.execute("BEGIN").await.unwrap();
    block.execute("INSERT INTO child VALUES (30, 3)").await.unwrap();
    other.execute("INSERT INTO parent VALUES (4)").await.unwrap();
    block.execute("COMMIT").await.unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM child WHERE pid = 3").await, 1);
}

/// A long chain of ON DELETE CASCADE (each row references the one before it) is deleted whole by
/// deleting its head: the cascades run one after another, not nested, so the chain's length
/// does not use stack.
#[tokio::test]
async fn a_long_cascade_chain_goes_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE chain (id int PRIMARY KEY, previous int REFERENCES chain ON DELETE CASCADE)")
        .await
        .unwrap();
    db.execute(
        "INSERT INTO chain SELECT i, CASE WHEN i = 0 THEN NULL ELSE i - 1 END FROM generate_series(0, 299) AS s(i)",
    )
    .await
    .unwrap();
    db.execute("INSERT INTO chain VALUES (1000, NULL)").await.unwrap();
    db.execute("DELETE FROM chain WHERE id = 0").await.unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM chain").await, 1);
}

/// Temporary tables cascade too (the DELETE runs in a transaction of its own, as any).
#[tokio::test]
async fn temporary_tables_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    let session = db.session();
    session.execute("CREATE TEMP TABLE tparent (id int PRIMARY KEY)").await.unwrap();
    session.execute("CREATE TEMP TABLE tchild (id int, pid int REFERENCES tparent ON DELETE CASCADE)").await.unwrap();
    session.execute("INSERT INTO tparent VALUES (1), (2)").await.unwrap();
    session.execute("INSERT INTO tchild VALUES (1, 1), (2, 2)").await.unwrap();
    session.execute("DELETE FROM tparent WHERE id = 1").await.unwrap();
    let rows = crate::common::rows(&session.query("SELECT id FROM tchild").await.unwrap());
    assert_eq!(rows, vec!["2".to_string()]);
}
