//! `sluice serve` as a process, with real clients: psql (plain, TLS, SCRAM), and psycopg 3,
//! psycopg2, SQLAlchemy, pandas and asyncpg through `clients.py` in the test venv.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Serve {
    child: Child,
    port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn serve(data: &Path, extra: &[&str]) -> Serve {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--data", data.to_str().unwrap(), "--listen", &listen])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "sluice serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Serve { child, port }
}

fn psql_binary() -> Option<PathBuf> {
    ["/usr/bin/psql", "/usr/local/bin/psql"].iter().map(PathBuf::from).find(|p| p.exists())
}

fn psql(port: u16, connection: &str, password: Option<&str>, args: &[&str]) -> Output {
    let psql = psql_binary().expect("psql is installed (scripts/test installs postgresql-client)");
    let dsn = format!("host=127.0.0.1 port={port} dbname=sluice {connection}");
    let mut command = Command::new(psql);
    command.args(["-X", "-v", "ON_ERROR_STOP=1", "-d", &dsn]).args(args);
    command.env("PGCONNECT_TIMEOUT", "10");
    match password {
        Some(p) => command.env("PGPASSWORD", p),
        None => command.env_remove("PGPASSWORD"),
    };
    command.output().unwrap()
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "psql failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn psql_meta_commands_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let port = server.port;
    let run = |args: &[&str]| ok(&psql(port, "user=me sslmode=disable", None, args));
    let out = run(&["-c", "select 1; select 2"]);
    assert!(out.contains("?column? \n----------\n        1\n(1 row)"), "{out}");
    assert!(out.contains("        2\n(1 row)"), "{out}");
    run(&[
        "-c",
        "CREATE SCHEMA sales",
        "-c",
        "CREATE TABLE sales.orders (id bigint NOT NULL, customer text, amount numeric(10,2), at timestamptz)",
        "-c",
        "CREATE TABLE notes (n int)",
    ]);
    let out = run(&["-c", "\\dt"]);
    assert!(out.contains(" public | notes  | table |"), "{out}");
    let out = run(&["-c", "\\dt sales.*"]);
    assert!(out.contains(" sales  | orders | table |"), "{out}");
    let out = run(&["-c", "\\d"]);
    assert!(out.contains("notes"), "{out}");
    let out = run(&["-c", "\\d sales.orders"]);
    assert!(out.contains("Table \"sales.orders\""), "{out}");
    for column in [
        " id       | bigint                   |           | not null |",
        " customer | text",
        " amount   | numeric",
        " at       | timestamp with time zone",
    ] {
        assert!(out.contains(column), "missing {column:?} in\n{out}");
    }
    let out = run(&["-c", "\\d+ sales.orders"]);
    assert!(out.contains("Storage") && out.contains(" customer |"), "{out}");
    let out = run(&["-c", "\\dn"]);
    assert!(out.contains(" sales ") && out.contains(" public "), "{out}");
    let out = run(&["-c", "\\l"]);
    assert!(out.contains(" sluice "), "{out}");
    let out = run(&["-c", "\\df"]);
    assert!(out.contains("List of functions"), "{out}");

    // \copy moves files on the client's side through COPY FROM STDIN / TO STDOUT.
    let csv = dir.path().join("orders.csv");
    let mut file = std::fs::File::create(&csv).unwrap();
    writeln!(file, "id,customer,amount,at").unwrap();
    for i in 0..1000 {
        writeln!(file, "{i},cust{},{}.25,2024-01-01 00:00:00+00", i % 7, i).unwrap();
    }
    drop(file);
    let out = run(&["-c", &format!("\\copy sales.orders from '{}' csv header", csv.display())]);
    assert!(out.contains("COPY 1000"), "{out}");
    let exported = dir.path().join("o.csv");
    let out = run(&[
        "-c",
        &format!(
            "\\copy (select customer, count(*) as n from sales.orders group by customer order by customer) to '{}' csv",
            exported.display()
        ),
    ]);
    assert!(out.contains("COPY 7"), "{out}");
    let text = std::fs::read_to_string(&exported).unwrap();
    assert_eq!(text.lines().next(), Some("cust0,143"));
    assert_eq!(text.lines().count(), 7);
    // A failing statement: psql reports the error with its position, the server goes on.
    let failed = psql(port, "user=me", None, &["-c", "select * from nowhere"]);
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("nowhere"));
    let out = run(&["-c", "select count(*) from sales.orders"]);
    assert!(out.contains("  1000\n"), "{out}");
}

