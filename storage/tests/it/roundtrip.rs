//! Tables written by sluice-storage, read back by sluice-storage: appends, overwrites, deletes and
//! updates with deletion vectors, partitions, time travel, the change data feed, checkpoints,
//! OPTIMIZE, VACUUM, RESTORE, conflicts and bad input.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use sluice_storage::commit::{CommitOutcome, ConflictReason};
use sluice_storage::scan::{scan, ScanOptions};
use sluice_storage::schema::{PrimitiveType, StructType};
use sluice_storage::store::TableStore;
use sluice_storage::table::{CreateTable, Table};
use sluice_storage::Error;

use crate::common::*;

pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
    ]))
}

pub fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<Option<String>> =
        ids.clone().map(|i| if i % 5 == 0 { None } else { Some(format!("n{}", i % 3)) }).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
            Arc::new(StringArray::from(names)),
            Arc::new(Float64Array::from(ids.map(|i| i as f64 / 2.0).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

pub async fn create(dir: &std::path::Path, partition: &[&str], properties: &[(&str, &str)]) -> Table {
    let store = TableStore::local(dir).unwrap();
    let create = CreateTable {
        schema: StructType::from_arrow(&schema()).unwrap(),
        partition_columns: partition.iter().map(|s| s.to_string()).collect(),
        properties: properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>(),
        ..Default::default()
    };
    Table::create(store, create).await.unwrap()
}

pub async fn ids(table: &Table, version: Option<u64>) -> Vec<i64> {
    let snapshot = match version {
        Some(v) => table.snapshot_at_version(v).await.unwrap(),
        None => table.snapshot().await.unwrap(),
    };
    let batches =
        scan(&snapshot, &ScanOptions { columns: Some(vec!["id".into()]), ..Default::default() }).await.unwrap();
    let mut ids: Vec<i64> =
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
    ids.sort();
    ids
}

fn committed(outcome: CommitOutcome) -> u64 {
    match outcome {
        CommitOutcome::Committed(c) => c.version,
        CommitOutcome::Conflict(c) => panic!("unexpected conflict: {c}"),
    }
}

pub fn id_in(batch: &RecordBatch, wanted: impl Fn(i64) -> bool) -> sluice_storage::Result<BooleanArray> {
    let index = batch.schema().index_of("id").unwrap();
    Ok(batch.column(index).as_primitive::<Int64Type>().iter().map(|v| v.map(&wanted)).collect())
}

#[tokio::test]
async fn appends_overwrites_deletes_and_time_travel() {
    let dir = tempfile::tempdir().unwrap();
    let table =
        create(dir.path(), &[], &[("delta.enableDeletionVectors", "true"), ("delta.checkpointInterval", "3")]).await;
    assert_eq!(committed(table.append(vec![batch(0..10)]).await.unwrap()), 1);
    assert_eq!(committed(table.append(vec![batch(10..20), batch(20..25)]).await.unwrap()), 2);
    let deleted = table.delete_where(|_| true, |b| id_in(b, |i| i % 2 == 0)).await.unwrap();
    assert_eq!(deleted.rows_affected, 13);
    assert_eq!(committed(deleted.outcome), 3);
    // Deletes are deletion vectors: the files stay, masked.
    let snapshot = table.snapshot().await.unwrap();
    assert!(snapshot.files().all(|f| f.deletion_vector.is_some()));
    assert!(dir.path().join("_delta_log/00000000000000000003.checkpoint.parquet").exists());
    assert_eq!(ids(&table, None).await, (0..25).filter(|i| i % 2 == 1).collect::<Vec<_>>());
    let updated = table
        .update_where(
            |_| true,
            |b| id_in(b, |i| i == 1),
            |rows| {
                let ids = Int64Array::from(vec![1001; rows.num_rows()]);
                let mut columns = rows.columns().to_vec();
                columns[0] = Arc::new(ids);
                Ok(RecordBatch::try_new(rows.schema(), columns).unwrap())
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.rows_affected, 1);
    assert!(ids(&table, None).await.contains(&1001));
    assert_eq!(committed(table.overwrite(vec![batch(100..103)]).await.unwrap()), 5);
    assert_eq!(ids(&table, None).await, vec![100, 101, 102]);
    // Time travel, also through a fresh handle that reads the checkpoint.
    let reopened = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(reopened.snapshot().await.unwrap().version(), 5);
    assert_eq!(ids(&reopened, Some(1)).await, (0..10).collect::<Vec<_>>());
    assert_eq!(ids(&reopened, Some(2)).await, (0..25).collect::<Vec<_>>());
    assert_eq!(ids(&reopened, Some(3)).await.len(), 12);
    let at = reopened.version_at_timestamp(chrono::Utc::now().timestamp_millis()).await.unwrap();
    assert_eq!(at, 5);
    assert!(matches!(reopened.snapshot_at_version(9).await, Err(Error::VersionNotFound { .. })));
    let history = reopened.history(None).await.unwrap();
    assert_eq!(
        history.iter().map(|h| h.operation.clone().unwrap()).collect::<Vec<_>>(),
        ["WRITE", "UPDATE", "DELETE", "WRITE", "WRITE", "CREATE TABLE"]
    );
}

#[tokio::test]
async fn partitioned_writes_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &["name"], &[]).await;
    committed(table.append(vec![batch(0..30)]).await.unwrap());
    let snapshot = table.snapshot().await.unwrap();
    // n0, n1, n2 and NULL.
    assert_eq!(snapshot.file_count(), 4);
    assert!(dir.path().join("name=__HIVE_DEFAULT_PARTITION__").is_dir());
    let all = scan(&snapshot, &ScanOptions::default()).await.unwrap();
    assert_eq!(
        canonical_rows(&all, &["id".into(), "name".into(), "score".into()]),
        canonical_rows(&[batch(0..30)], &["id".into(), "name".into(), "score".into()])
    );
    // Without deletion vectors, deletes rewrite the files.
    let result = table
        .delete_where(|f| f.partition_values.get("name") == Some(&Some("n1".into())), |b| id_in(b, |i| i < 10))
        .await
        .unwrap();
    assert_eq!(result.rows_affected, 3);
    let snapshot = table.snapshot().await.unwrap();
    assert!(snapshot.files().all(|f| f.deletion_vector.is_none()));
    assert_eq!(ids(&table, None).await.len(), 27);
}

#[tokio::test]
async fn change_data_feed_of_our_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let table =
        create(dir.path(), &[], &[("delta.enableDeletionVectors", "true"), ("delta.enableChangeDataFeed", "true")])
            .await;
    committed(table.append(vec![batch(0..4)]).await.unwrap());
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i == 2)).await.unwrap().outcome);
    let changes = sluice_storage::cdf::flatten(table.changes(1, None).await.unwrap());
    let rows = canonical_rows(&changes, &["id".into(), "_change_type".into(), "_commit_version".into()]);
    assert_eq!(rows, ["0 | insert | 1", "1 | insert | 1", "2 | delete | 2", "2 | insert | 1", "3 | insert | 1"]);
    // The delete wrote a cdc file, so that version is read from it.
    let snapshot = table.snapshot().await.unwrap();
    assert!(snapshot.files().count() == 1);
    assert!(dir.path().join("_change_data").is_dir());
}

