//! Materialized views against their own queries: random INSERT, UPDATE, DELETE, MERGE and
//! TRUNCATE on three tables, and after every statement each view's rows must equal its defining
//! query run from scratch. Also a file warehouse closed and reopened between writes (the view's
//! durable state and its catch-up), a second handle writing behind the first's back, and async
//! views maintained by the background worker.
//!
//! `SLUICE_DIFF_SEQUENCES` sets how many random sequences the differential test runs;
//! `SLUICE_DIFF_SEED` runs the one sequence of that seed (the seed a failure prints).

use std::time::{Duration, Instant};

use arrow::array::{Array, Float64Array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice::Database;

use crate::common::rows;

/// Sequences run by default: about 75 s in a debug build on two cores.
const SEQUENCES_DEFAULT: u64 = 6;
/// Statements per sequence.
const STEPS_PER_SEQUENCE: usize = 36;
/// The step before which the midway views are created, and the one where a view is replaced.
const STEP_MIDWAY_CREATE: usize = 12;
const STEP_MIDWAY_REPLACE: usize = 20;

// One order row from the start: `SELECT ... FROM orders ORDER BY ... LIMIT n` over a table that
// never had a file fails to plan (SanityCheckPlan: "does not satisfy distribution requirements:
// SinglePartition", an engine bug), which would fail the recomputed view `v_top`.
const TABLES: &str = "
CREATE TABLE orders (id bigint, customer bigint, amount bigint, qty int);
CREATE TABLE customers (id bigint, region text);
CREATE TABLE payments (order_id bigint, paid bigint);
INSERT INTO orders VALUES (1, 1, 10, 1);
";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Strategy {
    Incremental,
    Recompute,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Incremental => "incremental",
            Strategy::Recompute => "recompute",
        }
    }
}

/// A view under test: its defining query, and the same query over base tables only (a view over
/// a view inlines the inner view's reference query, so the reference never reads a view).
#[derive(Clone, Debug)]
struct ViewDef {
    name: String,
    sql: String,
    reference: String,
    strategy: Strategy,
}

impl ViewDef {
    fn new(name: &str, sql: &str, strategy: Strategy) -> Self {
        Self { name: name.to_string(), sql: sql.to_string(), reference: sql.to_string(), strategy }
    }

    /// A view whose query reads `inner` (written as `FROM <inner name>` in `sql_template`'s
    /// `{inner}` placeholder).
    fn over(name: &str, sql_template: &str, inner: &ViewDef, strategy: Strategy) -> Self {
        Self {
            name: name.to_string(),
            sql: sql_template.replace("{inner}", &inner.name),
            reference: sql_template.replace("{inner}", &format!("({}) AS {}", inner.reference, inner.name)),
            strategy,
        }
    }

    fn create_sql(&self, or_replace: bool) -> String {
        let replace = if or_replace { "OR REPLACE " } else { "" };
        format!("CREATE {replace}MATERIALIZED VIEW {} AS {}", self.name, self.sql)
    }
}

