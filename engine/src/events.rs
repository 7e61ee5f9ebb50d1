//! The event log: what flows, sources, views and maintenance did, and every DDL statement (who,
//! what, when), kept in a Delta table of the warehouse (`_sluice/event_log/`) so that it
//! survives restarts and other engines (delta-rs, Spark) read it. `sluice.events` reads that
//! table. Also the expectation counts since the process started (`sluice.expectations`).
//!
//! Recording an event only appends it to a buffer in memory (bounded: beyond
//! [`PENDING_EVENTS_MAX`] the oldest are dropped, and the drop is counted); the background
//! worker writes the buffer as one append every [`FLUSH_INTERVAL_MS`], and a read of
//! `sluice.events` writes it first, so a reader sees every event recorded before its statement.
//! Events older than the retention ([`DatabaseOptions::event_retention_ms`], 7 days by default)
//! are deleted once an hour, and the log's small files are compacted as a streaming table's are.
//!
//! [`DatabaseOptions::event_retention_ms`]: crate::DatabaseOptions::event_retention_ms

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use sluice_storage::store::TableStore;
use sluice_storage::table::{CreateTable, Table};

use crate::error::{Error, Result};
use crate::util::{lock, now_ms};

/// The event log's folder, under the warehouse's root.
pub const EVENT_LOG_PATH: &str = "_sluice/event_log";
/// How often the background worker writes the recorded events.
pub const FLUSH_INTERVAL_MS: i64 = 1_000;
/// Events held in memory before they are written; beyond it, the oldest are dropped.
pub const PENDING_EVENTS_MAX: usize = 100_000;
/// The default retention of the event log: 7 days.
pub const RETENTION_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;
/// How often events older than the retention are deleted.
const PRUNE_INTERVAL_MS: i64 = 3600 * 1000;
/// Small files the log may gather before they are compacted.
const SMALL_FILES_MAX: usize = 50;
/// Tries of one append that lost races with other writers of the log (other processes).
const APPEND_TRIES_MAX: usize = 5;

/// One event (a row of `sluice.events`).
#[derive(Debug, Clone, Default)]
pub struct FlowEvent {
    pub at_ms: i64,
    /// The flow, source route (`source -> table`), view or object the event is about.
    pub flow: String,
    /// `run`, `failure`, `retry`, `resume`, `refresh`, `source batch`, `source error`,
    /// `checkpoint`, `compaction`, `ddl`, ...
    pub kind: &'static str,
    pub source_from: Option<i64>,
    pub source_to: Option<i64>,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Violations per constraint in this run.
    pub violations: BTreeMap<String, u64>,
    pub message: Option<String>,
    /// The role whose statement it was (DDL).
    pub user: Option<String>,
    /// How long the run, batch or statement took.
    pub duration_ms: Option<i64>,
}

/// The columns of the event log (and of `sluice.events`).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        Field::new("flow", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, false),
        Field::new("source_from", DataType::Int64, true),
        Field::new("source_to", DataType::Int64, true),
        Field::new("rows_in", DataType::Int64, true),
        Field::new("rows_out", DataType::Int64, true),
        Field::new("violations", DataType::Utf8, true),
        Field::new("message", DataType::Utf8, true),
        Field::new("user_name", DataType::Utf8, true),
        Field::new("duration_ms", DataType::Int64, true),
    ]))
}

fn to_batch(events: &[FlowEvent]) -> Result<RecordBatch> {
    let text = |f: &dyn Fn(&FlowEvent) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(events.iter().map(f).collect::<Vec<_>>()))
    };
    let int = |f: &dyn Fn(&FlowEvent) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(events.iter().map(f).collect::<Vec<_>>()))
    };
    let at = TimestampMicrosecondArray::from(events.iter().map(|e| e.at_ms.saturating_mul(1000)).collect::<Vec<_>>())
        .with_timezone("UTC");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(at),
        text(&|e| Some(e.flow.clone())),
        text(&|e| Some(e.kind.to_string())),
        int(&|e| e.source_from),
        int(&|e| e.source_to),
        int(&|e| i64::try_from(e.rows_in).ok()),
        int(&|e| i64::try_from(e.rows_out).ok()),
        text(&|e| (!e.violations.is_empty()).then(|| serde_json::to_string(&e.violations).unwrap_or_default())),
        text(&|e| e.message.clone()),
        text(&|e| e.user.clone()),
        int(&|e| e.duration_ms),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// The event log of one warehouse.
