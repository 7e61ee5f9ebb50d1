//! HTTP beside pgwire (`sluice serve --http`): `/metrics` parses with Prometheus' own parser,
//! moves while a pipeline runs and agrees with the system tables; `/health`; bad requests; a
//! port in use leaves pgwire serving; beyond loopback it asks for the users' passwords.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::serve::{free_port, serve};

/// One HTTP/1.0 request: (status, body).
pub fn http(port: u16, method: &str, path: &str, authorization: Option<&str>) -> (u16, String) {
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(socket, "{method} {path} HTTP/1.0\r\nHost: localhost\r\n{auth}\r\n").unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Waits until the HTTP port answers.
pub fn wait_http(port: u16) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the HTTP server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn psql(port: u16, sql: &str) -> String {
    crate::serve::psql_as(port, "me", sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The samples of a scrape, parsed by the `prometheus_client` package's text-format parser:
/// `name{label="value",...}` -> value.
fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = {}\n\
        for family in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in family.samples:\n\
        \x20       labels = ','.join(f'{k}=\"{v}\"' for k, v in sorted(s.labels.items()))\n\
        \x20       out[s.name + '{' + labels + '}'] = s.value\n\
        print(json.dumps(out))\n";
    let python = std::env::var("SLUICE_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let mut child = Command::new(python)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Python peers are not installed: run ./scripts/test");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Prometheus parser refused /metrics: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sample(metrics: &BTreeMap<String, f64>, key: &str) -> f64 {
    *metrics.get(key).unwrap_or_else(|| panic!("{key} is not in /metrics: {:?}", metrics.keys().collect::<Vec<_>>()))
}

#[test]
fn metrics_move_and_agree_with_the_system_tables() {
    let dir = tempfile::tempdir().unwrap();
    let http_port = free_port();
    let server = serve(dir.path(), &["--http", &format!("127.0.0.1:{http_port}")]);
    wait_http(http_port);
    assert_eq!(http(http_port, "GET", "/health", None), (200, "{\"status\":\"ready\"}\n".to_string()));
    psql(
        server.port,
        "CREATE STREAMING TABLE bronze (id bigint, amount double precision,
           CONSTRAINT positive EXPECT (amount > 0))
         PUSH INTO big AS SELECT id, amount FROM bronze WHERE amount >= 100
         PUSH INTO small AS SELECT id, amount FROM bronze WHERE amount < 100",
    );
    psql(server.port, "INSERT INTO bronze VALUES (1, 5), (2, 500), (3, -1)");
    let first = parse_metrics(&http(http_port, "GET", "/metrics", None).1);
    psql(server.port, "INSERT INTO bronze SELECT g, g FROM generate_series(1, 1000) AS g");
    // A failing statement is counted under its SQLSTATE.
    let failed = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &server.port.to_string(), "-U", "me", "-d", "sluice"])
        .args(["-c", "SELECT 1/0"])
        .output()
        .unwrap();
    assert!(!failed.status.success());
    let (status, text) = http(http_port, "GET", "/metrics", None);
    assert_eq!(status, 200);
    let second = parse_metrics(&text);

    // The counters moved.
    let rows = "sluice_flow_rows_out_total{flow=\"bronze_to_big\"}";
    assert!(sample(&second, rows) > sample(&first, rows), "{rows} did not move");
    let commits = "sluice_storage_commits_total{}";
    assert!(sample(&second, commits) > sample(&first, commits));
    let inserts = "sluice_pgwire_statements_total{kind=\"insert\"}";
    assert!(sample(&second, inserts) >= sample(&first, inserts) + 1.0);
    assert!(sample(&second, "sluice_pgwire_errors_total{sqlstate=\"22012\"}") >= 1.0);
    assert!(sample(&second, "sluice_pgwire_statement_seconds_count{kind=\"insert\"}") >= 2.0);

    // And they say what the system tables say (nothing runs between the two reads).
    let flows = psql(
        server.port,
        "SELECT name || ' ' || runs || ' ' || rows_out || ' ' || failures_total FROM sluice.flows ORDER BY name",
    );
    let text = http(http_port, "GET", "/metrics", None).1;
    let now = parse_metrics(&text);
    for line in flows.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [name, runs, rows_out, failures] = parts.as_slice() else { panic!("{line}") };
        assert_eq!(sample(&now, &format!("sluice_flow_runs_total{{flow=\"{name}\"}}")), runs.parse::<f64>().unwrap());
        assert_eq!(
            sample(&now, &format!("sluice_flow_rows_out_total{{flow=\"{name}\"}}")),
            rows_out.parse::<f64>().unwrap()
        );
        assert_eq!(
            sample(&now, &format!("sluice_flow_failures_total{{flow=\"{name}\"}}")),
            failures.parse::<f64>().unwrap()
        );
    }
    let expectation = psql(server.port, "SELECT passed || ' ' || violations FROM sluice.expectations");
    assert_eq!(expectation, "1002 1", "1,003 rows checked, one violated");
    assert_eq!(
        sample(&now, "sluice_expectation_passed_total{expectation=\"positive\",table=\"public.bronze\"}"),
        1002.0
    );
    assert_eq!(
        sample(&now, "sluice_expectation_violated_total{expectation=\"positive\",table=\"public.bronze\"}"),
        1.0
    );
    assert!(sample(&now, "sluice_pgwire_connections_total{}") >= 4.0);
    // The event log names the role that ran the DDL.
    assert_eq!(
        psql(server.port, "SELECT user_name || ' ' || message FROM sluice.events WHERE kind = 'ddl'"),
        "me CREATE STREAMING TABLE bronze"
    );
}

