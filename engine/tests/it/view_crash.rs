//! Killing the process while it maintains materialized views: after each kill the warehouse
//! reopens, every view that sluice.views reports reads, and every view holds exactly what its
//! defining query computes from scratch over the tables as they are on disk.
//!
//! The child is this test binary (`--ignored --exact view_crash::child`). It creates the tables and
//! the sync views if they are not there yet, prints `ready`, then runs random INSERTs, UPDATEs and
//! DELETEs forever, with a `REFRESH MATERIALIZED VIEW` (which writes a checkpoint) every few
//! statements. It prints `begin <n> <sql>` before statement n and `ok <n>` after it returns, so
//! the parent knows what was in flight when it killed.

use std::time::{Duration, Instant};

use rand::Rng;
use sluice::Database;

use crate::common::rows;

const TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS orders (id bigint, customer bigint, amount bigint)",
    "CREATE TABLE IF NOT EXISTS payments (order_id bigint, paid bigint)",
];

/// Each view: its name, its definition, and the same query written over the base tables only (the
/// reference, run from scratch by the parent). Views come after the views they read.
const VIEWS: [(&str, &str, &str); 5] = [
    (
        "by_customer",
        "SELECT customer, count(*) AS orders, count(amount) AS priced, sum(amount) AS total, \
         min(amount) AS lowest, max(amount) AS highest, count(DISTINCT amount) AS amounts \
         FROM orders GROUP BY customer",
        "SELECT customer, count(*) AS orders, count(amount) AS priced, sum(amount) AS total, \
         min(amount) AS lowest, max(amount) AS highest, count(DISTINCT amount) AS amounts \
         FROM orders GROUP BY customer",
    ),
    (
        "paid_orders",
        "SELECT o.id, o.customer, o.amount, p.paid FROM orders o JOIN payments p ON o.id = p.order_id",
        "SELECT o.id, o.customer, o.amount, p.paid FROM orders o JOIN payments p ON o.id = p.order_id",
    ),
    (
        "orders_with_payments",
        "SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.id = p.order_id",
        "SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.id = p.order_id",
    ),
    (
        "paid_by_customer",
        "SELECT customer, count(*) AS payments, sum(paid) AS paid, max(amount) AS largest \
         FROM paid_orders GROUP BY customer",
        "SELECT o.customer, count(*) AS payments, sum(p.paid) AS paid, max(o.amount) AS largest \
         FROM orders o JOIN payments p ON o.id = p.order_id GROUP BY o.customer",
    ),
    (
        "big_customers",
        "SELECT customer, total FROM by_customer WHERE orders > 3",
        "SELECT customer, sum(amount) AS total FROM orders GROUP BY customer HAVING count(*) > 3",
    ),
];

/// The environment variable that tells the child where the warehouse is.
const WAREHOUSE_VARIABLE: &str = "SLUICE_VIEW_CRASH_WAREHOUSE";
/// How many kills the test makes.
const KILLS: usize = 27;
/// Order ids are drawn from `0..ORDER_ID_RANGE`, so joins match and deletes hit.
const ORDER_ID_RANGE: i64 = 600;
/// Every this many statements the child refreshes one view (and so writes a checkpoint).
const REFRESH_EVERY: u64 = 4;

/// A value drawn from `range`, or now and then NULL.
fn value_or_null(rng: &mut impl Rng, range: std::ops::Range<i64>) -> String {
    if rng.random_ratio(1, 30) {
        "NULL".to_string()
    } else {
        rng.random_range(range).to_string()
    }
}