#[tokio::test]
async fn optimize_vacuum_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    for start in 0..5 {
        committed(table.append(vec![batch(start * 10_000..start * 10_000 + 10_000)]).await.unwrap());
    }
    // Half the rows of a file: a deletion vector too large to go inline, so it has a file.
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i < 10_000 && i % 2 == 0)).await.unwrap().outcome);
    let before = ids(&table, None).await;
    let optimized = table.optimize(None).await.unwrap();
    assert_eq!(optimized.files_removed, 5);
    assert_eq!(optimized.files_added, 1);
    assert_eq!(ids(&table, None).await, before);
    let snapshot = table.snapshot().await.unwrap();
    assert_eq!(snapshot.file_count(), 1);
    assert!(snapshot.files().all(|f| f.deletion_vector.is_none()));
    // VACUUM keeps everything within the retention and refuses a short one by default.
    assert!(table.vacuum(Some(0), true, true).await.is_err());
    assert!(table.vacuum(None, false, true).await.unwrap().files_deleted.is_empty());
    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert_eq!(vacuumed.files_deleted.iter().filter(|f| f.ends_with(".parquet")).count(), 5);
    assert!(vacuumed.files_deleted.iter().any(|f| f.starts_with("deletion_vector_")));
    assert_eq!(ids(&table, None).await, before);
    // Version 2 lost its files to VACUUM: reading it names the missing file.
    let err = sluice_storage::scan::scan(&table.snapshot_at_version(2).await.unwrap(), &ScanOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MissingFile { .. }), "{err}");
    assert!(table.restore(2).await.is_err());
    let version = table.snapshot().await.unwrap().version();
    committed(table.append(vec![batch(200..201)]).await.unwrap());
    committed(table.restore(version).await.unwrap());
    assert_eq!(ids(&table, None).await, before);
}

