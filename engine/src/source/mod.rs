//! External sources that streaming tables ingest: `CREATE SOURCE name FROM KAFKA (...)` or `FROM
//! FILES (...)`, and `CREATE STREAMING TABLE bronze FROM SOURCE name [PUSH INTO ...]`.
//!
//! A source is a catalog entry (its options); the tables that ingest it hold their own progress in
//! their logs, committed with the rows of each micro-batch: one `txn(appId =
//! 'kafka:<source>:<topic>:<partition>', version = last offset)` per Kafka partition, one
//! `txn(appId = 'files:<source>:<path>')` per file. Records that cannot be decoded go to the
//! table's dead-letter table `<table>_errors`, committed (under the same txns) before the good
//! rows of their batch, so a replay after a crash skips what either table already holds.
//!
//! - [`options`]: what a Kafka `CREATE SOURCE` may say, checked when it is created;
//! - [`decode`]: Kafka records to Arrow rows of the bronze table and of its dead-letter table;
//! - [`kafka`]: the consumer (librdkafka through rdkafka, behind the `kafka` feature) and its
//!   session, which commits micro-batches;
//! - [`files`]: folders of CSV, JSON-lines and Parquet files (Auto Loader), and `read_files`;
//! - [`ddl`]: the statements.
//!
//! One ingest task runs per ingesting table, started by the flow worker (which also restarts it
//! after a failure, with backoff) and by the statement that creates the table. Its state, counters
//! and errors live in memory ([`SourceRuntime`]) and are served as `sluice.sources` and
//! `sluice.kafka_offsets`.

pub mod ddl;
pub mod debezium;
pub mod decode;
pub mod files;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod options;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::catalog::SourceEntry;
use crate::error::{Error, Result};
use crate::util::lock;
use crate::warehouse::Warehouse;

/// The first delay before a failed session starts again; it doubles up to the maximum.
const RESTART_DELAY_MS_MIN: u64 = 500;
const RESTART_DELAY_MS_MAX: u64 = 30_000;

/// The prefix of the txn application ids a table keeps per source partition.
pub fn txn_prefix(source: &str) -> String {
    format!("kafka:{source}:")
}

/// The txn application id of one source partition.
pub fn txn_app_id(source: &str, topic: &str, partition: i32) -> String {
    format!("kafka:{source}:{topic}:{partition}")
}

/// Parses `kafka:<source>:<topic>:<partition>` back (the topic may hold ':').
pub fn parse_txn_app_id<'a>(source: &str, app_id: &'a str) -> Option<(&'a str, i32)> {
    let rest = app_id.strip_prefix("kafka:")?.strip_prefix(source)?.strip_prefix(':')?;
    let (topic, partition) = rest.rsplit_once(':')?;
    Some((topic, partition.parse().ok()?))
}

/// The catalog entry of an ingesting table.
pub(crate) fn table_entry(db: &Warehouse, table: &str) -> Result<crate::catalog::TableEntry> {
    db.catalog.current().tables.get(table).cloned().ok_or_else(|| Error::UndefinedTable(table.to_string()))
}

/// The dead-letter table of an ingesting table.
pub fn errors_table_name(table: &str) -> String {
    format!("{table}_errors")
}

/// What an ingest task is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IngestState {
    #[default]
    Starting,
    Running,
    /// The client reported an error (e.g. brokers down) and no record arrived since; librdkafka
    /// reconnects by itself.
    Retrying,
    /// A micro-batch could not be committed; the task restarts from the committed offsets after a
    /// backoff.
    Failed,
}

impl IngestState {
    pub fn as_str(&self) -> &'static str {
        match self {
            IngestState::Starting => "starting",
            IngestState::Running => "running",
            IngestState::Retrying => "retrying",
            IngestState::Failed => "failed",
        }
    }
}

/// What the runtime knows about one ingesting table.
#[derive(Debug, Clone, Default)]
pub struct IngestStatus {
    pub source: String,
    pub state: IngestState,
    pub error: Option<String>,
    pub messages: u64,
    pub dead_letters: u64,
    pub batches: u64,
    pub bytes: u64,
    /// Failed sessions since the last good batch.
    pub failures: u32,
    pub last_batch_ms: Option<i64>,
    /// The high watermark (next offset to be written) of each assigned partition, as last
    /// reported by the client.
    pub high_watermarks: BTreeMap<(String, i32), i64>,
    /// File sources: the files the last listing found, those the table holds, those that were
    /// dead letters as a whole (since the server started), and those still to ingest.
    pub files: Option<FileProgress>,
}

/// What a file source's ingest task has seen.
#[derive(Debug, Clone, Default)]
pub struct FileProgress {
    pub seen: u64,
    pub done: u64,
    pub failed: u64,
    pub pending: u64,
    pub last_file: Option<String>,
    /// The modification time of the oldest file still to ingest.
    pub oldest_pending_ms: Option<i64>,
}

/// The ingest tasks of a database and their status.
pub struct SourceRuntime {
    pub(crate) db: Arc<Warehouse>,
    status: Mutex<HashMap<String, IngestStatus>>,
    /// Set when the database's last handle is gone: the worker (which outlives it) must not start
    /// ingest tasks again.
    closed: AtomicBool,
    tasks: Mutex<HashMap<String, IngestTask>>,
}

