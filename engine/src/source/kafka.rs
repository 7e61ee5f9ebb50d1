//! The Kafka ingest loop of one table: a librdkafka consumer on its own thread builds micro-batches,
//! and an async task commits each one to the table with the batch's offsets as txns.
//!
//! Exactly once without Kafka's offset commits: the consumer is *assigned* every partition of the
//! source's topics (no consumer-group rebalancing) at the offset after the one the table's log
//! holds for it (`txn(appId = 'kafka:<source>:<topic>:<partition>')`), or at the start the source
//! names for partitions the table has not seen. A batch commits its dead letters first, then its
//! rows, each under the batch's txns, and rows at or below a table's txn are dropped before a
//! write (a replay after a crash, or another process ingesting the same source). When a commit
//! fails the session ends: the consumer is dropped and a new session seeks to the committed
//! offsets again after a backoff.
//!
//! Memory is bounded: a batch closes at `batch_rows`, `batch_bytes` or `batch_ms`; the channel
//! between the thread and the committer holds one batch; librdkafka's prefetch queue is capped
//! (`queued.max.messages.kbytes`). The committer writes through the table's flows (sync flows run
//! before the write returns), so a slow pipeline slows the consumer down: back-pressure.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::Int32Type;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientContext;
use sluice_storage::actions::Txn;
use sluice_storage::write::SaveMode;

use super::decode::{BatchBuilder, DecodedBatch, RawRecord};
use super::options::{KafkaOptions, StartAt, Topics};
use super::SourceRuntime;
use super::{errors_table_name, parse_txn_app_id, table_entry, txn_app_id, txn_prefix, IngestState};
use crate::catalog::{SourceEntry, TableEntry};
use crate::change::{ColumnMatch, WriteContext};
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;
use crate::util::now_ms;
use crate::warehouse::Warehouse;

/// How long metadata requests may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the consumer looks for new partitions and topics.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(10);
/// How many records the consumer thread takes between two looks at the clock.
const CLOCK_EVERY: u64 = 256;
/// librdkafka's prefetch queue limit, unless the source sets `queued.max.messages.kbytes`.
const PREFETCH_KBYTES_DEFAULT: &str = "65536";

/// Checks a source's client properties by creating (not connecting) a consumer.
pub fn check_client(source: &str, options: &KafkaOptions) -> Result<()> {
    client_config(source, options)
        .create::<BaseConsumer>()
        .map(|_| ())
        .map_err(|e| Error::data("22023", format!("the Kafka client refused the options of source {source}: {e}")))
}

fn client_config(source: &str, options: &KafkaOptions) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("group.id", format!("sluice-{source}"));
    config.set("queued.max.messages.kbytes", PREFETCH_KBYTES_DEFAULT);
    for (key, value) in &options.client {
        config.set(key, value);
    }
    config
        .set("bootstrap.servers", &options.brokers)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", if options.start == StartAt::Latest { "latest" } else { "earliest" })
        .set("statistics.interval.ms", "1000");
    config
}

/// The client's callbacks: errors and statistics go to the table's status.
struct IngestContext {
    sources: Weak<SourceRuntime>,
    table: String,
    source: String,
}

impl ClientContext for IngestContext {
    fn stats(&self, statistics: Statistics) {
        let Some(sources) = self.sources.upgrade() else { return };
        let mut marks = BTreeMap::new();
        for (topic, stats) in &statistics.topics {
            for (partition, p) in &stats.partitions {
                if *partition >= 0 && p.hi_offset >= 0 {
                    marks.insert((topic.clone(), *partition), p.hi_offset);
                }
            }
        }
        sources.update(&self.table, |s| s.high_watermarks.extend(marks));
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let Some(sources) = self.sources.upgrade() else { return };
        let message = format!("{error}: {reason}");
        tracing::warn!(source = %self.source, table = %self.table, "{message}");
        let mut first = false;
        sources.update(&self.table, |s| {
            first = s.state != IngestState::Retrying;
            s.state = IngestState::Retrying;
            s.error = Some(message.clone());
        });
        if first {
            sources.db.events.record_source_event(&self.source, &self.table, "source error", 0, 0, Some(message));
        }
    }
}

impl ConsumerContext for IngestContext {}

/// Ends the consumer thread when the session ends, however it ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the consumer thread sends.
enum Delivery {
    Batch(DecodedBatch),
    /// The thread failed (it has stopped).
    Failed(String),
}

