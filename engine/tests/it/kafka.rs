//! Kafka sources end to end, against librdkafka's mock cluster (a Kafka protocol implementation
//! served on loopback TCP ports): the seed's three topics split by one bronze table into typed
//! silver tables, schema drift, dead letters, exactly once across SIGKILLs, and a broker outage.
//!
//! The crash child is this test binary (`--ignored --exact kafka::child`): it opens the warehouse
//! and lets the ingest task run until it is killed.

use std::time::{Duration, Instant};

use rand::Rng;
use rdkafka::config::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sluice::Database;

use crate::common::rows;

/// A mock cluster with the seed's topics, two partitions each.
fn cluster() -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    let cluster = MockCluster::new(1).unwrap();
    for topic in ["orders", "payments", "clicks"] {
        cluster.create_topic(topic, 2, 1).unwrap();
    }
    cluster
}

fn producer(brokers: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("queue.buffering.max.messages", "1000000")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

/// Message `i`: its topic and JSON payload. Every 100th message is malformed JSON. From `drift_at`
/// on, orders carry a new field (`coupon`) and their `amount` is a string.
fn message(i: u64, drift_at: u64) -> (&'static str, String) {
    let topic = ["orders", "payments", "clicks"][(i % 3) as usize];
    if i % 100 == 99 {
        return (topic, format!("{{\"id\": {i}, broken"));
    }
    let payload = match topic {
        "orders" if i >= drift_at => format!(
            "{{\"id\": {i}, \"customer\": \"c{}\", \"amount\": \"{}.50\", \"coupon\": \"SAVE{}\"}}",
            i % 7,
            i % 1000,
            i % 5
        ),
        "orders" => format!("{{\"id\": {i}, \"customer\": \"c{}\", \"amount\": {}.5}}", i % 7, i % 1000),
        "payments" => format!("{{\"order_id\": {i}, \"method\": \"card\", \"paid\": true, \"cents\": {}}}", i % 500),
        _ => format!("{{\"url\": \"/page/{}\", \"ms\": {}, \"tags\": [\"a\", \"b\"]}}", i % 50, i % 9000),
    };
    (topic, payload)
}

fn produce(producer: &BaseProducer, range: std::ops::Range<u64>, drift_at: u64) {
    for i in range {
        let (topic, payload) = message(i, drift_at);
        let key = i.to_string();
        send(producer, BaseRecord::to(topic).partition((i / 3 % 2) as i32).key(key.as_str()).payload(payload.as_str()));
    }
    producer.flush(Duration::from_secs(60)).unwrap();
}

/// Sends a record, polling while the producer's queue is full.
pub fn send(producer: &BaseProducer, mut record: BaseRecord<'_, str, str>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((_, returned)) => {
                producer.poll(Duration::from_millis(10));
                record = returned;
            }
        }
    }
}

fn pipeline(brokers: &str, batch_rows: usize) -> String {
    format!(
        "CREATE TABLE silver_orders (id bigint, customer text, amount double);
         CREATE SOURCE events FROM KAFKA (brokers '{brokers}', topics 'orders,payments,clicks', format 'json', batch_rows '{batch_rows}', batch_ms '200');
         CREATE STREAMING TABLE bronze FROM SOURCE events
           PUSH INTO silver_orders WHERE topic = 'orders' EXPAND JSON value
           PUSH INTO silver_payments WHERE topic = 'payments' EXPAND JSON value
           PUSH INTO silver_clicks AS SELECT topic, partition, \"offset\", value FROM bronze WHERE topic = 'clicks' EXPAND JSON value;
         CREATE STREAMING TABLE gold AS SELECT customer, amount FROM STREAM(silver_orders);"
    )
}

async fn one(db: &Database, sql: &str) -> String {
    rows(&db.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))).join(",")
}

