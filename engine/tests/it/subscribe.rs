//! `Database::subscribe`: a table's committed changes, in order, waited for (the way a test or an
//! application waits for rows to come through an asynchronous pipeline), from now or replayed
//! from a version.

use std::time::Duration;

use sluice::Database;

use crate::common::rows;

/// A change's rows as `id|w|_change_type` lines.
fn changed(change: &sluice::TableChange) -> Vec<String> {
    let mut out = Vec::new();
    for batch in &change.rows {
        let projected = batch.project(&[0, 1, 2]).unwrap();
        out.extend(rows(&[projected]));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_waits_for_pipeline_output() {
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE TABLE src (id int, v int);
         CREATE STREAMING TABLE dst WITH (mode = 'async') AS SELECT id, v * 2 AS w FROM STREAM(src)",
    )
    .await
    .unwrap();
    let mut output = db.subscribe("dst", None).await.unwrap();
    db.execute("INSERT INTO src VALUES (1, 10), (2, 20)").await.unwrap();
    // The async flow writes dst after the INSERT returned: the subscription waits for it.
    let change = output.next_within(Duration::from_secs(30)).await.unwrap().expect("the flow's output");
    assert_eq!(changed(&change), ["1|20|insert", "2|40|insert"]);
    db.execute("DELETE FROM dst WHERE id = 1").await.unwrap();
    let change = output.next_within(Duration::from_secs(30)).await.unwrap().expect("the delete");
    assert_eq!(changed(&change), ["1|20|delete"]);
    assert_eq!(change.version + 1, output.next_version());
    // Nothing more happened.
    assert!(output.next_within(Duration::from_millis(300)).await.unwrap().is_none());

    // From a version: the history again, each version once and in order.
    let mut replay = db.subscribe("public.dst", Some(0)).await.unwrap();
    let mut seen = Vec::new();
    while let Some(change) = replay.next_within(Duration::from_millis(300)).await.unwrap() {
        seen.push((change.version, changed(&change)));
    }
    let versions: Vec<u64> = seen.iter().map(|(v, _)| *v).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    let all: Vec<String> = seen.into_iter().flat_map(|(_, rows)| rows).collect();
    assert_eq!(all, ["1|20|insert", "2|40|insert", "1|20|delete"]);

    // A missing table is refused.
    assert!(db.subscribe("nope", None).await.is_err());
}

/// Reads every change of `subscription` until none comes for a while, as (version, rows).
async fn drain(subscription: &mut sluice::Subscription) -> Vec<(u64, Vec<String>)> {
    let mut seen = Vec::new();
    while let Some(change) = subscription.next_within(Duration::from_millis(300)).await.unwrap() {
        seen.push((change.version, changed(&change)));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscription_resumes_after_what_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Database::open(&path).await.unwrap();
    // VACUUM may delete what the table gave up at once: only the subscription keeps it.
    db.execute(
        "CREATE TABLE t (id int, w int) \
           WITH (delta.deletedFileRetentionDuration = 'interval 0 hours', delta.logRetentionDuration = 'interval 0 hours');
         INSERT INTO t VALUES (1, 10), (2, 20);
         CREATE SUBSCRIPTION s FROM t;",
    )
    .await
    .unwrap();
    db.execute("INSERT INTO t VALUES (3, 30)").await.unwrap();
    let mut subscription = db.resume_subscription("s").await.unwrap();
    let seen = drain(&mut subscription).await;
    // The rows as of the subscription's creation (version 1), then the insert (version 2).
    assert_eq!(
        seen,
        [(1, vec!["1|10|insert".to_string(), "2|20|insert".to_string()]), (2, vec!["3|30|insert".to_string()])]
    );
    db.acknowledge_subscription("s", 1).await.unwrap();
    // Acknowledgements only move forward; one beyond the table is refused.
    db.acknowledge_subscription("s", 0).await.unwrap();
    let beyond = db.acknowledge_subscription("s", 99).await.unwrap_err();
    assert_eq!(beyond.sqlstate(), "22023", "{beyond}");
    db.execute("DELETE FROM t WHERE id = 1").await.unwrap();
    db.execute("UPDATE t SET w = 21 WHERE id = 2").await.unwrap();
    let vacuumed = db.query("VACUUM t").await.unwrap();
    assert_eq!(crate::common::rows(&vacuumed), Vec::<String>::new(), "VACUUM removed files a subscription needs");
    drop(subscription);
    drop(db);

    // After a restart: from version 2 (acknowledged 1), nothing skipped, nothing repeated.
    let db = Database::open(&path).await.unwrap();
    let mut subscription = db.resume_subscription("s").await.unwrap();
    let seen = drain(&mut subscription).await;
    let versions: Vec<u64> = seen.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, [2, 3, 4]);
    assert_eq!(seen[1].1, ["1|10|delete"]);
    assert_eq!(seen[2].1.len(), 2, "the update's two rows: {:?}", seen[2].1);
    db.acknowledge_subscription("s", 4).await.unwrap();
    let status = db
        .query(
            "SELECT name, \"table\", acknowledged_version, latest_version, pending_versions FROM sluice.subscriptions",
        )
        .await
        .unwrap();
    // Version 5 is the first VACUUM's commit (no rows changed), not acknowledged yet.
    assert_eq!(crate::common::rows(&status), ["s|public.t|4|5|1"]);
    // Acknowledged everything: VACUUM may now delete what the DELETE and UPDATE gave up.
    let vacuumed = db.query("VACUUM t").await.unwrap();
    assert!(!crate::common::rows(&vacuumed).is_empty());
    // A new change after the restart arrives live.
    db.execute("INSERT INTO t VALUES (5, 50)").await.unwrap();
    let change = subscription.next_within(Duration::from_secs(30)).await.unwrap().expect("the insert");
    assert_eq!(changed(&change), ["5|50|insert"]);
    assert!(change.version > 5);

    // The table cannot go while a subscription follows it, unless CASCADE.
    let refused = db.execute("DROP TABLE t").await.unwrap_err();
    assert_eq!(refused.sqlstate(), "2BP01", "{refused}");
    db.execute("DROP TABLE t CASCADE").await.unwrap();
    assert_eq!(db.resume_subscription("s").await.unwrap_err().sqlstate(), "42704");
}
