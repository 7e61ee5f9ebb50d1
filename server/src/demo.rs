//! `sluice demo [--data DIR] [--listen ADDR] [--http ADDR]`: a self-contained pipeline to look at
//! in one command.
//!
//! - An in-process Kafka cluster (librdkafka's mock cluster, on a loopback port) with three
//!   topics, fed by a producer thread at [`MESSAGES_PER_SECOND`] (at most [`MESSAGES_MAX`] in
//!   all) with generated orders, payments and clicks as JSON. The feed is drawn from a fixed
//!   seed ([`SEED`]), so two runs look alike. It includes schema drift (orders gain a `channel`
//!   field after [`DRIFT_AFTER_ORDERS`] orders), malformed records (about 1% that are not JSON,
//!   dead letters of the source) and wrong-typed ones (an amount or duration as a string, kept
//!   in the silver table's `_rescued_data`), and orders with a negative amount (about 3%, which
//!   break the expectation `positive_amount`).
//! - A pipeline made through SQL only ([`PIPELINE`]): the source `demo_kafka`, the bronze table
//!   that ingests it and routes each topic into its typed silver table (`EXPAND JSON`), the
//!   pull flow `gold_orders`, and the materialized views `revenue_per_customer` and
//!   `clicks_per_page`.
//! - Served over pgwire and HTTP (the status page with the lineage graph, `/metrics`), until
//!   Ctrl-C. The warehouse stays in the folder, and `sluice serve --data DIR` opens it later
//!   (its source then retries the gone cluster, and says so in `sluice.sources`).
//!
//! Running the demo again on the same folder reuses its pipeline. The new mock cluster starts
//! empty while bronze remembers the offsets it took from the last one, so each run feeds topics
//! of its own (`orders`, then `orders.2`, ...; see [`DemoTopics`]), which the routes match by the
//! name before the dot.
//!
//! Not the engine's business: the demo uses only the public `Database` API and SQL.

use std::process::ExitCode;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::config::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use sluice::Database;

/// The warehouse used when `--data` is not given.
pub const DEFAULT_DATA_DIR: &str = "./sluice-demo";
/// The seed of the generated messages.
pub const SEED: u64 = 25;
/// Messages produced per second, over the three topics.
pub const MESSAGES_PER_SECOND: u64 = 300;
/// The producer stops after this many messages (about 55 minutes at the rate above); the
/// cluster and the servers stay up.
pub const MESSAGES_MAX: u64 = 1_000_000;
/// Orders after which orders carry a new field (`channel`).
pub const DRIFT_AFTER_ORDERS: u64 = 1_500;
/// Partitions per topic.
const PARTITIONS: i32 = 2;
/// The producer sends a tick's share of messages every TICK_MS.
const TICK_MS: u64 = 100;
/// Attempts to hand a message to a full producer queue before it is dropped.
const SEND_ATTEMPTS_MAX: u32 = 100;
/// How long the producer may take to deliver what it holds when the demo stops.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the demo waits for the mock cluster to start.
const CLUSTER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The name of the demo's source: a folder that has it holds a demo.
const SOURCE: &str = "demo_kafka";
/// The runs of the demo a folder may hold (see [`DemoTopics`]).
const RUNS_MAX: u64 = 10_000;

/// The options of `sluice demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// The warehouse folder (created if missing; a demo's folder is reused).
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    data: String,
    /// Address for the PostgreSQL wire protocol.
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: std::net::SocketAddr,
    /// Address for HTTP: the status page, /metrics and /health.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: std::net::SocketAddr,
}