/// A small deletion vector is written inline in the log entry: no file, read back the same,
/// also by a handle that opens the table anew; a large one still gets a file.
#[tokio::test]
async fn small_deletion_vectors_are_inline_and_large_ones_are_files() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    committed(table.append(vec![batch(0..20_000)]).await.unwrap());
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i == 7 || i == 9_000)).await.unwrap().outcome);
    let bins = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "bin"))
            .count()
    };
    assert_eq!(bins(), 0, "a two-row deletion vector has no file");
    let snapshot = table.snapshot().await.unwrap();
    let dv = snapshot.files().find_map(|f| f.deletion_vector.clone()).unwrap();
    assert_eq!((dv.storage_type.as_str(), dv.cardinality), ("i", 2));
    let expected: Vec<i64> = (0..20_000).filter(|i| *i != 7 && *i != 9_000).collect();
    assert_eq!(ids(&table, None).await, expected);
    let reopened = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(ids(&reopened, None).await, expected);
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i % 2 == 1)).await.unwrap().outcome);
    assert_eq!(bins(), 1, "half the rows need a file");
    let dv = table.snapshot().await.unwrap().files().find_map(|f| f.deletion_vector.clone()).unwrap();
    assert_eq!(dv.storage_type, "u");
    let expected: Vec<i64> = expected.into_iter().filter(|i| i % 2 == 0).collect();
    assert_eq!(ids(&table, None).await, expected);
}

#[tokio::test]
async fn two_writers_deleting_the_same_file_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    committed(table.append(vec![batch(0..10)]).await.unwrap());
    let other = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    let deletion = |snapshot: &sluice_storage::snapshot::Snapshot, row: u64| sluice_storage::write::Mutation {
        deleted: vec![(snapshot.files_sorted()[0].clone(), [row].into_iter().collect())],
        operation: "DELETE".into(),
        ..Default::default()
    };
    // The first delete declares the deletion vectors feature (version 2).
    let first = table.snapshot().await.unwrap();
    committed(table.mutate(&first, deletion(&first, 0)).await.unwrap());
    let snapshot = table.snapshot().await.unwrap();
    committed(table.mutate(&snapshot, deletion(&snapshot, 1)).await.unwrap());
    match other.mutate(&snapshot, deletion(&snapshot, 2)).await.unwrap() {
        CommitOutcome::Conflict(conflict) => {
            assert_eq!(conflict.winning_version, 3);
            assert!(matches!(conflict.reason, ConflictReason::ConcurrentDelete { .. }));
        }
        CommitOutcome::Committed(c) => panic!("the second delete committed as version {}", c.version),
    }
    // A blind append on the stale snapshot is rebased instead.
    assert_eq!(
        committed(
            other
                .write_on(
                    &snapshot,
                    sluice_storage::write::WriteRequest { batches: vec![batch(50..51)], ..Default::default() }
                )
                .await
                .unwrap()
        ),
        4
    );
    assert_eq!(ids(&table, None).await.len(), 9);
}

