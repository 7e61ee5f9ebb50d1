//! The status page of `sluice serve --http` in a real browser: headless Chromium (Debian's
//! `chromium`, which scripts/test installs) loads it for a pipeline fed by librdkafka's mock
//! cluster (served by this test process on loopback ports, read by the server process): a Kafka
//! source, a bronze streaming table with three push routes (one failing on a bad cast), a pull
//! flow with an expectation, a view and a materialized view. The test reads the DOM after the
//! page's script ran and checks the drawn graph's nodes, edges and failure marks, the tables and
//! the update time; it keeps a screenshot (and the DOM) under target/test-artifacts/.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tokio_postgres::NoTls;

use crate::serve::{free_port, serve, text};

/// How long Chromium may take to load and draw the page.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

fn chromium() -> String {
    std::env::var("SLUICE_CHROMIUM").unwrap_or_else(|_| "chromium".to_string())
}

fn artifacts() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs headless Chromium on `url` with `args`, killed after [`BROWSER_TIMEOUT`].
fn browse(url: &str, profile: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--virtual-time-budget=5000")
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (headless Chromium; scripts/test installs Debian's chromium, or set \
                 SLUICE_CHROMIUM): {e}",
                chromium()
            )
        });
    // Read its output while it runs (a full pipe would stall it).
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish with {url} within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// A GET over plain HTTP/1.1: status line, headers and body.
fn get(port: u16, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_string(), body.to_string())
}

/// The `<g ...>` elements of a document with a `class`, as their attributes (values unescaped
/// for `&amp;`, `&lt;`, `&gt;`, `&quot;`).
fn groups(document: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    for piece in document.split("<g ").skip(1) {
        let Some(tag) = piece.split('>').next() else { continue };
        let mut attributes = BTreeMap::new();
        let mut rest = tag;
        while let Some(eq) = rest.find("=\"") {
            let name = rest[..eq].trim().to_string();
            let value_start = eq + 2;
            let Some(len) = rest[value_start..].find('"') else { break };
            let value = &rest[value_start..value_start + len];
            let value = value.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
            attributes.insert(name, value);
            rest = &rest[value_start + len + 1..];
        }
        if attributes.contains_key("class") {
            out.push(attributes);
        }
    }
    out
}

fn has_class(group: &BTreeMap<String, String>, class: &str) -> bool {
    group.get("class").is_some_and(|c| c.split_whitespace().any(|word| word == class))
}