/// The views created before the first write: every incremental shape, combined, and two that are
/// recomputed.
fn initial_views() -> Vec<ViewDef> {
    use Strategy::*;
    let join2 = ViewDef::new(
        "v_join2",
        "SELECT o.id, o.amount, o.qty, c.region FROM orders o JOIN customers c ON o.customer = c.id",
        Incremental,
    );
    let region_totals = ViewDef::over(
        "v_region_totals",
        "SELECT region, count(*) AS n, count(DISTINCT qty) AS qtys, sum(amount) AS total, avg(amount) AS mean, \
         min(amount) AS low, max(amount) AS high FROM {inner} GROUP BY region HAVING count(*) > 1",
        &join2,
        Incremental,
    );
    vec![
        ViewDef::new(
            "v_filter",
            "SELECT id, customer, amount * 2 AS double_amount, qty FROM orders WHERE amount > 30 AND qty IS NOT NULL",
            Incremental,
        ),
        ViewDef::new(
            "v_by_customer",
            "SELECT customer, count(*) AS n, count(amount) AS n_amount, count(DISTINCT qty) AS qtys, \
             sum(amount) AS total, avg(amount) AS mean, min(amount) AS low, max(amount) AS high, sum(qty) AS units \
             FROM orders GROUP BY customer",
            Incremental,
        ),
        ViewDef::new(
            "v_having",
            "SELECT customer, qty, sum(amount) AS total, max(amount) AS high FROM orders WHERE customer IS NOT NULL \
             GROUP BY customer, qty HAVING count(*) >= 2 AND sum(amount) > 20",
            Incremental,
        ),
        join2.clone(),
        region_totals,
        ViewDef::new(
            "v_join3",
            "SELECT o.id, o.amount, c.region, p.paid FROM orders o JOIN customers c ON o.customer = c.id \
             JOIN payments p ON p.order_id = o.id WHERE p.paid IS NOT NULL OR o.amount > 10",
            Incremental,
        ),
        ViewDef::new(
            "v_left",
            "SELECT o.id, o.customer, o.amount, c.region FROM orders o LEFT JOIN customers c ON o.customer = c.id",
            Incremental,
        ),
        ViewDef::new(
            "v_left_grouped",
            "SELECT o.customer, count(*) AS n, count(p.order_id) AS payments, sum(p.paid) AS paid, min(p.paid) AS low \
             FROM orders o LEFT JOIN payments p ON p.order_id = o.id GROUP BY o.customer",
            Incremental,
        ),
        ViewDef::new(
            "v_union",
            "SELECT id AS k, amount AS v, 'order' AS source FROM orders WHERE qty > 1 \
             UNION ALL SELECT order_id AS k, paid AS v, 'payment' AS source FROM payments",
            Incremental,
        ),
        ViewDef::new("v_distinct", "SELECT DISTINCT customer, qty FROM orders", Incremental),
        ViewDef::new(
            "v_global",
            "SELECT count(*) AS n, count(amount) AS n_amount, sum(amount) AS total, avg(qty) AS mean_qty, \
             min(amount) AS low, max(amount) AS high, count(DISTINCT customer) AS customers FROM orders",
            Incremental,
        ),
        // Every column is an ordering key, so ties cannot make two correct answers differ.
        ViewDef::new(
            "v_top",
            "SELECT id, customer, amount, qty FROM orders ORDER BY amount DESC, id, customer, qty LIMIT 3",
            Recompute,
        ),
        ViewDef::new(
            "v_rank",
            "SELECT id, customer, amount, rank() OVER (PARTITION BY customer ORDER BY amount) AS place FROM orders",
            Recompute,
        ),
    ]
}

/// Views created midway, over tables that already hold rows (the initial load of a view), one of
/// them over a view.
fn midway_views() -> Vec<ViewDef> {
    use Strategy::*;
    let paid = ViewDef::new(
        "v_mid_paid",
        "SELECT p.order_id, p.paid, o.customer FROM payments p JOIN orders o ON o.id = p.order_id",
        Incremental,
    );
    let paid_by_customer = ViewDef::over(
        "v_mid_paid_by_customer",
        "SELECT customer, count(*) AS n, sum(paid) AS paid, max(paid) AS high FROM {inner} GROUP BY customer",
        &paid,
        Incremental,
    );
    let regions = ViewDef::new(
        "v_mid_regions",
        "SELECT DISTINCT c.region, o.qty FROM customers c LEFT JOIN orders o ON o.customer = c.id",
        Incremental,
    );
    vec![paid, paid_by_customer, regions]
}

/// The definition `v_filter` is replaced by midway.
fn replaced_filter() -> ViewDef {
    ViewDef::new(
        "v_filter",
        "SELECT id, amount, customer FROM orders WHERE amount <= 40 OR customer = 2",
        Strategy::Incremental,
    )
}

/// Rows as sorted text lines, like `common::rows`, but floats rounded to 6 decimals: sums and
/// averages maintained incrementally may differ from a recompute in the last bits.
fn rows_rounded(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for batch in batches {
        let columns: Vec<Vec<String>> = batch.columns().iter().map(|c| cells(c.as_ref(), &options)).collect();
        for row in 0..batch.num_rows() {
            out.push(columns.iter().map(|c| c[row].as_str()).collect::<Vec<_>>().join("|"));
        }
    }
    out.sort();
    out
}