#[tokio::test]
async fn txn_versions_commit_with_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    let txn = |v| sluice_storage::actions::Txn { app_id: "flow-1".into(), version: v, last_updated: None };
    let request = |v| sluice_storage::write::WriteRequest {
        batches: vec![batch(v * 10..v * 10 + 1)],
        txns: vec![txn(v)],
        ..Default::default()
    };
    let stale = table.snapshot().await.unwrap();
    committed(table.write(request(1)).await.unwrap());
    assert_eq!(table.snapshot().await.unwrap().txn_version("flow-1"), Some(1));
    // A second writer for the same application on a stale snapshot conflicts.
    assert!(matches!(table.write_on(&stale, request(1)).await.unwrap(), CommitOutcome::Conflict(_)));
}

#[tokio::test]
async fn schema_checks_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    let bad = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
    )
    .unwrap();
    let err = table.append(vec![bad]).await.unwrap_err().to_string();
    assert!(err.contains("NOT NULL") && err.contains("id"), "{err}");
    let unknown = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("extra", DataType::Int64, true),
        ])),
        vec![Arc::new(Int64Array::from(vec![1])), Arc::new(Int64Array::from(vec![1]))],
    )
    .unwrap();
    assert!(table.append(vec![unknown]).await.unwrap_err().to_string().contains("extra"));
    // Only the id given: the nullable columns read as NULL.
    let narrow = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("ID", DataType::Int32, false)])),
        vec![Arc::new(arrow::array::Int32Array::from(vec![7]))],
    )
    .unwrap();
    committed(table.append(vec![narrow]).await.unwrap());
    let rows = scan(&table.snapshot().await.unwrap(), &ScanOptions::default()).await.unwrap();
    assert_eq!(canonical_rows(&rows, &["id".into(), "name".into()]), ["7 | NULL"]);
}

#[tokio::test]
async fn column_mapping_tables_round_trip_and_rename() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.columnMapping.mode", "name")]).await;
    committed(table.append(vec![batch(0..3)]).await.unwrap());
    let snapshot = table.snapshot().await.unwrap();
    assert_eq!(snapshot.protocol().min_reader_version, 2);
    let mut schema = snapshot.schema().clone();
    schema.fields[1].name = "label".into();
    committed(table.set_schema(&snapshot, schema, "RENAME COLUMN").await.unwrap());
    let rows = scan(&table.snapshot().await.unwrap(), &ScanOptions::default()).await.unwrap();
    assert_eq!(canonical_rows(&rows, &["id".into(), "label".into()]), ["0 | NULL", "1 | n1", "2 | n2"]);
}

/// A deletion-vector file cut short (or with a wrong size prefix) is a corrupt file named by its
/// path, never a panic.
#[tokio::test]
async fn a_truncated_deletion_vector_is_a_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    // A third of 20,000 rows: a deletion vector too large to go inline.
    committed(table.append(vec![batch(0..20_000)]).await.unwrap());
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i % 3 == 0)).await.unwrap().outcome);
    let snapshot = table.snapshot().await.unwrap();
    let dv = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "bin"))
        .expect("the delete wrote a deletion-vector file");
    let bytes = std::fs::read(&dv).unwrap();
    let name = dv.file_name().unwrap().to_string_lossy().to_string();
    // The file ends with a CRC-32 after the bitmap (not checked on read); cut into the bitmap.
    for cut in [bytes.len() - 5, 6, 3] {
        std::fs::write(&dv, &bytes[..cut]).unwrap();
        let err = scan(&snapshot, &ScanOptions::default()).await.unwrap_err();
        assert!(matches!(err, Error::CorruptFile { .. }) && err.to_string().contains(&name), "cut at {cut}: {err}");
    }
    // Empty: the store refuses the range itself.
    std::fs::write(&dv, b"").unwrap();
    let err = scan(&snapshot, &ScanOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains(&name), "{err}");
    std::fs::write(&dv, &bytes).unwrap();
    assert_eq!(ids(&table, None).await.len(), 20_000 - 6_667);
}

