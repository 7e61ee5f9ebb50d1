//! The materialized view benchmark of issue 7: a 10-million-row `orders` table with a grouped
//! aggregate view and a join view over it (with `customers`), brought up to date after deltas of
//! 1,000 rows (inserts, and deletes mixed with inserts), beside recomputing each view from scratch
//! (`REFRESH MATERIALIZED VIEW v FULL`). DuckDB runs the same queries in full on the same data
//! (`benches/peers/duckdb_views.py`); `benches/run.py views` puts them side by side.
//!
//! The rows are a function of their id (customer, amount, time), written here and in the DuckDB
//! peer with the same formulas, so both sides hold the same data after the same deltas.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use serde_json::json;

use crate::{read_parquet, scalar};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type BenchResult = Result<serde_json::Value>;

/// Rows of the base `orders` table.
pub const ORDERS_ROWS: i64 = 10_000_000;
/// Rows of `customers` (each order's customer is one of them).
pub const CUSTOMERS: i64 = 100_000;
/// Distinct regions of the customers.
pub const REGIONS: i64 = 20;
/// Rows written to and read from Parquet per batch.
const BATCH_ROWS: usize = 65_536;
/// 2024-01-01T00:00:00 in microseconds since the epoch: the time of order 0 (one order a second).
const TS_ORIGIN_US: i64 = 1_704_067_200_000_000;
/// Deleted ids are `k * DELETE_STRIDE mod ORDERS_ROWS` for k = 0, 1, ...: distinct (the stride is
/// coprime to 10^7) and spread over the whole table, as deletes of old rows would be.
const DELETE_STRIDE: i64 = 19_997;

pub const AGG_VIEW: &str = "CREATE MATERIALIZED VIEW agg_view AS SELECT customer_id, count(*) AS n, \
    sum(amount) AS total, min(amount) AS lo, max(amount) AS hi FROM orders GROUP BY customer_id";
pub const JOIN_VIEW: &str = "CREATE MATERIALIZED VIEW join_view AS SELECT c.region, count(*) AS n, \
    sum(o.amount) AS total FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region";
const VIEWS: [&str; 2] = ["agg_view", "join_view"];
/// `REFRESH ... FULL` runs per view (the best is reported): the rebuild takes tens of seconds.
const REBUILDS: usize = 1;

/// Order `id`'s customer and amount (the DuckDB peer uses the same formulas).
fn customer_of(id: i64) -> i64 {
    id * 7_919 % CUSTOMERS
}

fn amount_of(id: i64) -> i64 {
    (id * 2_654_435_761) % 4_294_967_296 % 100_000 + 1
}

fn orders_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("customer_id", DataType::Int64, true),
        Field::new("amount", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

/// Orders `start..start + count`.
pub fn orders(start: i64, count: usize) -> Result<RecordBatch> {
    let ids: Vec<i64> = (start..start + count as i64).collect();
    Ok(RecordBatch::try_new(
        orders_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from(ids.iter().map(|i| customer_of(*i)).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(ids.iter().map(|i| amount_of(*i)).collect::<Vec<_>>())),
            Arc::new(TimestampMicrosecondArray::from(
                ids.iter().map(|i| TS_ORIGIN_US + i * 1_000_000).collect::<Vec<_>>(),
            )),
        ],
    )?)
}

fn customers() -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("region", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (0..CUSTOMERS).collect();
    let regions: Vec<String> = ids.iter().map(|i| format!("region-{:02}", i % REGIONS)).collect();
    Ok(RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(regions))])?)
}

