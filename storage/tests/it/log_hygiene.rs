//! The log stays tidy and readable by others: a table declares deletion vectors only once it
//! writes one; `.crc` files are written with each checkpoint and Spark's are read; log entries past
//! `delta.logRetentionDuration` go after a checkpoint, never one a retained version needs; and
//! delta-rs reads and writes a table whose log Sluice cleaned.

use std::time::{Duration, SystemTime};

use sluice_storage::actions::{Action, Txn};
use sluice_storage::commit::{CommitOutcome, Transaction};
use sluice_storage::log::LogFileKind;
use sluice_storage::table::Table;
use sluice_storage::write::{Mutation, WriteRequest};

use crate::common::fixtures;
use crate::peers::run_python_code;
use crate::roundtrip::{batch, create, ids};

fn committed(outcome: CommitOutcome) -> u64 {
    match outcome {
        CommitOutcome::Committed(c) => c.version,
        CommitOutcome::Conflict(c) => panic!("unexpected conflict: {c}"),
    }
}

fn log_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

fn delete_row(snapshot: &sluice_storage::snapshot::Snapshot, row: u64) -> Mutation {
    Mutation {
        deleted: vec![(snapshot.files_sorted()[0].clone(), [row].into_iter().collect())],
        operation: "DELETE".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn deletion_vectors_are_declared_by_the_first_delete() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    committed(table.append(vec![batch(0..10)]).await.unwrap());
    let plain = table.snapshot().await.unwrap();
    assert_eq!((plain.protocol().min_reader_version, plain.protocol().min_writer_version), (1, 2));
    // A writer on the old snapshot appends while the first delete upgrades the protocol: the
    // append is rebased over it (it needs nothing the upgrade changed).
    let other = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    let stale = other.snapshot().await.unwrap();
    committed(table.mutate(&plain, delete_row(&plain, 3)).await.unwrap());
    let upgraded = table.snapshot().await.unwrap();
    assert_eq!(upgraded.protocol().min_reader_version, 3);
    assert_eq!(upgraded.protocol().reader_features, Some(vec!["deletionVectors".to_string()]));
    assert!(upgraded.files().all(|f| f.deletion_vector.is_some()));
    let request = WriteRequest { batches: vec![batch(10..12)], ..Default::default() };
    assert_eq!(committed(other.write_on(&stale, request).await.unwrap()), 3);
    assert_eq!(ids(&table, None).await.len(), 11);
    // A SET TBLPROPERTIES built on the old protocol must not undo the upgrade: it conflicts.
    let mut transaction = Transaction::new(Some(&plain), "SET TBLPROPERTIES");
    let mut metadata = plain.metadata().clone();
    metadata.configuration.insert("owner".into(), "me".into());
    transaction.add_action(Action::Metadata(metadata));
    assert!(matches!(table.commit(&plain, transaction).await.unwrap(), CommitOutcome::Conflict(_)));
    // Purge, turn off, drop: the protocol goes back to the lowest one.
    committed(
        table
            .set_properties([("delta.enableDeletionVectors".to_string(), "false".to_string())].into(), &[])
            .await
            .unwrap(),
    );
    assert!(table.drop_feature("deletionVectors").await.is_err(), "live files still have deletion vectors");
    let purged = table.purge_deletion_vectors().await.unwrap();
    assert_eq!(purged.files_removed, 1);
    committed(table.drop_feature("deletionVectors").await.unwrap().unwrap());
    let dropped = table.snapshot().await.unwrap();
    assert_eq!((dropped.protocol().min_reader_version, dropped.protocol().min_writer_version), (1, 2));
    assert_eq!(ids(&table, None).await, (0..12).filter(|i| *i != 3).collect::<Vec<_>>());
    // Time travel to a version with deletion vectors still works.
    assert_eq!(ids(&table, Some(2)).await, (0..10).filter(|i| *i != 3).collect::<Vec<_>>());
    // And a delete now rewrites files.
    let snapshot = table.snapshot().await.unwrap();
    committed(table.mutate(&snapshot, delete_row(&snapshot, 0)).await.unwrap());
    let after = table.snapshot().await.unwrap();
    assert!(after.files().all(|f| f.deletion_vector.is_none()));
    assert_eq!(after.protocol().min_reader_version, 1);
}

#[tokio::test]
async fn every_checkpointed_version_has_a_crc_that_matches_it() {
    let dir = tempfile::tempdir().unwrap();
    // A checkpoint, and so a .crc, with every version.
    let table =
        create(dir.path(), &[], &[("delta.enableDeletionVectors", "true"), ("delta.checkpointInterval", "1")]).await;
    committed(table.append(vec![batch(0..10)]).await.unwrap());
    let snapshot = table.snapshot().await.unwrap();
    committed(table.mutate(&snapshot, delete_row(&snapshot, 1)).await.unwrap());
    let names = log_names(dir.path());
    for version in 0..=2u64 {
        assert!(names.contains(&format!("{version:020}.crc")), "{names:?}");
        let at = table.snapshot_at_version(version).await.unwrap();
        let checksum = sluice_storage::checksum::read(table.store(), version).await.unwrap().unwrap();
        assert_eq!(checksum.difference(&at), None, "version {version}");
        assert_eq!(checksum.num_files, at.file_count() as i64);
    }
    let latest = sluice_storage::checksum::read(table.store(), 2).await.unwrap().unwrap();
    assert_eq!((latest.num_deletion_vectors_opt, latest.num_deleted_records_opt), (Some(1), Some(1)));
    // A checksum that disagrees is told.
    let at_one = table.snapshot_at_version(1).await.unwrap();
    assert!(latest.difference(&at_one).is_some());
}

#[tokio::test]
async fn spark_crc_files_agree_with_what_sluice_replays() {
    let path = fixtures().join("cdf-table-with-cdc-and-dvs/delta");
    let table = Table::open_uri(path.to_str().unwrap()).await.unwrap();
    let latest = table.snapshot().await.unwrap().version();
    let mut checked = 0;
    for version in 0..=latest {
        let Some(checksum) = sluice_storage::checksum::read(table.store(), version).await.unwrap() else { continue };
        let snapshot = table.snapshot_at_version(version).await.unwrap();
        assert_eq!(checksum.difference(&snapshot), None, "version {version}");
        checked += 1;
    }
    assert!(checked >= 20, "the fixture's .crc files were read ({checked})");
}

/// Sets the modification time of every log file of a version below `before` to `age` ago.
fn age_log(dir: &std::path::Path, before: u64, age: Duration) {
    let when = SystemTime::now() - age;
    for entry in std::fs::read_dir(dir.join("_delta_log")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some((version, _)) = sluice_storage::log::parse_file_name(&name) else { continue };
        if version < before {
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
        }
    }
}

async fn commit_txn(table: &Table, n: i64) -> u64 {
    let snapshot = table.cached_snapshot();
    let mut transaction = Transaction::new(Some(&snapshot), "STREAMING UPDATE");
    transaction.add_action(Action::Txn(Txn { app_id: "app".into(), version: n, last_updated: None }));
    committed(table.commit(&snapshot, transaction).await.unwrap())
}

/// Without `delta.checkpointInterval`, checkpoints come every hundred versions while the table is
/// small, and further apart once a checkpoint would hold many entries (here 4,000 files: one per
/// 400 versions, see `Snapshot::checkpoint_due`); the table reopens and reads the same.
#[tokio::test]
async fn checkpoints_of_a_large_state_are_spaced_by_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    let checkpoints = |dir: &std::path::Path| -> Vec<u64> {
        log_names(dir)
            .iter()
            .filter_map(|n| sluice_storage::log::parse_file_name(n))
            .filter(|(_, kind)| *kind == LogFileKind::ClassicCheckpoint)
            .map(|(v, _)| v)
            .collect()
    };
    for n in 1..=100 {
        commit_txn(&table, n).await;
    }
    assert_eq!(checkpoints(dir.path()), [100]);
    // Files that are never read: only their number matters here.
    let snapshot = table.cached_snapshot();
    let mut transaction = Transaction::new(Some(&snapshot), "WRITE");
    transaction.add_actions((0..4_000).map(|i| {
        let add = serde_json::json!({"path": format!("part-{i:05}.parquet"), "size": 100, "modificationTime": 0, "dataChange": true});
        Action::Add(serde_json::from_value(add).unwrap())
    }));
    assert_eq!(committed(table.commit(&snapshot, transaction).await.unwrap()), 101);
    for n in 102..=900 {
        commit_txn(&table, n).await;
    }
    assert_eq!(checkpoints(dir.path()), [100, 500, 900]);
    let reopened = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    let snapshot = reopened.snapshot().await.unwrap();
    assert_eq!((snapshot.version(), snapshot.files().count()), (900, 4_000));
    assert_eq!(snapshot.txn_version("app"), Some(900));
}

