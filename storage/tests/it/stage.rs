//! Staged handles: commits held in memory and shown to the handle's readers, committed as one
//! net commit on the base, rolled back to a mark, or discarded with their files.

use std::sync::Arc;

use sluice_storage::commit::CommitOutcome;
use sluice_storage::table::Table;

use crate::roundtrip::{batch, create, id_in, ids};

fn version(outcome: CommitOutcome) -> u64 {
    match outcome {
        CommitOutcome::Committed(c) => c.version,
        CommitOutcome::Conflict(c) => panic!("unexpected conflict: {c}"),
    }
}

fn parquet_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "parquet"))
        .count()
}

#[tokio::test]
async fn staged_commits_are_seen_by_the_handle_only_and_commit_as_one() {
    let dir = tempfile::tempdir().unwrap();
    for dvs in ["true", "false"] {
        let dir = dir.path().join(dvs);
        let table = create(&dir, &[], &[("delta.enableDeletionVectors", dvs)]).await;
        version(table.append(vec![batch(0..10)]).await.unwrap());
        let staged = Arc::new(table.staged().await.unwrap());
        assert!(staged.is_staged() && !staged.has_staged_commits());
        version(staged.append(vec![batch(10..15)]).await.unwrap());
        staged.delete_where(|_| true, |b| id_in(b, |i| i % 2 == 0)).await.unwrap();
        let mark = staged.stage_mark();
        version(staged.append(vec![batch(100..102)]).await.unwrap());
        assert_eq!(ids(&staged, None).await, vec![1, 3, 5, 7, 9, 11, 13, 100, 101]);
        // Others see nothing of it.
        assert_eq!(ids(&table, None).await, (0..10).collect::<Vec<_>>());
        assert_eq!(table.snapshot().await.unwrap().version(), 1);
        staged.rollback_stage_to(mark).await.unwrap();
        assert_eq!(ids(&staged, None).await, vec![1, 3, 5, 7, 9, 11, 13]);
        let committed = version(table.commit_staged(&staged, "t1").await.unwrap().unwrap().0);
        assert_eq!(committed, 2, "one commit for the whole stage");
        assert_eq!(ids(&table, None).await, vec![1, 3, 5, 7, 9, 11, 13]);
        assert_eq!(table.find_transaction(1, "t1").await.unwrap(), Some(2));
        assert_eq!(table.find_transaction(1, "other").await.unwrap(), None);
        // Undone by a compensating commit.
        version(table.revert_version(2).await.unwrap());
        assert_eq!(ids(&table, None).await, (0..10).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn a_discarded_stage_deletes_its_files_and_a_stale_stage_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let table: Table = create(dir.path(), &[], &[]).await;
    version(table.append(vec![batch(0..10)]).await.unwrap());
    let before = parquet_files(dir.path());
    let staged = table.staged().await.unwrap();
    version(staged.append(vec![batch(10..20)]).await.unwrap());
    assert!(parquet_files(dir.path()) > before);
    staged.discard_stage().await;
    assert_eq!(parquet_files(dir.path()), before, "the rolled-back files are deleted");
    assert_eq!(ids(&staged, None).await, (0..10).collect::<Vec<_>>());
    // A stage that deleted rows conflicts with a concurrent delete of the same file.
    let staged = table.staged().await.unwrap();
    staged.delete_where(|_| true, |b| id_in(b, |i| i < 3)).await.unwrap();
    table.delete_where(|_| true, |b| id_in(b, |i| i > 7)).await.unwrap();
    match table.commit_staged(&staged, "t2").await.unwrap() {
        Some((CommitOutcome::Conflict(_), _)) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(ids(&table, None).await, (0..8).collect::<Vec<_>>());
}

/// A transaction block reads a table as of the commit clock when it began; the snapshots a
/// handle replaced recently come from memory, and are the ones the log gives at that version.
#[tokio::test]
async fn recent_snapshots_as_of_the_clock_are_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let table: Table = create(dir.path(), &[], &[("delta.checkpointInterval", "10")]).await;
    let mut before = Vec::new();
    for i in 0..300i64 {
        before.push(sluice_storage::table::commit_clock());
        version(table.append(vec![batch(i * 10..i * 10 + 10)]).await.unwrap());
        if i % 3 == 0 {
            // Deletes too, so that files leave as well as join.
            table.delete_where(|_| true, |b| id_in(b, |id| id == i * 10 + 1)).await.unwrap();
        }
    }
    let latest = table.snapshot().await.unwrap().version();
    for clock in before.iter().rev().take(40).chain(before.iter().take(3)) {
        let kept = table.snapshot_as_of_clock(*clock).await.unwrap().expect("remembered");
        assert!(kept.version() < latest);
        let logged = sluice_storage::snapshot::Snapshot::load_version(table.store(), kept.version()).await.unwrap();
        let paths = |s: &sluice_storage::snapshot::Snapshot| {
            let mut p: Vec<(String, Option<String>)> =
                s.files().map(|a| (a.path.clone(), a.deletion_vector.as_ref().map(|d| d.unique_id()))).collect();
            p.sort();
            p
        };
        assert_eq!(paths(&kept), paths(&logged), "version {}", kept.version());
    }
}