fn cells(column: &dyn Array, options: &FormatOptions) -> Vec<String> {
    if matches!(column.data_type(), DataType::Float16 | DataType::Float32 | DataType::Float64) {
        let floats = cast(column, &DataType::Float64).unwrap();
        let floats = floats.as_any().downcast_ref::<Float64Array>().unwrap();
        return (0..floats.len())
            .map(|i| {
                if floats.is_null(i) {
                    return "NULL".to_string();
                }
                let text = format!("{:.6}", floats.value(i));
                if text.strip_prefix('-').is_some_and(|t| t.chars().all(|c| c == '0' || c == '.')) {
                    text[1..].to_string()
                } else {
                    text
                }
            })
            .collect();
    }
    let formatter = ArrayFormatter::try_new(column, options).unwrap();
    (0..column.len()).map(|i| formatter.value(i).to_string()).collect()
}

/// One random sequence: its database, the statements run so far and the live views.
struct Sequence {
    seed: u64,
    db: Database,
    rng: StdRng,
    log: Vec<String>,
    views: Vec<ViewDef>,
    comparisons: u64,
}

impl Sequence {
    async fn new(seed: u64) -> Self {
        let url = format!("memory://views-diff-{}-{seed}", std::process::id());
        let db = Database::open(&url).await.unwrap();
        let mut sequence =
            Self { seed, db, rng: StdRng::seed_from_u64(seed), log: Vec::new(), views: Vec::new(), comparisons: 0 };
        sequence.run(TABLES).await;
        sequence
    }

    /// Runs a statement, failing with the sequence's context if it errors.
    async fn run(&mut self, sql: &str) {
        self.log.push(sql.trim().to_string());
        if let Err(e) = self.db.execute(sql).await {
            panic!("seed {}: statement failed: {e}\n{}", self.seed, self.history());
        }
    }

    fn history(&self) -> String {
        let mut text = String::from("statements so far:\n");
        for (i, sql) in self.log.iter().enumerate() {
            text.push_str(&format!("  {i:>3}: {sql};\n"));
        }
        text
    }

    async fn query(&self, sql: &str, step: usize) -> Vec<String> {
        match self.db.query(sql).await {
            Ok(batches) => rows_rounded(&batches),
            Err(e) => panic!("seed {} step {step}: query failed: {e}\n  {sql}\n{}", self.seed, self.history()),
        }
    }

    async fn create(&mut self, view: ViewDef, or_replace: bool) {
        self.run(&view.create_sql(or_replace)).await;
        self.views.retain(|v| v.name != view.name);
        self.views.push(view);
    }

    /// Every view's rows equal its reference query's.
    async fn compare_all(&mut self, step: usize) {
        for view in self.views.clone() {
            let actual = self.query(&format!("SELECT * FROM {}", view.name), step).await;
            let expected = self.query(&view.reference, step).await;
            self.comparisons += 1;
            if actual != expected {
                panic!(
                    "seed {} step {step}: view {} differs from its query\n  {}\n{}view rows ({}):\n{}\nquery rows ({}):\n{}\n\
                     rerun with SLUICE_DIFF_SEED={}",
                    self.seed,
                    view.name,
                    view.sql,
                    self.history(),
                    actual.len(),
                    actual.join("\n"),
                    expected.len(),
                    expected.join("\n"),
                    self.seed,
                );
            }
        }
    }

