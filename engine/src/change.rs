//! The one way a table changes: every commit the engine makes goes through [`Writer::commit`],
//! which makes the storage commit and then tells each [`CommitListener`] about it with the
//! [`Change`] (the table, its new version, what kind of statement, and the rows it inserted and
//! deleted when the writer knows them).
//!
//! Flows and materialized views subscribe when a database opens (flows first, so that a sync
//! flow's target is written before the views over the source are maintained); a new commit site
//! (a transaction's COMMIT, CDC, file ingestion) reaches them by calling the writer, never by
//! calling them itself. Listeners are called in order, one commit at a time per writer call, and
//! each exactly once per commit.

use std::fmt;
use std::sync::{Arc, RwLock};

use arrow::array::RecordBatch;
use futures::future::BoxFuture;
use sluice_storage::commit::CommitOutcome;

use crate::error::{Error, Result};

/// What kind of statement made a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// INSERT, `Database::insert`, a flow's or a source's batch (rows appended or, with
    /// overwrite, replacing the table's).
    Write,
    /// COPY ... FROM.
    Copy,
    /// CREATE TABLE ... AS SELECT (the rows of a new table).
    CreateAs,
    Delete,
    Update,
    Merge,
    Truncate,
    Restore,
    /// OPTIMIZE, or the worker's compaction: files rewritten, rows unchanged.
    Optimize,
    /// Schema or table properties (ALTER TABLE, a flow's schema evolution).
    Metadata,
    /// A materialized view's stored rows.
    ViewCheckpoint,
}

impl Operation {
    /// Whether the commit can change the table's rows (OPTIMIZE and metadata commits do not).
    pub fn changes_rows(self) -> bool {
        !matches!(self, Operation::Optimize | Operation::Metadata)
    }
}

/// The rows a commit deleted and inserted, in the table's schema.
#[derive(Debug, Clone, Default)]
pub struct ChangedRows {
    pub deleted: Vec<RecordBatch>,
    pub inserted: Vec<RecordBatch>,
}

impl ChangedRows {
    pub fn inserted(batches: Vec<RecordBatch>) -> Self {
        Self { deleted: Vec::new(), inserted: batches }
    }

    /// Rows inserted, counted over the batches.
    pub fn inserted_count(&self) -> usize {
        self.inserted.iter().map(|b| b.num_rows()).sum()
    }

    /// Rows deleted, counted over the batches.
    pub fn deleted_count(&self) -> usize {
        self.deleted.iter().map(|b| b.num_rows()).sum()
    }
}

/// One committed version of one table.
#[derive(Debug, Clone)]
pub struct Change {
    /// The table's qualified name (`schema.table`), as the catalog keys it.
    pub table: String,
    pub version: u64,
    pub operation: Operation,
    /// The rows the commit changed, when the writer had them at hand (otherwise a listener that
    /// needs them reads the version's change from the log).
    pub rows: Option<ChangedRows>,
}

/// Something that acts on each commit (the flows, the views, a test, a metrics exporter).
pub trait CommitListener: Send + Sync {
    /// Called once per commit, after it is durable. An error is returned to the statement that
    /// committed (the commit stays: a flow's `FAIL UPDATE` expectation failing downstream), after
    /// the other listeners ran.
    fn committed<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<()>>;

    /// Whether this listener uses the changed rows of `table` (a writer then collects them
    /// when that costs extra work, as the old rows of a DELETE do).
    fn wants_rows(&self, _table: &str) -> bool {
        false
    }
}

/// The writer every commit goes through, and the listeners it tells.
#[derive(Default)]
pub struct Writer {
    listeners: RwLock<Vec<Arc<dyn CommitListener>>>,
    /// What the commits through this writer did, since the process started (`/metrics`).
    pub stats: WriteStats,
}