/// Writes `orders.parquet` and `customers.parquet` under `out` (once: kept if both exist).
pub fn generate(out: &Path) -> BenchResult {
    let started = Instant::now();
    std::fs::create_dir_all(out)?;
    let (orders_path, customers_path) = (out.join("orders.parquet"), out.join("customers.parquet"));
    if !(orders_path.exists() && customers_path.exists()) {
        let temporary = out.join("orders.parquet.tmp");
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&temporary)?, orders_schema(), None)?;
        let mut start = 0;
        while start < ORDERS_ROWS {
            let count = (ORDERS_ROWS - start).min(BATCH_ROWS as i64);
            writer.write(&orders(start, count as usize)?)?;
            start += count;
        }
        writer.close()?;
        let batch = customers()?;
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&customers_path)?, batch.schema(), None)?;
        writer.write(&batch)?;
        writer.close()?;
        std::fs::rename(temporary, orders_path)?;
    }
    Ok(json!({"seconds": started.elapsed().as_secs_f64(), "orders": ORDERS_ROWS, "customers": CUSTOMERS}))
}

/// A view's maintenance counters from `sluice.views`.
#[derive(Clone, Copy)]
struct Maintenance {
    runs: i64,
    last_us: i64,
    last_rows_in: i64,
}

async fn maintenance(db: &sluice::Database, view: &str) -> Result<Maintenance> {
    // NULL (no maintenance yet, only the initial build) counts as 0.
    let column =
        |name: &str| format!("SELECT CAST(coalesce({name}, 0) AS bigint) FROM sluice.views WHERE name = '{view}'");
    Ok(Maintenance {
        runs: scalar(db, &column("maintenance_runs")).await?,
        last_us: scalar(db, &column("last_maintenance_us")).await?,
        last_rows_in: scalar(db, &column("last_rows_in")).await?,
    })
}

/// Timings of a series of rounds, in milliseconds.
#[derive(Default)]
struct Series {
    statement_ms: Vec<f64>,
    plain_ms: Vec<f64>,
    maintenance_ms: [Vec<f64>; 2],
    rows_in: [Vec<i64>; 2],
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() as f64 * fraction) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or(f64::NAN)
}

impl Series {
    fn summary(&self) -> serde_json::Value {
        let mut views = serde_json::Map::new();
        for (i, view) in VIEWS.iter().enumerate() {
            views.insert(
                view.to_string(),
                json!({
                    "maintenance_ms_median": median(&self.maintenance_ms[i]),
                    "maintenance_ms_max": self.maintenance_ms[i].iter().copied().fold(0.0, f64::max),
                    "maintenance_ms": self.maintenance_ms[i],
                    "rows_in": self.rows_in[i],
                }),
            );
        }
        json!({
            "statement_ms_median": median(&self.statement_ms),
            "statement_ms": self.statement_ms,
            "plain_ms_median": median(&self.plain_ms),
            "plain_ms": self.plain_ms,
            "views": views,
        })
    }
}

/// Runs `write` on `orders` (which the views read) and on `orders_plain` (no views), and records
/// the statement times and each view's maintenance time (the sum over the round's statements).
struct Rounds<'a> {
    db: &'a sluice::Database,
    series: Series,
}

