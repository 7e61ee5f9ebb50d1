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
