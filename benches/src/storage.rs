//! The storage benchmarks of issue 2: one large append, and opening a long log.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use serde_json::json;
use sluice_storage::schema::StructType;
use sluice_storage::store::TableStore;
use sluice_storage::table::{CreateTable, Table};

type BenchResult = Result<serde_json::Value, Box<dyn std::error::Error>>;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Float64, true),
        Field::new("label", DataType::Utf8, true),
        Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("flag", DataType::Boolean, true),
    ]))
}

fn rows(start: usize, count: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + count).map(|i| i as i64).collect();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Float64Array::from(ids.iter().map(|i| (*i as f64 * 0.37).sin() * 1000.0).collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                ids.iter().map(|i| format!("user_{}", (i * 7919) % 50_000)).collect::<Vec<_>>(),
            )),
            Arc::new(
                TimestampMicrosecondArray::from(
                    ids.iter().map(|i| 1_700_000_000_000_000 + i * 1_000_003).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(BooleanArray::from(ids.iter().map(|i| i % 3 == 0).collect::<Vec<_>>())),
        ],
    );
    batch.unwrap_or_else(|e| crate::fail(e))
}

pub fn gen_rows(count: usize, out: &Path) -> BenchResult {
    let file = std::fs::File::create(out)?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema(), None)?;
    let chunk = 1 << 20;
    for start in (0..count).step_by(chunk) {
        writer.write(&rows(start, chunk.min(count - start)))?;
    }
    writer.close()?;
    Ok(json!({"rows": count}))
}

pub async fn write(input: &Path, table: &Path) -> BenchResult {
    let file = std::fs::File::open(input)?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
        .with_batch_size(65_536)
        .build()?;
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let started = Instant::now();
    let create = CreateTable { schema: StructType::from_arrow(&schema())?, ..Default::default() };
    let table = Table::create(TableStore::local(table)?, create).await?;
    let outcome = table.append(batches).await?;
    let seconds = started.elapsed().as_secs_f64();
    let version = outcome.version().map_err(|c| c.to_string())?;
    Ok(json!({"seconds": seconds, "peak_rss_mb": crate::peak_rss_mb(), "rows": rows, "version": version}))
}

pub async fn make_commits(table: &Path, commits: u64, checkpoint_interval: u64) -> BenchResult {
    let create = CreateTable {
        schema: StructType::from_arrow(&schema())?,
        properties: [("delta.checkpointInterval".to_string(), checkpoint_interval.to_string())].into(),
        ..Default::default()
    };
    let table = Table::create(TableStore::local(table)?, create).await?;
    for i in 1..commits {
        table.append(vec![rows(i as usize, 1)]).await?.version().map_err(|c| c.to_string())?;
    }
    Ok(json!({"version": table.cached_snapshot().version()}))
}

pub async fn open(table: &Path, repeat: usize) -> BenchResult {
    let uri = table.to_str().ok_or("table path is not UTF-8")?;
    let mut best = f64::MAX;
    let mut version = 0;
    let mut files = 0;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        let table = Table::open_uri(uri).await?;
        let snapshot = table.cached_snapshot();
        version = snapshot.version();
        files = snapshot.file_count();
        best = best.min(started.elapsed().as_secs_f64());
    }
    Ok(json!({"seconds": best, "peak_rss_mb": crate::peak_rss_mb(), "version": version, "files": files}))
}