/// Runs `sql` until its rows are `expected` (60 s at most).
async fn wait_for(client: &tokio_postgres::Client, sql: &str, expected: &[&str]) {
    let started = Instant::now();
    loop {
        let rows = text(&client.simple_query(sql).await.unwrap());
        if rows == expected {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{sql}: {rows:?}, not {expected:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Feeds the mock cluster: 20 orders, 10 payments and 10 clicks, the 7th click with an `ms` that
/// is not a number.
fn produce(brokers: &str) {
    let producer: BaseProducer = rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().unwrap();
    for i in 0..20 {
        let order = format!("{{\"id\": {i}, \"amount\": {}.5}}", i * 3);
        producer.send(BaseRecord::<str, str>::to("orders").payload(&order)).unwrap();
    }
    for i in 0..10 {
        let payment = format!("{{\"order_id\": {i}, \"paid\": true}}");
        producer.send(BaseRecord::<str, str>::to("payments").payload(&payment)).unwrap();
        let ms = if i == 6 { "\"slow\"".to_string() } else { (i * 10).to_string() };
        let click = format!("{{\"page\": \"/p/{i}\", \"ms\": {ms}}}");
        producer.send(BaseRecord::<str, str>::to("clicks").payload(&click)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Makes the pipeline over pgwire and waits until it has ingested everything and the clicks
/// route has failed.
async fn pipeline(port: u16, brokers: &str) {
    let dsn = format!("host=127.0.0.1 port={port} user=me dbname=sluice");
    let (client, connection) = tokio_postgres::connect(&dsn, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "CREATE SOURCE shop FROM KAFKA (brokers '{brokers}', topics 'orders,payments,clicks', batch_ms '50');
             CREATE STREAMING TABLE bronze FROM SOURCE shop
               PUSH INTO orders WHERE topic = 'orders' EXPAND JSON value
               PUSH INTO payments WHERE topic = 'payments' EXPAND JSON value
               PUSH INTO clicks AS SELECT value ->> 'page' AS page, CAST(value ->> 'ms' AS BIGINT) AS ms
                 FROM bronze WHERE topic = 'clicks'"
        ))
        .await
        .unwrap();
    wait_for(&client, "SELECT count(*) FROM orders", &["20"]).await;
    // The pull flow and the views read the routes' tables once these have their columns.
    client
        .batch_execute(
            "CREATE STREAMING TABLE gold (CONSTRAINT big EXPECT (amount > 10)) AS SELECT id, amount FROM STREAM(orders);
             CREATE VIEW big_orders AS SELECT * FROM gold WHERE amount > 30;
             CREATE MATERIALIZED VIEW revenue AS SELECT count(*) AS orders, sum(amount) AS amount FROM gold",
        )
        .await
        .unwrap();
    wait_for(&client, "SELECT count(*) FROM gold", &["20"]).await;
    wait_for(&client, "SELECT count(*) FROM payments", &["10"]).await;
    wait_for(&client, "SELECT state FROM sluice.flows WHERE target = 'public.clicks'", &["failed"]).await;
}

#[test]
fn the_status_page_draws_the_pipeline_in_a_browser() {
    let version = Command::new(chromium()).arg("--version").output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} (headless Chromium; scripts/test installs Debian's chromium, or set SLUICE_CHROMIUM): {e}",
            chromium()
        )
    });
    assert!(version.status.success(), "{} --version: {version:?}", chromium());
    let help = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["serve", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--http"), "sluice serve has no --http option");
    let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
    for topic in ["orders", "payments", "clicks"] {
        cluster.create_topic(topic, 1, 1).unwrap();
    }
    let brokers = cluster.bootstrap_servers();
    produce(&brokers);
    let dir = tempfile::tempdir().unwrap();
    let http = free_port();
    let server = serve(&dir.path().join("data"), &["--http", &format!("127.0.0.1:{http}")]);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", http)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "sluice serve --http did not listen on {http}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(pipeline(server.port, &brokers));

    // What the page reads, straight from the server.
    let (head, svg) = get(http, "/lineage.svg");
    assert!(head.starts_with("HTTP/1.1 200") && head.to_ascii_lowercase().contains("image/svg+xml"), "{head}");
    assert!(svg.starts_with("<svg"), "{svg}");
    let (head, status) = get(http, "/api/status");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{status}");
    assert!(status.contains("\"graph\"") && status.contains("bronze_to_clicks"), "{status}");

    // The page in the browser, after its script ran.
    let url = format!("http://127.0.0.1:{http}/");
    let profile = tempfile::tempdir().unwrap();
    let dom = browse(&url, profile.path(), &["--dump-dom"]);
    let dom_text = String::from_utf8_lossy(&dom.stdout).into_owned();
    let artifacts = artifacts();
    std::fs::write(artifacts.join("status_page.html"), &dom_text).unwrap();
    assert!(
        dom.status.success() && dom_text.contains("id=\"graph\""),
        "chromium --dump-dom {url}: {:?}\n{}\n{dom_text}",
        dom.status,
        String::from_utf8_lossy(&dom.stderr)
    );
    let graph = dom_text.split("id=\"graph\"").nth(1).unwrap();
    assert!(graph.contains("<svg"), "the page did not draw the graph: {dom_text}");
    let groups = groups(graph);
    let nodes: BTreeMap<String, &BTreeMap<String, String>> = groups
        .iter()
        .filter(|g| has_class(g, "node"))
        .map(|g| (g.get("data-id").cloned().unwrap_or_default(), g))
        .collect();
    for (id, kind) in [
        ("shop", "source"),
        ("public.bronze", "streaming table"),
        ("public.orders", "streaming table"),
        ("public.payments", "streaming table"),
        ("public.clicks", "streaming table"),
        ("public.gold", "streaming table"),
        ("public.big_orders", "view"),
        ("public.revenue", "materialized view"),
    ] {
        let node = nodes.get(id).unwrap_or_else(|| panic!("no node {id}: {:?}", nodes.keys()));
        assert_eq!(node.get("data-kind").map(String::as_str), Some(kind), "{id}");
    }
    let edges: Vec<(String, String, bool)> = groups
        .iter()
        .filter(|g| has_class(g, "edge"))
        .map(|g| (g["data-from"].clone(), g["data-to"].clone(), has_class(g, "failed")))
        .collect();
    for (from, to, failed) in [
        ("shop", "public.bronze", false),
        ("public.bronze", "public.orders", false),
        ("public.bronze", "public.payments", false),
        ("public.bronze", "public.clicks", true),
        ("public.orders", "public.gold", false),
        ("public.gold", "public.big_orders", false),
        ("public.gold", "public.revenue", false),
    ] {
        assert!(
            edges.contains(&(from.to_string(), to.to_string(), failed)),
            "no edge {from} -> {to} (failed: {failed}) in {edges:?}"
        );
    }
    // The failing route's target is drawn failed; the others are not.
    let clicks = nodes["public.clicks"];
    assert!(has_class(clicks, "failed") && clicks["data-state"] == "failed", "{clicks:?}");
    let failed: Vec<&String> = nodes.iter().filter(|(_, g)| has_class(g, "failed")).map(|(id, _)| id).collect();
    assert_eq!(failed, ["public.clicks"]);
    // The tables: the failing flow's row, the source, the error, the update time.
    let updated = dom_text.split("id=\"updated\"").nth(1).and_then(|t| t.split('>').nth(1)).unwrap_or("");
    assert!(!updated.starts_with("never<"), "the page never updated: {dom_text}");
    let flows = dom_text.split("id=\"flows\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    let failing_row =
        flows.split("<tr").find(|row| row.contains("bronze_to_clicks")).unwrap_or_else(|| panic!("{flows}"));
    assert!(failing_row.contains("class=\"failed\"") && failing_row.contains("slow"), "{failing_row}");
    let sources = dom_text.split("id=\"sources\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    assert!(sources.contains(">shop<") && sources.contains(">running<"), "{sources}");
    let errors = dom_text.split("id=\"errors\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    assert!(errors.contains("bronze_to_clicks") && errors.contains("slow"), "{errors}");
    // Amounts are 0.5, 3.5, ..., 57.5: 16 of 20 are over 10.
    let expectations = dom_text.split("id=\"expectations\"").nth(1).and_then(|t| t.split("</table>").next()).unwrap();
    assert!(expectations.contains(">big<") && expectations.contains("80.0%"), "{expectations}");
    let summary = dom_text.split("id=\"summary\"").nth(1).and_then(|t| t.split("</div>").next()).unwrap();
    assert!(summary.contains(">1 failing<"), "{summary}");

    // A picture to look at.
    let screenshot = artifacts.join("status_page.png");
    let _ = std::fs::remove_file(&screenshot);
    let shot =
        browse(&url, profile.path(), &[&format!("--screenshot={}", screenshot.display()), "--window-size=1400,900"]);
    let png = std::fs::read(&screenshot).unwrap_or_else(|e| {
        panic!("no screenshot at {} ({e}): {}", screenshot.display(), String::from_utf8_lossy(&shot.stderr))
    });
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
    drop(server);
}
