//! Debezium change events through Kafka, end to end against librdkafka's mock cluster: two
//! source tables' events (a snapshot, creates, updates, deletes each followed by its tombstone,
//! and one malformed record) land in bronze with their operation and row image, are expanded into
//! typed change tables, and AUTO CDC keeps two silver tables equal to the source tables' final
//! state; the malformed record is in the dead-letter table.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::Rng;
use rdkafka::config::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sluice::Database;

use crate::common::rows;

const CUSTOMERS: &str = "db.public.customers";
const ORDERS: &str = "db.public.orders";

fn send(producer: &BaseProducer, topic: &str, key: &str, value: Option<&str>) {
    let record = BaseRecord::to(topic).key(key);
    crate::kafka::send(
        producer,
        match value {
            Some(value) => record.payload(value),
            None => record,
        },
    );
}

/// A source table as Debezium sees it: its rows by id (each row a JSON object).
#[derive(Default)]
struct SourceTable {
    rows: BTreeMap<i64, serde_json::Value>,
}

/// Produces `n` random changes of one table (a snapshot read of its first rows, then creates,
/// updates and deletes, each delete followed by a tombstone); returns the records that are rows
/// (tombstones are not).
fn produce_changes(
    producer: &BaseProducer,
    rng: &mut impl Rng,
    topic: &str,
    table: &mut SourceTable,
    image: &dyn Fn(i64, &mut dyn rand::RngCore) -> serde_json::Value,
    n: usize,
) -> usize {
    let mut rows = 0;
    let envelope = |op: &str,
                    before: Option<&serde_json::Value>,
                    after: Option<&serde_json::Value>,
                    with_schema: bool| {
        let payload = serde_json::json!({"before": before, "after": after, "op": op, "ts_ms": 1_700_000_000_000i64, "source": {"table": topic}});
        if with_schema {
            serde_json::json!({"schema": {"type": "struct", "optional": false}, "payload": payload}).to_string()
        } else {
            payload.to_string()
        }
    };
    for id in 1..=10 {
        let row = image(id, rng);
        send(producer, topic, &format!("{{\"id\": {id}}}"), Some(&envelope("r", None, Some(&row), true)));
        table.rows.insert(id, row);
        rows += 1;
    }
    for _ in 0..n {
        let id = rng.random_range(1..=30);
        let key = format!("{{\"id\": {id}}}");
        let with_schema = rng.random_bool(0.5);
        match table.rows.get(&id).cloned() {
            None => {
                let row = image(id, rng);
                send(producer, topic, &key, Some(&envelope("c", None, Some(&row), with_schema)));
                table.rows.insert(id, row);
            }
            Some(before) if rng.random_bool(0.3) => {
                send(producer, topic, &key, Some(&envelope("d", Some(&before), None, with_schema)));
                send(producer, topic, &key, None);
                table.rows.remove(&id);
            }
            Some(before) => {
                let row = image(id, rng);
                send(producer, topic, &key, Some(&envelope("u", Some(&before), Some(&row), with_schema)));
                table.rows.insert(id, row);
            }
        }
        rows += 1;
    }
    rows
}

async fn one(db: &Database, sql: &str) -> String {
    rows(&db.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))).join(",")
}

