//! `sluice serve` as a process, with real clients: psql (plain, TLS, SCRAM), and psycopg 3,
//! psycopg2, SQLAlchemy, pandas and asyncpg through `clients.py` in the test venv.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::serve::serve;

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
    // PostgreSQL's warnings for COMMIT / ROLLBACK with no transaction block and BEGIN inside one.
    let output = psql(
        port,
        "user=me sslmode=disable",
        None,
        &["-c", "COMMIT", "-c", "BEGIN", "-c", "BEGIN", "-c", "ROLLBACK", "-c", "ROLLBACK"],
    );
    ok(&output);
    let warnings = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        warnings.lines().collect::<Vec<_>>(),
        [
            "WARNING:  there is no transaction in progress",
            "WARNING:  there is already a transaction in progress",
            "WARNING:  there is no transaction in progress"
        ],
        "{warnings}"
    );
    run(&[
        "-c",
        "CREATE SCHEMA sales",
        "-c",
        "CREATE TABLE sales.orders (id bigint NOT NULL, customer text, amount numeric(10,2), at timestamptz)",
        "-c",
        "CREATE TABLE notes (n int)",
    ]);
    let out = run(&["-c", "\\dt"]);
    // The Name column's width depends on whether \dt lists sales.orders too (it does today;
    // PostgreSQL lists only the tables on the search path).
    assert!(out.contains(" public | notes"), "{out}");
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
    // psql's `+` commands: sizes from the tables' files, the catalogs they join.
    run(&["-c", "INSERT INTO notes VALUES (1), (2)"]);
    let out = run(&["-c", "\\dt+ notes"]);
    assert!(out.contains(" public | notes | table |") && out.contains(" bytes |"), "{out}");
    assert!(!out.contains("| 0 bytes |"), "a table with rows has a size: {out}");
    for command in ["\\l+", "\\dn+", "\\df+", "\\db", "\\do", "\\dv+", "\\di+"] {
        run(&["-c", command]);
    }
    // search_path: unqualified names are found, and created, along it.
    let out = run(&[
        "-c",
        "SET search_path TO sales, public",
        "-c",
        "SELECT count(*) AS orders FROM orders",
        "-c",
        "CREATE TABLE returns (id int)",
        "-c",
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'returns'",
    ]);
    assert!(out.contains("orders \n--------\n      0"), "{out}");
    assert!(out.contains(" sales\n"), "{out}");
    let out = run(&["-c", "\\d+ sales.orders"]);
    assert!(out.contains("Storage") && out.contains(" customer |"), "{out}");
    // Keys, indexes, defaults and identity columns, as psql 15 prints them from PostgreSQL 15.
    run(&[
        "-c",
        "CREATE TABLE kv (k int PRIMARY KEY, v text UNIQUE, n int NOT NULL DEFAULT 7, s serial, \
         g bigint GENERATED ALWAYS AS IDENTITY)",
        "-c",
        "CREATE INDEX kv_n ON kv (n)",
        "-c",
        "CREATE UNIQUE INDEX kv_vn ON kv (v, n) NULLS NOT DISTINCT",
    ]);
    let out = run(&["-c", "\\d kv"]);
    for line in [
        " k      | integer |           | not null | \n",
        " v      | text    |           |          | \n",
        " n      | integer |           | not null | 7\n",
        " s      | bigint  |           | not null | nextval('kv_s_seq'::regclass)\n",
        " g      | bigint  |           | not null | generated always as identity\n",
        "Indexes:\n    \"kv_pkey\" PRIMARY KEY, btree (k)\n    \"kv_n\" btree (n)\n    \"kv_v_key\" UNIQUE CONSTRAINT, btree (v)\n    \"kv_vn\" UNIQUE, btree (v, n) NULLS NOT DISTINCT\n",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    let out = run(&["-c", "\\di"]);
    for line in [" public | kv_n     | index |", " public | kv_pkey  | index |", "(4 rows)"] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    let out = run(&[
        "-A",
        "-t",
        "-c",
        "SELECT conname, contype, pg_get_constraintdef(oid), conkey FROM pg_constraint ORDER BY 1",
    ]);
    assert_eq!(out, "kv_pkey|p|PRIMARY KEY (k)|{1}\nkv_v_key|u|UNIQUE (v)|{2}\n");
    run(&["-c", "CREATE TABLE catc (a int CHECK (a > 0), b int, CONSTRAINT b_small CHECK (b < 10))"]);
    let out = run(&["-c", "\\d catc"]);
    let checks = "Check constraints:\n    \"b_small\" CHECK (b < 10)\n    \"catc_a_check\" CHECK (a > 0)\n";
    assert!(out.contains(checks), "{out}");
    // Foreign keys: the referencing table lists them, the referenced one the tables that use it.
    run(&["-c", "CREATE TABLE catc_child (id int, a int REFERENCES kv ON DELETE CASCADE, v text REFERENCES kv (v))"]);
    let out = run(&["-c", "\\d catc_child"]);
    let keys =
        "Foreign-key constraints:\n    \"catc_child_a_fkey\" FOREIGN KEY (a) REFERENCES kv(k) ON DELETE CASCADE\n    \
                \"catc_child_v_fkey\" FOREIGN KEY (v) REFERENCES kv(v)\n";
    assert!(out.contains(keys), "{out}");
    let out = run(&["-c", "\\d kv"]);
    let referenced = "Referenced by:\n    \
        TABLE \"catc_child\" CONSTRAINT \"catc_child_a_fkey\" FOREIGN KEY (a) REFERENCES kv(k) ON DELETE CASCADE\n    \
        TABLE \"catc_child\" CONSTRAINT \"catc_child_v_fkey\" FOREIGN KEY (v) REFERENCES kv(v)\n";
    assert!(out.contains(referenced), "{out}");
    run(&["-c", "DROP TABLE catc_child"]);
    run(&["-c", "DROP INDEX kv_n"]);
    let out = run(&["-c", "\\d kv"]);
    assert!(!out.contains("kv_n") && out.contains("\"kv_pkey\" PRIMARY KEY, btree (k)"), "{out}");
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

/// `--require-tls`: psql without TLS is refused, with TLS it connects; the self-signed key is the
/// server's alone (mode 0600).
#[test]
fn psql_with_require_tls() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.json");
    std::fs::write(&users, r#"[{"name": "admin", "password": "pa55"}]"#).unwrap();
    let data = dir.path().join("data");
    let server = serve(&data, &["--users", users.to_str().unwrap(), "--tls-self-signed", "--require-tls"]);
    let port = server.port;
    let plain = psql(port, "user=admin sslmode=disable", Some("pa55"), &["-c", "select 1"]);
    assert!(!plain.status.success());
    assert!(String::from_utf8_lossy(&plain.stderr).contains("no encryption"), "{plain:?}");
    let out = ok(&psql(port, "user=admin sslmode=require", Some("pa55"), &["-c", "\\conninfo"]));
    assert!(out.contains("SSL connection"), "{out}");
    let key = data.join("_sluice/tls/server.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
}

/// Runs tests/it/<script> with the venv's Python against a fresh `sluice serve`; its standard
/// output, once it exited successfully and printed `done`.
fn run_python_client(script: &str, done: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let python = std::env::var("SLUICE_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it").join(script);
    let output = Command::new(&python).arg(&script).arg(server.port.to_string()).output().unwrap_or_else(|e| {
        panic!("cannot run {python} (run ./scripts/test, which makes the venv): {e}");
    });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(done), "{stdout}");
    stdout
}

#[test]
fn python_clients() {
    run_python_client("clients.py", "all clients ok");
}

/// pgcli's completion (tests/it/pgcli_completion.py): its own queries (schemas, tables, views,
/// columns with their types, functions with their argument types, foreign keys, data types,
/// casing) fill its completer, which then completes as in a pgcli session. The expected values
/// are PostgreSQL 15's; the script passes against it unchanged (with `--postgres`).
#[test]
fn pgcli_completes_from_the_catalog() {
    run_python_client("pgcli_completion.py", "pgcli ok");
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
    assert_eq!(run(&["-At", "-c", "SELECT sum(amount) FROM orders"]).trim(), "2475");
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
    assert!(stderr.contains("format must be 'json', 'text', 'bytes' or 'debezium'"), "{stderr}");
    let refused = psql(port, "user=me", None, &["-v", "VERBOSITY=verbose", "-c", "DROP SOURCE shop"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("2BP01"), "{refused:?}");
    assert_eq!(run(&["-At", "-c", "SELECT count(*) FROM bronze"]).trim(), "99");
}

/// One bronze event of the seed's pipeline without Kafka.
enum Event {
    Order { id: i64, customer: &'static str, amount: i64, ts: &'static str },
    Payment { order_id: i64, paid: i64 },
}

impl Event {
    fn sql_value(&self) -> String {
        match self {
            Event::Order { id, customer, amount, ts } => format!(
                "('orders', 'o{id}', '{{\"order_id\": {id}, \"customer\": \"{customer}\", \"amount\": {amount}, \"ts\": \"{ts}\"}}')"
            ),
            Event::Payment { order_id, paid } => {
                format!("('payments', 'p{order_id}', '{{\"order_id\": {order_id}, \"paid\": {paid}}}')")
            }
        }
    }
}

/// gold_revenue computed from the events: `customer|hour|revenue|payments` lines, sorted.
fn gold_revenue(events: &[Event]) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<(&str, String), (i64, i64)> = Default::default();
    for event in events {
        let Event::Order { id, customer, ts, .. } = event else { continue };
        // Timestamps are written `YYYY-MM-DD HH:MM:SS`: the hour is the first 13 characters.
        // The server prints timestamps as PostgreSQL does (no fraction when there is none).
        let hour = format!("{}:00:00", &ts[..13]);
        for payment in events {
            match payment {
                Event::Payment { order_id, paid } if order_id == id => {
                    let group = groups.entry((customer, hour.clone())).or_default();
                    group.0 += paid;
                    group.1 += 1;
                }
                _ => {}
            }
        }
    }
    groups
        .into_iter()
        .map(|((customer, hour), (revenue, count))| format!("{customer}|{hour}|{revenue}|{count}"))
        .collect()
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    lines.sort();
    lines
}

/// The seed's pipeline (a bronze streaming table pushing typed silver tables) with a sync
/// materialized view joining and aggregating the silvers, all through psql against `sluice serve`:
/// the view follows every insert (a payment may arrive before its order), says it is maintained
/// incrementally, explains itself, refuses writes with an ERROR, and psycopg reads it too.
#[test]
fn psql_maintains_a_gold_view_over_the_seed_pipeline() {
    use Event::{Order, Payment};
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let port = server.port;
    let run = |args: &[&str]| ok(&psql(port, "user=me", None, args));
    run(&[
        "-c",
        "CREATE STREAMING TABLE bronze (topic text NOT NULL, key text, payload text) \
         PUSH INTO silver_orders AS \
           SELECT CAST(payload->>'order_id' AS BIGINT) AS order_id, payload->>'customer' AS customer, \
             CAST(payload->>'amount' AS BIGINT) AS amount, CAST(payload->>'ts' AS TIMESTAMP) AS ts \
           FROM bronze WHERE topic = 'orders' \
         PUSH INTO silver_payments AS \
           SELECT CAST(payload->>'order_id' AS BIGINT) AS order_id, CAST(payload->>'paid' AS BIGINT) AS paid \
           FROM bronze WHERE topic = 'payments'",
        "-c",
        "CREATE MATERIALIZED VIEW gold_revenue AS SELECT o.customer, date_trunc('hour', o.ts) AS hour, \
         sum(p.paid) AS revenue, count(*) AS payments \
         FROM silver_orders o JOIN silver_payments p ON o.order_id = p.order_id GROUP BY 1, 2",
    ]);
    let batches: Vec<Vec<Event>> = vec![
        vec![
            Order { id: 1, customer: "ann", amount: 50, ts: "2024-05-01 10:15:00" },
            Order { id: 2, customer: "bob", amount: 20, ts: "2024-05-01 10:40:00" },
            Payment { order_id: 1, paid: 20 },
            Payment { order_id: 1, paid: 30 },
        ],
        // A payment before its order: nothing joins yet.
        vec![Payment { order_id: 3, paid: 70 }],
        vec![
            Order { id: 3, customer: "ann", amount: 70, ts: "2024-05-01 11:05:00" },
            Order { id: 4, customer: "cy", amount: 11, ts: "2024-05-01 10:59:59" },
        ],
        vec![
            Payment { order_id: 2, paid: 15 },
            Payment { order_id: 4, paid: 5 },
            Payment { order_id: 4, paid: 6 },
            Order { id: 5, customer: "ann", amount: 9, ts: "2024-05-01 10:00:00" },
            Payment { order_id: 5, paid: 9 },
        ],
        vec![Payment { order_id: 9, paid: 1 }, Payment { order_id: 2, paid: 5 }],
    ];
    let mut events = Vec::new();
    for (i, batch) in batches.into_iter().enumerate() {
        let values: Vec<String> = batch.iter().map(Event::sql_value).collect();
        run(&["-c", &format!("INSERT INTO bronze VALUES {}", values.join(", "))]);
        events.extend(batch);
        let gold = run(&["-At", "-c", "SELECT * FROM gold_revenue"]);
        assert_eq!(sorted_lines(&gold), gold_revenue(&events), "gold_revenue after insert {i}");
    }
    assert_eq!(
        gold_revenue(&events),
        [
            "ann|2024-05-01 10:00:00|59|3",
            "ann|2024-05-01 11:00:00|70|1",
            "bob|2024-05-01 10:00:00|20|2",
            "cy|2024-05-01 10:00:00|11|2"
        ],
        "the model"
    );

    let strategy = run(&["-At", "-c", "SELECT strategy FROM sluice.views WHERE name = 'gold_revenue'"]);
    assert_eq!(strategy.trim(), "incremental");
    let plan = run(&["-At", "-c", "EXPLAIN MATERIALIZED VIEW gold_revenue"]);
    let plan: Vec<&str> = plan.lines().collect();
    assert_eq!(plan.first(), Some(&"strategy: incremental"), "{plan:?}");
    assert!(plan.len() > 1, "the plan names its operators: {plan:?}");

    // Writing to the view is an error; the server goes on answering.
    let refused = psql(
        port,
        "user=me",
        None,
        &["-c", "INSERT INTO gold_revenue VALUES ('zed', TIMESTAMP '2024-05-01 10:00:00', 1, 1)"],
    );
    assert!(!refused.status.success(), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ERROR:"), "{refused:?}");
    let gold = run(&["-At", "-c", "SELECT * FROM gold_revenue"]);
    assert_eq!(sorted_lines(&gold), gold_revenue(&events));

    // psycopg reads the same rows.
    let python = std::env::var("SLUICE_PYTHON")
        .unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let output = Command::new(&python)
        .arg("-c")
        .arg(
            "import sys, psycopg\n\
             with psycopg.connect(host='127.0.0.1', port=int(sys.argv[1]), dbname='sluice', user='me') as c:\n\
             \x20   for row in c.execute('SELECT customer, hour, revenue, payments FROM gold_revenue').fetchall():\n\
             \x20       print('|'.join(str(x) for x in row))\n",
        )
        .arg(port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (run ./scripts/test, which makes the venv): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    // psycopg reads the hour as a datetime, which Python prints as the server does.
    let expected: Vec<String> = gold_revenue(&events);
    assert_eq!(sorted_lines(&stdout), expected, "psycopg reads gold_revenue");
}

/// psql follows a table with `COPY (SUBSCRIBE TO t) TO STDOUT`: the table's rows first, then
/// each change another client commits, as it commits (version, diff, columns).
#[test]
fn psql_follows_a_table_with_copy_subscribe() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let port = server.port;
    let run = |args: &[&str]| ok(&psql(port, "user=me sslmode=disable", None, args));
    run(&["-c", "CREATE TABLE s (id int, name text)", "-c", "INSERT INTO s VALUES (1, 'a')"]);
    let psql_path = psql_binary().expect("psql is installed");
    let dsn = format!("host=127.0.0.1 port={port} dbname=sluice user=me sslmode=disable");
    // stdbuf: psql's stdout is a pipe here, which C's stdio would buffer (a terminal shows each
    // row as it comes).
    let mut follower = Command::new("stdbuf")
        .arg("-o0")
        .arg(psql_path)
        .args(["-X", "-d", &dsn, "-c", "COPY (SUBSCRIBE TO s) TO STDOUT"])
        .env_remove("PGPASSWORD")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        received.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("psql printed no line for {what}"))
    };
    let first: Vec<String> = next("the snapshot").split('\t').map(String::from).collect();
    assert_eq!(&first[1..], ["1", "1", "a"], "{first:?}");
    let snapshot_version: u64 = first[0].parse().unwrap();
    run(&["-c", "INSERT INTO s VALUES (2, 'b')"]);
    let inserted: Vec<String> = next("the insert").split('\t').map(String::from).collect();
    assert_eq!(&inserted[1..], ["1", "2", "b"], "{inserted:?}");
    assert!(inserted[0].parse::<u64>().unwrap() > snapshot_version, "{inserted:?}");
    run(&["-c", "DELETE FROM s WHERE id = 1"]);
    let deleted: Vec<String> = next("the delete").split('\t').map(String::from).collect();
    assert_eq!(&deleted[1..], ["-1", "1", "a"], "{deleted:?}");
    // psql took the heartbeats of the quiet seconds (ParameterStatus messages) without a word.
    std::thread::sleep(Duration::from_secs(3));
    run(&["-c", "INSERT INTO s VALUES (3, 'c')"]);
    let after_quiet: Vec<String> = next("the insert after a quiet while").split('\t').map(String::from).collect();
    assert_eq!(&after_quiet[1..], ["1", "3", "c"], "{after_quiet:?}");
    // A follower killed is noticed without a change to the table: its session ends (only the
    // counting session is left).
    follower.kill().unwrap();
    let _ = follower.wait();
    let started = std::time::Instant::now();
    while run(&["-At", "-c", "SELECT count(*) FROM pg_stat_activity"]).trim() != "1" {
        assert!(started.elapsed() < Duration::from_secs(30), "the subscription outlived its client");
        std::thread::sleep(Duration::from_millis(200));
    }
    // So is one killed while its FETCH waits on a subscription cursor.
    let mut fetcher = Command::new(psql_binary().expect("psql is installed"))
        .args(["-X", "-d", &dsn])
        .args(["-c", "BEGIN", "-c", "DECLARE c CURSOR FOR SUBSCRIBE TO s WITH (SNAPSHOT = false)"])
        .args(["-c", "FETCH 1 FROM c"])
        .env_remove("PGPASSWORD")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while run(&["-At", "-c", "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'FETCH%'"]).trim() != "1" {
        assert!(started.elapsed() < Duration::from_secs(30), "the FETCH did not start waiting");
        std::thread::sleep(Duration::from_millis(100));
    }
    fetcher.kill().unwrap();
    let _ = fetcher.wait();
    let started = std::time::Instant::now();
    while run(&["-At", "-c", "SELECT count(*) FROM pg_stat_activity"]).trim() != "1" {
        assert!(started.elapsed() < Duration::from_secs(30), "the waiting FETCH outlived its client");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A statement SUBSCRIBE is refused with a pointer to the COPY form; a missing table is 42P01.
    let out = psql(port, "user=me sslmode=disable", None, &["-c", "SUBSCRIBE TO s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("COPY (SUBSCRIBE TO t) TO STDOUT"), "{err}");
    let out = psql(port, "user=me sslmode=disable", None, &["-c", "COPY (SUBSCRIBE TO nope) TO STDOUT"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not exist"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