#[test]
fn bad_http_requests_and_a_port_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let http_port = free_port();
    let server = serve(dir.path(), &["--http", &format!("127.0.0.1:{http_port}")]);
    wait_http(http_port);
    assert_eq!(http(http_port, "POST", "/metrics", None).0, 405);
    assert_eq!(http(http_port, "GET", "/nothing/here", None).0, 404);
    assert_eq!(http(http_port, "GET", "/", None).0, 200);
    // A request that never ends its head is dropped; the server keeps answering others.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", http_port)).unwrap();
    write!(slow, "GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert_eq!(http(http_port, "GET", "/health", None).0, 200);
    drop(slow);

    // A second server on the same HTTP port: it says so, and serves pgwire all the same.
    let other = tempfile::tempdir().unwrap();
    let pg_port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data", other.path().to_str().unwrap(), "--listen", &format!("127.0.0.1:{pg_port}")])
        .args(["--http", &format!("127.0.0.1:{http_port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", pg_port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the second server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(psql(pg_port, "SELECT 40 + 2"), "42");
    let _ = child.kill();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let _ = child.wait();
    assert!(stderr.contains("HTTP not started") && stderr.contains("in use"), "{stderr}");
    // The first one still answers.
    assert_eq!(psql(server.port, "SELECT 1"), "1");
    assert_eq!(http(http_port, "GET", "/health", None).0, 200);
}

#[test]
fn beyond_loopback_http_asks_for_a_password() {
    let dir = tempfile::tempdir().unwrap();
    // Without users, HTTP beyond loopback is refused (pgwire too, as before).
    let http_port = free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data", dir.path().to_str().unwrap(), "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--http", &format!("0.0.0.0:{http_port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut out = out;
    let _ = out.kill();
    let mut stderr = String::new();
    out.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let _ = out.wait();
    assert!(stderr.contains("without authentication"), "{stderr}");

    let users = dir.path().join("users.json");
    std::fs::write(&users, r#"[{"name": "ops", "password": "s3cret", "owner": true}]"#).unwrap();
    let data = dir.path().join("w");
    let http_port = free_port();
    let _server = serve(&data, &["--users", users.to_str().unwrap(), "--http", &format!("0.0.0.0:{http_port}")]);
    wait_http(http_port);
    use base64_encode as b64;
    assert_eq!(http(http_port, "GET", "/metrics", None).0, 401);
    assert_eq!(http(http_port, "GET", "/metrics", Some(&format!("Basic {}", b64("ops:wrong")))).0, 401);
    assert_eq!(http(http_port, "GET", "/metrics", Some(&format!("Basic {}", b64("nobody:s3cret")))).0, 401);
    assert_eq!(http(http_port, "GET", "/health", Some(&format!("Basic {}", b64("ops:s3cret")))).0, 200);
}

fn base64_encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