#[tokio::test]
async fn bad_input_names_the_file_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.checkpointInterval", "2")]).await;
    committed(table.append(vec![batch(0..3)]).await.unwrap());
    committed(table.append(vec![batch(3..6)]).await.unwrap());
    committed(table.append(vec![batch(6..9)]).await.unwrap());
    let path = dir.path().to_str().unwrap().to_string();
    let log = dir.path().join("_delta_log");

    // A truncated data file.
    let snapshot = table.snapshot().await.unwrap();
    let data = snapshot.files_sorted()[0].path.clone();
    let bytes = std::fs::read(dir.path().join(&data)).unwrap();
    std::fs::write(dir.path().join(&data), &bytes[..bytes.len() / 2]).unwrap();
    let err = scan(&snapshot, &ScanOptions::default()).await.unwrap_err();
    assert!(
        matches!(err, Error::CorruptFile { .. })
            && err.to_string().contains(&data)
            && err.to_string().contains("version 3"),
        "{err}"
    );
    // A missing data file.
    std::fs::remove_file(dir.path().join(&data)).unwrap();
    let err = scan(&snapshot, &ScanOptions::default()).await.unwrap_err();
    assert!(matches!(err, Error::MissingFile { .. }) && err.to_string().contains(&data), "{err}");
    // A corrupt JSON commit. Being the newest, it leaves the table readable at version 2 (see
    // damaged_log.rs); reading version 3 itself names the file, version and line.
    let commit = log.join("00000000000000000003.json");
    let good = std::fs::read(&commit).unwrap();
    std::fs::write(&commit, b"{\"add\": {broken\n").unwrap();
    let opened = Table::open_uri(&path).await.unwrap();
    let err = opened.snapshot_at_version(3).await.unwrap_err().to_string();
    assert!(err.contains("00000000000000000003.json") && err.contains("version 3") && err.contains("line 1"), "{err}");
    std::fs::write(&commit, good).unwrap();
    // A truncated checkpoint, with the commits before it gone so that nothing can stand in.
    let checkpoint = log.join("00000000000000000002.checkpoint.parquet");
    let bytes = std::fs::read(&checkpoint).unwrap();
    std::fs::write(&checkpoint, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::remove_file(log.join("00000000000000000000.json")).unwrap();
    let err = Table::open_uri(&path).await.unwrap_err().to_string();
    assert!(err.contains("checkpoint") && err.contains("version 2"), "{err}");
    // A broken _last_checkpoint is only a hint: the log is listed instead.
    std::fs::write(&checkpoint, &bytes).unwrap();
    std::fs::write(log.join("_last_checkpoint"), b"{oops").unwrap();
    assert_eq!(Table::open_uri(&path).await.unwrap().snapshot().await.unwrap().version(), 3);
    std::fs::write(log.join("_last_checkpoint"), b"").unwrap();
    assert_eq!(Table::open_uri(&path).await.unwrap().snapshot().await.unwrap().version(), 3);
    // Not a table at all.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(Table::open_uri(empty.path().to_str().unwrap()).await, Err(Error::NotATable { .. })));
}

#[tokio::test]
async fn advancing_reads_only_new_commits() {
    let dir = tempfile::tempdir().unwrap();
    let writer = create(dir.path(), &[], &[]).await;
    let reader = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap();
    assert_eq!(reader.cached_snapshot().version(), 0);
    committed(writer.append(vec![batch(0..1)]).await.unwrap());
    assert_eq!(reader.snapshot().await.unwrap().version(), 1);
    committed(writer.append(vec![batch(1..2)]).await.unwrap());
    committed(writer.append(vec![batch(2..3)]).await.unwrap());
    // Spoiling an old commit shows up in a full replay but not in an advance, which reads only
    // the commits after the cached version.
    std::fs::write(dir.path().join("_delta_log/00000000000000000001.json"), b"garbage").unwrap();
    assert_eq!(reader.snapshot().await.unwrap().version(), 3);
    assert_eq!(reader.cached_snapshot().file_count(), 3);
    assert!(Table::open_uri(dir.path().to_str().unwrap()).await.is_err());
    assert_eq!(len(&Int64Array::from(vec![1])), 1);
}