/// The statements of the pipeline, `{brokers}` and `{topics}` filled in by [`pipeline`]. Each is
/// run on its own; all but the source's are skipped when their object exists. The source is
/// replaced on every run: it names this run's cluster and topics.
pub const PIPELINE: &[&str] = &[
    "CREATE OR REPLACE SOURCE demo_kafka FROM KAFKA (brokers '{brokers}', topics '{topics}', format 'json', batch_ms '1000')",
    "CREATE STREAMING TABLE IF NOT EXISTS silver_orders (order_id bigint, customer text, amount double, currency text, items bigint,
       CONSTRAINT positive_amount EXPECT (amount > 0))",
    "CREATE STREAMING TABLE IF NOT EXISTS silver_payments (payment_id bigint, order_id bigint, method text, amount double, status text)",
    "CREATE STREAMING TABLE IF NOT EXISTS silver_clicks (customer text, page text, ms bigint)",
    "CREATE STREAMING TABLE IF NOT EXISTS bronze FROM SOURCE demo_kafka
       PUSH INTO silver_orders AS SELECT topic, \"offset\", \"timestamp\", value FROM bronze
         WHERE split_part(topic, '.', 1) = 'orders' EXPAND JSON value
       PUSH INTO silver_payments AS SELECT topic, \"offset\", \"timestamp\", value FROM bronze
         WHERE split_part(topic, '.', 1) = 'payments' EXPAND JSON value
       PUSH INTO silver_clicks AS SELECT topic, \"offset\", \"timestamp\", value FROM bronze
         WHERE split_part(topic, '.', 1) = 'clicks' EXPAND JSON value",
    "CREATE STREAMING TABLE IF NOT EXISTS gold_orders AS
       SELECT order_id, customer, amount, currency, items FROM STREAM(silver_orders) WHERE amount > 0",
    "CREATE MATERIALIZED VIEW IF NOT EXISTS revenue_per_customer AS
       SELECT customer, count(*) AS orders, CAST(sum(amount) AS decimal(14, 2)) AS revenue FROM gold_orders GROUP BY customer",
    "CREATE MATERIALIZED VIEW IF NOT EXISTS clicks_per_page AS
       SELECT page, count(*) AS clicks, sum(ms) AS total_ms FROM silver_clicks GROUP BY page",
];

/// Queries worth trying, printed at start.
const EXAMPLES: &[&str] = &[
    "SELECT * FROM revenue_per_customer ORDER BY revenue DESC LIMIT 5;",
    "SELECT page, clicks FROM clicks_per_page ORDER BY clicks DESC;",
    "SELECT name, \"table\", passed, violations FROM sluice.expectations;",
    "SELECT topic, error FROM bronze_errors LIMIT 5;",
    "SELECT order_id, channel, _rescued_data FROM silver_orders WHERE _rescued_data IS NOT NULL LIMIT 5;",
    "SELECT name, state, messages, dead_letters FROM sluice.sources;",
    "SELECT name, state, runs, rows_out FROM sluice.flows;",
];

/// The topics of one run: `orders`, `payments`, `clicks` in the first, `orders.N` ... in run N.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoTopics {
    pub run: u64,
    pub orders: String,
    pub payments: String,
    pub clicks: String,
}

impl DemoTopics {
    pub fn of_run(run: u64) -> DemoTopics {
        let name = |base: &str| if run <= 1 { base.to_string() } else { format!("{base}.{run}") };
        DemoTopics { run, orders: name("orders"), payments: name("payments"), clicks: name("clicks") }
    }

    fn all(&self) -> [&str; 3] {
        [&self.orders, &self.payments, &self.clicks]
    }

    /// The first run none of whose topics a table has taken records from.
    pub fn first_unused(used: &[String]) -> DemoTopics {
        (1..RUNS_MAX)
            .map(DemoTopics::of_run)
            .find(|topics| topics.all().iter().all(|t| !used.iter().any(|u| u == t)))
            .unwrap_or_else(|| DemoTopics::of_run(RUNS_MAX))
    }
}

/// The pipeline's statements for a cluster and a run's topics.
pub fn pipeline(brokers: &str, topics: &DemoTopics) -> Vec<String> {
    let topic_list = topics.all().join(",");
    PIPELINE.iter().map(|s| s.replace("{brokers}", brokers).replace("{topics}", &topic_list)).collect()
}