async fn wait_for(db: &Database, sql: &str, expected: &str) {
    let started = Instant::now();
    loop {
        let got = one(db, sql).await;
        if got == expected {
            return;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let sources = one(db, "SELECT state, messages, error FROM sluice.sources").await;
            let flows = one(db, "SELECT name, state, error FROM sluice.flows").await;
            panic!("{sql}: {got}, expected {expected}; sources {sources}; flows {flows}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_topics_through_bronze_into_auto_cdc_silver_tables() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(CUSTOMERS, 2, 1).unwrap();
    cluster.create_topic(ORDERS, 1, 1).unwrap();
    let brokers = cluster.bootstrap_servers();
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
    let mut rng = crate::common::rng_from(crate::common::seed("debezium"));
    let mut customers = SourceTable::default();
    let mut orders = SourceTable::default();
    let cities = ["Oaxaca", "Tijuana", "Cancun", "Leon"];
    let customer = |id: i64, rng: &mut dyn rand::RngCore| serde_json::json!({"id": id, "name": format!("c{id}"), "city": cities[rng.random_range(0..cities.len())]});
    let order =
        |id: i64, rng: &mut dyn rand::RngCore| serde_json::json!({"id": id, "amount": rng.random_range(1..1000)});
    let mut good = produce_changes(&producer, &mut rng, CUSTOMERS, &mut customers, &customer, 200);
    good += produce_changes(&producer, &mut rng, ORDERS, &mut orders, &order, 100);
    send(&producer, ORDERS, "{\"id\": 1}", Some("{\"before\": null, \"after\": {\"id\": 1}}"));
    producer.flush(Duration::from_secs(60)).unwrap();

    let db = Database::open("memory://").await.unwrap();
    db.execute(&format!(
        "CREATE SOURCE db FROM KAFKA (brokers '{brokers}', topics '{CUSTOMERS},{ORDERS}', format 'debezium', batch_ms '200');
         CREATE STREAMING TABLE cdc_bronze FROM SOURCE db
           PUSH INTO customers_changes AS SELECT op, \"offset\", image FROM cdc_bronze WHERE topic = '{CUSTOMERS}' EXPAND JSON image
           PUSH INTO orders_changes AS SELECT op, \"offset\", image FROM cdc_bronze WHERE topic = '{ORDERS}' EXPAND JSON image;"
    ))
    .await
    .unwrap();
    let total = good + 1;
    wait_for(
        &db,
        "SELECT (SELECT count(*) FROM cdc_bronze) + (SELECT count(*) FROM cdc_bronze_errors)",
        &total.to_string(),
    )
    .await;
    assert_eq!(one(&db, "SELECT count(*) FROM cdc_bronze WHERE op = 'r'").await, "20");
    let errors = one(&db, "SELECT topic, error FROM cdc_bronze_errors").await;
    assert!(errors.starts_with(&format!("{ORDERS}|")) && errors.contains("no \"op\""), "{errors}");
    // Deletes carry the old row image (their key columns), tombstones made no rows.
    assert_eq!(one(&db, "SELECT count(*) FROM cdc_bronze WHERE value IS NULL OR image IS NULL").await, "0");

    db.execute(
        "CREATE STREAMING TABLE customers FLOW AUTO CDC FROM STREAM(customers_changes) KEYS (id)
           APPLY AS DELETE WHEN op = 'd' SEQUENCE BY \"offset\" COLUMNS (id, name, city);
         CREATE STREAMING TABLE orders FLOW AUTO CDC FROM STREAM(orders_changes) KEYS (id)
           APPLY AS DELETE WHEN op = 'd' SEQUENCE BY \"offset\" COLUMNS (id, amount)",
    )
    .await
    .unwrap();
    let expected_customers: Vec<String> = customers
        .rows
        .values()
        .map(|r| format!("{}|{}|{}", r["id"], r["name"].as_str().unwrap(), r["city"].as_str().unwrap()))
        .collect();
    let mut expected_customers = expected_customers;
    expected_customers.sort();
    assert!(expected_customers.len() > 5 && customers.rows.len() < 30, "{expected_customers:?}");
    let deletes = one(&db, "SELECT count(*) FROM customers_changes WHERE op = 'd'").await;
    assert_ne!(deletes, "0");
    assert_eq!(rows(&db.query("SELECT id, name, city FROM customers").await.unwrap()), expected_customers);
    let mut expected_orders: Vec<String> =
        orders.rows.values().map(|r| format!("{}|{}", r["id"], r["amount"])).collect();
    expected_orders.sort();
    assert_eq!(rows(&db.query("SELECT id, amount FROM orders").await.unwrap()), expected_orders);

    // Later events flow through the three statements as they arrive.
    let mut more = SourceTable { rows: customers.rows.clone() };
    produce_changes(&producer, &mut rng, CUSTOMERS, &mut more, &customer, 50);
    producer.flush(Duration::from_secs(60)).unwrap();
    let mut expected: Vec<String> = more
        .rows
        .values()
        .map(|r| format!("{}|{}|{}", r["id"], r["name"].as_str().unwrap(), r["city"].as_str().unwrap()))
        .collect();
    expected.sort();
    wait_for(&db, "SELECT id, name, city FROM customers", &expected.join(",")).await;
}
