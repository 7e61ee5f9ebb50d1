//! The file-ingestion benchmark of issue 24: 1,000 CSV files of 10,000 rows (10M rows of 8
//! columns: bigint key, 3 bigints, a double, text, timestamp, boolean) ingested through a FILES
//! source into a bronze table. `benches/peers/files_ingest.py` loads the same files with DuckDB's
//! `INSERT INTO t SELECT * FROM read_csv(...)` and writes them with the deltalake package;
//! `benches/run.py files` puts them side by side.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{peak_rss_mb, scalar};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Writes `files` CSV files of `rows` rows each under `out` (kept if there).
pub fn generate(out: &Path, files: usize, rows: usize) -> Result<serde_json::Value> {
    let marker = out.join(format!(".done-{files}-{rows}"));
    if marker.exists() {
        return Ok(json!({"cached": true}));
    }
    std::fs::create_dir_all(out)?;
    let started = Instant::now();
    for file in 0..files {
        let ids: Vec<i64> = (file * rows..(file + 1) * rows).map(|i| i as i64).collect();
        let batch = crate::cdc::rows(&ids, 0, None).map_err(|e| e.to_string())?;
        let path = out.join(format!("part-{file:05}.csv"));
        let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(std::fs::File::create(&path)?);
        writer.write(&batch)?;
    }
    std::fs::write(&marker, b"")?;
    Ok(json!({"seconds": started.elapsed().as_secs_f64()}))
}

/// Ingests the folder `input` into a new warehouse at `data` through a FILES source and times it
/// from the CREATE STREAMING TABLE to the last file's commit.
pub async fn run(input: &Path, data: &str, files: u64) -> Result<serde_json::Value> {
    std::fs::create_dir_all(data)?;
    // A relative source path is taken from the data folder: name the input by its absolute path.
    let input = &std::fs::canonicalize(input)?;
    let db = sluice::Database::open(data).await?;
    db.allow_paths(&[input.to_path_buf()]);
    db.execute(&format!(
        "CREATE SOURCE landing FROM FILES (path '{}', format 'csv', pattern '*.csv')",
        input.display()
    ))
    .await?;
    let started = Instant::now();
    db.execute("CREATE STREAMING TABLE bronze FROM SOURCE landing").await?;
    loop {
        let done = scalar(&db, "SELECT coalesce(max(files_done), 0) FROM sluice.sources").await?;
        if done as u64 >= files {
            break;
        }
        let error = db.query("SELECT error FROM sluice.sources WHERE error IS NOT NULL").await?;
        if error.iter().any(|b| b.num_rows() > 0) {
            return Err(format!("ingestion failed: {:?}", error).into());
        }
        if started.elapsed() > Duration::from_secs(3600) {
            return Err("ingestion took more than an hour".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let rows = scalar(&db, "SELECT count(*) FROM bronze").await?;
    let checksum = scalar(&db, "SELECT sum(a) + sum(d) FROM bronze").await?;
    let commits = scalar(&db, "SELECT count(*) FROM table_history('bronze') WHERE operation = 'WRITE'").await?;
    Ok(json!({
        "seconds": seconds,
        "rows": rows,
        "rows_per_second": rows as f64 / seconds,
        "checksum": checksum,
        "commits": commits,
        "peak_rss_mb": peak_rss_mb(),
    }))
}