#[derive(Debug)]
pub struct EventLog {
    root: TableStore,
    /// Off: events are dropped when recorded (see [`crate::DatabaseOptions::event_log`]).
    enabled: bool,
    retention_ms: i64,
    /// Recorded, not yet written.
    pending: Mutex<Vec<FlowEvent>>,
    /// Held while the pending events are written (so a reader that flushes waits for a flush
    /// under way).
    flushing: tokio::sync::Mutex<()>,
    table: tokio::sync::OnceCell<Arc<Table>>,
    last_prune_ms: AtomicI64,
    /// Events dropped because the buffer was full (the log could not be written for long).
    dropped: AtomicU64,
    /// Events written to the log since the process started.
    written: AtomicU64,
    /// The last error writing the log (it is retried with the next flush).
    last_error: Mutex<Option<String>>,
    /// Violations per (table key, constraint) since the process started.
    violations: Mutex<BTreeMap<(String, String), u64>>,
    /// Rows checked per (table key, constraint) since the process started.
    checked: Mutex<BTreeMap<(String, String), u64>>,
}

impl EventLog {
    pub fn new(root: TableStore, retention_ms: i64, enabled: bool) -> Self {
        Self {
            root,
            enabled,
            retention_ms,
            pending: Mutex::default(),
            flushing: tokio::sync::Mutex::new(()),
            table: tokio::sync::OnceCell::new(),
            last_prune_ms: AtomicI64::new(0),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            last_error: Mutex::default(),
            violations: Mutex::default(),
            checked: Mutex::default(),
        }
    }

    /// Records an event (written with the next flush).
    pub fn record(&self, event: FlowEvent) {
        if !self.enabled {
            return;
        }
        let mut pending = lock(&self.pending);
        if pending.len() >= PENDING_EVENTS_MAX {
            let excess = pending.len() + 1 - PENDING_EVENTS_MAX;
            pending.drain(..excess);
            self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
        }
        pending.push(event);
    }

    /// Records an event of a source's ingest into a table (shown in `sluice.events` with
    /// `flow = 'source -> table'`).
    pub fn record_source_event(
        &self,
        source: &str,
        table: &str,
        kind: &'static str,
        rows_in: u64,
        rows_out: u64,
        message: Option<String>,
    ) {
        self.record(FlowEvent {
            at_ms: now_ms(),
            flow: format!("{source} -> {table}"),
            kind,
            rows_in,
            rows_out,
            message,
            ..Default::default()
        });
    }

    /// Records an event of a materialized view (`flow` is the view's name).
    pub fn record_view_event(&self, view: &str, kind: &'static str, rows_in: u64, message: Option<String>) {
        self.record(FlowEvent {
            at_ms: now_ms(),
            flow: view.to_string(),
            kind,
            rows_in,
            message,
            ..Default::default()
        });
    }

    /// Adds violations of a table's constraint.
    pub fn count_violations(&self, table: &str, constraint: &str, rows: u64) {
        *lock(&self.violations).entry((table.to_string(), constraint.to_string())).or_default() += rows;
    }

    /// Adds rows checked against a table's constraint (passed or not).
    pub fn count_checked(&self, table: &str, constraint: &str, rows: u64) {
        *lock(&self.checked).entry((table.to_string(), constraint.to_string())).or_default() += rows;
    }

    /// Violations per (table key, constraint).
    pub fn violations(&self) -> BTreeMap<(String, String), u64> {
        lock(&self.violations).clone()
    }

    /// Rows checked per (table key, constraint).
    pub fn checked(&self) -> BTreeMap<(String, String), u64> {
        lock(&self.checked).clone()
    }

    /// (events written since start, events dropped, events pending, the last write error).
    pub fn stats(&self) -> (u64, u64, u64, Option<String>) {
        (
            self.written.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
            lock(&self.pending).len() as u64,
            lock(&self.last_error).clone(),
        )
    }

