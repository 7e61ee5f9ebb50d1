//! `sluice-bench`: the Sluice side of the side-by-side benchmarks. Each subcommand does one
//! measured thing and prints one JSON line (`seconds`, `peak_rss_mb`, ...); `benches/run.py`
//! runs it beside the peer (delta-rs, DuckDB, ...) and writes `benches/RESULTS.md`.

/// The same allocator as the `sluice` program, with the same settings (see `main`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cdc;
mod files;
mod flows;
mod kafka;
mod storage;
mod tpch_steps;
mod views;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Sluice benchmark steps (driven by benches/run.py)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the benchmark input: ROWS rows of (int64, float64, short string, timestamp, bool).
    GenRows {
        #[arg(long)]
        rows: usize,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Loads a Parquet file into memory, then times one append of all of it to a new table.
    Write {
        #[arg(long)]
        input: std::path::PathBuf,
        #[arg(long)]
        table: std::path::PathBuf,
    },
    /// Builds a table of COMMITS one-row commits with a checkpoint every INTERVAL commits.
    MakeCommits {
        #[arg(long)]
        table: std::path::PathBuf,
        #[arg(long)]
        commits: u64,
        #[arg(long)]
        checkpoint_interval: u64,
    },
    /// Writes TPC-H data at scale factor SF as one Parquet file per table.
    TpchGen {
        #[arg(long)]
        sf: f64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Loads TPC-H Parquet files into a new Sluice warehouse.
    TpchLoad {
        #[arg(long)]
        parquet: std::path::PathBuf,
        #[arg(long)]
        data: String,
    },
    /// Runs the 22 TPC-H queries (best of REPEAT) and prints each one's seconds.
    TpchRun {
        #[arg(long)]
        data: String,
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Only these queries (comma separated), e.g. 6,17.
        #[arg(long)]
        queries: Option<String>,
        /// Statements to run first (e.g. SET datafusion.execution.parquet.pushdown_filters = true).
        #[arg(long)]
        setup: Vec<String>,
    },
    /// Prints the rows of the 22 TPC-H queries as text.
    TpchAnswers {
        #[arg(long)]
        data: String,
    },
    /// Serves a warehouse over pgwire (as `sluice serve`, built with the benchmarks) until killed.
    Serve {
        #[arg(long)]
        data: String,
        #[arg(long)]
        port: u16,
    },
    /// Feeds BATCHES batches of BATCH_ROWS rows into a bronze table with three routes.
    FlowsBatched {
        #[arg(long)]
        data: String,
        #[arg(long)]
        batches: usize,
        #[arg(long, default_value_t = 10_000)]
        batch_rows: usize,
        /// Turn the event log off and scrape no metrics (to measure what they cost).
        #[arg(long)]
        unobserved: bool,
    },
    /// Writes COMMITS single-row commits into a streaming table and waits for auto-compaction.
    FlowsSmallCommits {
        #[arg(long)]
        data: String,
        #[arg(long)]
        commits: usize,
        /// Turn the event log off and scrape no metrics (to measure what they cost).
        #[arg(long)]
        unobserved: bool,
    },
    /// A bare rdkafka consumer reading MESSAGES messages from an in-process mock cluster.
    KafkaBare {
        #[arg(long)]
        messages: u64,
    },
    /// Sluice ingesting MESSAGES messages from an in-process mock cluster through bronze and
    /// three JSON routes.
    KafkaIngest {
        #[arg(long)]
        data: String,
        #[arg(long)]
        messages: u64,
    },
    /// Writes the materialized view benchmark's input (orders.parquet, 10M rows, and
    /// customers.parquet) under OUT, unless it is there already.
    ViewsGen {
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Loads the views-gen Parquet into a new warehouse at DATA, creates a grouped-aggregate view
    /// and a join view, and times their maintenance after deltas, their full recompute and the
    /// write-to-visible latency of 1-row inserts.
    Views {
        #[arg(long)]
        parquet: std::path::PathBuf,
        #[arg(long)]
        data: String,
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        #[arg(long, default_value_t = 1_000)]
        delta_rows: usize,
        #[arg(long, default_value_t = 200)]
        latency_iterations: usize,
    },
    /// Maintenance of the two views alone (for profiling): ORDERS generated rows, then ROUNDS
    /// inserts of DELTA_ROWS rows each.
    ViewsProfile {
        #[arg(long)]
        data: String,
        #[arg(long, default_value_t = 1_000_000)]
        orders: usize,
        #[arg(long, default_value_t = 300)]
        rounds: usize,
        #[arg(long, default_value_t = 1_000)]
        delta_rows: usize,
    },
    /// Writes the CDC benchmark's input under OUT: base.parquet (ROWS rows) and BATCHES files of
    /// BATCH_ROWS change events (kept if there).
    CdcGen {
        #[arg(long)]
        out: std::path::PathBuf,
        #[arg(long, default_value_t = 10_000_000)]
        rows: usize,
        #[arg(long, default_value_t = 10)]
        batches: usize,
        #[arg(long, default_value_t = 10_000)]
        batch_rows: usize,
    },
    /// Loads the cdc-gen base into a new warehouse at DATA through AUTO CDC, then applies BATCHES
    /// event files and times each.
    Cdc {
        #[arg(long)]
        input: std::path::PathBuf,
        #[arg(long)]
        data: String,
        #[arg(long, default_value_t = 10)]
        batches: usize,
    },
    /// Writes the file-ingestion benchmark's input: FILES CSV files of ROWS rows under OUT.
    FilesGen {
        #[arg(long)]
        out: std::path::PathBuf,
        #[arg(long, default_value_t = 1_000)]
        files: usize,
        #[arg(long, default_value_t = 10_000)]
        rows: usize,
    },
    /// Ingests the CSV files under INPUT into a new warehouse at DATA through a FILES source.
    Files {
        #[arg(long)]
        input: std::path::PathBuf,
        #[arg(long)]
        data: String,
        #[arg(long, default_value_t = 1_000)]
        files: u64,
    },
    /// Times opening a table at its latest version (the best of REPEAT runs).
    Open {
        #[arg(long)]
        table: std::path::PathBuf,
        #[arg(long, default_value_t = 5)]
        repeat: usize,
    },
}

fn main() {
    sluice_server::allocator::keep_freed_memory();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap_or_else(|e| fail(e));
    let result = runtime.block_on(async {
        match cli.command {
            Command::GenRows { rows, out } => storage::gen_rows(rows, &out),
            Command::Write { input, table } => storage::write(&input, &table).await,
            Command::MakeCommits { table, commits, checkpoint_interval } => {
                storage::make_commits(&table, commits, checkpoint_interval).await
            }
            Command::Open { table, repeat } => storage::open(&table, repeat).await,
            Command::TpchGen { sf, out } => tpch_steps::generate(sf, &out),
            Command::TpchLoad { parquet, data } => tpch_steps::load(&parquet, &data).await,
            Command::TpchRun { data, repeat, queries, setup } => {
                tpch_steps::run(&data, repeat, queries.as_deref(), &setup).await
            }
            Command::TpchAnswers { data } => tpch_steps::answers(&data).await,
            Command::Serve { data, port } => serve(&data, port).await,
            Command::FlowsBatched { data, batches, batch_rows, unobserved } => {
                flows::batched(&data, batches, batch_rows, !unobserved).await
            }
            Command::FlowsSmallCommits { data, commits, unobserved } => {
                flows::small_commits(&data, commits, !unobserved).await
            }
            Command::KafkaBare { messages } => kafka::bare(messages),
            Command::KafkaIngest { data, messages } => kafka::ingest(&data, messages).await,
            Command::CdcGen { out, rows, batches, batch_rows } => cdc::generate(&out, rows, batches, batch_rows),
            Command::Cdc { input, data, batches } => cdc::run(&input, &data, batches).await,
            Command::FilesGen { out, files, rows } => files::generate(&out, files, rows),
            Command::Files { input, data, files } => files::run(&input, &data, files).await,
            Command::ViewsGen { out } => views::generate(&out),
            Command::Views { parquet, data, rounds, delta_rows, latency_iterations } => {
                views::run(&parquet, &data, rounds, delta_rows, latency_iterations).await
            }
            Command::ViewsProfile { data, orders, rounds, delta_rows } => {
                views::profile(&data, orders, rounds, delta_rows).await
            }
        }
    });
    match result {
        Ok(json) => println!("{json}"),
        Err(e) => fail(e),
    }
}

async fn serve(data: &str, port: u16) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(data).map_err(|e| e.to_string())?;
    let db = sluice::Database::open(data).await.map_err(|e| e.to_string())?;
    let config = sluice_server::pg::ServerConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        connections_max: 100,
        users: vec![],
        tls: None,
        allowed_paths: vec![std::path::PathBuf::from(data)],
        message_bytes_max: sluice_server::pg::socket::MESSAGE_BYTES_MAX_DEFAULT,
        ..Default::default()
    };
    let server = sluice_server::pg::serve(db, config).await?;
    eprintln!("serving {data} on {}", server.local_addr);
    std::future::pending::<()>().await;
    Ok(serde_json::Value::Null)
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("sluice-bench: {e}");
    std::process::exit(1)
}