/// One session: reads the committed offsets, starts a consumer there and commits its batches
/// until a commit fails or the task is stopped.
pub(super) async fn session(
    sources: &Weak<SourceRuntime>,
    table: &str,
    source: &SourceEntry,
    stop: &Arc<AtomicBool>,
) -> Result<()> {
    let options = KafkaOptions::parse(&source.options)?;
    let committed = {
        let sources = sources.upgrade().ok_or_else(|| Error::Internal("the database closed".into()))?;
        let entry = table_entry(&sources.db, table)?;
        committed_offsets(&sources.db, &entry, &source.name).await?
    };
    let context = IngestContext { sources: sources.clone(), table: table.to_string(), source: source.name.clone() };
    let consumer: BaseConsumer<IngestContext> =
        client_config(&source.name, &options).create_with_context(context).map_err(|e| {
            Error::data("22023", format!("the Kafka client refused the options of source {}: {e}", source.name))
        })?;
    let session_stop = Arc::new(AtomicBool::new(false));
    let _guard = StopOnDrop(session_stop.clone());
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Delivery>(1);
    let thread_stop = (stop.clone(), session_stop.clone());
    let thread_options = options.clone();
    std::thread::Builder::new()
        .name(format!("sluice-kafka-{}", source.name))
        .spawn(move || {
            let stopped = || thread_stop.0.load(Ordering::Relaxed) || thread_stop.1.load(Ordering::Relaxed);
            if let Err(e) = consume(&consumer, &thread_options, committed, &sender, &stopped) {
                let _ = sender.blocking_send(Delivery::Failed(e));
            }
        })
        .map_err(|e| Error::Internal(format!("cannot start the Kafka consumer thread: {e}")))?;
    let mut writer: Option<QueryContext> = None;
    while let Some(delivery) = receiver.recv().await {
        let batch = match delivery {
            Delivery::Batch(batch) => batch,
            Delivery::Failed(message) => return Err(Error::data("08006", message)),
        };
        let Some(sources) = sources.upgrade() else { return Ok(()) };
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let writer = writer.get_or_insert_with(|| QueryContext::new(sources.db.clone()));
        commit_batch(&sources, writer, table, &source.name, batch).await?;
    }
    Ok(())
}

/// The last offset a table holds per (topic, partition) of a source.
pub(crate) async fn committed_offsets(
    db: &Arc<Warehouse>,
    entry: &TableEntry,
    source: &str,
) -> Result<HashMap<(String, i32), i64>> {
    let snapshot = db.open_table(entry).await?.snapshot().await?;
    Ok(offsets_in(snapshot.txns().values().map(|t| (t.app_id.as_str(), t.version)), source))
}

fn offsets_in<'a>(txns: impl Iterator<Item = (&'a str, i64)>, source: &str) -> HashMap<(String, i32), i64> {
    let prefix = txn_prefix(source);
    txns.filter(|(app, _)| app.starts_with(&prefix))
        .filter_map(|(app, version)| parse_txn_app_id(source, app).map(|(t, p)| ((t.to_string(), p), version)))
        .collect()
}