#[test]
fn psql_with_tls_and_scram_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.json");
    std::fs::write(&users, r#"[{"name": "admin", "password": "pa55"}]"#).unwrap();
    let server = serve(&dir.path().join("data"), &["--users", users.to_str().unwrap(), "--tls-self-signed"]);
    let port = server.port;
    let out = ok(&psql(port, "user=admin sslmode=require", Some("pa55"), &["-c", "\\conninfo"]));
    assert!(out.contains("SSL connection"), "{out}");
    // Plain text is allowed too when the client does not ask for TLS.
    let out = ok(&psql(port, "user=admin sslmode=disable", Some("pa55"), &["-c", "select 41 + 1 as answer"]));
    assert!(out.contains("42"), "{out}");
    let wrong = psql(port, "user=admin sslmode=require", Some("nope"), &["-c", "select 1"]);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).to_lowercase().contains("password authentication failed"),
        "{wrong:?}"
    );
    // A role made with CREATE ROLE logs in with SCRAM as well.
    ok(&psql(
        port,
        "user=admin sslmode=require",
        Some("pa55"),
        &["-c", "CREATE ROLE ro PASSWORD 'r0' IN ROLE pg_read_all_data"],
    ));
    let out = ok(&psql(port, "user=ro sslmode=require", Some("r0"), &["-c", "select current_user"]));
    assert!(out.contains("ro"), "{out}");
    let denied = psql(port, "user=ro sslmode=require", Some("r0"), &["-c", "create table x (a int)"]);
    assert!(String::from_utf8_lossy(&denied.stderr).contains("read-only"), "{denied:?}");
}

#[test]
fn python_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let python = std::env::var("SLUICE_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/clients.py");
    let output = Command::new(&python).arg(&script).arg(server.port.to_string()).output().unwrap_or_else(|e| {
        panic!("cannot run {python} (run ./scripts/test, which makes the venv): {e}");
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("all clients ok"), "{stdout}");
}

/// A Kafka pipeline defined and watched through psql, ingested by the `sluice serve` process from
/// librdkafka's mock cluster (served by this test process on a loopback port).
#[test]
fn psql_runs_a_kafka_pipeline_in_sluice_serve() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    cluster.create_topic("clicks", 1, 1).unwrap();
    let brokers = cluster.bootstrap_servers();
    let producer: BaseProducer = rdkafka::ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
    for i in 0..100 {
        let (topic, payload) = match i % 2 {
            0 => ("orders", format!("{{\"id\": {i}, \"amount\": {i}.5}}")),
            _ => ("clicks", if i == 51 { "not json".to_string() } else { format!("{{\"page\": \"/p/{i}\"}}") }),
        };
        producer.send(BaseRecord::<str, str>::to(topic).payload(&payload)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let port = server.port;
    let run = |args: &[&str]| ok(&psql(port, "user=me", None, args));
    run(&[
        "-c",
        &format!("CREATE SOURCE shop FROM KAFKA (brokers '{brokers}', topics 'orders,clicks', batch_ms '50')"),
        "-c",
        "CREATE STREAMING TABLE bronze FROM SOURCE shop \
         PUSH INTO orders WHERE topic = 'orders' EXPAND JSON value \
         PUSH INTO clicks WHERE topic = 'clicks' EXPAND JSON value",
    ]);
    let started = Instant::now();
    loop {
        let out = run(&["-At", "-c", "SELECT (SELECT count(*) FROM orders) AS o, (SELECT count(*) FROM clicks) AS c, (SELECT count(*) FROM bronze_errors) AS e"]);
        if out.trim() == "50|49|1" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "not ingested: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(run(&["-At", "-c", "SELECT sum(amount) FROM orders"]).trim(), "2475.0");
    // The lag is known once the client reported the high watermarks (every second).
    let started = Instant::now();
    loop {
        let offsets = run(&["-At", "-c", "SELECT topic, \"offset\", lag FROM sluice.kafka_offsets ORDER BY topic"]);
        if offsets.trim() == "clicks|49|0\norders|49|0" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "offsets: {offsets}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let sources = run(&["-At", "-c", "SELECT name, state, messages, dead_letters FROM sluice.sources"]);
    assert_eq!(sources.trim(), "shop|running|100|1");
    // Bad definitions get errors with their SQLSTATE; the server goes on.
    let bad =
        psql(port, "user=me", None, &["-c", "CREATE SOURCE x FROM KAFKA (brokers 'h:1', topics 't', format 'xml')"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("format must be 'json', 'text' or 'bytes'"), "{stderr}");
    let refused = psql(port, "user=me", None, &["-v", "VERBOSITY=verbose", "-c", "DROP SOURCE shop"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("2BP01"), "{refused:?}");
    assert_eq!(run(&["-At", "-c", "SELECT count(*) FROM bronze"]).trim(), "99");
}
