//! Every table under testdata/delta (written by Spark, Databricks and delta-rs) attaches with
//! `CREATE TABLE ... LOCATION` and answers `count(*)` and a full scan with its expected rows.

use std::path::Path;

use sluice::{Database, DatabaseOptions};

use crate::common::{rows, workspace};

fn expected_rows(base: &Path) -> usize {
    let files: Vec<std::path::PathBuf> = if base.join("expected_derived").exists() {
        vec![base.join("expected_derived/latest.parquet")]
    } else if base.join("expected/latest").exists() {
        vec![base.join("expected/latest/table_content.parquet")]
    } else {
        std::fs::read_dir(base.join("expected"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "parquet")
                    && !p.file_name().unwrap().to_string_lossy().starts_with('.')
            })
            .collect()
    };
    files
        .iter()
        .map(|f| {
            let file = std::fs::File::open(f).unwrap();
            parquet::file::reader::SerializedFileReader::new(file)
                .map(|r| parquet::file::reader::FileReader::metadata(&r).file_metadata().num_rows() as usize)
                .unwrap()
        })
        .sum()
}

#[tokio::test]
async fn every_fixture_attaches_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    // The one fixture with zone-less timestamp partitions was written at UTC-7.
    let options = DatabaseOptions { partition_timezone: Some("America/Los_Angeles".into()), ..Default::default() };
    let db = Database::open_with(dir.path().to_str().unwrap(), options).await.unwrap();
    let manifest: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(workspace().join("testdata/delta/MANIFEST.json")).unwrap())
            .unwrap();
    for (i, entry) in manifest.iter().enumerate() {
        let name = entry["name"].as_str().unwrap();
        let root = workspace().join("testdata/delta").join(entry["table_root"].as_str().unwrap());
        db.execute(&format!("CREATE TABLE f{i} LOCATION '{}'", root.display()))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let count =
            rows(&db.query(&format!("SELECT count(*) FROM f{i}")).await.unwrap_or_else(|e| panic!("{name}: {e}")));
        let expected = expected_rows(root.parent().unwrap());
        assert_eq!(count, [expected.to_string()], "{name}: count(*)");
        let all = db.query(&format!("SELECT * FROM f{i}")).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(all.iter().map(|b| b.num_rows()).sum::<usize>(), expected, "{name}: full scan");
    }
}