impl Rounds<'_> {
    async fn counters(&self) -> Result<[Maintenance; 2]> {
        Ok([maintenance(self.db, VIEWS[0]).await?, maintenance(self.db, VIEWS[1]).await?])
    }

    /// One round: a DELETE of `deletes` (an id list), if any, then an insert of `inserts`, on
    /// `orders` (maintenance read from sluice.views after each statement), then on `orders_plain`.
    async fn round(&mut self, deletes: Option<&str>, inserts: &RecordBatch) -> Result<()> {
        let before = self.counters().await?;
        let mut statement_s = 0.0;
        let mut maintenance_us = [0_i64; 2];
        let mut rows_in = [0_i64; 2];
        let mut statements = 0;
        if let Some(ids) = deletes {
            let started = Instant::now();
            self.db.execute(&format!("DELETE FROM orders WHERE id IN ({ids})")).await?;
            statement_s += started.elapsed().as_secs_f64();
            statements += 1;
            self.add_maintenance(&mut maintenance_us, &mut rows_in).await?;
        }
        let started = Instant::now();
        self.db.insert("orders", vec![inserts.clone()]).await?;
        statement_s += started.elapsed().as_secs_f64();
        statements += 1;
        let after = self.add_maintenance(&mut maintenance_us, &mut rows_in).await?;
        // A view maintained more or less often than once per statement would make the figures
        // read from sluice.views belong to another run.
        for ((view, before), after) in VIEWS.iter().zip(before).zip(after) {
            if after.runs - before.runs != statements {
                let runs = after.runs - before.runs;
                let error =
                    self.db.query(&format!("SELECT state, error FROM sluice.views WHERE name = '{view}'")).await?;
                let error = sluice_benches::tpch::text_rows(&error);
                return Err(format!("{view}: {runs} maintenance runs for {statements} statements ({error:?})").into());
            }
        }
        for (i, (us, rows)) in maintenance_us.iter().zip(rows_in).enumerate() {
            self.series.maintenance_ms[i].push(*us as f64 / 1000.0);
            self.series.rows_in[i].push(rows);
        }
        self.series.statement_ms.push(statement_s * 1000.0);

        let started = Instant::now();
        if let Some(ids) = deletes {
            self.db.execute(&format!("DELETE FROM orders_plain WHERE id IN ({ids})")).await?;
        }
        self.db.insert("orders_plain", vec![inserts.clone()]).await?;
        self.series.plain_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        Ok(())
    }

    /// Adds each view's last maintenance time and input rows to the round's sums.
    async fn add_maintenance(&self, maintenance_us: &mut [i64; 2], rows_in: &mut [i64; 2]) -> Result<[Maintenance; 2]> {
        let now = self.counters().await?;
        for ((us, rows), view) in maintenance_us.iter_mut().zip(rows_in.iter_mut()).zip(now) {
            *us += view.last_us;
            *rows += view.last_rows_in;
        }
        Ok(now)
    }
}

/// The ids deleted by mixed round `round`: `count` ids spread over the base table.
pub fn deleted_ids(round: usize, count: usize, of: i64) -> String {
    (0..count).map(|j| (((round * count + j) as i64 * DELETE_STRIDE) % of).to_string()).collect::<Vec<_>>().join(", ")
}

/// Creates `customers`, `orders` (which the views read) and `orders_plain` (no views), empty.
async fn create_tables(db: &sluice::Database) -> Result<()> {
    db.execute("CREATE TABLE customers (id bigint, region text)").await?;
    for table in ["orders", "orders_plain"] {
        db.execute(&format!("CREATE TABLE {table} (id bigint, customer_id bigint, amount bigint, ts timestamp)"))
            .await?;
    }
    Ok(())
}

/// Creates both views, and reports how long each took to build.
async fn create_views(db: &sluice::Database) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut build_seconds = serde_json::Map::new();
    for (view, sql) in [("agg_view", AGG_VIEW), ("join_view", JOIN_VIEW)] {
        let started = Instant::now();
        db.execute(sql).await?;
        build_seconds.insert(view.to_string(), json!(started.elapsed().as_secs_f64()));
        eprintln!("{view} built in {:.1} s", started.elapsed().as_secs_f64());
    }
    Ok(build_seconds)
}

async fn load(db: &sluice::Database, parquet: &Path) -> Result<serde_json::Value> {
    create_tables(db).await?;
    let started = Instant::now();
    db.insert("customers", read_parquet(&parquet.join("customers.parquet"))?).await?;
    let customers_s = started.elapsed().as_secs_f64();
    let mut seconds = serde_json::Map::new();
    for table in ["orders", "orders_plain"] {
        let batches = read_parquet(&parquet.join("orders.parquet"))?;
        let started = Instant::now();
        db.insert(table, batches).await?;
        seconds.insert(table.to_string(), json!(started.elapsed().as_secs_f64()));
    }
    seconds.insert("customers".to_string(), json!(customers_s));
    Ok(serde_json::Value::Object(seconds))
}

