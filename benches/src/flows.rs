//! The flow benchmarks of issue 5: a bronze table with three routes (filter, projection, JSON
//! field extraction) fed by batches, and a streaming table written by many single-row commits
//! (auto-compaction).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::json;

type BenchResult = Result<serde_json::Value, Box<dyn std::error::Error>>;

/// The pipeline (the same queries as benches/peers/duckdb_flows.py runs as pulls).
pub const PIPELINE: &str = include_str!("../flows_pipeline.sql");

/// Rows `start..start + count` of bronze: topics in turn, each with its own JSON payload.
pub fn bronze_rows(start: usize, count: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("payload", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (start..start + count).map(|i| i as i64).collect();
    let topics = ["orders", "payments", "clicks"];
    let topic: Vec<&str> = ids.iter().map(|i| topics[(*i % 3) as usize]).collect();
    let key: Vec<String> = ids.iter().map(|i| format!("k{i}")).collect();
    let payload: Vec<String> = ids
        .iter()
        .map(|i| match i % 3 {
            0 => format!("{{\"customer\": \"c{}\", \"amount\": {}.25}}", i % 1000, i % 500),
            1 => format!("{{\"customer\": \"c{}\", \"paid\": {}.5}}", i % 1000, i % 300),
            _ => format!("{{\"page\": \"/p/{}\", \"ms\": {}}}", i % 50, i % 9000),
        })
        .collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(topic)),
            Arc::new(StringArray::from(key)),
            Arc::new(StringArray::from(payload)),
        ],
    )
    .unwrap_or_else(|e| crate::fail(e))
}

/// The database of a run: with `observe`, the event log on and `/metrics` rendered every second
/// (as a Prometheus scraping it would); without, the event log off and nothing scraped.
async fn observed(data: &str, observe: bool) -> Result<sluice::Database, Box<dyn std::error::Error>> {
    let options = sluice::DatabaseOptions { event_log: observe, ..Default::default() };
    let db = sluice::Database::open_with(data, options).await?;
    if observe {
        let scraped = db.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if sluice_server::metrics::render(&scraped).await.is_err() {
                    return;
                }
                if std::sync::Arc::strong_count(scraped.inner()) <= 2 {
                    return;
                }
            }
        });
    }
    Ok(db)
}

async fn count(db: &sluice::Database, table: &str) -> Result<i64, Box<dyn std::error::Error>> {
    let batches = db.query(&format!("SELECT count(*) FROM {table}")).await?;
    let column = batches[0].column(0).as_any().downcast_ref::<Int64Array>().ok_or("count is not int64")?;
    Ok(column.value(0))
}

/// Inserts `batches` batches of `batch_rows` rows into bronze (each INSERT returns once the three
/// routes have committed) and reports source rows/s end to end.
pub async fn batched(data: &str, batches: usize, batch_rows: usize, observe: bool) -> BenchResult {
    std::fs::create_dir_all(data)?;
    let db = observed(data, observe).await?;
    db.execute(PIPELINE).await?;
    let inputs: Vec<RecordBatch> = (0..batches).map(|b| bronze_rows(b * batch_rows, batch_rows)).collect();
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(batches);
    for batch in inputs {
        let one = Instant::now();
        db.insert("bronze", vec![batch]).await?;
        latencies.push(one.elapsed().as_secs_f64());
    }
    let seconds = started.elapsed().as_secs_f64();
    let rows = batches * batch_rows;
    let routed =
        count(&db, "silver_orders").await? + count(&db, "silver_payments").await? + count(&db, "silver_clicks").await?;
    if routed != rows as i64 {
        return Err(format!("{routed} rows routed of {rows}").into());
    }
    latencies.sort_by(f64::total_cmp);
    Ok(json!({
        "seconds": seconds,
        "rows": rows,
        "rows_per_second": rows as f64 / seconds,
        "batch_p50_ms": latencies[latencies.len() / 2] * 1000.0,
        "peak_rss_mb": crate::peak_rss_mb(),
    }))
}

/// Writes `commits` single-row commits into a streaming table with one route, then waits for
/// auto-compaction to settle and reports the data files left in each table.
pub async fn small_commits(data: &str, commits: usize, observe: bool) -> BenchResult {
    std::fs::create_dir_all(data)?;
    let db = observed(data, observe).await?;
    db.execute("CREATE STREAMING TABLE events (id bigint, topic text, key text, payload text) PUSH INTO clicks WHERE topic = 'clicks'")
        .await?;
    let started = Instant::now();
    for i in 0..commits {
        db.insert("events", vec![bronze_rows(i, 1)]).await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let files = |name: &'static str| {
        let db = db.clone();
        async move {
            let state = db.inner().warehouse.catalog.current();
            let entry = state.table("public", name).ok_or("no table")?;
            let table = db.inner().warehouse.open_table(entry).await?;
            Ok::<usize, Box<dyn std::error::Error>>(table.snapshot().await?.file_count())
        }
    };
    let settle = Instant::now();
    let limit = sluice::flow::compaction::SMALL_FILES_MAX;
    while settle.elapsed() < Duration::from_secs(60)
        && (files("events").await? > limit || files("clicks").await? > limit)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(json!({
        "seconds": seconds,
        "commits": commits,
        "commits_per_second": commits as f64 / seconds,
        "events_files": files("events").await?,
        "clicks_files": files("clicks").await?,
        "rows": count(&db, "events").await?,
    }))
}
