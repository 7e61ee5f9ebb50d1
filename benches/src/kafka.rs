//! The Kafka benchmark of issue 6: messages of about 200 bytes of JSON over three topics in
//! librdkafka's mock cluster, read (a) by Sluice through a bronze table with three `EXPAND JSON`
//! routes into typed silver tables and (b) by a bare rdkafka consumer loop that does nothing with
//! them (the ceiling on this machine).
//!
//! The mock cluster and a producer thread run inside each reader's process: the mock brokers keep
//! only the newest 5 MB of each partition, so the producer is paced by the reader (at most
//! [`BACKLOG_MAX`] messages ahead), and both readers pay the same for it. The peak RSS therefore
//! includes the brokers' bounded copy and the producer's queue (together under 200 MB).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::json;

type BenchResult = Result<serde_json::Value, Box<dyn std::error::Error>>;

const TOPICS: [&str; 3] = ["orders", "payments", "clicks"];
const PARTITIONS: i32 = 8;

/// Message `i`: about 200 bytes of JSON, its schema depending on its topic.
fn message(i: u64) -> (&'static str, String) {
    let topic = TOPICS[(i % 3) as usize];
    let payload = match i % 3 {
        0 => format!(
            "{{\"order_id\": {i}, \"customer\": \"customer-{:05}\", \"amount\": {}.25, \"currency\": \"EUR\", \
             \"items\": {}, \"created\": \"2026-11-30T10:{:02}:{:02}Z\", \"channel\": \"web\", \"status\": \"new\", \"source\": \"checkout-service\"}}",
            i % 10_000,
            i % 5_000,
            i % 9 + 1,
            i % 60,
            i % 60
        ),
        1 => format!(
            "{{\"payment_id\": {i}, \"order_id\": {}, \"method\": \"card\", \"paid\": {}.5, \"captured\": true, \
             \"provider\": \"acme-payments\", \"reference\": \"ref-{:012}\", \"attempt\": {}, \"source\": \"payment-gateway\"}}",
            i - 1,
            i % 5_000,
            i,
            i % 3 + 1
        ),
        _ => format!(
            "{{\"session\": \"s-{:08}\", \"page\": \"/products/{}\", \"referrer\": \"/search?q=item-{}\", \
             \"ms\": {}, \"device\": \"mobile\", \"country\": \"NL\", \"scroll\": 0.{}, \"source\": \"web-tracker-v2\"}}",
            i % 100_000,
            i % 5_000,
            i % 777,
            i % 9_000,
            i % 100
        ),
    };
    (topic, payload)
}

/// Messages not yet read that the producer lets pile up. librdkafka's mock partitions keep only
/// the newest 5 MB each (dropping whole message sets), so the producer is paced by the reader:
/// with 24 partitions, 250,000 messages of ~200 bytes are about 2.3 MB per partition.
const BACKLOG_MAX: u64 = 250_000;