/// The partitions of the source's topics, from the brokers' metadata.
fn partitions(
    consumer: &BaseConsumer<IngestContext>,
    options: &KafkaOptions,
) -> std::result::Result<Vec<(String, i32)>, String> {
    let mut out = Vec::new();
    let matches = options.topic_matcher();
    let topics: Vec<Option<&str>> = match &options.topics {
        Topics::List(list) => list.iter().map(|t| Some(t.as_str())).collect(),
        Topics::Pattern(_) => vec![None],
    };
    for topic in topics {
        let metadata = consumer
            .fetch_metadata(topic, METADATA_TIMEOUT)
            .map_err(|e| format!("cannot read the topics' metadata from the brokers: {e}"))?;
        for t in metadata.topics() {
            if !matches(t.name()) || t.error().is_some() {
                continue;
            }
            out.extend(t.partitions().iter().map(|p| (t.name().to_string(), p.id())));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The consumer thread: assigns partitions at the committed offsets, then builds and sends
/// batches until stopped. Returns an error message when it cannot go on.
fn consume(
    consumer: &BaseConsumer<IngestContext>,
    options: &KafkaOptions,
    committed: HashMap<(String, i32), i64>,
    sender: &tokio::sync::mpsc::Sender<Delivery>,
    stopped: &dyn Fn() -> bool,
) -> std::result::Result<(), String> {
    let mut assigned: Vec<(String, i32)> = Vec::new();
    let mut next_discovery = Instant::now();
    let mut builder = BatchBuilder::new(options.format);
    let mut batch_started: Option<Instant> = None;
    let batch_time = Duration::from_millis(options.batch.ms);
    // A ticker makes the consumer look at the clock at least every quarter of batch_ms, also when
    // records trickle in one at a time.
    let tick = Arc::new(AtomicBool::new(false));
    let ticker_stop = Arc::new(AtomicBool::new(false));
    let _ticker_guard = StopOnDrop(ticker_stop.clone());
    {
        let (tick, ticker_stop) = (tick.clone(), ticker_stop.clone());
        let period = (batch_time / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        std::thread::Builder::new()
            .name("sluice-kafka-tick".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    tick.store(true, Ordering::Relaxed);
                }
            })
            .map_err(|e| format!("cannot start the batch ticker: {e}"))?;
    }
    while !stopped() {
        if Instant::now() >= next_discovery {
            next_discovery = Instant::now() + DISCOVERY_INTERVAL;
            // A metadata failure (brokers down) is retried at the next discovery; librdkafka
            // reports the outage through the context meanwhile.
            if let Ok(found) = partitions(consumer, options) {
                let new: Vec<&(String, i32)> = found.iter().filter(|p| !assigned.contains(p)).collect();
                if !new.is_empty() {
                    let mut list = TopicPartitionList::new();
                    for (topic, partition) in &new {
                        let offset = match committed.get(&(topic.clone(), *partition)) {
                            Some(last) => Offset::Offset(last + 1),
                            None if options.start == StartAt::Latest => Offset::End,
                            None => Offset::Beginning,
                        };
                        list.add_partition_offset(topic, *partition, offset)
                            .map_err(|e| format!("cannot assign {topic}/{partition}: {e}"))?;
                    }
                    consumer.incremental_assign(&list).map_err(|e| format!("cannot assign partitions: {e}"))?;
                    assigned.extend(new.into_iter().cloned());
                }
            } else if assigned.is_empty() {
                next_discovery = Instant::now() + Duration::from_millis(500);
            }
        }
        // Clock reads are not free (librdkafka's poll makes two of its own): the batch's age is
        // looked at every CLOCK_EVERY records, and when the client has nothing to hand over.
        let wait = match batch_started {
            Some(started) => batch_time.saturating_sub(started.elapsed()).min(Duration::from_millis(100)),
            None => Duration::from_millis(100),
        };
        let mut idle = false;
        match consumer.poll(wait) {
            Some(Ok(message)) => {
                let record = RawRecord {
                    topic: message.topic(),
                    partition: message.partition(),
                    offset: message.offset(),
                    timestamp_ms: message.timestamp().to_millis(),
                    key: message.key(),
                    value: message.payload(),
                };
                match message.headers() {
                    Some(headers) => builder.push(record, headers.iter().map(|h| (h.key, h.value))),
                    None => builder.push(record, std::iter::empty()),
                }
                batch_started.get_or_insert_with(Instant::now);
            }
            Some(Err(e)) => {
                // Per-partition errors (the client goes on by itself); shown through the context.
                consumer.context().error(e, "while consuming");
            }
            None => idle = true,
        }
        let look_at_clock =
            idle || builder.messages().is_multiple_of(CLOCK_EVERY) || tick.swap(false, Ordering::Relaxed);
        let full = builder.messages() as usize >= options.batch.rows
            || builder.bytes() as usize >= options.batch.bytes
            || (look_at_clock && batch_started.is_some_and(|s| s.elapsed() >= batch_time));
        if full && builder.messages() > 0 {
            let batch = builder.finish().map_err(|e| e.to_string())?;
            batch_started = None;
            if sender.blocking_send(Delivery::Batch(batch)).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Keeps the rows above each partition's committed offset.
fn above_committed(rows: &RecordBatch, committed: &HashMap<(String, i32), i64>) -> Result<RecordBatch> {
    if committed.is_empty() || rows.num_rows() == 0 {
        return Ok(rows.clone());
    }
    let (Some(topics), Some(partitions), Some(offsets)) =
        (rows.column_by_name("topic"), rows.column_by_name("partition"), rows.column_by_name("offset"))
    else {
        return Err(Error::Internal("a Kafka batch lacks topic, partition or offset".into()));
    };
    let topics = topics.as_string::<i32>();
    let partitions = partitions.as_primitive::<Int32Type>();
    let offsets = offsets.as_primitive::<arrow::datatypes::Int64Type>();
    let mut key = (String::new(), 0);
    let keep: BooleanArray = (0..rows.num_rows())
        .map(|i| {
            key.0.clear();
            key.0.push_str(topics.value(i));
            key.1 = partitions.value(i);
            Some(committed.get(&key).is_none_or(|last| offsets.value(i) > *last))
        })
        .collect();
    if keep.true_count() == rows.num_rows() {
        return Ok(rows.clone());
    }
    Ok(filter_record_batch(rows, &keep)?)
}

/// Commits one batch: dead letters, then rows (which runs the table's flows).
async fn commit_batch(
    sources: &SourceRuntime,
    writer: &QueryContext,
    table: &str,
    source: &str,
    batch: DecodedBatch,
) -> Result<()> {
    let db = &sources.db;
    let txns: Vec<Txn> = batch
        .offsets
        .iter()
        .map(|((topic, partition), range)| Txn {
            app_id: txn_app_id(source, topic, *partition),
            version: range.last,
            last_updated: Some(now_ms()),
        })
        .collect();
    let entry = table_entry(db, table)?;
    let dead_letters = batch.errors.num_rows() as u64;
    if dead_letters > 0 {
        let errors_key = crate::catalog::key(&entry.schema, &errors_table_name(&entry.name));
        write(writer, &errors_key, source, &batch, &batch.errors, &txns).await?;
    }
    let written = write(writer, table, source, &batch, &batch.rows, &txns).await?;
    sources.update(table, |s| {
        s.state = IngestState::Running;
        s.error = None;
        s.failures = 0;
        s.messages += batch.messages;
        s.dead_letters += dead_letters;
        s.batches += 1;
        s.bytes += batch.bytes;
        s.last_batch_ms = Some(now_ms());
    });
    db.events.record_source_event(
        source,
        table,
        "ingest",
        batch.messages,
        written,
        (dead_letters > 0).then(|| format!("{dead_letters} records to the dead-letter table")),
    );
    Ok(())
}

/// Appends rows of `batch` (those above the table's committed offsets) with the batch's txns;
/// commits the txns even when no row is left, so the offsets move on.
async fn write(
    writer: &QueryContext,
    table: &str,
    source: &str,
    batch: &DecodedBatch,
    rows: &RecordBatch,
    txns: &[Txn],
) -> Result<u64> {
    writer.clear_statement_state();
    let name = crate::names::parse_table_name(table)?;
    let target = writer.target(&crate::names::object_name(&name.schema, &name.name)).await?;
    let committed = offsets_in(target.snapshot.txns().values().map(|t| (t.app_id.as_str(), t.version)), source);
    let fresh: Vec<Txn> = txns
        .iter()
        .filter(|t| committed_of(&committed, source, &t.app_id).is_none_or(|last| t.version > last))
        .cloned()
        .collect();
    if fresh.is_empty() {
        writer.clear_statement_state();
        return Ok(0);
    }
    // Usually every partition starts past what the table holds: no row needs looking at.
    let replayed = batch.offsets.iter().any(|(key, range)| committed.get(key).is_some_and(|last| range.first <= *last));
    let rows = if replayed { above_committed(rows, &committed)? } else { rows.clone() };
    let context = WriteContext { txns: fresh, source_version: None, commit_empty: true };
    let written = writer.write_rows_with(&target, vec![rows], ColumnMatch::ByName, SaveMode::Append, context).await;
    writer.clear_statement_state();
    Ok(written?.rows)
}

fn committed_of(committed: &HashMap<(String, i32), i64>, source: &str, app_id: &str) -> Option<i64> {
    let (topic, partition) = parse_txn_app_id(source, app_id)?;
    committed.get(&(topic.to_string(), partition)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_come_from_the_sources_txns_only() {
        let txns = [("kafka:s:t:0", 5), ("kafka:s:t:1", 9), ("kafka:other:t:0", 100), ("flow", 3)];
        let offsets = offsets_in(txns.into_iter(), "s");
        assert_eq!(offsets.len(), 2);
        assert_eq!(offsets[&("t".to_string(), 1)], 9);
    }
}