    /// `sluice.views` and EXPLAIN MATERIALIZED VIEW report each view's expected strategy.
    async fn check_strategies(&self) {
        let reported = rows(&self.db.query("SELECT name, strategy, reason FROM sluice.views").await.unwrap());
        for view in &self.views {
            let row = reported
                .iter()
                .find(|r| {
                    let name = r.split('|').next().unwrap();
                    name == view.name || name.ends_with(&format!(".{}", view.name))
                })
                .unwrap_or_else(|| panic!("{} is not in sluice.views: {reported:#?}", view.name));
            let fields: Vec<&str> = row.split('|').collect();
            assert_eq!(fields[1], view.strategy.name(), "strategy of {} ({row})\n  {}", view.name, view.sql);
            if view.strategy == Strategy::Recompute {
                assert!(fields[2] != "NULL" && !fields[2].is_empty(), "a recompute view has a reason: {row}");
            }
            let plan = self.db.query(&format!("EXPLAIN MATERIALIZED VIEW {}", view.name)).await.unwrap();
            let first = plan_lines(&plan).into_iter().next().unwrap_or_default();
            let prefix = match view.strategy {
                Strategy::Incremental => "strategy: incremental",
                Strategy::Recompute => "strategy: recompute (",
            };
            assert!(first.starts_with(prefix), "EXPLAIN MATERIALIZED VIEW {} starts with {first:?}", view.name);
        }
    }

    /// One random write statement on one of the three tables.
    fn statement(&mut self) -> String {
        let rng = &mut self.rng;
        match rng.random_range(0..100) {
            0..=19 => insert_orders(rng),
            20..=27 => insert_customers(rng),
            28..=37 => insert_payments(rng),
            38..=51 => update_orders(rng),
            52..=57 => update_customers(rng),
            58..=62 => update_payments(rng),
            63..=72 => delete_orders(rng),
            73..=77 => delete_customers(rng),
            78..=83 => delete_payments(rng),
            84..=89 => merge_customers(rng),
            90..=95 => merge_orders(rng),
            96..=97 => "INSERT INTO payments SELECT id, amount FROM orders WHERE qty >= 3".to_string(),
            _ => "TRUNCATE payments".to_string(),
        }
    }
}

// Small domains, so that keys collide in joins and groups, and NULLs in every nullable column.

fn order_id(rng: &mut StdRng) -> i64 {
    rng.random_range(1..=12)
}

fn customer(rng: &mut StdRng) -> String {
    nullable(rng, 0.15, |rng| rng.random_range(1..=5).to_string())
}

fn amount(rng: &mut StdRng) -> String {
    nullable(rng, 0.1, |rng| (rng.random_range(0..=8) * 10).to_string())
}

fn qty(rng: &mut StdRng) -> String {
    nullable(rng, 0.08, |rng| rng.random_range(1..=4).to_string())
}

fn region(rng: &mut StdRng) -> String {
    nullable(rng, 0.15, |rng| format!("'{}'", ["north", "south", "east"][rng.random_range(0..3)]))
}

fn paid(rng: &mut StdRng) -> String {
    nullable(rng, 0.1, |rng| (rng.random_range(0..=10) * 5).to_string())
}

fn nullable(rng: &mut StdRng, null_probability: f64, value: impl FnOnce(&mut StdRng) -> String) -> String {
    if rng.random_bool(null_probability) {
        "NULL".to_string()
    } else {
        value(rng)
    }
}

fn values(rng: &mut StdRng, count_max: usize, row: impl Fn(&mut StdRng) -> String) -> String {
    let count = rng.random_range(1..=count_max);
    (0..count).map(|_| format!("({})", row(rng))).collect::<Vec<_>>().join(", ")
}

fn insert_orders(rng: &mut StdRng) -> String {
    let rows = values(rng, 3, |rng| format!("{}, {}, {}, {}", order_id(rng), customer(rng), amount(rng), qty(rng)));
    format!("INSERT INTO orders VALUES {rows}")
}

fn insert_customers(rng: &mut StdRng) -> String {
    let rows = values(rng, 2, |rng| format!("{}, {}", rng.random_range(1..=6), region(rng)));
    format!("INSERT INTO customers VALUES {rows}")
}

fn insert_payments(rng: &mut StdRng) -> String {
    let rows = values(rng, 3, |rng| format!("{}, {}", nullable(rng, 0.05, |rng| order_id(rng).to_string()), paid(rng)));
    format!("INSERT INTO payments VALUES {rows}")
}