/// Each view's query (what `SELECT` from the view must equal).
const QUERIES: [(&str, &str); 2] = [
    (
        "agg_view",
        "SELECT customer_id, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi \
         FROM orders GROUP BY customer_id",
    ),
    (
        "join_view",
        "SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c \
         ON o.customer_id = c.id GROUP BY c.region",
    ),
];

/// Compares each view with its query run directly on the tables (0 rows differ in either way).
async fn check(db: &sluice::Database) -> Result<serde_json::Value> {
    let mut out = serde_json::Map::new();
    for (view, query) in QUERIES {
        let missing = scalar(db, &format!("SELECT count(*) FROM (({query}) EXCEPT (SELECT * FROM {view})) d")).await?;
        let extra = scalar(db, &format!("SELECT count(*) FROM ((SELECT * FROM {view}) EXCEPT ({query})) d")).await?;
        if missing != 0 || extra != 0 {
            return Err(format!("{view} differs from its query: {missing} rows missing, {extra} extra").into());
        }
        out.insert(view.to_string(), json!(scalar(db, &format!("SELECT count(*) FROM {view}")).await?));
    }
    Ok(serde_json::Value::Object(out))
}

/// Write-to-visible latency: a 1-row INSERT into orders, then a SELECT of that customer's row in
/// agg_view, which must show the new count.
async fn latency(db: &sluice::Database, first_id: i64, iterations: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut total_ms = Vec::with_capacity(iterations);
    let mut insert_ms = Vec::with_capacity(iterations);
    for i in 0..iterations as i64 {
        let id = first_id + i;
        let customer = customer_of(id);
        let select = format!("SELECT n FROM agg_view WHERE customer_id = {customer}");
        let before = scalar(db, &select).await?;
        let ts = chrono::DateTime::from_timestamp_micros(TS_ORIGIN_US + id * 1_000_000)
            .ok_or("timestamp out of range")?
            .naive_utc()
            .format("%Y-%m-%d %H:%M:%S");
        let insert = format!("INSERT INTO orders VALUES ({id}, {customer}, {}, TIMESTAMP '{ts}')", amount_of(id));
        let started = Instant::now();
        db.execute(&insert).await?;
        let inserted = started.elapsed().as_secs_f64();
        let after = scalar(db, &select).await?;
        let visible = started.elapsed().as_secs_f64();
        if after != before + 1 {
            return Err(format!("customer {customer}: n = {after} after the insert, {before} before").into());
        }
        insert_ms.push(inserted * 1000.0);
        total_ms.push(visible * 1000.0);
    }
    Ok((total_ms, insert_ms))
}

/// Maintenance alone, for profiling: `orders_rows` generated orders (no Parquet), both views, then
/// `rounds` inserts of `delta_rows` rows; reports each view's maintenance time per round.
pub async fn profile(data: &str, orders_rows: usize, rounds: usize, delta_rows: usize) -> BenchResult {
    std::fs::create_dir_all(data)?;
    let db = sluice::Database::open(data).await?;
    create_tables(&db).await?;
    db.insert("customers", vec![customers()?]).await?;
    let batches = (0..orders_rows)
        .step_by(BATCH_ROWS)
        .map(|start| orders(start as i64, BATCH_ROWS.min(orders_rows - start)))
        .collect::<Result<Vec<_>>>()?;
    db.insert("orders", batches).await?;
    let build_seconds = create_views(&db).await?;
    let mut inserts = Rounds { db: &db, series: Series::default() };
    let mut next_id = orders_rows as i64;
    for _ in 0..rounds {
        inserts.round(None, &orders(next_id, delta_rows)?).await?;
        next_id += delta_rows as i64;
    }
    let mut mixed = Rounds { db: &db, series: Series::default() };
    for round in 0..rounds {
        let ids = deleted_ids(round, delta_rows / 2, orders_rows as i64);
        mixed.round(Some(&ids), &orders(next_id, delta_rows / 2)?).await?;
        next_id += (delta_rows / 2) as i64;
    }
    Ok(json!({
        "orders_rows": orders_rows,
        "build_seconds": build_seconds,
        "inserts": inserts.series.summary(),
        "mixed": mixed.series.summary(),
    }))
}

