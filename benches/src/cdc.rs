//! The CDC benchmark of issue 23: batches of 10,000 change events (70% updates, 20% inserts, 10%
//! deletes, keys spread uniformly over the live rows) applied to a 10-million-row target. Sluice
//! applies them with AUTO CDC (SCD 1) from a changes table; `benches/peers/cdc_merge.py` applies
//! the same batches with DuckDB's `MERGE INTO` and with the deltalake package's `merge`, on the
//! same data; `benches/run.py cdc` puts them side by side.
//!
//! `cdc-gen` writes the input once as Parquet: `base.parquet` (the target's rows, ids 0..N) and
//! `events-<i>.parquet` (op `U`/`I`/`D`, seq, and the row), every key at most once per batch (a
//! MERGE refuses a target row matched twice).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    Array, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use serde_json::json;

use crate::{read_parquet, scalar};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type BenchResult = Result<serde_json::Value>;

/// Rows written to Parquet per batch, and the base's rows per load statement.
const BATCH_ROWS: usize = 65_536;
const LOAD_ROWS: usize = 1_000_000;
/// 2024-01-01T00:00:00 in microseconds since the epoch.
const TS_ORIGIN_US: i64 = 1_704_067_200_000_000;

/// The AUTO CDC pipeline: a changes table and the target kept from it.
const PIPELINE: &str = "
CREATE TABLE changes (op text, seq bigint, id bigint, a bigint, b bigint, c double, s text, ts timestamp, flag boolean, d bigint);
CREATE STREAMING TABLE target;
CREATE FLOW target_cdc AS AUTO CDC INTO target FROM STREAM(changes) KEYS (id)
  APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (op, seq) STORED AS SCD TYPE 1;
";