/// A running ingest task.
struct IngestTask {
    source: SourceEntry,
    handle: tokio::task::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for SourceRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceRuntime").finish_non_exhaustive()
    }
}

impl SourceRuntime {
    pub fn new(db: Arc<Warehouse>) -> Self {
        Self { db, status: Default::default(), closed: Default::default(), tasks: Default::default() }
    }

    /// The status of every ingesting table, by table key.
    pub fn statuses(&self) -> HashMap<String, IngestStatus> {
        lock(&self.status).clone()
    }

    pub(crate) fn update(&self, table: &str, change: impl FnOnce(&mut IngestStatus)) {
        change(lock(&self.status).entry(table.to_string()).or_default());
    }

    pub(crate) fn forget(&self, table: &str) {
        lock(&self.status).remove(table);
    }
}

/// Starts an ingest task for every table that ingests a source and has none, and stops the tasks
/// of tables that no longer do (or whose source changed). Called by the flow worker on every full
/// pass and by the DDL.
pub fn supervise(sources: &Arc<SourceRuntime>) {
    if sources.closed.load(Ordering::Relaxed) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let state = sources.db.catalog.current();
    let mut tasks = lock(&sources.tasks);
    tasks.retain(|table, task| {
        let wanted = state.tables.get(table).and_then(|t| t.source.as_deref()) == Some(task.source.name.as_str())
            && state.sources.get(&task.source.name) == Some(&task.source);
        if !wanted || task.handle.is_finished() {
            task.stop.store(true, Ordering::Relaxed);
            task.handle.abort();
            if !wanted {
                sources.forget(table);
            }
            return false;
        }
        true
    });
    for entry in state.tables.values() {
        let Some(source_name) = &entry.source else { continue };
        let key = entry.qualified_name();
        if tasks.contains_key(&key) {
            continue;
        }
        let Some(source) = state.sources.get(source_name) else { continue };
        let stop = Arc::new(AtomicBool::new(false));
        let handle = runtime.spawn(ingest(Arc::downgrade(sources), key.clone(), source.clone(), stop.clone()));
        sources.update(&key, |s| {
            s.source = source_name.clone();
            s.state = IngestState::Starting;
        });
        tasks.insert(key, IngestTask { source: source.clone(), handle, stop });
    }
}

/// One ingest session of a table, by the source's kind: it runs until the task is stopped (Ok)
/// or something fails (the task restarts it).
async fn session(
    sources: &Weak<SourceRuntime>,
    table: &str,
    source: &SourceEntry,
    stop: &Arc<AtomicBool>,
) -> Result<()> {
    match source.kind.as_str() {
        "files" => files::ingest::session(sources, table, source, stop).await,
        #[cfg(feature = "kafka")]
        "kafka" => kafka::session(sources, table, source, stop).await,
        other => Err(Error::NotSupported(format!("sources of kind {other} in this build of Sluice"))),
    }
}

/// Runs sessions until the task is stopped, restarting after failures with backoff.
async fn ingest(sources: Weak<SourceRuntime>, table: String, source: SourceEntry, stop: Arc<AtomicBool>) {
    let mut delay = RESTART_DELAY_MS_MIN;
    while !stop.load(Ordering::Relaxed) {
        let result = session(&sources, &table, &source, &stop).await;
        let Some(strong) = sources.upgrade() else { return };
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let message = match result {
            Ok(()) => return,
            Err(e) => e.to_string(),
        };
        tracing::warn!(source = %source.name, table = %table, "ingest failed: {message}");
        let mut failures = 0;
        strong.update(&table, |s| {
            s.state = IngestState::Failed;
            s.error = Some(message.clone());
            s.failures += 1;
            failures = s.failures;
        });
        if failures == 1 {
            delay = RESTART_DELAY_MS_MIN;
        }
        strong.db.events.record_source_event(
            &source.name,
            &table,
            "source failure",
            0,
            0,
            Some(format!("attempt {failures}: {message}; restarting in {delay} ms")),
        );
        drop(strong);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        delay = (delay * 2).min(RESTART_DELAY_MS_MAX);
    }
}

/// Checks a Kafka source's client properties (librdkafka refuses unknown ones).
pub fn check_client(source: &str, options: &options::KafkaOptions) -> Result<()> {
    #[cfg(feature = "kafka")]
    return kafka::check_client(source, options);
    #[cfg(not(feature = "kafka"))]
    {
        let _ = (source, options);
        Err(Error::NotSupported("Kafka sources: this Sluice was built without the kafka feature".into()))
    }
}

/// Stops every ingest task (the last handle of the database is gone).
pub fn stop_all(sources: &SourceRuntime) {
    sources.closed.store(true, Ordering::Relaxed);
    for (_, task) in lock(&sources.tasks).drain() {
        task.stop.store(true, Ordering::Relaxed);
        task.handle.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_app_ids_round_trip() {
        let id = txn_app_id("events", "a:b", 7);
        assert_eq!(id, "kafka:events:a:b:7");
        assert_eq!(parse_txn_app_id("events", &id), Some(("a:b", 7)));
        assert_eq!(parse_txn_app_id("event", &id), None);
        assert_eq!(parse_txn_app_id("events", "kafka:events:t:x"), None);
    }
}