/// Counters of the commits through the [`Writer`].
#[derive(Debug, Default)]
pub struct WriteStats {
    pub commits: std::sync::atomic::AtomicU64,
    /// Commits that lost to a concurrent one (40001).
    pub conflicts: std::sync::atomic::AtomicU64,
    /// Data files the commits added, and their bytes.
    pub files_written: std::sync::atomic::AtomicU64,
    pub bytes_written: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer").field("listeners", &self.listeners().len()).finish()
    }
}

impl Writer {
    /// Adds a listener; it hears every later commit.
    pub fn subscribe(&self, listener: Arc<dyn CommitListener>) {
        self.listeners.write().unwrap_or_else(|p| p.into_inner()).push(listener);
    }

    /// Drops every listener (the database's last handle is gone).
    pub fn clear(&self) {
        self.listeners.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn listeners(&self) -> Vec<Arc<dyn CommitListener>> {
        self.listeners.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a listener uses the changed rows of `table`.
    pub fn wants_rows(&self, table: &str) -> bool {
        self.listeners().iter().any(|l| l.wants_rows(table))
    }

    /// Finishes one commit of `table` (the outcome of a storage call) by telling the listeners;
    /// returns the committed version. A conflicting commit is 40001 and tells no one.
    pub async fn commit(
        &self,
        table: &str,
        operation: Operation,
        rows: Option<ChangedRows>,
        outcome: CommitOutcome,
    ) -> Result<u64> {
        if let CommitOutcome::Committed(c) = &outcome {
            if c.staged {
                // Held by a transaction block: its COMMIT tells the listeners (crate::staging).
                return Ok(c.version);
            }
        }
        self.count(&outcome);
        let version = committed(outcome)?;
        self.publish(Change { table: table.to_string(), version, operation, rows }).await?;
        Ok(version)
    }

    fn count(&self, outcome: &CommitOutcome) {
        use std::sync::atomic::Ordering::Relaxed;
        match outcome {
            CommitOutcome::Committed(c) => {
                self.stats.commits.fetch_add(1, Relaxed);
                let adds = c.commits.last().into_iter().flat_map(|(_, _, actions)| actions).filter_map(|a| match a {
                    sluice_storage::actions::Action::Add(add) => Some(add.size.max(0) as u64),
                    _ => None,
                });
                let (files, bytes) = adds.fold((0u64, 0u64), |(n, b), size| (n + 1, b + size));
                self.stats.files_written.fetch_add(files, Relaxed);
                self.stats.bytes_written.fetch_add(bytes, Relaxed);
            }
            CommitOutcome::Conflict(_) => {
                self.stats.conflicts.fetch_add(1, Relaxed);
            }
        }
    }

    /// Tells every listener about a commit; returns the first error after all have run.
    pub(crate) async fn publish(&self, change: Change) -> Result<()> {
        let mut first_error = None;
        for listener in self.listeners() {
            if let Err(e) = listener.committed(&change).await {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

// The writer's vocabulary for rows a statement, a flow or a source writes.

/// Who writes, for the commit: a flow's progress and the source version its rows came from.
#[derive(Debug, Default)]
pub struct WriteContext {
    /// Streaming writers' progress, committed with the rows (a flow's, or a Kafka source's per
    /// partition).
    pub txns: Vec<sluice_storage::actions::Txn>,
    pub source_version: Option<u64>,
    /// Commit the txns even when no row is left to write (a Kafka batch of dead letters only).
    pub commit_empty: bool,
}

/// What a write did.
#[derive(Debug, Default)]
pub struct Written {
    pub rows: u64,
    /// Rows that violated each expectation.
    pub violations: std::collections::BTreeMap<String, u64>,
}

/// How source columns are matched to the target's.
pub enum ColumnMatch {
    /// By position, onto these target columns (all of them when the statement lists none).
    Position(Vec<String>),
    ByName,
}

/// The version of a commit, or 40001 when a concurrent writer won.
pub fn committed(outcome: CommitOutcome) -> Result<u64> {
    match outcome {
        CommitOutcome::Committed(c) => Ok(c.version),
        CommitOutcome::Conflict(c) => Err(Error::SerializationFailure(c.to_string())),
    }
}