/// A random write: inserts of 1 to 200 rows, updates (also of the grouping key and the join key)
/// and deletes, which keep the tables at a few thousand rows.
fn random_write(rng: &mut impl Rng) -> String {
    let rows_count = rng.random_range(1..=200);
    match rng.random_range(0..100) {
        0..40 => {
            let values: Vec<String> = (0..rows_count)
                .map(|_| {
                    let id = rng.random_range(0..ORDER_ID_RANGE);
                    let customer = value_or_null(rng, 0..20);
                    let amount = value_or_null(rng, -50..1000);
                    format!("({id}, {customer}, {amount})")
                })
                .collect();
            format!("INSERT INTO orders VALUES {}", values.join(", "))
        }
        40..65 => {
            let values: Vec<String> = (0..rows_count)
                .map(|_| {
                    let order_id = value_or_null(rng, 0..ORDER_ID_RANGE);
                    format!("({order_id}, {})", rng.random_range(1..500))
                })
                .collect();
            format!("INSERT INTO payments VALUES {}", values.join(", "))
        }
        65..73 => format!(
            "UPDATE orders SET amount = amount + {} WHERE id % 13 = {}",
            rng.random_range(1..9),
            rng.random_range(0..13)
        ),
        73..78 => {
            format!("UPDATE orders SET customer = (customer + 1) % 20 WHERE id % 17 = {}", rng.random_range(0..17))
        }
        78..83 => format!(
            "UPDATE payments SET paid = paid + 1, order_id = order_id + 1 WHERE order_id % 19 = {}",
            rng.random_range(0..19)
        ),
        83..93 => format!("DELETE FROM orders WHERE id % 8 = {}", rng.random_range(0..8)),
        _ => format!("DELETE FROM payments WHERE order_id % 6 = {} OR order_id IS NULL", rng.random_range(0..6)),
    }
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var(WAREHOUSE_VARIABLE) else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        for sql in TABLES {
            db.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        for (name, definition, _) in VIEWS {
            let sql = format!("CREATE MATERIALIZED VIEW IF NOT EXISTS {name} WITH (refresh = 'sync') AS {definition}");
            db.execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        println!("ready");
        // The parent's seed for this round: the child's statements replay with it.
        let seed = std::env::var("SLUICE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut rng = crate::common::rng_from(seed);
        for n in 0u64.. {
            let sql = if n % REFRESH_EVERY == REFRESH_EVERY - 1 {
                format!("REFRESH MATERIALIZED VIEW {}", VIEWS[rng.random_range(0..VIEWS.len())].0)
            } else {
                random_write(&mut rng)
            };
            let shown: String = sql.chars().take(60).collect();
            println!("begin {n} {shown}");
            db.execute(&sql).await.unwrap_or_else(|e| panic!("statement {n} ({sql}): {e}"));
            println!("ok {n}");
        }
    });
}

/// Opens the warehouse in a runtime of its own (dropped on return, so no task of this handle
/// touches the warehouse while the next child runs) and checks every view against its reference.
/// Returns the number of orders.
fn check_views(path: &str, round: usize, setup_done: bool) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let db =
            Database::open(path).await.unwrap_or_else(|e| panic!("round {round}: the warehouse does not open: {e}"));
        let listed = rows(&db.query("SELECT name, state, error FROM sluice.views").await.unwrap());
        let names: Vec<&str> = listed.iter().map(|row| row.split('|').next().unwrap()).collect();
        for row in &listed {
            assert!(row.ends_with("|NULL") && !row.contains("|failed|"), "round {round}: a view failed: {row}");
        }
        if setup_done {
            for (name, _, _) in VIEWS {
                assert!(names.contains(&name), "round {round}: view {name} is not in sluice.views: {listed:?}");
            }
        }
        for (name, _, reference) in VIEWS {
            if !names.contains(&name) {
                continue;
            }
            let view = db
                .query(&format!("SELECT * FROM {name}"))
                .await
                .unwrap_or_else(|e| panic!("round {round}: view {name} does not read: {e}"));
            let expected = db.query(reference).await.unwrap();
            let (view, expected) = (rows(&view), rows(&expected));
            if view != expected {
                let missing: Vec<_> = expected.iter().filter(|r| !view.contains(r)).take(10).collect();
                let extra: Vec<_> = view.iter().filter(|r| !expected.contains(r)).take(10).collect();
                panic!(
                    "round {round}: view {name} has {} rows, its query {}; missing {missing:?}, extra {extra:?}",
                    view.len(),
                    expected.len()
                );
            }
        }
        let orders = rows(&db.query("SELECT count(*) FROM orders").await.unwrap());
        orders.first().map_or(0, |n| n.parse().unwrap())
    })
}

/// What the child printed last before the kill.
#[derive(Default)]
struct Progress {
    ready: bool,
    statements_done: usize,
    in_flight: Option<String>,
}

impl Progress {
    fn observe(&mut self, line: &str) {
        if line == "ready" {
            self.ready = true;
        } else if let Some(rest) = line.strip_prefix("begin ") {
            self.in_flight = Some(rest.to_string());
        } else if line.starts_with("ok ") {
            self.in_flight = None;
            self.statements_done += 1;
        }
    }
}

#[test]
fn killing_during_view_maintenance_and_checkpoints_keeps_views_equal_to_their_queries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let seed = crate::common::seed("view_crash");
    let mut rng = crate::common::rng_from(seed);
    let (mut kills_in_flight, mut kills_in_refresh, mut statements_done) = (0, 0, 0);
    let mut setup_done = false;
    let mut orders = 0;
    for round in 0..KILLS {
        let mut child = crate::common::ChildTest::spawn(
            "view_crash::child",
            &[(WAREHOUSE_VARIABLE, path.clone()), ("SLUICE_SEED", seed.wrapping_add(round as u64).to_string())],
        );
        // Every third round waits for a REFRESH to begin and kills within its first milliseconds;
        // the others let a random number of statements finish and kill after a random delay.
        let mut progress = Progress::default();
        let aim_at_refresh = round % 3 == 2;
        let statements_wanted = rng.random_range(1..8);
        let started = Instant::now();
        loop {
            let line = child
                .lines
                .recv_timeout(Duration::from_secs(60).saturating_sub(started.elapsed()))
                .unwrap_or_else(|_| panic!("round {round}: the child stopped printing (it failed or hangs)"));
            progress.observe(&line);
            let refresh_began = progress.in_flight.as_deref().is_some_and(|s| s.contains("REFRESH"));
            if progress.statements_done >= statements_wanted && (!aim_at_refresh || refresh_began) {
                break;
            }
        }
        // A REFRESH takes milliseconds in a debug build: kill at once or very soon after it began.
        let delay_ms = if aim_at_refresh { rng.random_range(0..3) } else { rng.random_range(0..400) };
        std::thread::sleep(Duration::from_millis(delay_ms));
        assert!(child.running(), "round {round}: the child exited by itself");
        for line in child.kill() {
            progress.observe(&line);
        }
        if let Some(statement) = &progress.in_flight {
            kills_in_flight += 1;
            kills_in_refresh += usize::from(statement.contains("REFRESH"));
        }
        statements_done += progress.statements_done;
        setup_done |= progress.ready;
        orders = check_views(&path, round, setup_done);
    }
    eprintln!(
        "{KILLS} kills, {kills_in_flight} with a statement in flight ({kills_in_refresh} in a REFRESH), \
         {statements_done} statements, {orders} orders at the end"
    );
    assert!(statements_done >= KILLS, "statements ran between the kills ({statements_done})");
    assert!(kills_in_flight >= KILLS / 2, "most kills land while a statement runs ({kills_in_flight} of {KILLS})");
    assert!(kills_in_refresh >= 1, "some kills land during a REFRESH ({kills_in_refresh})");
    assert!(orders > 0, "the tables are not empty at the end");
}