/// A mock cluster (one broker, three topics of eight partitions) and a producer thread writing
/// `messages` messages into it, never more than [`BACKLOG_MAX`] ahead of `read`.
fn cluster_with_producer(
    messages: u64,
    read: Arc<AtomicU64>,
) -> Result<
    (MockCluster<'static, rdkafka::producer::DefaultProducerContext>, std::thread::JoinHandle<u64>),
    Box<dyn std::error::Error>,
> {
    let cluster = MockCluster::new(1)?;
    for topic in TOPICS {
        cluster.create_topic(topic, PARTITIONS, 1)?;
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "65536")
        .set("linger.ms", "5")
        .set("batch.num.messages", "2000")
        .create()?;
    let handle = std::thread::spawn(move || {
        let mut bytes = 0u64;
        for i in 0..messages {
            if i.is_multiple_of(10_000) {
                while i > read.load(Ordering::Relaxed) + BACKLOG_MAX {
                    producer.poll(Duration::ZERO);
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            let (topic, payload) = message(i);
            bytes += payload.len() as u64;
            let key = format!("k{i}");
            let partition = (i / 3 % PARTITIONS as u64) as i32;
            let mut record = BaseRecord::to(topic).partition(partition).key(&key).payload(&payload);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    // The queue is full: wait for deliveries to make room.
                    Err((_, returned)) => {
                        producer.poll(Duration::from_millis(1));
                        record = returned;
                    }
                }
            }
        }
        let _ = producer.flush(Duration::from_secs(600));
        bytes
    });
    Ok((cluster, handle))
}

/// A bare consumer: assigned every partition from the start, polls until `messages` arrived.
pub fn bare(messages: u64) -> BenchResult {
    let read = Arc::new(AtomicU64::new(0));
    let (cluster, producer) = cluster_with_producer(messages, read.clone())?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", "bare")
        .set("enable.auto.commit", "false")
        .set("queued.max.messages.kbytes", "65536")
        .create()?;
    let mut list = TopicPartitionList::new();
    for topic in TOPICS {
        for partition in 0..PARTITIONS {
            list.add_partition_offset(topic, partition, Offset::Beginning)?;
        }
    }
    consumer.assign(&list)?;
    let started = Instant::now();
    let mut seen = 0u64;
    while seen < messages {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                use rdkafka::Message;
                seen += 1;
                std::hint::black_box(m.payload());
                if seen.is_multiple_of(1_000) {
                    read.store(seen, Ordering::Relaxed);
                }
            }
            Some(Err(e)) => eprintln!("bare consumer: {e}"),
            None if started.elapsed() > Duration::from_secs(1800) => return Err("the bare consumer timed out".into()),
            None => {}
        }
    }
    read.store(seen, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let bytes = producer.join().map_err(|_| "the producer failed")?;
    Ok(json!({
        "seconds": seconds,
        "messages": seen,
        "bytes": bytes,
        "messages_per_second": seen as f64 / seconds,
        "peak_rss_mb": crate::peak_rss_mb(),
    }))
}

async fn count(db: &sluice::Database, sql: &str) -> Result<i64, Box<dyn std::error::Error>> {
    let batches = db.query(sql).await?;
    let column =
        batches[0].column(0).as_any().downcast_ref::<arrow::array::Int64Array>().ok_or("count is not int64")?;
    Ok(column.value(0))
}

/// Sluice: a source, a bronze table and three routes expanding each topic's JSON into a typed
/// silver table; the clock runs from the CREATE until every message is in silver.
pub async fn ingest(data: &str, messages: u64) -> BenchResult {
    std::fs::create_dir_all(data)?;
    let read = Arc::new(AtomicU64::new(0));
    let (cluster, producer) = cluster_with_producer(messages, read.clone())?;
    let brokers = cluster.bootstrap_servers();
    let db = sluice::Database::open(data).await?;
    let started = Instant::now();
    db.execute(&format!(
        "CREATE SOURCE events FROM KAFKA (brokers '{brokers}', topics 'orders,payments,clicks', format 'json');
         CREATE STREAMING TABLE bronze FROM SOURCE events
           PUSH INTO silver_orders WHERE topic = 'orders' EXPAND JSON value
           PUSH INTO silver_payments WHERE topic = 'payments' EXPAND JSON value
           PUSH INTO silver_clicks WHERE topic = 'clicks' EXPAND JSON value"
    ))
    .await?;
    loop {
        let done: u64 = db.inner().sources.statuses().values().map(|s| s.messages).sum();
        read.store(done, Ordering::Relaxed);
        if done >= messages {
            break;
        }
        if started.elapsed() > Duration::from_secs(1800) {
            return Err(format!("Sluice ingested {done} of {messages} messages in 30 minutes").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = producer.join().map_err(|_| "the producer failed")?;
    // Sync routes: the silver tables have every message when bronze's commit returned.
    let routed = count(
        &db,
        "SELECT (SELECT count(*) FROM silver_orders) + (SELECT count(*) FROM silver_payments) + (SELECT count(*) FROM silver_clicks)",
    )
    .await?;
    if routed as u64 != messages {
        return Err(format!("{routed} messages in silver of {messages}").into());
    }
    let typed = count(&db, "SELECT count(*) FROM silver_orders WHERE amount > 0 AND items > 0").await?;
    let batches = count(&db, "SELECT coalesce(sum(batches), 0) FROM sluice.sources").await?;
    Ok(json!({
        "seconds": seconds,
        "messages": messages,
        "messages_per_second": messages as f64 / seconds,
        "bytes": bytes,
        "typed_orders": typed,
        "batches": batches,
        "peak_rss_mb": crate::peak_rss_mb(),
    }))
}