/// The whole benchmark on a new warehouse at `data` (see the module docs).
pub async fn run(parquet: &Path, data: &str, rounds: usize, delta_rows: usize, iterations: usize) -> BenchResult {
    std::fs::create_dir_all(data)?;
    let db = sluice::Database::open(data).await?;
    let load_seconds = load(&db, parquet).await?;
    let rss_loaded_mb = crate::current_rss_mb();
    eprintln!("loaded: {load_seconds}");

    let build_seconds = create_views(&db).await?;
    let rss_views_mb = crate::current_rss_mb();
    let strategies = db.query("SELECT name, strategy, reason FROM sluice.views ORDER BY name").await?;
    let strategies = sluice_benches::tpch::text_rows(&strategies);

    let mut next_id = ORDERS_ROWS;
    let mut inserts = Rounds { db: &db, series: Series::default() };
    for _ in 0..rounds {
        inserts.round(None, &orders(next_id, delta_rows)?).await?;
        next_id += delta_rows as i64;
    }
    let mut mixed = Rounds { db: &db, series: Series::default() };
    for round in 0..rounds {
        let ids = deleted_ids(round, delta_rows / 2, ORDERS_ROWS);
        mixed.round(Some(&ids), &orders(next_id, delta_rows / 2)?).await?;
        next_id += (delta_rows / 2) as i64;
    }
    let (latency_ms, latency_insert_ms) = latency(&db, next_id, iterations).await?;
    let rows = scalar(&db, "SELECT count(*) FROM orders").await?;
    let checked = check(&db).await?;

    // The view's query run by Sluice's query engine over the tables (best of 3): what keeping the
    // view current costs without incremental maintenance, as a recompute-strategy view pays it.
    let mut query_seconds = serde_json::Map::new();
    for (view, query) in QUERIES {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            db.query(query).await?;
            best = best.min(started.elapsed().as_secs_f64());
        }
        query_seconds.insert(view.to_string(), json!(best));
    }

    // REFRESH ... FULL also writes the view's checkpoint; its last_maintenance_us is the rebuild
    // alone.
    let mut recompute_seconds = serde_json::Map::new();
    let mut rebuild_seconds = serde_json::Map::new();
    for view in VIEWS {
        let (mut best, mut best_rebuild) = (f64::MAX, f64::MAX);
        for _ in 0..REBUILDS {
            let started = Instant::now();
            db.execute(&format!("REFRESH MATERIALIZED VIEW {view} FULL")).await?;
            best = best.min(started.elapsed().as_secs_f64());
            best_rebuild = best_rebuild.min(maintenance(&db, view).await?.last_us as f64 / 1e6);
        }
        recompute_seconds.insert(view.to_string(), json!(best));
        rebuild_seconds.insert(view.to_string(), json!(best_rebuild));
    }
    Ok(json!({
        "orders_rows_base": ORDERS_ROWS,
        "orders_rows_final": rows,
        "customers": CUSTOMERS,
        "rounds": rounds,
        "delta_rows": delta_rows,
        "load_seconds": load_seconds,
        "build_seconds": build_seconds,
        "strategies": strategies,
        "inserts": inserts.series.summary(),
        "mixed": mixed.series.summary(),
        "query_seconds": query_seconds,
        "recompute_seconds": recompute_seconds,
        "recompute_rebuild_seconds": rebuild_seconds,
        "latency_p50_ms": percentile(&latency_ms, 0.5),
        "latency_p95_ms": percentile(&latency_ms, 0.95),
        "latency_insert_p50_ms": percentile(&latency_insert_ms, 0.5),
        "latency_iterations": iterations,
        "view_rows": checked,
        "rss_loaded_mb": rss_loaded_mb,
        "rss_views_mb": rss_views_mb,
        "peak_rss_mb": crate::peak_rss_mb(),
    }))
}
