//! A damaged log that a reader can step around still opens: an unreadable checkpoint gives way to
//! an older one or to the commits, and a corrupt newest commit to the version before it (on which
//! nothing can be committed).

use std::path::Path;

use sluice_storage::commit::CommitOutcome;
use sluice_storage::table::Table;
use sluice_storage::Error;

use crate::roundtrip::{batch, create, ids};

fn committed(outcome: CommitOutcome) -> u64 {
    match outcome {
        CommitOutcome::Committed(c) => c.version,
        CommitOutcome::Conflict(c) => panic!("unexpected conflict: {c}"),
    }
}

fn log_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join("_delta_log").join(name)
}

/// Versions 1..=5 each append ten rows; checkpoints at 2 and 4.
async fn five_appends(dir: &Path) -> Table {
    let table = create(dir, &[], &[("delta.checkpointInterval", "2")]).await;
    for start in 0..5 {
        committed(table.append(vec![batch(start * 10..start * 10 + 10)]).await.unwrap());
    }
    assert!(log_file(dir, "00000000000000000004.checkpoint.parquet").exists());
    table
}

async fn open(dir: &Path) -> sluice_storage::Result<Table> {
    Table::open_uri(dir.to_str().unwrap()).await
}

/// Keeps the footer magic but spoils the metadata and pages in between.
fn garble(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let end = bytes.len() - 8;
    for byte in &mut bytes[4..end] {
        *byte ^= 0x5a;
    }
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

#[tokio::test]
async fn an_unreadable_checkpoint_gives_way_to_an_older_one_or_the_commits() {
    let dir = tempfile::tempdir().unwrap();
    five_appends(dir.path()).await;
    let all: Vec<i64> = (0..50).collect();
    let newest = log_file(dir.path(), "00000000000000000004.checkpoint.parquet");
    let older = log_file(dir.path(), "00000000000000000002.checkpoint.parquet");
    let good_newest = std::fs::read(&newest).unwrap();

    // Named by _last_checkpoint, truncated: the checkpoint of version 2 stands in.
    truncate(&newest);
    let table = open(dir.path()).await.unwrap();
    assert_eq!(table.cached_snapshot().version(), 5);
    assert_eq!(table.cached_snapshot().checkpoint_version(), Some(2));
    assert_eq!(ids(&table, None).await, all);
    // Time travel to the checkpoint's own version replays instead.
    assert_eq!(ids(&table, Some(4)).await, (0..40).collect::<Vec<_>>());

    // Garbled, and found by listing (no hint).
    std::fs::write(&newest, &good_newest).unwrap();
    garble(&newest);
    std::fs::remove_file(log_file(dir.path(), "_last_checkpoint")).unwrap();
    let table = open(dir.path()).await.unwrap();
    assert_eq!(table.cached_snapshot().checkpoint_version(), Some(2));
    assert_eq!(ids(&table, None).await, all);

    // Both checkpoints spoiled: every commit from version 0 is still there, so replay them.
    truncate(&older);
    let table = open(dir.path()).await.unwrap();
    assert_eq!(table.cached_snapshot().version(), 5);
    assert_eq!(table.cached_snapshot().checkpoint_version(), None);
    assert_eq!(ids(&table, None).await, all);
    // Writing on top works, and the next checkpoint is whole again.
    committed(table.append(vec![batch(50..51)]).await.unwrap());
    assert_eq!(ids(&open(dir.path()).await.unwrap(), None).await.len(), 51);

    // Without the early commits there is nothing to fall back to: the error names the checkpoint.
    std::fs::remove_file(log_file(dir.path(), "00000000000000000006.checkpoint.parquet")).unwrap();
    std::fs::remove_file(log_file(dir.path(), "_last_checkpoint")).unwrap();
    std::fs::remove_file(log_file(dir.path(), "00000000000000000000.json")).unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, Error::CorruptCheckpoint { version: 4, .. })
            && err.to_string().contains("00000000000000000004.checkpoint.parquet"),
        "{err}"
    );
}

#[tokio::test]
async fn a_corrupt_newest_commit_opens_the_version_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let writer = five_appends(dir.path()).await;
    let reader = open(dir.path()).await.unwrap();
    let newest = log_file(dir.path(), "00000000000000000005.json");
    let spoiled = b"{\"add\": {\"path\": trunc".to_vec();
    std::fs::write(&newest, &spoiled).unwrap();

    // Through _last_checkpoint (the checkpoint of version 4, then probing), and by listing.
    let table = open(dir.path()).await.unwrap();
    assert_eq!(table.cached_snapshot().version(), 4);
    assert_eq!(ids(&table, None).await, (0..40).collect::<Vec<_>>());
    std::fs::remove_file(log_file(dir.path(), "_last_checkpoint")).unwrap();
    assert_eq!(open(dir.path()).await.unwrap().cached_snapshot().version(), 4);
    // Also with no checkpoint at all.
    std::fs::remove_file(log_file(dir.path(), "00000000000000000004.checkpoint.parquet")).unwrap();
    std::fs::remove_file(log_file(dir.path(), "00000000000000000002.checkpoint.parquet")).unwrap();
    let table = open(dir.path()).await.unwrap();
    assert_eq!(table.cached_snapshot().version(), 4);
    assert_eq!(ids(&table, None).await, (0..40).collect::<Vec<_>>());
    // A handle that had already read version 5 keeps it; one at an older version does not pass 4.
    assert_eq!(reader.snapshot().await.unwrap().version(), 5);
    assert_eq!(writer.cached_snapshot().version(), 5);
    let stale = open(dir.path()).await.unwrap();
    assert_eq!(stale.snapshot().await.unwrap().version(), 4);

    // Committing on top names the corrupt file and leaves it as it was.
    for handle in [&table, &stale] {
        let err = handle.append(vec![batch(100..101)]).await.unwrap_err();
        assert!(
            matches!(err, Error::CorruptCommit { version: 5, .. })
                && err.to_string().contains("00000000000000000005.json"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&newest).unwrap(), spoiled);
    assert!(!log_file(dir.path(), "00000000000000000006.json").exists());
    // Time travel to the corrupt version itself is an error.
    assert!(matches!(table.snapshot_at_version(5).await, Err(Error::CorruptCommit { version: 5, .. })));
}

#[tokio::test]
async fn a_corrupt_commit_inside_the_log_stays_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    for start in 0..3 {
        committed(table.append(vec![batch(start..start + 1)]).await.unwrap());
    }
    std::fs::write(log_file(dir.path(), "00000000000000000002.json"), b"garbage").unwrap();
    let err = open(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, Error::CorruptCommit { version: 2, .. }) && err.to_string().contains("00000000000000000002.json"),
        "{err}"
    );
    // So does time travel to it.
    let err = table.snapshot_at_version(2).await.unwrap_err();
    assert!(matches!(err, Error::CorruptCommit { version: 2, .. }), "{err}");
}
