//! `sluice demo` as a child process: psql reads its bronze, silver and gold tables and its views
//! while the in-process Kafka cluster feeds it (with dead letters, drift and a broken
//! expectation), the status page's graph has their nodes, `sluice sql` reads the warehouse after
//! the demo is killed, and a second run on the same folder reuses the pipeline and is stopped with
//! Ctrl-C (SIGINT).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::http::{http, wait_http};
use crate::serve::free_port;

/// How long rows may take to arrive in every table of the pipeline.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);

struct Demo {
    child: Child,
    pg_port: u16,
    http_port: u16,
    /// The lines the demo printed.
    lines: Receiver<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn start(data: &Path) -> Demo {
        let (pg_port, http_port) = (free_port(), free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["demo", "--data", data.to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{pg_port}"), "--http", &format!("127.0.0.1:{http_port}")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let demo = Demo { child, pg_port, http_port, lines };
        wait_until("psql answers", || psql_try(pg_port, "SELECT 1").as_deref() == Ok("1"));
        demo
    }

    fn psql(&self, sql: &str) -> String {
        psql_try(self.pg_port, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// What it printed so far.
    fn printed(&self) -> String {
        self.lines.try_iter().collect::<Vec<_>>().join("\n")
    }
}

fn psql_try(port: u16, sql: &str) -> Result<String, String> {
    crate::serve::psql_as(port, "demo", sql)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < ARRIVAL_TIMEOUT, "{what}: not within {ARRIVAL_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Rows in every table and view, dead letters, the expectation's violations, the drifted field
/// and rescued values: what the demo must show once it has run a while.
const ARRIVED: &str = "SELECT (SELECT count(*) FROM silver_orders) > 0, (SELECT count(*) FROM silver_payments) > 0,
    (SELECT count(*) FROM silver_clicks) > 0, (SELECT count(*) FROM gold_orders) > 0,
    (SELECT count(*) FROM revenue_per_customer) > 0, (SELECT count(*) FROM clicks_per_page) > 0,
    (SELECT dead_letters FROM sluice.sources WHERE name = 'demo_kafka') > 0,
    (SELECT count(*) FROM bronze_errors) > 0,
    (SELECT violations FROM sluice.expectations WHERE name = 'positive_amount') > 0,
    (SELECT count(*) FROM information_schema.columns WHERE table_name = 'silver_orders' AND column_name = 'channel') = 1,
    (SELECT count(*) FROM silver_orders WHERE _rescued_data IS NOT NULL) > 0";

/// The `data-id`s of the graph's `<g class="node ...">` elements.
fn node_ids(svg: &str) -> Vec<String> {
    svg.split("<g class=\"node")
        .skip(1)
        .filter_map(|node| node.split_once("data-id=\"").and_then(|(_, rest)| rest.split_once('"')))
        .map(|(id, _)| id.to_string())
        .collect()
}

fn sluice_sql(data: &Path, sql: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["sql", "--data", data.to_str().unwrap(), "--csv", "-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn demo_runs_a_pipeline_that_psql_and_the_status_page_show() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let mut demo = Demo::start(&data);
    let all_true = ["t"; 11].join("|");
    wait_until("rows, dead letters, violations and drift in the demo's tables", || demo.psql(ARRIVED) == all_true);
    let printed = demo.printed();
    assert!(printed.contains(&format!("psql -h 127.0.0.1 -p {} -U demo -d sluice", demo.pg_port)), "{printed}");
    assert!(printed.contains(&format!("http://127.0.0.1:{}/", demo.http_port)), "{printed}");
    // Typed silver columns, and the gold table holds only the orders that kept the expectation.
    assert_eq!(demo.psql("SELECT count(*) FROM gold_orders WHERE amount <= 0 OR amount IS NULL"), "0");
    assert_eq!(demo.psql("SELECT count(*) > 0 FROM silver_clicks WHERE ms >= 0 AND page LIKE '/%'"), "t");

    wait_http(demo.http_port);
    let (status, svg) = http(demo.http_port, "GET", "/lineage.svg", None);
    assert_eq!(status, 200);
    let nodes = node_ids(&svg);
    for id in [
        "demo_kafka",
        "public.bronze",
        "public.silver_orders",
        "public.silver_payments",
        "public.silver_clicks",
        "public.gold_orders",
        "public.revenue_per_customer",
        "public.clicks_per_page",
    ] {
        assert!(nodes.iter().any(|n| n == id), "no node {id} in the graph: {nodes:?}");
    }
    assert_eq!(http(demo.http_port, "GET", "/", None).0, 200);

    // Killed: the warehouse opens without the gone cluster.
    demo.child.kill().unwrap();
    demo.child.wait().unwrap();
    let counts = sluice_sql(
        &data,
        "SELECT count(*) > 0 AS orders, (SELECT count(*) FROM gold_orders) > 0 AS gold FROM silver_orders",
    );
    assert_eq!(counts, "orders,gold\ntrue,true\n");
    let orders_before: u64 =
        sluice_sql(&data, "SELECT count(*) AS n FROM silver_orders").lines().nth(1).unwrap().parse().unwrap();

    // Again on the same folder: the pipeline is reused and fed from topics of this run's own.
    let mut again = Demo::start(&data);
    wait_until("orders of the second run", || {
        again.psql("SELECT count(*) FROM silver_orders WHERE topic = 'orders.2'") != "0"
    });
    assert!(again.printed().contains("already holds a demo pipeline"));
    let pid = again.child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = again.child.wait().unwrap();
    assert!(status.success(), "the demo did not stop cleanly on Ctrl-C: {status}");
    let orders_after: u64 =
        sluice_sql(&data, "SELECT count(*) AS n FROM silver_orders").lines().nth(1).unwrap().parse().unwrap();
    assert!(orders_after > orders_before, "{orders_after} orders after the second run, {orders_before} before");
    assert_eq!(sluice_sql(&data, "SELECT count(*) > 0 AS seen FROM sluice.events"), "seen\ntrue\n");
}