/// Waits until bronze and its dead letters hold `total` records.
async fn ingested(db: &Database, total: u64, timeout: Duration) {
    let started = Instant::now();
    loop {
        let held: u64 = one(db, "SELECT (SELECT count(*) FROM bronze) + (SELECT count(*) FROM bronze_errors)")
            .await
            .parse()
            .unwrap();
        if held >= total {
            return;
        }
        if started.elapsed() > timeout {
            let sources = one(db, "SELECT state, messages, error FROM sluice.sources").await;
            panic!("ingested {held} of {total} records in {timeout:?}; sources: {sources}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every record of `0..total` is in bronze or bronze_errors once, and each silver table holds its
/// topic's good records once, typed.
async fn assert_exactly_once(db: &Database, total: u64, drift_at: u64) {
    let bad = (0..total).filter(|i| i % 100 == 99).count() as u64;
    let good = total - bad;
    let per_topic = |t: u64| (0..total).filter(|i| i % 3 == t && i % 100 != 99).count().to_string();
    assert_eq!(
        one(db, "SELECT count(*), count(DISTINCT (topic, partition, \"offset\")) FROM bronze").await,
        format!("{good}|{good}")
    );
    assert_eq!(
        one(db, "SELECT count(*), count(DISTINCT (topic, partition, \"offset\")) FROM bronze_errors").await,
        format!("{bad}|{bad}")
    );
    assert_eq!(
        one(db, "SELECT count(*) FROM bronze_errors WHERE error LIKE '%not valid JSON%' AND value IS NOT NULL").await,
        bad.to_string()
    );
    for (table, topic) in [("silver_orders", 0), ("silver_payments", 1), ("silver_clicks", 2)] {
        let expected = per_topic(topic);
        assert_eq!(
            one(db, &format!("SELECT count(*), count(DISTINCT (partition, \"offset\")) FROM {table}")).await,
            format!("{expected}|{expected}"),
            "{table}"
        );
    }
    // Typed columns.
    let ids: u64 =
        one(db, "SELECT count(*) FROM silver_orders WHERE id % 3 = 0 AND customer LIKE 'c%'").await.parse().unwrap();
    assert_eq!(ids.to_string(), per_topic(0));
    assert_eq!(one(db, "SELECT count(*) FROM silver_payments WHERE paid AND method = 'card'").await, per_topic(1));
    assert_eq!(
        one(db, "SELECT count(*) FROM silver_clicks WHERE ms >= 0 AND tags = '[\"a\",\"b\"]'").await,
        per_topic(2)
    );
    // Drift: `amount` turned to a string (kept in _rescued_data), `coupon` became a column.
    let drifted = (drift_at..total).filter(|i| i % 3 == 0 && i % 100 != 99).count();
    if drifted > 0 {
        assert_eq!(
            one(db, "SELECT count(*) FROM silver_orders WHERE amount IS NULL AND _rescued_data->>'amount' LIKE '%.50' AND coupon LIKE 'SAVE%'").await,
            drifted.to_string()
        );
    }
    // Gold (pulled from silver_orders) aggregates match the messages.
    let mut expected: std::collections::BTreeMap<String, (u64, f64)> = Default::default();
    for i in (0..total).filter(|i| i % 3 == 0 && i % 100 != 99) {
        let entry = expected.entry(format!("c{}", i % 7)).or_default();
        entry.0 += 1;
        if i < drift_at {
            entry.1 += (i % 1000) as f64 + 0.5;
        }
    }
    let expected: Vec<String> = expected.iter().map(|(c, (n, sum))| format!("{c}|{n}|{sum:?}")).collect();
    let gold = rows(
        &db.query("SELECT customer, count(*), coalesce(sum(amount), 0) FROM gold GROUP BY customer ORDER BY customer")
            .await
            .unwrap(),
    );
    assert_eq!(gold, expected);
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var("SLUICE_KAFKA_WAREHOUSE") else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        // Reports what bronze holds, so the parent can tell a kill landed mid-ingestion.
        loop {
            if let Ok(batches) = db.query("SELECT count(*) FROM bronze").await {
                println!("held {}", rows(&batches).join(""));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// The seed's case: 1,000,000 messages over three topics (6 partitions), 1% malformed, orders
/// drifting halfway, ingested by a process killed 20 times at random.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_messages_exactly_once_across_kills() {
    let total: u64 = 1_000_000;
    let drift_at = total / 2;
    let cluster = cluster();
    let brokers = cluster.bootstrap_servers();
    let producer = producer(&brokers);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    {
        let db = Database::open(&path).await.unwrap();
        db.execute(&pipeline(&brokers, 20_000)).await.unwrap();
    }
    // librdkafka's mock partitions keep only their newest 5 MB, so the producer stays at most
    // BACKLOG messages ahead of what bronze holds (about 2 MB per partition).
    const CHUNK: u64 = 50_000;
    const BACKLOG: u64 = 100_000;
    let mut rng = crate::common::rng_from(crate::common::seed("kafka"));
    let (mut produced, mut held_before, mut mid_ingestion) = (0u64, 0u64, 0);
    let kills = 20;
    for _ in 0..kills {
        if produced < total && produced <= held_before + BACKLOG {
            let end = (produced + CHUNK).min(total);
            produce(&producer, produced..end, drift_at);
            produced = end;
        }
        let child = crate::common::ChildTest::spawn("kafka::child", &[("SLUICE_KAFKA_WAREHOUSE", path.clone())]);
        let report = |line: &str| line.strip_prefix("held ").and_then(|n| n.parse::<u64>().ok());
        // Kill at a random moment soon after the child has started committing (or after 3 s):
        // on a fast machine a 50,000-message chunk is in within a few hundred milliseconds, so a
        // later kill would find the chunk ingested.
        let mut held = held_before;
        let deadline = Instant::now() + Duration::from_secs(3);
        while held <= held_before && Instant::now() < deadline {
            if let Some(n) = child.lines.recv_timeout(Duration::from_millis(50)).ok().as_deref().and_then(report) {
                held = n;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        held = child.kill().iter().filter_map(|line| report(line)).next_back().unwrap_or(held);
        // The child's last report: bronze grew, and (good rows being 99% of records) had not
        // taken everything produced yet when the kill came.
        if held > held_before && held < produced * 98 / 100 {
            mid_ingestion += 1;
        }
        held_before = held;
    }
    assert!(mid_ingestion >= 10, "only {mid_ingestion} of {kills} kills landed while the child was ingesting");
    let db = Database::open(&path).await.unwrap();
    while produced < total {
        ingested(&db, produced.saturating_sub(BACKLOG), Duration::from_secs(300)).await;
        let end = (produced + CHUNK).min(total);
        produce(&producer, produced..end, drift_at);
        produced = end;
    }
    ingested(&db, total, Duration::from_secs(300)).await;
    // The flows caught up with the last batch before the write returned (sync flows).
    assert_exactly_once(&db, total, drift_at).await;
    // The offsets are the partitions' ends.
    assert_eq!(
        one(&db, "SELECT count(*), sum(lag) FROM sluice.kafka_offsets WHERE table = 'public.bronze'").await,
        "6|0"
    );
    let history = rows(&db.query("DESCRIBE HISTORY silver_orders").await.unwrap());
    assert!(history.iter().any(|r| r.contains("ADD COLUMNS")), "the new fields are in silver_orders' history");
    let sources = one(&db, "SELECT name, table, state, error FROM sluice.sources").await;
    assert!(sources.starts_with("events|public.bronze|running|"), "{sources}");
}

/// Schema inference and evolution, in process: new fields become columns, conflicts are rescued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_routes_infer_and_evolve_their_schema() {
    let cluster = cluster();
    let brokers = cluster.bootstrap_servers();
    let producer = producer(&brokers);
    produce(&producer, 0..300, 150);
    let db = Database::open("memory://").await.unwrap();
    db.execute(&pipeline(&brokers, 1_000)).await.unwrap();
    ingested(&db, 300, Duration::from_secs(60)).await;
    assert_exactly_once(&db, 300, 150).await;
    let columns = one(
        &db,
        "SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_name = 'silver_orders' ORDER BY 1",
    )
    .await;
    // Declared (id, customer, amount), added for the route (its other columns, _rescued_data), and
    // inferred from the data (coupon).
    assert_eq!(
        columns,
        "_rescued_data:Utf8,amount:Float64,coupon:Utf8,customer:Utf8,headers:Utf8,id:Int64,key:Utf8,offset:Int64,partition:Int32,timestamp:Timestamp(µs, \"UTC\"),topic:Utf8"
    );
    let clicks = one(
        &db,
        "SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_name = 'silver_clicks' ORDER BY 1",
    )
    .await;
    assert_eq!(clicks, "_rescued_data:Utf8,ms:Int64,offset:Int64,partition:Int32,tags:Utf8,topic:Utf8,url:Utf8");
    assert_eq!(one(&db, "SELECT count(*) FROM sluice.flows WHERE query LIKE '%EXPAND JSON value'").await, "3");
    assert_eq!(one(&db, "SELECT topic, partition, count(*) FROM sluice.kafka_offsets GROUP BY topic, partition HAVING count(*) <> 1").await, "");
    // A bad option is refused when the source is created, naming it.
    let err = db
        .execute("CREATE SOURCE bad FROM KAFKA (brokers 'x:1', topics 't', 'no.such.property' 'x')")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no.such.property"), "{err}");
    let err = db.execute("CREATE SOURCE bad FROM KAFKA (topics 't')").await.unwrap_err();
    assert!(err.to_string().contains("brokers"), "{err}");
    // The source cannot be dropped while bronze ingests it.
    let err = db.execute("DROP SOURCE events").await.unwrap_err();
    assert_eq!(err.sqlstate(), "2BP01", "{err}");
}

/// Each Kafka batch, and each flow commit it causes downstream, reaches a commit listener once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kafka_batch_reaches_the_commit_listener_once() {
    let cluster = cluster();
    let brokers = cluster.bootstrap_servers();
    let producer = producer(&brokers);
    produce(&producer, 0..300, 1_000);
    let db = Database::open("memory://").await.unwrap();
    let recorder = std::sync::Arc::new(crate::changes::Recorder::default());
    db.on_commit(recorder.clone());
    db.execute(&pipeline(&brokers, 40)).await.unwrap();
    ingested(&db, 300, Duration::from_secs(60)).await;
    assert_exactly_once(&db, 300, 1_000).await;
    for table in ["bronze", "silver_orders", "silver_payments", "silver_clicks", "gold"] {
        let key = format!("public.{table}");
        // A listener hears of a commit just after it is in the log: wait for the last one.
        let seen = crate::common::wait_for(&format!("the commits of {table}"), Duration::from_secs(10), || async {
            let logged: Vec<u64> = crate::changes::history_after(&db, table, 0).await.into_iter().collect();
            let seen = recorder.versions(&key);
            (seen == logged).then_some(seen)
        })
        .await;
        assert!(seen.len() > 1 || table == "gold", "{table}: {seen:?}");
    }
}

/// The brokers go away: the source says so, and everything produced meanwhile arrives once they
/// are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_is_reported_and_nothing_is_lost() {
    let cluster = cluster();
    let brokers = cluster.bootstrap_servers();
    let producer = producer(&brokers);
    produce(&producer, 0..90, u64::MAX);
    let db = Database::open("memory://").await.unwrap();
    db.execute(&pipeline(&brokers, 1_000)).await.unwrap();
    ingested(&db, 90, Duration::from_secs(60)).await;
    cluster.broker_down(1).unwrap();
    let started = Instant::now();
    loop {
        let state = one(&db, "SELECT state FROM sluice.sources").await;
        if state == "retrying" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the outage was not reported (state {state})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let error = one(&db, "SELECT error FROM sluice.sources").await;
    assert!(!error.is_empty());
    let events =
        one(&db, "SELECT count(*) FROM sluice.events WHERE flow = 'events -> public.bronze' AND kind = 'source error'")
            .await;
    assert_ne!(events, "0");
    cluster.broker_up(1).unwrap();
    produce(&producer, 90..300, u64::MAX);
    ingested(&db, 300, Duration::from_secs(120)).await;
    assert_exactly_once(&db, 300, u64::MAX).await;
    assert_eq!(one(&db, "SELECT state, error FROM sluice.sources").await, "running|NULL");
}

/// Issue 24: fifty topics through one per-value route. Each topic gets its table with its own
/// inferred columns; a topic created while ingesting (matching the source's pattern) gets its table
/// without a restart; counts are exact after SIGKILLs of the ingesting process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_topics_through_one_route() {
    const TOPICS: u64 = 50;
    const PER_TOPIC: u64 = 200;
    let cluster = MockCluster::new(1).unwrap();
    for t in 0..TOPICS {
        cluster.create_topic(&format!("ev.t{t:02}"), 1, 1).unwrap();
    }
    let brokers = cluster.bootstrap_servers();
    let producer = producer(&brokers);
    // Topic t's messages have an id and a field of its own, `f<t>`, whose type depends on t.
    let payload = |t: u64, i: u64| match t % 3 {
        0 => format!("{{\"id\": {i}, \"f{t}\": {i}}}"),
        1 => format!("{{\"id\": {i}, \"f{t}\": \"s{i}\"}}"),
        _ => format!("{{\"id\": {i}, \"f{t}\": {}}}", i.is_multiple_of(2)),
    };
    let produce_topic = |t: u64, range: std::ops::Range<u64>| {
        let topic = format!("ev.t{t:02}");
        for i in range {
            let value = payload(t, i);
            send(&producer, BaseRecord::to(&topic).partition(0).key("k").payload(value.as_str()));
        }
    };
    for t in 0..TOPICS {
        produce_topic(t, 0..PER_TOPIC / 2);
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    {
        let db = Database::open(&path).await.unwrap();
        db.execute(&format!(
            "CREATE SOURCE events FROM KAFKA (brokers '{brokers}', topic_pattern '^ev\\..*', batch_rows '700');
             CREATE STREAMING TABLE bronze FROM SOURCE events
               PUSH INTO TABLE PER topic NAMED 'silver_{{topic}}' EXPAND JSON value;"
        ))
        .await
        .unwrap();
    }
    let mut rng = crate::common::rng_from(crate::common::seed("kafka-topics"));
    for round in 0..6 {
        if round == 3 {
            for t in 0..TOPICS {
                produce_topic(t, PER_TOPIC / 2..PER_TOPIC);
            }
            producer.flush(Duration::from_secs(60)).unwrap();
        }
        let child = crate::common::ChildTest::spawn("kafka::child", &[("SLUICE_KAFKA_WAREHOUSE", path.clone())]);
        std::thread::sleep(Duration::from_millis(rng.random_range(200..1500)));
        child.kill();
    }
    let db = Database::open(&path).await.unwrap();
    // A topic created while the source runs, once it has taken the others in.
    let started = Instant::now();
    while one(&db, "SELECT count(*) FROM bronze").await != (TOPICS * PER_TOPIC).to_string() {
        assert!(started.elapsed() < Duration::from_secs(120), "bronze did not take the first 50 topics");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.create_topic("ev.t50", 1, 1).unwrap();
    produce_topic(50, 0..PER_TOPIC);
    producer.flush(Duration::from_secs(60)).unwrap();
    let started = Instant::now();
    loop {
        let routed = one(&db, "SELECT count(*) FROM bronze").await;
        let tables = one(&db, "SELECT count(*) FROM sluice.flows WHERE name LIKE 'bronze_to_silver_ev_t%'").await;
        if routed == ((TOPICS + 1) * PER_TOPIC).to_string() && tables == (TOPICS + 1).to_string() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "bronze {routed}, tables {tables}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for t in 0..=TOPICS {
        let table = format!("silver_ev_t{t:02}");
        let check = match t % 3 {
            0 => format!("count(*) FILTER (WHERE f{t} = id)"),
            1 => format!("count(*) FILTER (WHERE f{t} = 's' || CAST(id AS TEXT))"),
            _ => format!("count(*) FILTER (WHERE f{t} = (id % 2 = 0))"),
        };
        // The table's rows arrive right after bronze's commit: wait for them.
        let expected = format!("{PER_TOPIC}|{PER_TOPIC}|{PER_TOPIC}");
        let sql = format!("SELECT count(*), count(DISTINCT \"offset\"), {check} FROM {table}");
        let started = Instant::now();
        loop {
            let got = one(&db, &sql).await;
            if got == expected {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{table}: {got}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Only its own field among the JSON ones.
        let others = one(
            &db,
            &format!(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = '{table}' \
                 AND column_name LIKE 'f%' AND column_name <> 'f{t}'"
            ),
        )
        .await;
        assert_eq!(others, "0", "{table}");
    }
}
