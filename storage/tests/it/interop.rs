//! Tables written by sluice-storage are read by delta-rs (the `deltalake` Python package) with
//! exactly the same rows, at the latest version and at every earlier version: partitioned and
//! not, after appends, overwrites, deletes with deletion vectors, checkpoints, OPTIMIZE and VACUUM.

use std::sync::Arc;

use arrow::array::{
    AsArray, BooleanArray, Date32Array, Decimal128Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use sluice_storage::commit::CommitOutcome;
use sluice_storage::scan::{scan, ScanOptions};
use sluice_storage::schema::StructType;
use sluice_storage::store::TableStore;
use sluice_storage::table::{CreateTable, Table};

use crate::common::*;
use crate::peers::run_python;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("category", DataType::Utf8, true),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("day", DataType::Date32, true),
        Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("flag", DataType::Boolean, true),
    ]))
}

fn rows(ids: std::ops::Range<i64>) -> RecordBatch {
    let n = ids.clone().count();
    let categories: Vec<Option<String>> = ids
        .clone()
        .map(|i| if i % 7 == 0 { None } else { Some(["a b", "c%d", "é"][(i % 3) as usize].to_string()) })
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
            Arc::new(StringArray::from(categories)),
            Arc::new(
                Decimal128Array::from(ids.clone().map(|i| Some(i as i128 * 125)).collect::<Vec<_>>())
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            Arc::new(Date32Array::from(ids.clone().map(|i| 19_000 + (i % 4) as i32).collect::<Vec<_>>())),
            Arc::new(
                TimestampMicrosecondArray::from(
                    ids.clone().map(|i| 1_700_000_000_000_000 + i * 1_000_123).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(BooleanArray::from(vec![Some(true); n])),
        ],
    )
    .unwrap()
}

fn ok(outcome: CommitOutcome) {
    assert!(matches!(outcome, CommitOutcome::Committed(_)), "{outcome:?}");
}

fn ids_matching(batch: &RecordBatch, f: impl Fn(i64) -> bool) -> sluice_storage::Result<BooleanArray> {
    Ok(batch.column(0).as_primitive::<Int64Type>().iter().map(|v| v.map(&f)).collect())
}

async fn build(dir: &std::path::Path, partitioned: bool) -> (Table, u64) {
    let create = CreateTable {
        schema: StructType::from_arrow(&schema()).unwrap(),
        partition_columns: if partitioned { vec!["category".into()] } else { vec![] },
        properties: [("delta.enableDeletionVectors", "true"), ("delta.checkpointInterval", "4")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    let table = Table::create(TableStore::local(dir).unwrap(), create).await.unwrap();
    ok(table.append(vec![rows(0..50)]).await.unwrap()); // 1
    ok(table.append(vec![rows(50..60)]).await.unwrap()); // 2
    ok(table.delete_where(|_| true, |b| ids_matching(b, |i| i % 3 == 0)).await.unwrap().outcome); // 3
    ok(table.append(vec![rows(60..70)]).await.unwrap()); // 4, checkpoint
    ok(table.delete_where(|_| true, |b| ids_matching(b, |i| i % 5 == 0)).await.unwrap().outcome); // 5
    ok(table.overwrite(vec![rows(100..140)]).await.unwrap()); // 6
    ok(table.delete_where(|_| true, |b| ids_matching(b, |i| i % 2 == 0)).await.unwrap().outcome); // 7
    ok(table.append(vec![rows(140..150)]).await.unwrap()); // 8, checkpoint
    ok(table.optimize(None).await.unwrap().outcome.unwrap()); // 9
    let latest = table.snapshot().await.unwrap().version();
    assert!(dir.join("_delta_log/00000000000000000008.checkpoint.parquet").exists());
    (table, latest)
}

async fn compare_with_deltalake(table: &Table, dir: &std::path::Path, versions: &[u64]) {
    let out = tempfile::tempdir().unwrap();
    let mut labels: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
    labels.push("latest".into());
    let mut args = vec![dir.to_str().unwrap(), out.path().to_str().unwrap()];
    args.extend(labels.iter().map(String::as_str));
    run_python("deltalake_read.py", &args);
    let columns: Vec<String> = schema().fields().iter().map(|f| f.name().clone()).collect();
    for label in &labels {
        let snapshot = match label.as_str() {
            "latest" => table.snapshot().await.unwrap(),
            v => table.snapshot_at_version(v.parse().unwrap()).await.unwrap(),
        };
        let ours = scan(&snapshot, &ScanOptions::default()).await.unwrap();
        let theirs = read_parquet_file(&out.path().join(format!("{label}.parquet")));
        let ours_rows = if ours.is_empty() { vec![] } else { canonical_rows(&ours, &columns) };
        let theirs_rows = if row_count(&theirs) == 0 { vec![] } else { canonical_rows(&theirs, &columns) };
        assert_eq!(ours_rows, theirs_rows, "version {label}: delta-rs sees other rows");
        assert!(!ours_rows.is_empty() || label == "0");
    }
}

async fn check(partitioned: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (table, latest) = build(dir.path(), partitioned).await;
    compare_with_deltalake(&table, dir.path(), &(0..=latest).collect::<Vec<_>>()).await;
    // VACUUM with no retention drops the files of old versions; the latest still matches.
    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert!(!vacuumed.files_deleted.is_empty());
    compare_with_deltalake(&table, dir.path(), &[]).await;
}

#[tokio::test]
async fn deltalake_reads_what_we_write_unpartitioned() {
    check(false).await;
}

#[tokio::test]
async fn deltalake_reads_what_we_write_partitioned() {
    check(true).await;
}