/// Rows a benchmark reads from its Parquet input per batch.
const PARQUET_BATCH_ROWS: usize = 65_536;

/// Every row of a Parquet file.
pub fn read_parquet(path: &std::path::Path) -> Result<Vec<arrow::array::RecordBatch>, Box<dyn std::error::Error>> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)?
        .with_batch_size(PARQUET_BATCH_ROWS)
        .build()?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// The first column of the first row of `sql`'s answer, as a bigint.
pub async fn scalar(db: &sluice::Database, sql: &str) -> Result<i64, Box<dyn std::error::Error>> {
    use arrow::array::Array;
    let batches = db.query(sql).await?;
    let batch = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| format!("no rows from {sql}"))?;
    let column = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64)?;
    let values = column.as_any().downcast_ref::<arrow::array::Int64Array>().ok_or("not a bigint")?;
    if values.is_null(0) {
        return Err(format!("NULL from {sql}").into());
    }
    Ok(values.value(0))
}

/// Peak resident memory of this process so far, in MiB.
pub fn peak_rss_mb() -> f64 {
    status_mb("VmHWM:")
}

/// Resident memory of this process now, in MiB.
pub fn current_rss_mb() -> f64 {
    status_mb("VmRSS:")
}

/// A memory figure of /proc/self/status (given in kB), in MiB.
fn status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