    /// The event log's table (created on first use).
    pub async fn table(&self) -> Result<Arc<Table>> {
        self.table
            .get_or_try_init(|| async {
                let store = self.root.child(EVENT_LOG_PATH);
                if Table::exists(&store).await? {
                    return Ok::<_, Error>(Arc::new(Table::open(store).await?));
                }
                let create = CreateTable {
                    schema: sluice_storage::schema::StructType::from_arrow(&schema())?,
                    partition_columns: vec![],
                    properties: Default::default(),
                    name: Some("event_log".into()),
                    description: Some("Sluice's event log: flow runs, source batches, failures and DDL".into()),
                };
                match Table::create(store.clone(), create).await {
                    Ok(table) => Ok(Arc::new(table)),
                    // Another process created it first.
                    Err(sluice_storage::error::Error::TableExists { .. }) => Ok(Arc::new(Table::open(store).await?)),
                    Err(e) => Err(e.into()),
                }
            })
            .await
            .cloned()
    }

    /// Writes the recorded events (one append), and deletes expired ones when due. A failed
    /// write keeps the events for the next flush.
    pub async fn flush(&self) -> Result<()> {
        let _flushing = self.flushing.lock().await;
        let events = std::mem::take(&mut *lock(&self.pending));
        if !events.is_empty() {
            let count = events.len() as u64;
            match self.append(&events).await {
                Ok(()) => {
                    self.written.fetch_add(count, Ordering::Relaxed);
                    *lock(&self.last_error) = None;
                }
                Err(e) => {
                    let mut pending = lock(&self.pending);
                    let newer = std::mem::replace(&mut *pending, events);
                    pending.extend(newer);
                    let excess = pending.len().saturating_sub(PENDING_EVENTS_MAX);
                    pending.drain(..excess);
                    self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
                    *lock(&self.last_error) = Some(e.to_string());
                    return Err(e);
                }
            }
        }
        let now = now_ms();
        let last = self.last_prune_ms.load(Ordering::Relaxed);
        if now - last >= PRUNE_INTERVAL_MS && self.table.get().is_some() {
            self.last_prune_ms.store(now, Ordering::Relaxed);
            if let Err(e) = self.prune(now - self.retention_ms).await {
                tracing::warn!("event log: deleting expired events failed (retried in an hour): {e}");
            }
        }
        Ok(())
    }

    async fn append(&self, events: &[FlowEvent]) -> Result<()> {
        let table = self.table().await?;
        let batch = to_batch(events)?;
        for _ in 0..APPEND_TRIES_MAX {
            match table.append(vec![batch.clone()]).await? {
                sluice_storage::commit::CommitOutcome::Committed(_) => {
                    self.compact_when_due(&table).await;
                    return Ok(());
                }
                sluice_storage::commit::CommitOutcome::Conflict(_) => continue,
            }
        }
        Err(Error::Internal("the event log's append lost to other writers too many times".into()))
    }

    async fn compact_when_due(&self, table: &Table) {
        let snapshot = table.cached_snapshot();
        let small = table.write_options().target_file_size_bytes / 4;
        if snapshot.files().filter(|f| (f.size as u64) < small).count() < SMALL_FILES_MAX {
            return;
        }
        if let Err(e) = table.optimize(None).await {
            tracing::warn!("event log: compaction failed (retried later): {e}");
        }
    }

    /// Deletes the events before `cutoff_ms`, and the files older deletes left behind.
    async fn prune(&self, cutoff_ms: i64) -> Result<()> {
        let table = self.table().await?;
        let cutoff_us = cutoff_ms.saturating_mul(1000);
        let result = table
            .delete_where(
                |_| true,
                |batch| {
                    let at = batch
                        .column_by_name("at")
                        .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
                        .ok_or_else(|| sluice_storage::error::Error::Schema("the event log has no `at`".into()))?;
                    Ok(BooleanArray::from(
                        (0..at.len()).map(|i| Some(at.is_valid(i) && at.value(i) < cutoff_us)).collect::<Vec<_>>(),
                    ))
                },
            )
            .await?;
        if result.rows_affected > 0 {
            table.optimize(None).await?;
            table.vacuum(None, false, true).await?;
        }
        Ok(())
    }
}
