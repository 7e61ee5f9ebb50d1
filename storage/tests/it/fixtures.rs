//! Every table under testdata/delta (written by Spark, Databricks and delta-rs), driven by its
//! MANIFEST.json, read by sluice-storage and compared with the expected results shipped with it:
//! latest snapshots, every DAT version, change data feeds, and txn versions.

use std::path::Path;

use serde_json::Value;
use sluice_storage::partition::PartitionReadOptions;
use sluice_storage::scan::{scan, ScanOptions};
use sluice_storage::table::Table;

use crate::common::*;

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("MANIFEST.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

/// The zone in which a fixture's writer stored zone-less timestamp partition values (the one
/// documented trap: data-reader-partition-values was written at UTC-7).
fn partition_zone(name: &str) -> Option<String> {
    (name == "data-reader-partition-values").then(|| "America/Los_Angeles".to_string())
}

async fn compare_snapshot(table: &Table, version: Option<u64>, expected: &[arrow::array::RecordBatch], name: &str) {
    let snapshot = match version {
        Some(v) => table.snapshot_at_version(v).await.unwrap(),
        None => table.snapshot().await.unwrap(),
    };
    let options =
        ScanOptions { partition: PartitionReadOptions { timestamp_zone: partition_zone(name) }, ..Default::default() };
    let actual = scan(&snapshot, &options).await.unwrap_or_else(|e| panic!("{name}: scan failed: {e}"));
    let columns = column_names(expected);
    assert!(!columns.is_empty() || row_count(expected) == 0, "{name}: no expected columns");
    let want = canonical_rows(expected, &columns);
    let got = if actual.is_empty() { vec![] } else { canonical_rows(&actual, &columns) };
    assert_eq!(got, want, "{name} at version {version:?}: rows differ");
}

#[tokio::test]
async fn every_fixture_matches_its_expected_results() {
    let mut checked = 0;
    for entry in manifest() {
        let name = entry["name"].as_str().unwrap().to_string();
        let root = fixtures().join(entry["table_root"].as_str().unwrap());
        let base = root.parent().unwrap().to_path_buf();
        let table =
            Table::open_uri(root.to_str().unwrap()).await.unwrap_or_else(|e| panic!("{name}: open failed: {e}"));
        let expected_kind = entry["expected"].as_str().unwrap();
        if expected_kind.starts_with("expected/*.parquet") {
            compare_snapshot(&table, None, &read_parquet_dir(&base.join("expected")), &name).await;
            checked += 1;
        } else if expected_kind.starts_with("expected/<vN|latest>") {
            check_dat_versions(&table, &base.join("expected"), &name).await;
            checked += 1;
        } else if expected_kind.starts_with("expected_derived") {
            check_derived(&table, &base.join("expected_derived"), &name).await;
            checked += 1;
        } else {
            panic!("{name}: unknown expectation {expected_kind}");
        }
    }
    assert_eq!(checked, 26, "every fixture is checked");
}

async fn check_dat_versions(table: &Table, expected: &Path, name: &str) {
    let mut versions = 0;
    for entry in std::fs::read_dir(expected).unwrap() {
        let dir = entry.unwrap().path();
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("table_version_metadata.json")).unwrap()).unwrap();
        let version = meta["version"].as_u64().unwrap();
        let rows = read_parquet_file(&dir.join("table_content.parquet"));
        let label = dir.file_name().unwrap().to_string_lossy().to_string();
        let at = if label == "latest" { None } else { Some(version) };
        compare_snapshot(table, at, &rows, &format!("{name}/{label}")).await;
        if label == "latest" {
            let snapshot = table.snapshot().await.unwrap();
            assert_eq!(snapshot.version(), version, "{name}: latest version");
            assert_eq!(snapshot.protocol().min_reader_version as u64, meta["min_reader_version"].as_u64().unwrap());
        }
        versions += 1;
    }
    assert!(versions >= 2, "{name}: expected several DAT versions");
}

async fn check_derived(table: &Table, expected: &Path, name: &str) {
    let latest = read_parquet_file(&expected.join("latest.parquet"));
    compare_snapshot(table, None, &latest, name).await;
    let cdf = expected.join("cdf_v0_to_latest.parquet");
    if cdf.exists() {
        let want_batches = read_parquet_file(&cdf);
        let columns = column_names(&want_batches);
        let changes =
            sluice_storage::cdf::flatten(table.changes(0, None).await.unwrap_or_else(|e| panic!("{name}: cdf: {e}")));
        assert_eq!(
            canonical_rows(&changes, &columns),
            canonical_rows(&want_batches, &columns),
            "{name}: change data feed differs"
        );
    }
    let txn = expected.join("txn.json");
    if txn.exists() {
        let want: Value = serde_json::from_str(&std::fs::read_to_string(txn).unwrap()).unwrap();
        let snapshot = table.snapshot().await.unwrap();
        assert_eq!(snapshot.version(), want["version"].as_u64().unwrap());
        for (app, version) in want["txn"].as_object().unwrap() {
            assert_eq!(snapshot.txn_version(app), version.as_i64(), "{name}: txn {app}");
        }
        assert_eq!(snapshot.txns().len(), want["txn"].as_object().unwrap().len());
    }
}

#[tokio::test]
async fn zoneless_timestamp_partitions_read_as_utc_by_default() {
    // The trap: the same value reads as 11:11:11Z when no writer zone is given (as delta-rs
    // reads it) and as 18:11:11Z in the writer's zone (as Spark wrote the expected file).
    let table = Table::open_uri(fixtures().join("data-reader-partition-values/delta").to_str().unwrap()).await.unwrap();
    let snapshot = table.snapshot().await.unwrap();
    let read = |zone: Option<&str>| {
        let options = ScanOptions {
            columns: Some(vec!["as_timestamp".into()]),
            partition: PartitionReadOptions { timestamp_zone: zone.map(str::to_string) },
            ..Default::default()
        };
        let snapshot = snapshot.clone();
        async move { canonical_rows(&scan(&snapshot, &options).await.unwrap(), &["as_timestamp".to_string()]) }
    };
    let utc = read(None).await;
    let pacific = read(Some("America/Los_Angeles")).await;
    assert!(utc.iter().any(|r| r.contains("11:11:11")), "{utc:?}");
    assert!(pacific.iter().any(|r| r.contains("18:11:11")), "{pacific:?}");
}

#[tokio::test]
async fn refuses_unknown_reader_features() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("_delta_log");
    std::fs::create_dir_all(&log).unwrap();
    std::fs::write(
        log.join("00000000000000000000.json"),
        r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors","quantumStorage"],"writerFeatures":["deletionVectors","quantumStorage"]}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"configuration":{}}}
"#,
    )
    .unwrap();
    let err = Table::open_uri(dir.path().to_str().unwrap()).await.unwrap_err().to_string();
    assert!(err.contains("quantumStorage") && err.contains("reader features"), "{err}");
}
