//! # sluice-storage: an ACID table log over Parquet, following the Delta Lake protocol
//!
//! A table is a folder of Parquet files and a `_delta_log/` of JSON commits and Parquet
//! checkpoints, readable by Spark, delta-rs, DuckDB and Polars. This crate reads and writes it and
//! knows nothing of SQL.
//!
//! The pipeline of types:
//!
//! - [`store::TableStore`]: the one I/O seam (object_store: local disk, memory, S3, GCS, Azure);
//!   on local disk a warehouse's stores make puts durable through one [`journal::Journal`].
//! - [`log`] lists `_delta_log/` and picks a checkpoint plus commits; [`actions`] parses them;
//!   [`checkpoint`] reads and writes checkpoints.
//! - [`snapshot::Snapshot`]: immutable state at one version (schema, live files with stats and
//!   deletion vectors, txn versions), built by replay and advanced by reading only new commits.
//! - [`scan`] reads a snapshot's data (partition values, column mapping, deletion vectors);
//!   [`cdf`] reads the change data feed between versions.
//! - [`table::Table`]: a handle that commits [`commit::Transaction`]s (put-if-absent, conflict
//!   detection, retries) and checkpoints; [`write`](mod@crate::write) appends, overwrites, deletes and updates
//!   (deletion vectors); [`maintenance`] optimizes, vacuums and restores.
//!
//! ```no_run
//! # async fn example(batch: arrow::array::RecordBatch) -> sluice_storage::Result<()> {
//! use sluice_storage::{store::TableStore, table::{CreateTable, Table}, schema::StructType};
//! let store = TableStore::local("/tmp/events")?;
//! let schema = StructType::from_arrow(&batch.schema())?;
//! let table = Table::create(store, CreateTable { schema, ..Default::default() }).await?;
//! let _ = table.append(vec![batch]).await?;
//! let snapshot = table.snapshot().await?;
//! let rows = sluice_storage::scan::scan(&snapshot, &Default::default()).await?;
//! # Ok(()) }
//! ```
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

pub mod actions;
pub mod cdf;
pub mod checkpoint;
pub mod checksum;
pub mod commit;
pub mod deletion_vector;
pub mod error;
pub mod gate;
pub mod journal;
pub mod log;
pub mod log_cleanup;
pub mod maintenance;
pub mod parquet;
pub mod partition;
pub mod protocol;
pub mod recent;
pub mod scan;
pub mod schema;
pub mod snapshot;
pub mod stage;
pub mod store;
pub mod table;
pub mod write;

pub use error::{Error, Result};

/// The cores this process may use (`std::thread::available_parallelism`, which reads the
/// cgroup's files each time it is called), asked once.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
