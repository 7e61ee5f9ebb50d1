//! External sources that streaming tables ingest: `CREATE SOURCE name FROM KAFKA (...)` and
//! `CREATE STREAMING TABLE bronze FROM SOURCE name [PUSH INTO ...]`.
//!
//! A source is a catalog entry (its options); the tables that ingest it hold their own progress in
//! their logs, one `txn(appId = 'kafka:<source>:<topic>:<partition>', version = last offset)` per
//! partition, committed with the rows of each micro-batch. Records that cannot be decoded go to
//! the table's dead-letter table `<table>_errors`, committed (under the same txns) before the good
//! rows of their batch, so a replay after a crash skips what either table already holds.
//!
//! - [`options`]: what a `CREATE SOURCE` may say, checked when it is created;
//! - [`decode`]: Kafka records to Arrow rows of the bronze table and of its dead-letter table;
//! - [`kafka`]: the consumer (librdkafka through rdkafka, behind the `kafka` feature) and the
//!   ingest loop that commits micro-batches;
//! - [`ddl`]: the statements.
//!
//! One ingest task runs per ingesting table, started by the flow worker (which also restarts it
//! after a failure, with backoff) and by the statement that creates the table. Its state, counters
//! and errors live in memory ([`SourceRuntime`]) and are served as `sluice.sources` and
//! `sluice.kafka_offsets`.

pub mod ddl;
pub mod debezium;
pub mod decode;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod options;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::util::lock;
use crate::warehouse::Warehouse;

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
}

/// The ingest tasks of a database and their status.
pub struct SourceRuntime {
    pub(crate) db: Arc<Warehouse>,
    status: Mutex<HashMap<String, IngestStatus>>,
    /// Set when the database's last handle is gone: the worker (which outlives it) must not start
    /// ingest tasks again.
    closed: std::sync::atomic::AtomicBool,
    #[cfg(feature = "kafka")]
    tasks: Mutex<HashMap<String, kafka::IngestTask>>,
}

impl std::fmt::Debug for SourceRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceRuntime").finish_non_exhaustive()
    }
}

impl SourceRuntime {
    pub fn new(db: Arc<Warehouse>) -> Self {
        Self {
            db,
            status: Default::default(),
            closed: Default::default(),
            #[cfg(feature = "kafka")]
            tasks: Default::default(),
        }
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
/// of tables that no longer do. Called by the flow worker on every full pass and by the DDL.
pub fn supervise(sources: &Arc<SourceRuntime>) {
    if sources.closed.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "kafka")]
    kafka::supervise(sources);
}

/// Checks a Kafka source's client properties (librdkafka refuses unknown ones).
pub fn check_client(source: &str, options: &options::KafkaOptions) -> crate::error::Result<()> {
    #[cfg(feature = "kafka")]
    return kafka::check_client(source, options);
    #[cfg(not(feature = "kafka"))]
    {
        let _ = (source, options);
        Err(crate::error::Error::NotSupported("Kafka sources: this Sluice was built without the kafka feature".into()))
    }
}

/// Stops every ingest task (the last handle of the database is gone).
pub fn stop_all(sources: &SourceRuntime) {
    sources.closed.store(true, std::sync::atomic::Ordering::Relaxed);
    #[cfg(feature = "kafka")]
    kafka::stop_all(sources);
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