const DELTA_RS_READS_AND_WRITES: &str = r#"
import sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
path, oldest = sys.argv[1], int(sys.argv[2])
dt = DeltaTable(path)
print(dt.version())
print(DeltaTable(path, version=oldest).version())
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("score", pa.float64())])
write_deltalake(path, pa.table({"id": [1000, 1001], "name": ["x", None], "score": [1.0, 2.0]}, schema=schema), mode="append")
print(DeltaTable(path).version())
"#;

#[tokio::test]
async fn ten_thousand_commits_keep_only_the_log_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(
        dir.path(),
        &[],
        &[("delta.logRetentionDuration", "interval 1 day"), ("delta.checkpointInterval", "100")],
    )
    .await;
    committed(table.append(vec![batch(0..5)]).await.unwrap());
    for n in 2..9_000 {
        commit_txn(&table, n).await;
    }
    // Everything so far was committed two days ago; what follows is inside the retention. (A
    // handle cleans at most hourly, and this one did at its first checkpoint: a new one cleans at
    // its first.)
    age_log(dir.path(), 9_000, Duration::from_secs(2 * 86_400));
    let table = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    for n in 9_000..=10_000 {
        commit_txn(&table, n).await;
    }
    // The new handle's first checkpoint (9,000) cleaned the log: the version latest at the cutoff is
    // 8,999, and the newest checkpoint at or below it is 8,900.
    let names = log_names(dir.path());
    let versions: Vec<u64> =
        names.iter().filter_map(|n| sluice_storage::log::parse_file_name(n)).map(|(v, _)| v).collect();
    assert_eq!(versions.iter().min(), Some(&8_900), "{:?}", &names[..5.min(names.len())]);
    assert!(names.contains(&format!("{:020}.checkpoint.parquet", 8_900)));
    let commits =
        names.iter().filter_map(|n| sluice_storage::log::parse_file_name(n)).filter(|(_, k)| *k == LogFileKind::Commit);
    assert_eq!(commits.count(), 10_000 - 8_900 + 1);
    // Every version inside the retention still time-travels; older ones are gone.
    let reopened = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    for version in [8_900, 8_950, 8_999, 9_000, 9_500, 10_000] {
        let snapshot = reopened.snapshot_at_version(version).await.unwrap();
        assert_eq!(snapshot.txn_version("app"), Some(version as i64));
        assert_eq!(ids(&reopened, Some(version)).await, (0..5).collect::<Vec<_>>());
    }
    assert!(reopened.snapshot_at_version(8_899).await.is_err());
    // delta-rs opens it, reads an old retained version, and appends; Sluice reads that commit.
    let output = run_python_code(DELTA_RS_READS_AND_WRITES, &[dir.path().to_str().unwrap(), "8900"]);
    assert_eq!(output.lines().collect::<Vec<_>>(), ["10000", "8900", "10001"]);
    let snapshot = reopened.snapshot().await.unwrap();
    assert_eq!(snapshot.version(), 10_001);
    assert_eq!(ids(&reopened, None).await, vec![0, 1, 2, 3, 4, 1000, 1001]);
}