fn update_orders(rng: &mut StdRng) -> String {
    match rng.random_range(0..5) {
        0 => format!("UPDATE orders SET amount = amount + 10 WHERE id = {}", order_id(rng)),
        1 => format!("UPDATE orders SET customer = {} WHERE id % 4 = {}", customer(rng), rng.random_range(0..4)),
        2 => format!("UPDATE orders SET qty = qty + 1, amount = {} WHERE customer = {}", amount(rng), customer(rng)),
        3 => format!("UPDATE orders SET amount = {} WHERE amount IS NULL OR qty IS NULL", amount(rng)),
        _ => format!("UPDATE orders SET id = {} WHERE id = {}", order_id(rng), order_id(rng)),
    }
}

fn update_customers(rng: &mut StdRng) -> String {
    match rng.random_range(0..3) {
        0 => format!("UPDATE customers SET region = {} WHERE id = {}", region(rng), rng.random_range(1..=6)),
        1 => format!("UPDATE customers SET id = {} WHERE id = {}", rng.random_range(1..=6), rng.random_range(1..=6)),
        _ => format!("UPDATE customers SET region = {} WHERE region IS NULL", region(rng)),
    }
}

fn update_payments(rng: &mut StdRng) -> String {
    match rng.random_range(0..2) {
        0 => format!("UPDATE payments SET paid = paid + 5 WHERE order_id = {}", order_id(rng)),
        _ => format!("UPDATE payments SET order_id = {} WHERE paid < {}", order_id(rng), rng.random_range(0..=50)),
    }
}

fn delete_orders(rng: &mut StdRng) -> String {
    match rng.random_range(0..3) {
        0 => format!("DELETE FROM orders WHERE id = {}", order_id(rng)),
        1 => format!("DELETE FROM orders WHERE customer = {}", customer(rng)),
        _ => "DELETE FROM orders WHERE amount IS NULL".to_string(),
    }
}

fn delete_customers(rng: &mut StdRng) -> String {
    match rng.random_range(0..2) {
        0 => format!("DELETE FROM customers WHERE id = {}", rng.random_range(1..=6)),
        _ => "DELETE FROM customers WHERE region IS NULL".to_string(),
    }
}

fn delete_payments(rng: &mut StdRng) -> String {
    format!("DELETE FROM payments WHERE order_id = {} OR paid IS NULL", order_id(rng))
}

