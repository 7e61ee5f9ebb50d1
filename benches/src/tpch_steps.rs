//! The Sluice side of the TPC-H benchmark (issue 3): generate, load, run.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use sluice_benches::tpch;

type BenchResult = Result<serde_json::Value, Box<dyn std::error::Error>>;

pub fn generate(sf: f64, out: &Path) -> BenchResult {
    tpch::write_parquet(out, sf)?;
    Ok(json!({"sf": sf}))
}

pub async fn load(parquet: &Path, data: &str) -> BenchResult {
    let started = Instant::now();
    let db = sluice::Database::open(data).await?;
    tpch::load(&db, parquet).await?;
    Ok(json!({"seconds": started.elapsed().as_secs_f64()}))
}

pub async fn run(data: &str, repeat: usize, only: Option<&str>, setup: &[String]) -> BenchResult {
    let db = sluice::Database::open(data).await?;
    for statement in setup {
        db.execute(statement).await?;
    }
    let wanted: Vec<usize> = match only {
        Some(list) => list.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        None => (1..=22).collect(),
    };
    let mut out = serde_json::Map::new();
    for n in wanted {
        let sql = tpch::query(n)?;
        let mut best = f64::MAX;
        for _ in 0..repeat.max(1) {
            let started = Instant::now();
            let batches = db.query(&sql).await?;
            std::hint::black_box(batches);
            best = best.min(started.elapsed().as_secs_f64());
        }
        out.insert(n.to_string(), json!(best));
    }
    Ok(serde_json::Value::Object(out))
}

/// Every query's rows as text (to compare with DuckDB's answers).
pub async fn answers(data: &str) -> BenchResult {
    let db = sluice::Database::open(data).await?;
    let mut out = serde_json::Map::new();
    for n in 1..=22 {
        let batches = db.query(&tpch::query(n)?).await?;
        out.insert(n.to_string(), json!(tpch::text_rows(&batches)));
    }
    Ok(serde_json::Value::Object(out))
}