/// A splitmix64 step: the generator's randomness (fixed, so every run writes the same input).
fn mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn row_schema(with_event: bool) -> Arc<Schema> {
    let mut fields = Vec::new();
    if with_event {
        fields.push(Field::new("op", DataType::Utf8, true));
        fields.push(Field::new("seq", DataType::Int64, true));
    }
    fields.extend([
        Field::new("id", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Int64, true),
        Field::new("c", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("d", DataType::Int64, true),
    ]);
    Arc::new(Schema::new(fields))
}

/// Rows for `ids`, their values drawn from `version` (0 for the base), with the event columns
/// when `events` is given (op, seq).
pub(crate) fn rows(ids: &[i64], version: i64, events: Option<(&[&str], i64)>) -> Result<RecordBatch> {
    let value = |id: i64, salt: i64| {
        let mut state = (id as u64) ^ ((version as u64) << 40) ^ (salt as u64).wrapping_mul(0x1234_5678_9ABC);
        mix(&mut state)
    };
    let mut columns: Vec<Arc<dyn Array>> = Vec::new();
    if let Some((ops, seq)) = events {
        columns.push(Arc::new(StringArray::from(ops.to_vec())));
        columns.push(Arc::new(Int64Array::from(vec![seq; ids.len()])));
    }
    columns.extend([
        Arc::new(Int64Array::from(ids.to_vec())) as Arc<dyn Array>,
        Arc::new(Int64Array::from(ids.iter().map(|&i| (value(i, 1) % 1_000_000) as i64).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(ids.iter().map(|&i| (value(i, 2) % 1_000) as i64).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(ids.iter().map(|&i| (value(i, 3) % 100_000) as f64 / 100.0).collect::<Vec<_>>())),
        Arc::new(StringArray::from(ids.iter().map(|&i| format!("name-{}", value(i, 4) % 50_000)).collect::<Vec<_>>())),
        Arc::new(TimestampMicrosecondArray::from(
            ids.iter().map(|&i| TS_ORIGIN_US + (value(i, 5) % 31_536_000_000_000) as i64).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(ids.iter().map(|&i| value(i, 6) % 2 == 0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(ids.iter().map(|&i| i * 3 + version).collect::<Vec<_>>())),
    ]);
    Ok(RecordBatch::try_new(row_schema(events.is_some()), columns)?)
}

fn write_parquet(path: &Path, batches: impl Iterator<Item = Result<RecordBatch>>, schema: Arc<Schema>) -> Result<()> {
    let temporary = path.with_extension("tmp");
    let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&temporary)?, schema, None)?;
    for batch in batches {
        writer.write(&batch?)?;
    }
    writer.close()?;
    std::fs::rename(temporary, path)?;
    Ok(())
}

/// Writes `base.parquet` (`rows` rows) and `batches` event files of `batch_rows` events under
/// `out`, unless they are there.
pub fn generate(out: &Path, rows_base: usize, batches: usize, batch_rows: usize) -> BenchResult {
    let started = Instant::now();
    std::fs::create_dir_all(out)?;
    let marker = out.join(format!("done-{rows_base}-{batches}-{batch_rows}"));
    if marker.exists() {
        return Ok(json!({"seconds": 0.0, "cached": true}));
    }
    let base = out.join("base.parquet");
    let chunks = (0..rows_base).step_by(BATCH_ROWS).map(|start| {
        let ids: Vec<i64> = (start..(start + BATCH_ROWS).min(rows_base)).map(|i| i as i64).collect();
        rows(&ids, 0, None)
    });
    write_parquet(&base, chunks, row_schema(false))?;
    // The live keys, to draw updates and deletes from; new keys continue after the base.
    let mut live: Vec<i64> = (0..rows_base as i64).collect();
    let mut next_id = rows_base as i64;
    let mut state = 7_u64;
    for batch in 0..batches {
        let version = batch as i64 + 1;
        let (updates, deletes) = (batch_rows * 7 / 10, batch_rows / 10);
        let inserts = batch_rows - updates - deletes;
        let mut taken: HashSet<usize> = HashSet::new();
        let mut pick = |state: &mut u64| loop {
            let at = (mix(state) % live.len() as u64) as usize;
            if taken.insert(at) {
                return at;
            }
        };
        let mut ids = Vec::with_capacity(batch_rows);
        let mut ops = Vec::with_capacity(batch_rows);
        let mut deleted_at = Vec::new();
        for n in 0..updates + deletes {
            let at = pick(&mut state);
            ids.push(live[at]);
            ops.push(if n < updates { "U" } else { "D" });
            if n >= updates {
                deleted_at.push(at);
            }
        }
        for _ in 0..inserts {
            ids.push(next_id);
            ops.push("I");
            next_id += 1;
        }
        // Deleted keys leave the live set (highest position first, so positions stay valid).
        deleted_at.sort_unstable_by(|a, b| b.cmp(a));
        for at in deleted_at {
            live.swap_remove(at);
        }
        live.extend(ids.iter().zip(&ops).filter(|(_, op)| **op == "I").map(|(id, _)| *id));
        let events = rows(&ids, version, Some((&ops, version)));
        write_parquet(&out.join(format!("events-{batch}.parquet")), std::iter::once(events), row_schema(true))?;
    }
    std::fs::write(marker, "")?;
    Ok(json!({"seconds": started.elapsed().as_secs_f64(), "live_rows": live.len()}))
}

/// Loads the base through AUTO CDC (as inserts), then applies each event batch (an INSERT into
/// the changes table that returns once the sync flow has applied it) and reports each batch's
/// time.
pub async fn run(input: &Path, data: &str, batches: usize) -> BenchResult {
    // A warehouse loaded before (a copy kept for profiling) is used as it is.
    let loaded = Path::new(data).join("_sluice").exists();
    std::fs::create_dir_all(data)?;
    let db = sluice::Database::open(data).await?;
    let started = Instant::now();
    if !loaded {
        load_base(&db, input).await?;
    }
    let load_seconds = started.elapsed().as_secs_f64();
    let rss_loaded = crate::current_rss_mb();
    let load_peak = crate::peak_rss_mb();
    // The batches' own peak: Linux starts the high-water mark again from the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let mut times = Vec::new();
    for batch in 0..batches {
        let events = read_parquet(&input.join(format!("events-{batch}.parquet")))?;
        let started = Instant::now();
        db.insert("changes", events).await?;
        times.push(started.elapsed().as_secs_f64());
    }
    let rows = scalar(&db, "SELECT count(*) FROM target").await?;
    let checksum = scalar(&db, "SELECT sum(a) + sum(d) FROM target").await?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    Ok(json!({
        "seconds": median,
        "median_seconds": median,
        "batch_seconds": times,
        "load_seconds": load_seconds,
        "rows": rows,
        "checksum": checksum,
        "rss_loaded_mb": rss_loaded,
        "load_peak_rss_mb": load_peak,
        "peak_rss_mb": crate::peak_rss_mb(),
    }))
}

/// Makes the pipeline and loads the base through it, LOAD_ROWS events per INSERT.
async fn load_base(db: &sluice::Database, input: &Path) -> Result<()> {
    db.execute(PIPELINE).await?;
    let base = read_parquet(&input.join("base.parquet"))?;
    let mut chunk: Vec<RecordBatch> = Vec::new();
    let mut chunk_rows = 0;
    let load = |chunk: Vec<RecordBatch>| -> Result<RecordBatch> {
        let schema = chunk.first().ok_or("an empty chunk")?.schema();
        let rows = arrow::compute::concat_batches(&schema, &chunk)?;
        let n = rows.num_rows();
        let ops = StringArray::from(vec!["I"; n]);
        let seq = Int64Array::from(vec![0_i64; n]);
        let mut columns: Vec<Arc<dyn Array>> = vec![Arc::new(ops), Arc::new(seq)];
        columns.extend(rows.columns().iter().cloned());
        Ok(RecordBatch::try_new(row_schema(true), columns)?)
    };
    for batch in base {
        chunk_rows += batch.num_rows();
        chunk.push(batch);
        if chunk_rows >= LOAD_ROWS {
            db.insert("changes", vec![load(std::mem::take(&mut chunk))?]).await?;
            chunk_rows = 0;
        }
    }
    if !chunk.is_empty() {
        db.insert("changes", vec![load(chunk)?]).await?;
    }
    Ok(())
}