/// Distinct keys `1..=key_max`, one to three of them (a target row may match one source row only).
fn distinct_keys(rng: &mut StdRng, key_max: i64) -> Vec<i64> {
    let mut keys: Vec<i64> = (0..rng.random_range(1..=3)).map(|_| rng.random_range(1..=key_max)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn merge_customers(rng: &mut StdRng) -> String {
    let source = distinct_keys(rng, 6)
        .into_iter()
        .map(|id| format!("SELECT CAST({id} AS BIGINT) AS id, CAST({} AS TEXT) AS region", region(rng)))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    format!(
        "MERGE INTO customers t USING ({source}) s ON t.id = s.id \
         WHEN MATCHED AND s.region IS NULL THEN DELETE \
         WHEN MATCHED THEN UPDATE SET region = s.region \
         WHEN NOT MATCHED THEN INSERT (id, region) VALUES (s.id, s.region)"
    )
}

fn merge_orders(rng: &mut StdRng) -> String {
    let source = distinct_keys(rng, 12)
        .into_iter()
        .map(|id| format!("SELECT CAST({id} AS BIGINT) AS id, CAST({} AS BIGINT) AS amount", amount(rng)))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    format!(
        "MERGE INTO orders t USING ({source}) s ON t.id = s.id \
         WHEN MATCHED AND s.amount IS NULL THEN DELETE \
         WHEN MATCHED THEN UPDATE SET amount = s.amount, qty = t.qty + 1 \
         WHEN NOT MATCHED THEN INSERT (id, customer, amount, qty) VALUES (s.id, {}, s.amount, 1)",
        customer(rng)
    )
}

fn plan_lines(batches: &[RecordBatch]) -> Vec<String> {
    let mut lines = Vec::new();
    for batch in batches {
        let formatter = ArrayFormatter::try_new(batch.column(0).as_ref(), &FormatOptions::default()).unwrap();
        lines.extend((0..batch.num_rows()).map(|i| formatter.value(i).to_string()));
    }
    lines
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")))
}

/// Runs one sequence: views first, writes, midway views and a replaced view, a comparison of
/// every view after every write. Returns (statements, comparisons).
async fn run_sequence(seed: u64) -> (u64, u64) {
    let mut sequence = Sequence::new(seed).await;
    for view in initial_views() {
        sequence.create(view, false).await;
    }
    sequence.check_strategies().await;
    sequence.compare_all(0).await;
    for step in 1..=STEPS_PER_SEQUENCE {
        if step == STEP_MIDWAY_CREATE {
            for view in midway_views() {
                sequence.create(view, false).await;
                sequence.compare_all(step).await;
            }
            sequence.check_strategies().await;
        }
        if step == STEP_MIDWAY_REPLACE {
            sequence.create(replaced_filter(), true).await;
            sequence.check_strategies().await;
            sequence.compare_all(step).await;
        }
        let sql = sequence.statement();
        sequence.run(&sql).await;
        sequence.compare_all(step).await;
    }
    (STEPS_PER_SEQUENCE as u64, sequence.comparisons)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_match_their_queries_after_every_write() {
    let seeds: Vec<u64> = match env_u64("SLUICE_DIFF_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("SLUICE_DIFF_SEQUENCES").unwrap_or(SEQUENCES_DEFAULT)).collect(),
    };
    let started = Instant::now();
    let (mut steps, mut comparisons) = (0, 0);
    for &seed in &seeds {
        let (sequence_steps, sequence_comparisons) = run_sequence(seed).await;
        steps += sequence_steps;
        comparisons += sequence_comparisons;
    }
    println!(
        "views differential: {} sequences, {steps} write statements, {comparisons} view comparisons in {:.1} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Compares each view with its reference query; returns the views that differ, with both row sets.
async fn differences(db: &Database, views: &[ViewDef]) -> Vec<String> {
    let mut out = Vec::new();
    for view in views {
        let actual = rows_rounded(&db.query(&format!("SELECT * FROM {}", view.name)).await.unwrap());
        let expected = rows_rounded(&db.query(&view.reference).await.unwrap());
        if actual != expected {
            out.push(format!("{}: view rows {actual:#?}\nquery rows {expected:#?}", view.name));
        }
    }
    out
}

async fn assert_views_match(db: &Database, views: &[ViewDef], when: &str) {
    let differences = differences(db, views).await;
    assert!(differences.is_empty(), "{when}:\n{}", differences.join("\n"));
}

/// The views of the restart and async tests: grouped, joined, left joined, global, over a view
/// and recomputed.
fn small_views() -> Vec<ViewDef> {
    initial_views()
        .into_iter()
        .filter(|v| {
            ["v_by_customer", "v_join2", "v_region_totals", "v_left", "v_global", "v_top"].contains(&v.name.as_str())
        })
        .collect()
}

/// Deterministic writes `round` of the restart test.
async fn write_round(db: &Database, round: i64) {
    let base = round * 10;
    db.execute(&format!(
        "INSERT INTO orders VALUES ({base}, 1, 10, 1), ({}, 2, 20, 2), ({}, NULL, 30, 3), ({}, 1, NULL, 1);
         INSERT INTO customers VALUES ({round}, 'north'), ({}, NULL);
         INSERT INTO payments VALUES ({base}, 5), ({}, 7);
         UPDATE orders SET amount = amount + 1 WHERE customer = 1;
         DELETE FROM orders WHERE id = {};
         UPDATE customers SET region = 'south' WHERE id = 2",
        base + 1,
        base + 2,
        base + 3,
        round + 1,
        base + 1,
        base + 2
    ))
    .await
    .unwrap();
}

/// Opens the warehouse at `path` and creates the tables and `views` in it.
async fn open_with_views(path: &str, views: &[ViewDef]) -> Database {
    let db = Database::open(path).await.unwrap();
    db.execute(TABLES).await.unwrap();
    for view in views {
        db.execute(&view.create_sql(false)).await.unwrap();
    }
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_survive_restarts_and_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let views = small_views();
    {
        let db = open_with_views(&path, &views).await;
        write_round(&db, 1).await;
        write_round(&db, 2).await;
        assert_views_match(&db, &views, "before the first restart").await;
        // REFRESH writes a checkpoint, so the reopened view starts from it and catches up.
        db.execute("REFRESH MATERIALIZED VIEW v_by_customer").await.unwrap();
        write_round(&db, 3).await;
    }
    let db = Database::open(&path).await.unwrap();
    assert_views_match(&db, &views, "right after reopening").await;
    write_round(&db, 4).await;
    assert_views_match(&db, &views, "after writes once reopened").await;
    // Writes straight before closing: the checkpoint (written in the background) may lag.
    write_round(&db, 5).await;
    drop(db);
    let db = Database::open(&path).await.unwrap();
    assert_views_match(&db, &views, "after the second restart").await;
    // Another handle on the warehouse (as another process) writes; the first sees it on read.
    let other = Database::open(&path).await.unwrap();
    write_round(&other, 6).await;
    assert_views_match(&db, &views, "after writes by another handle").await;
    assert_views_match(&other, &views, "in the other handle").await;
    drop(other);
    db.execute("REFRESH MATERIALIZED VIEW v_join2 FULL").await.unwrap();
    assert_views_match(&db, &views, "after REFRESH ... FULL").await;
}

/// Two handles on one warehouse (as two processes) maintain the same views and checkpoint them
/// at the same time. Both commits name the view's state, so one loses the race and tries again:
/// every REFRESH succeeds, and a reopened warehouse starts from a whole checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_checkpoint_the_same_view_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let views = small_views();
    {
        let first = open_with_views(&path, &views).await;
        let second = Database::open(&path).await.unwrap();
        for round in 1..=6 {
            write_round(if round % 2 == 0 { &first } else { &second }, round).await;
            for view in &views {
                // FULL rebuilds, so both handles have a checkpoint to write at about the same time.
                let refresh = format!("REFRESH MATERIALIZED VIEW {} FULL", view.name);
                let tasks = [&first, &second, &first, &second].map(|db| {
                    let (db, refresh) = (db.clone(), refresh.clone());
                    tokio::spawn(async move { db.execute(&refresh).await.map(|_| ()) })
                });
                for (handle, task) in ["first", "second", "first", "second"].into_iter().zip(tasks) {
                    let outcome = task.await.unwrap();
                    outcome.unwrap_or_else(|e| panic!("round {round}, {} in the {handle} handle: {e}", view.name));
                }
            }
        }
        assert_views_match(&first, &views, "in the first handle").await;
        assert_views_match(&second, &views, "in the second handle").await;
    }
    let db = Database::open(&path).await.unwrap();
    assert_views_match(&db, &views, "reopened").await;
    let rebuilds = rows(&db.query("SELECT flow, message FROM sluice.events WHERE kind = 'rebuild'").await.unwrap());
    assert!(rebuilds.is_empty(), "every view should start from its checkpoint: {rebuilds:?}");
}

/// Async views are maintained and checkpointed by the background worker: without anything
/// reading them (a read, also of sluice.views, would catch them up itself), their Delta tables,
/// attached in another database as outside readers see them, reach the rows of their queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_views_catch_up_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute(TABLES).await.unwrap();
    let views: Vec<ViewDef> = small_views()
        .into_iter()
        .filter(|v| v.name != "v_region_totals")
        .map(|v| ViewDef { name: format!("{}_async", v.name), ..v })
        .collect();
    let reader = Database::open(&format!("memory://views-async-reader-{}", std::process::id())).await.unwrap();
    for view in &views {
        db.execute(&format!(
            "CREATE MATERIALIZED VIEW {} WITH (refresh = 'async', refresh_interval_ms = '100') AS {}",
            view.name, view.sql
        ))
        .await
        .unwrap();
    }
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..5 {
        for _ in 0..6 {
            let sql = match rng.random_range(0..4) {
                0 => insert_customers(&mut rng),
                1 => update_orders(&mut rng),
                2 => delete_orders(&mut rng),
                _ => insert_orders(&mut rng),
            };
            db.execute(&sql).await.unwrap();
        }
        for view in &views {
            wait_for_checkpoint(&db, &reader, view, round, dir.path()).await;
        }
    }
    assert_views_match(&db, &views, "read after the worker caught up").await;
    let refresh = rows(&db.query("SELECT DISTINCT refresh FROM sluice.views").await.unwrap());
    assert_eq!(refresh, ["async"]);
}

/// Waits (10 s at most) until the view's Delta table, read by `reader`, holds its query's rows.
async fn wait_for_checkpoint(db: &Database, reader: &Database, view: &ViewDef, round: usize, root: &std::path::Path) {
    let expected = rows_rounded(&db.query(&view.reference).await.unwrap());
    let location =
        rows(&db.query(&format!("SELECT location FROM sluice.tables WHERE name = '{}'", view.name)).await.unwrap());
    assert_eq!(location.len(), 1, "the location of {}: {location:?}", view.name);
    let started = Instant::now();
    loop {
        // The view's Delta table exists from its first checkpoint on.
        // sluice.tables gives managed locations relative to the warehouse root.
        let path = root.join(&location[0]);
        let attach = format!("CREATE TABLE IF NOT EXISTS {} LOCATION '{}'", view.name, path.display());
        let checkpointed = match reader.execute(&attach).await {
            Ok(_) => rows_rounded(&reader.query(&format!("SELECT * FROM {}", view.name)).await.unwrap()),
            Err(e) => vec![format!("not attached: {e}")],
        };
        if checkpointed == expected {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "round {round}: the Delta table of async view {} does not hold its query's rows after 10 s\n\
             table rows {checkpointed:#?}\nquery rows {expected:#?}",
            view.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A min/max whose buffer an UPDATE empties is re-aggregated from the input at the UPDATE's
/// version: the UPDATE's deletes and inserts must be applied together first, or the new values
/// are counted twice (once by the re-aggregation, once as inserts) and outlive their delete.
/// Checked through the rows the writer hands over and, after a reopen, through the change feed.
#[tokio::test]
async fn an_update_that_empties_a_max_buffer_is_applied_as_one_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let db = Database::open(path).await.unwrap();
    db.execute("CREATE TABLE t (g bigint, v bigint)").await.unwrap();
    let values: Vec<String> = (1..=20).map(|v| format!("(1, {v})")).collect();
    db.execute(&format!("INSERT INTO t VALUES {}", values.join(", "))).await.unwrap();
    db.execute("CREATE MATERIALIZED VIEW top AS SELECT g, count(*) AS n, max(v) AS hi, min(v) AS lo FROM t GROUP BY g")
        .await
        .unwrap();
    // The 16 largest values are the max buffer: all of them move up.
    db.execute("UPDATE t SET v = v + 100 WHERE v >= 5").await.unwrap();
    assert_eq!(rows(&db.query("SELECT * FROM top").await.unwrap()), ["1|20|120|1"]);
    db.execute("DELETE FROM t WHERE v >= 105").await.unwrap();
    assert_eq!(rows(&db.query("SELECT * FROM top").await.unwrap()), ["1|4|4|1"]);
    db.execute("REFRESH MATERIALIZED VIEW top").await.unwrap();
    drop(db);

    // The same writes by another process's view of the warehouse: the view catches up from the
    // change data feed after the reopen.
    let writer = Database::open(path).await.unwrap();
    let values: Vec<String> = (1..=20).map(|v| format!("(1, {})", v + 1000)).collect();
    writer.execute(&format!("INSERT INTO t VALUES {}", values.join(", "))).await.unwrap();
    writer.execute("REFRESH MATERIALIZED VIEW top").await.unwrap();
    writer.execute("UPDATE t SET v = v + 100 WHERE v >= 1005").await.unwrap();
    writer.execute("DELETE FROM t WHERE v >= 1105").await.unwrap();
    drop(writer);
    let db = Database::open(path).await.unwrap();
    assert_eq!(rows(&db.query("SELECT * FROM top").await.unwrap()), ["1|8|1004|1"]);
}