#[tokio::test]
async fn a_table_that_declares_v2_checkpoints_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.checkpointPolicy", "v2"), ("delta.checkpointInterval", "2")]).await;
    let protocol = table.snapshot().await.unwrap().protocol().clone();
    assert!(protocol.reader_features.unwrap_or_default().contains(&"v2Checkpoint".to_string()));
    for n in 0..3 {
        committed(table.append(vec![batch(n * 10..n * 10 + 10)]).await.unwrap());
    }
    let checkpoints: Vec<(u64, LogFileKind)> = log_names(dir.path())
        .iter()
        .filter_map(|n| sluice_storage::log::parse_file_name(n))
        .filter(|(_, kind)| kind.is_checkpoint())
        .collect();
    assert_eq!(checkpoints, [(2, LogFileKind::V2Checkpoint { parquet: true })]);
    // Opened afresh, the table is replayed from the V2 checkpoint (and the commit after it).
    let reopened = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(ids(&reopened, None).await, (0..30).collect::<Vec<_>>());
    // Its first action is the checkpointMetadata header naming the version.
    let path = dir
        .path()
        .join("_delta_log")
        .join(log_names(dir.path()).into_iter().find(|n| n.starts_with("00000000000000000002.checkpoint.")).unwrap());
    let file = std::fs::File::open(path).unwrap();
    let batches: Vec<arrow::array::RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
    let headers: usize = batches
        .iter()
        .map(|b| {
            let column = b.column_by_name("checkpointMetadata").unwrap();
            column.len() - arrow::array::Array::null_count(column.as_ref())
        })
        .sum();
    assert_eq!(headers, 1, "one checkpointMetadata action");
}

#[tokio::test]
async fn log_cleanup_keeps_the_commits_a_change_reader_needs() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(
        dir.path(),
        &[],
        &[("delta.logRetentionDuration", "interval 1 day"), ("delta.checkpointInterval", "10")],
    )
    .await;
    committed(table.append(vec![batch(0..5)]).await.unwrap());
    for n in 2..100 {
        commit_txn(&table, n).await;
    }
    age_log(dir.path(), 100, Duration::from_secs(2 * 86_400));
    // A reader (a durable subscription) will read the changes from version 35 on.
    let table = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    table.retain_changes_from(Some(35));
    for n in 100..=110 {
        commit_txn(&table, n).await;
    }
    let versions: Vec<u64> =
        log_names(dir.path()).iter().filter_map(|n| sluice_storage::log::parse_file_name(n)).map(|(v, _)| v).collect();
    // The newest checkpoint at or below 34 (the snapshot before 35) is 30; nothing older is left.
    assert_eq!(versions.iter().min(), Some(&30));
    assert!(table.changes(35, None).await.is_ok());
}