/// A time-of-day column (a `long` declared `time`) is a plain Parquet INT64 with numeric stats
/// and partition values in the files, and `Time64(µs)` to readers: unpartitioned, partitioned by
/// it, under column mapping, and in the change data feed.
#[tokio::test]
async fn a_time_of_day_column_is_a_long_in_files_and_a_time_to_readers() {
    use arrow::array::Time64MicrosecondArray;
    use arrow::datatypes::TimeUnit;
    let arrow_schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("at", DataType::Time64(TimeUnit::Microsecond), true),
    ]));
    let schema = StructType::from_arrow(&arrow_schema).unwrap();
    assert_eq!(schema.fields[1].data_type, sluice_storage::schema::DataType::Primitive(PrimitiveType::Long));
    assert!(schema.fields[1].is_time_of_day());
    let at = [Some(46_638_000_396), None, Some(0)];
    let rows = RecordBatch::try_new(
        arrow_schema.clone(),
        vec![Arc::new(Int64Array::from(vec![1, 2, 3])), Arc::new(Time64MicrosecondArray::from(at.to_vec()))],
    )
    .unwrap();
    for (partition, properties) in [
        (vec![], vec![("delta.enableChangeDataFeed", "true"), ("delta.enableDeletionVectors", "true")]),
        (vec!["at".to_string()], vec![]),
        (vec![], vec![("delta.columnMapping.mode", "name")]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let create = CreateTable {
            schema: schema.clone(),
            partition_columns: partition.clone(),
            properties: properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>(),
            ..Default::default()
        };
        let table = Table::create(TableStore::local(dir.path()).unwrap(), create).await.unwrap();
        committed(table.append(vec![rows.clone()]).await.unwrap());
        let snapshot = table.snapshot().await.unwrap();
        assert_eq!(snapshot.arrow_schema().field(1).data_type(), &DataType::Time64(TimeUnit::Microsecond));
        let read = scan(&snapshot, &ScanOptions::default()).await.unwrap();
        let mut values: Vec<(i64, Option<i64>)> = read
            .iter()
            .flat_map(|b| {
                let ids = b.column(0).as_primitive::<Int64Type>().clone();
                let times = b.column(1).as_primitive::<arrow::datatypes::Time64MicrosecondType>().clone();
                ids.values().to_vec().into_iter().zip(times.iter().collect::<Vec<_>>())
            })
            .collect();
        values.sort();
        assert_eq!(values, vec![(1, at[0]), (2, at[1]), (3, at[2])], "{partition:?} {properties:?}");
        for file in snapshot.files() {
            if partition.is_empty() {
                let stats: serde_json::Value = serde_json::from_str(file.stats.as_deref().unwrap()).unwrap();
                let (min, max) = (&stats["minValues"], &stats["maxValues"]);
                let min = min.as_object().unwrap().values().find(|v| !v.is_null() && v.as_i64() != Some(1));
                assert!(min.is_some_and(|v| v.is_number()), "{stats}");
                assert!(max.as_object().unwrap().values().all(serde_json::Value::is_number), "{stats}");
            } else {
                let value = file.partition_values.get("at").cloned().flatten();
                assert!(
                    value.is_none() || value.is_some_and(|v| v.parse::<i64>().is_ok()),
                    "{:?}",
                    file.partition_values
                );
            }
            let path = dir.path().join(urlencoding_free(&file.path));
            let reader = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            let parquet_schema =
                parquet::file::reader::FileReader::metadata(&reader).file_metadata().schema_descr_ptr();
            for column in parquet_schema.columns() {
                assert_eq!(column.physical_type(), parquet::basic::Type::INT64, "{}", column.name());
                let time = matches!(column.logical_type_ref(), Some(parquet::basic::LogicalType::Time { .. }));
                assert!(!time, "{} in {} is annotated as a time", column.name(), file.path);
            }
        }
        if partition.is_empty() && properties.len() == 2 {
            committed(table.delete_where(|_| true, |b| id_in(b, |i| i == 1)).await.unwrap().outcome);
            let changes = sluice_storage::cdf::flatten(table.changes(2, None).await.unwrap());
            assert_eq!(
                canonical_rows(&changes, &["id".into(), "at".into(), "_change_type".into()]),
                ["1 | 12:57:18.000396 | delete"]
            );
        }
    }
}

/// A data file's path as logged, unescaped (the test writes only plain names and `=` directories).
fn urlencoding_free(path: &str) -> String {
    path.replace("%3A", ":").replace("%3D", "=")
}