/// `sluice demo`.
pub async fn run(args: DemoArgs) -> ExitCode {
    let DemoArgs { data, listen, http } = args;
    if let Err(e) = std::fs::create_dir_all(&data) {
        eprintln!("ERROR: cannot create {data}: {e}");
        return ExitCode::FAILURE;
    }
    let db = match Database::open(&data).await {
        Ok(db) => db,
        Err(e) => {
            eprintln!("ERROR: cannot open {data}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let topics = match prepare(&db, &data).await {
        Ok(topics) => topics,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    let feed = match Feed::start(topics.clone()) {
        Ok(feed) => feed,
        Err(e) => {
            eprintln!("ERROR: cannot start the Kafka mock cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    for statement in pipeline(&feed.brokers, &topics) {
        if let Err(e) = db.execute(&statement).await {
            eprintln!("ERROR: the demo pipeline was not made: {e}\n  in: {statement}");
            return ExitCode::FAILURE;
        }
    }
    let code = serve(&db, &data, listen, http, &feed, &topics).await;
    if let Err(e) = db.flush_events().await {
        eprintln!("WARNING: the last events were not written to the event log: {e}");
    }
    feed.stop();
    code
}

/// Whether the folder holds a demo (say so) or nothing (fine) or something else (refused);
/// returns this run's topics.
async fn prepare(db: &Database, data: &str) -> Result<DemoTopics, String> {
    let has_demo = first_column(db, &format!("SELECT count(*) FROM sluice.sources WHERE name = '{SOURCE}'")).await?;
    if has_demo.first().map(String::as_str) != Some("0") {
        let used = first_column(
            db,
            &format!(
                "SELECT DISTINCT topic FROM sluice.kafka_offsets WHERE source = '{SOURCE}' AND \"offset\" IS NOT NULL"
            ),
        )
        .await?;
        let topics = DemoTopics::first_unused(&used);
        println!(
            "{data} already holds a demo pipeline: reusing it (its tables keep their rows; this run's messages go to the topics {})",
            topics.all().join(", ")
        );
        return Ok(topics);
    }
    let tables =
        first_column(db, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").await?;
    if tables.first().map(String::as_str) != Some("0") {
        return Err(format!(
            "{data} holds a warehouse that is not a demo's (it has tables but no source {SOURCE}): give the demo another folder with --data"
        ));
    }
    Ok(DemoTopics::of_run(1))
}

/// The first column of a query's rows, as text (NULL as an empty string).
async fn first_column(db: &Database, sql: &str) -> Result<Vec<String>, String> {
    let batches = db.query(sql).await.map_err(|e| format!("{sql}: {e}"))?;
    let mut out = Vec::new();
    for batch in batches.iter().filter(|b| b.num_columns() > 0) {
        let column = arrow::compute::cast(batch.column(0), &DataType::Utf8).map_err(|e| e.to_string())?;
        let column = column.as_string::<i32>();
        out.extend(
            (0..column.len()).map(|i| if column.is_null(i) { String::new() } else { column.value(i).to_string() }),
        );
    }
    Ok(out)
}

/// Serves pgwire and HTTP until Ctrl-C.
async fn serve(
    db: &Database,
    data: &str,
    listen: std::net::SocketAddr,
    http: std::net::SocketAddr,
    feed: &Feed,
    topics: &DemoTopics,
) -> ExitCode {
    let config = crate::pg::ServerConfig { listen, ..Default::default() };
    let server = match crate::pg::serve(db.clone(), config).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return ExitCode::FAILURE;
        }
    };
    // A port in use for HTTP is said clearly, and the demo goes on over pgwire.
    let http = match crate::http::serve(db.clone(), http).await {
        Ok(http) => Some(http),
        Err(e) => {
            eprintln!("ERROR: HTTP not started: {e} (pgwire keeps serving)");
            None
        }
    };
    print_banner(data, server.local_addr, http.as_ref().map(|h| h.local_addr), feed, topics);
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping; the warehouse stays in {data} (sluice serve --data {data} opens it)");
    server.stop();
    if let Some(http) = http {
        http.stop();
    }
    ExitCode::SUCCESS
}

fn print_banner(
    data: &str,
    pg: std::net::SocketAddr,
    http: Option<std::net::SocketAddr>,
    feed: &Feed,
    topics: &DemoTopics,
) {
    println!("sluice {} demo in {data}", env!("CARGO_PKG_VERSION"));
    println!(
        "  Kafka (in-process mock cluster) at {}: topics {} ({MESSAGES_PER_SECOND} messages a second, at most {MESSAGES_MAX}; seed {SEED})",
        feed.brokers,
        topics.all().join(", ")
    );
    println!("  pipeline: {SOURCE} -> bronze (dead letters in bronze_errors) -> silver_orders, silver_payments, silver_clicks");
    println!("            silver_orders -> gold_orders -> revenue_per_customer; silver_clicks -> clicks_per_page");
    println!();
    println!("  psql -h {} -p {} -U demo -d sluice", pg.ip(), pg.port());
    match http {
        Some(http) => println!("  status page: http://{http}/   (metrics: http://{http}/metrics)"),
        None => println!("  status page: not served (see the error above)"),
    }
    println!();
    println!("  queries to try:");
    for example in EXAMPLES {
        println!("    {example}");
    }
    println!();
    println!("  Ctrl-C stops the demo; the warehouse stays in {data}.");
}

/// The mock cluster and the producer, on a thread of their own (the cluster's handle cannot
/// move between threads). The cluster lives until [`Feed::stop`].
struct Feed {
    brokers: String,
    stop: SyncSender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Feed {
    fn start(topics: DemoTopics) -> Result<Feed, String> {
        let (ready_sender, ready) = std::sync::mpsc::sync_channel::<Result<String, String>>(1);
        let (stop, stopped) = std::sync::mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("sluice-demo-kafka".into())
            .spawn(move || feed_thread(&topics, &ready_sender, &stopped))
            .map_err(|e| format!("cannot start its thread: {e}"))?;
        match ready.recv_timeout(CLUSTER_START_TIMEOUT) {
            Ok(Ok(brokers)) => Ok(Feed { brokers, stop, thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("it did not start in time".into()),
        }
    }

    /// Stops the producer and the cluster.
    fn stop(self) {
        let _ = self.stop.try_send(());
        drop(self.stop);
        let _ = self.thread.join();
    }
}

fn feed_thread(topics: &DemoTopics, ready: &SyncSender<Result<String, String>>, stopped: &Receiver<()>) {
    let started = MockCluster::new(1).map_err(|e| e.to_string()).and_then(|cluster| {
        for topic in topics.all() {
            cluster.create_topic(topic, PARTITIONS, 1).map_err(|e| format!("cannot create topic {topic}: {e}"))?;
        }
        let brokers = cluster.bootstrap_servers();
        let producer: BaseProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("linger.ms", "20")
            .create()
            .map_err(|e| format!("cannot create the producer: {e}"))?;
        Ok((cluster, brokers, producer))
    });
    let (_cluster, producer) = match started {
        Ok((cluster, brokers, producer)) => {
            let _ = ready.send(Ok(brokers));
            (cluster, producer)
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let finished = produce(&producer, topics, stopped);
    let _ = producer.flush(FLUSH_TIMEOUT);
    if finished {
        println!("the feed has sent its {MESSAGES_MAX} messages and stops; the demo keeps serving");
        // The cluster stays up (the source reads it) until the demo stops.
        let _ = stopped.recv();
    }
}

/// Produces at [`MESSAGES_PER_SECOND`] until stopped (false) or [`MESSAGES_MAX`] are sent (true).
fn produce(producer: &BaseProducer, topics: &DemoTopics, stopped: &Receiver<()>) -> bool {
    let mut generator = Generator::new(topics.run);
    let per_tick = (MESSAGES_PER_SECOND * TICK_MS / 1000).max(1);
    while generator.sequence < MESSAGES_MAX {
        match stopped.recv_timeout(Duration::from_millis(TICK_MS)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return false,
        }
        for _ in 0..per_tick {
            let message = generator.next_message();
            let topic = match message.kind {
                Kind::Order => &topics.orders,
                Kind::Payment => &topics.payments,
                Kind::Click => &topics.clicks,
            };
            let record = BaseRecord::to(topic).partition(message.partition).key(&message.key).payload(&message.payload);
            send(producer, record);
        }
        producer.poll(Duration::ZERO);
    }
    true
}

/// Sends a record, waiting while the producer's queue is full; drops it after
/// [`SEND_ATTEMPTS_MAX`] attempts (the demo goes on).
fn send(producer: &BaseProducer, mut record: BaseRecord<'_, String, String>) {
    for _ in 0..SEND_ATTEMPTS_MAX {
        match producer.send(record) {
            Ok(()) => return,
            Err((_, returned)) => {
                producer.poll(Duration::from_millis(10));
                record = returned;
            }
        }
    }
}

/// The topic a generated message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Order,
    Payment,
    Click,
}

/// A generated message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    pub partition: i32,
    pub key: String,
    pub payload: String,
}

const CUSTOMERS: u64 = 40;
const PAGES: &[&str] = &["/", "/products", "/products/42", "/products/7", "/search", "/cart", "/checkout", "/help"];
const CURRENCIES: &[&str] = &["EUR", "EUR", "EUR", "USD", "GBP"];
const METHODS: &[&str] = &["card", "card", "paypal", "transfer"];
const CHANNELS: &[&str] = &["web", "web", "app", "partner"];

/// The generated stream: orders (30%), payments (20%) and clicks (50%); see the module's doc for
/// the drift and the bad records among them.
pub struct Generator {
    rng: StdRng,
    /// Messages generated.
    pub sequence: u64,
    orders: u64,
    payments: u64,
    /// Added to ids, so that a later run's ids differ from an earlier one's.
    id_base: u64,
}

impl Generator {
    pub fn new(run: u64) -> Generator {
        Generator {
            rng: StdRng::seed_from_u64(SEED),
            sequence: 0,
            orders: 0,
            payments: 0,
            id_base: run.saturating_sub(1).saturating_mul(100_000_000),
        }
    }

    pub fn next_message(&mut self) -> Message {
        self.sequence += 1;
        let roll = self.rng.random_range(0..100u32);
        let kind = match roll {
            0..30 => Kind::Order,
            30..50 => Kind::Payment,
            _ => Kind::Click,
        };
        let customer = self.rng.random_range(1..=CUSTOMERS);
        let partition = (customer % PARTITIONS as u64) as i32;
        let key = format!("c{customer:03}");
        let payload = match kind {
            Kind::Order => self.order(&key),
            Kind::Payment => self.payment(),
            Kind::Click => self.click(&key),
        };
        // About 1% are not JSON at all: dead letters.
        let payload = if self.rng.random_range(0..100u32) == 0 { malformed(&payload, self.sequence) } else { payload };
        Message { kind, partition, key, payload }
    }

    fn order(&mut self, customer: &str) -> String {
        self.orders += 1;
        let id = self.id_base + self.orders;
        let cents = self.rng.random_range(100..50_000u64);
        let amount = match self.rng.random_range(0..100u32) {
            // Breaks the expectation positive_amount.
            0..3 => format!("-{}", decimal(cents)),
            // Wrong-typed: rescued into _rescued_data.
            3 => format!("\"{}\"", decimal(cents)),
            _ => decimal(cents),
        };
        let currency = pick(&mut self.rng, CURRENCIES);
        let items = self.rng.random_range(1..6u32);
        let drift = if self.orders > DRIFT_AFTER_ORDERS {
            format!(", \"channel\": \"{}\"", pick(&mut self.rng, CHANNELS))
        } else {
            String::new()
        };
        format!(
            "{{\"order_id\": {id}, \"customer\": \"{customer}\", \"amount\": {amount}, \"currency\": \"{currency}\", \"items\": {items}{drift}}}"
        )
    }

    fn payment(&mut self) -> String {
        self.payments += 1;
        let id = self.id_base + self.payments;
        let order = self.id_base + self.rng.random_range(0..=self.orders).max(1);
        let cents = self.rng.random_range(100..50_000u64);
        let method = pick(&mut self.rng, METHODS);
        let status = if self.rng.random_range(0..20u32) == 0 { "declined" } else { "ok" };
        format!(
            "{{\"payment_id\": {id}, \"order_id\": {order}, \"method\": \"{method}\", \"amount\": {}, \"status\": \"{status}\"}}",
            decimal(cents)
        )
    }

    fn click(&mut self, customer: &str) -> String {
        let page = pick(&mut self.rng, PAGES);
        let ms = self.rng.random_range(5..3_000u32);
        // About 1% of clicks have their duration as text: rescued into _rescued_data.
        let ms = if self.rng.random_range(0..100u32) == 0 { format!("\"{ms}ms\"") } else { ms.to_string() };
        format!("{{\"customer\": \"{customer}\", \"page\": \"{page}\", \"ms\": {ms}}}")
    }
}

fn decimal(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

fn pick(rng: &mut StdRng, choices: &[&'static str]) -> &'static str {
    choices.get(rng.random_range(0..choices.len().max(1))).copied().unwrap_or_default()
}

/// A record that is not JSON: cut short, or not JSON at all.
fn malformed(payload: &str, sequence: u64) -> String {
    if sequence.is_multiple_of(2) {
        payload.chars().take(payload.len() / 2).collect()
    } else {
        format!("<event seq={sequence}>not json</event>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_is_the_same_from_the_same_seed_and_has_its_bad_records() {
        let messages: Vec<Message> = {
            let mut generator = Generator::new(1);
            (0..20_000).map(|_| generator.next_message()).collect()
        };
        let mut again = Generator::new(1);
        assert!(messages.iter().all(|m| *m == again.next_message()));
        let not_json =
            messages.iter().filter(|m| serde_json::from_str::<serde_json::Value>(&m.payload).is_err()).count();
        assert!((100..400).contains(&not_json), "{not_json} malformed records");
        let orders: Vec<serde_json::Value> = messages
            .iter()
            .filter(|m| m.kind == Kind::Order)
            .filter_map(|m| serde_json::from_str(&m.payload).ok())
            .collect();
        let negative = orders.iter().filter(|o| o["amount"].as_f64().is_some_and(|a| a < 0.0)).count();
        let text = orders.iter().filter(|o| o["amount"].is_string()).count();
        let drifted = orders.iter().filter(|o| o.get("channel").is_some()).count();
        assert!(negative > 50 && text > 10, "{negative} negative, {text} as text");
        assert!(drifted > 0 && drifted < orders.len(), "{drifted} of {} orders have the new field", orders.len());
        assert!(orders.first().is_some_and(|o| o.get("channel").is_none()));
    }

    #[test]
    fn each_run_feeds_topics_the_warehouse_has_not_taken() {
        assert_eq!(DemoTopics::first_unused(&[]).orders, "orders");
        let used = vec!["orders".to_string(), "clicks".to_string()];
        let second = DemoTopics::first_unused(&used);
        assert_eq!((second.run, second.payments.as_str()), (2, "payments.2"));
        let used = vec!["payments".to_string(), "orders.2".to_string()];
        assert_eq!(DemoTopics::first_unused(&used).clicks, "clicks.3");
        let statements = pipeline("127.0.0.1:9", &second);
        assert!(statements.iter().any(|s| s.contains("topics 'orders.2,payments.2,clicks.2'")));
    }
}
