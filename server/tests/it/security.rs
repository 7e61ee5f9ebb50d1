//! Regression tests of the security findings against `sluice serve` (issue 18), each over pgwire
//! as an attacker would send it: paths a client names (LOCATION, COPY files, schema names),
//! VACUUM and retention, read-only roles writing through COPY/CTE/EXPLAIN ANALYZE, Kafka client
//! properties, cancellation ordered with the commit, and memory limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_server::pg::{serve, Server, ServerConfig, UserConfig};
use tokio_postgres::{Client, NoTls};

struct Warehouse {
    server: Server,
    dir: tempfile::TempDir,
}

fn users() -> Vec<UserConfig> {
    vec![
        UserConfig { name: "owner".into(), password: "o".into(), read_only: false, ..Default::default() },
        UserConfig { name: "user".into(), password: "u".into(), read_only: false, ..Default::default() },
        UserConfig { name: "reader".into(), password: "r".into(), read_only: true, ..Default::default() },
    ]
}

impl Warehouse {
    async fn start() -> Self {
        Self::start_with(sluice::DatabaseOptions::default()).await
    }

    async fn start_with(options: sluice::DatabaseOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = sluice::Database::open_with(dir.path().to_str().unwrap(), options).await.unwrap();
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            connections_max: 32,
            users: users(),
            tls: None,
            allowed_paths: vec![dir.path().to_path_buf()],
            message_bytes_max: sluice_server::pg::socket::MESSAGE_BYTES_MAX_DEFAULT,
            ..Default::default()
        };
        let server = serve(db, config).await.unwrap();
        Self { server, dir }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    async fn connect(&self, user: &str) -> Client {
        let password = users().into_iter().find(|u| u.name == user).map(|u| u.password).unwrap();
        let url = format!(
            "host=127.0.0.1 port={} user={user} password={password} dbname=sluice",
            self.server.local_addr.port()
        );
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    }
}

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

async fn count(client: &Client, table: &str) -> i64 {
    client.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.unwrap().get(0)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Finding 1: LOCATION anywhere + VACUUM deleted files outside the warehouse and other tables'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_are_confined_and_vacuum_deletes_only_its_own_files() {
    let warehouse = Warehouse::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("precious.txt"), "keep me").unwrap();
    let user = warehouse.connect("user").await;
    let owner = warehouse.connect("owner").await;

    // A normal user cannot place a table outside the allowed folders, nor in the server's own.
    for location in [outside.path().display().to_string(), format!("file://{}", outside.path().display())] {
        let err = user.batch_execute(&format!("CREATE TABLE d (a int) LOCATION '{location}'")).await.unwrap_err();
        assert_eq!(code(&err), "42501", "{location}: {err}");
    }
    for location in ["_sluice/catalog", "../", "/"] {
        let err = user.batch_execute(&format!("CREATE TABLE d (a int) LOCATION '{location}'")).await.unwrap_err();
        assert_eq!(code(&err), "42501", "{location}: {err}");
    }
    // Nor over another table's folder, even inside the data folder.
    user.batch_execute("CREATE TABLE victim (a int); INSERT INTO victim VALUES (1), (2)").await.unwrap();
    let victim_folder = std::fs::read_dir(warehouse.data().join("public"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("victim-"))
        .unwrap();
    for location in [victim_folder.display().to_string(), victim_folder.join("sub").display().to_string()] {
        for client in [&user, &owner] {
            let err = client.batch_execute(&format!("CREATE TABLE d (a int) LOCATION '{location}'")).await.unwrap_err();
            assert_eq!(code(&err), "42501", "{location}: {err}");
        }
    }
    // A schema named like an absolute path keeps its tables inside the data folder.
    user.batch_execute("CREATE SCHEMA \"/tmp/escape\"; CREATE TABLE \"/tmp/escape\".t (a int); INSERT INTO \"/tmp/escape\".t VALUES (1)")
        .await
        .unwrap();
    assert!(!Path::new("/tmp/escape").exists());
    assert_eq!(count(&user, "\"/tmp/escape\".t").await, 1);

    // Retention below Delta's default is the owner's to set.
    let err = user
        .batch_execute(
            "ALTER TABLE victim SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 0 hours')",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&err), "42501", "{err}");
    let err = user
        .batch_execute(
            "CREATE TABLE r0 (a int) TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 hours')",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&err), "42501", "{err}");

    // The owner may attach outside; VACUUM there deletes only files the table's log referenced.
    owner
        .batch_execute(&format!(
            "CREATE TABLE ext (a int) LOCATION '{}' TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 0 hours')",
            outside.path().display()
        ))
        .await
        .unwrap();
    // One statement per query: a multi-statement query is one implicit transaction with one net commit,
    // which would leave no removed file for VACUUM to find.
    for statement in
        ["INSERT INTO ext VALUES (1)", "INSERT INTO ext VALUES (2)", "DELETE FROM ext WHERE a = 1", "OPTIMIZE ext"]
    {
        owner.batch_execute(statement).await.unwrap();
    }
    let parquet =
        |dir: &Path| files_under(dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")).count();
    let before = parquet(outside.path());
    // Removed files become old enough for a retention of 0 hours once the clock has moved on.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    owner.batch_execute("VACUUM ext RETAIN 0 HOURS").await.unwrap();
    assert!(outside.path().join("precious.txt").exists(), "VACUUM deleted a file its log never referenced");
    assert!(parquet(outside.path()) < before, "VACUUM deleted nothing of its own");
    assert_eq!(count(&owner, "ext").await, 1);
    assert_eq!(count(&owner, "victim").await, 2);
}

/// Finding 2: a read-only role wrote through COPY (DML) TO STDOUT, data-modifying CTEs and
/// EXPLAIN ANALYZE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_roles_write_by_no_path() {
    let warehouse = Warehouse::start().await;
    let owner = warehouse.connect("owner").await;
    owner.batch_execute("CREATE TABLE r (x int); INSERT INTO r VALUES (1)").await.unwrap();
    owner.batch_execute("CREATE STREAMING TABLE s (x int)").await.unwrap();
    owner.batch_execute("CREATE TABLE q (id serial PRIMARY KEY, x int)").await.unwrap();
    owner.batch_execute("CREATE SUBSCRIPTION osub FROM r; CREATE VIEW ov AS SELECT * FROM r").await.unwrap();
    owner.batch_execute("CREATE TYPE omood AS ENUM ('sad', 'ok'); CREATE TABLE e (m omood)").await.unwrap();
    std::fs::create_dir_all(warehouse.data().join("in")).unwrap();
    std::fs::write(warehouse.data().join("in/a.csv"), "x\n1\n").unwrap();
    let reader = warehouse.connect("reader").await;
    for sql in [
        "COPY (INSERT INTO r VALUES (2)) TO STDOUT",
        "COPY (UPDATE r SET x = 5) TO STDOUT",
        "COPY (DELETE FROM r) TO STDOUT",
        "COPY (INSERT INTO s VALUES (2)) TO STDOUT",
        "WITH w AS (INSERT INTO r VALUES (3)) SELECT 1",
        "EXPLAIN ANALYZE INSERT INTO r VALUES (4)",
        "SELECT * INTO r2 FROM r",
        "INSERT INTO r VALUES (5)",
        "MERGE INTO r USING (SELECT 1 AS x) src ON r.x = src.x WHEN MATCHED THEN DELETE",
        "TRUNCATE r",
        "VACUUM r",
        "OPTIMIZE r",
        "COPY r TO 'out.csv'",
        "SELECT nextval('q_id_seq')",
        "SELECT * FROM r FOR UPDATE",
        "SELECT setval('q_id_seq', 9)",
        "INSERT INTO q (x) VALUES (1) ON CONFLICT (id) DO UPDATE SET x = excluded.x RETURNING id",
        "UPDATE r SET x = 6 RETURNING x",
        "DELETE FROM r RETURNING x",
        "ALTER TABLE r ADD PRIMARY KEY (x)",
        "CREATE INDEX r_x ON r (x)",
        "DROP INDEX q_pkey",
        "ALTER TABLE r ALTER COLUMN x TYPE bigint",
        "INSERT INTO q (id, x) OVERRIDING SYSTEM VALUE VALUES (50, 1)",
        "CREATE VIEW rv AS SELECT * FROM r",
        "DROP VIEW IF EXISTS rv",
        "WITH c AS (SELECT 1 AS x) DELETE FROM r WHERE x IN (SELECT x FROM c)",
        "WITH c AS (SELECT 9 AS x) INSERT INTO r SELECT x FROM c",
        "WITH c AS (SELECT 1 AS x) UPDATE r SET x = 2 FROM c WHERE r.x = c.x",
        "CREATE MATERIALIZED VIEW rmv AS SELECT * FROM r",
        "CREATE SEQUENCE rs",
        "CREATE SUBSCRIPTION rsub FROM r",
        "ALTER SUBSCRIPTION osub ACKNOWLEDGE 1",
        "DROP SUBSCRIPTION osub",
        "COMMENT ON VIEW ov IS 'x'",
        "CREATE SOURCE rf FROM FILES (path 'in', format 'csv')",
        "SELECT * FROM read_files('in/*.csv', format => 'csv')",
        "SELECT * FROM read_files('in/a.csv', format => 'csv')",
        "CREATE STREAMING TABLE rpv (k text) PUSH INTO TABLE PER k",
        "CREATE TYPE rmood AS ENUM ('a')",
        "ALTER TYPE omood ADD VALUE 'happy'",
        "ALTER TYPE omood RENAME VALUE 'ok' TO 'fine'",
        "ALTER TYPE omood RENAME TO rmood",
        "DROP TYPE omood CASCADE",
        "INSERT INTO e VALUES ('ok')",
    ] {
        let err = reader.simple_query(sql).await.unwrap_err();
        let sqlstate = code(&err);
        assert!(sqlstate == "25006" || sqlstate == "42501", "{sql}: {err}");
    }
    let err = reader.simple_query("COPY r FROM STDIN").await.unwrap_err();
    assert_eq!(code(&err), "25006", "{err}");
    // Inside a transaction block too (its writes would be staged, then committed at COMMIT).
    reader.simple_query("BEGIN").await.unwrap();
    let err = reader.simple_query("INSERT INTO r VALUES (7)").await.unwrap_err();
    assert!(code(&err) == "25006" || code(&err) == "42501", "{err}");
    reader.simple_query("COMMIT").await.unwrap();
    // Reads still work, COPY TO STDOUT of a query included, and reading a durable subscription
    // (which only an acknowledgement moves).
    assert_eq!(count(&reader, "r").await, 1);
    reader.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION osub; CLOSE c; COMMIT").await.unwrap();
    let out = reader.copy_out("COPY (SELECT * FROM r) TO STDOUT").await.unwrap();
    futures::pin_mut!(out);
    let mut copied = Vec::new();
    while let Some(chunk) = futures::StreamExt::next(&mut out).await {
        copied.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(copied, b"1\n");
    assert_eq!(count(&owner, "r").await, 1);
    assert_eq!(count(&owner, "s").await, 0);
    // The refused nextval and setval took no value of the sequence.
    let first = owner.query_one("INSERT INTO q (x) VALUES (1) RETURNING id", &[]).await.unwrap();
    assert_eq!(first.get::<_, i64>(0), 1);
    // Grants on objects are refused, not ignored.
    for sql in ["GRANT SELECT ON r TO reader", "REVOKE INSERT ON r FROM reader"] {
        assert_eq!(code(&owner.simple_query(sql).await.unwrap_err()), "0A000", "{sql}");
    }
    // A writer's COPY of a statement that is not a query is refused, not run.
    let err = owner.simple_query("COPY (INSERT INTO r VALUES (9)) TO STDOUT").await.unwrap_err();
    assert_eq!(code(&err), "0A000", "{err}");
    assert_eq!(count(&owner, "r").await, 1);
}

/// Finding 3: CREATE SOURCE passed every librdkafka property through, `plugin.library.paths`
/// included (a client made the server load a library).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sources_take_only_allowed_properties() {
    let warehouse = Warehouse::start().await;
    let library = warehouse.data().join("evil.so");
    std::fs::write(&library, b"not a library").unwrap();
    for user in ["user", "owner"] {
        let client = warehouse.connect(user).await;
        for (property, value) in [
            ("plugin.library.paths", library.display().to_string()),
            ("ssl.engine.location", library.display().to_string()),
            ("sasl.kerberos.kinit.cmd", "touch /tmp/sluice-pwned".to_string()),
            ("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/".to_string()),
        ] {
            let sql = format!("CREATE SOURCE k FROM KAFKA (brokers '127.0.0.1:1', topics 't', '{property}' '{value}')");
            let err = client.batch_execute(&sql).await.unwrap_err();
            assert_eq!(code(&err), "42501", "{user}: {property}: {err}");
        }
    }
    // Files a client reads only from the owner, and only inside the allowed folders.
    let ca = warehouse.data().join("ca.pem");
    std::fs::write(&ca, b"-----BEGIN CERTIFICATE-----\n").unwrap();
    let user = warehouse.connect("user").await;
    let sql =
        format!("CREATE SOURCE k FROM KAFKA (brokers '127.0.0.1:1', topics 't', 'ssl.ca.location' '{}')", ca.display());
    assert_eq!(code(&user.batch_execute(&sql).await.unwrap_err()), "42501");
    let owner = warehouse.connect("owner").await;
    let sql =
        "CREATE SOURCE k FROM KAFKA (brokers '127.0.0.1:1', topics 't', 'ssl.ca.location' '/etc/ssl/certs/x.pem')";
    assert_eq!(code(&owner.batch_execute(sql).await.unwrap_err()), "42501");
    owner
        .batch_execute("CREATE SOURCE ok FROM KAFKA (brokers '127.0.0.1:1', topics 't', 'client.id' 'x')")
        .await
        .unwrap();
}

/// Findings 4 and 5: a statement that timed out could still commit, and a view then stayed
/// stale. Random timeouts (the seed is printed) against INSERTs made slow by a synchronous
/// recompute view: every INSERT either reports success or left nothing, and the view always
/// equals its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_statement_commits_nothing_and_a_committed_one_succeeds() {
    let seed: u64 = std::env::var("SLUICE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("seed {seed} (SLUICE_SEED={seed} replays it)");
    let mut state = seed | 1;
    let mut next = move |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    };
    let warehouse = Warehouse::start().await;
    let owner = warehouse.connect("owner").await;
    owner
        .batch_execute(
            "CREATE TABLE src (id bigint, g bigint);
             CREATE MATERIALIZED VIEW v AS SELECT g, count(*) AS n, percentile_cont(0.5) WITHIN GROUP (ORDER BY id) AS p FROM src GROUP BY g",
        )
        .await
        .unwrap();
    let mut expected: i64 = 0;
    let (mut successes, mut cancels) = (0, 0);
    for round in 0..40 {
        let rows = 1 + next(20_000) as i64;
        let timeout_ms = 1 + next(60);
        owner.batch_execute(&format!("SET statement_timeout = {timeout_ms}")).await.unwrap();
        let sql = format!("INSERT INTO src SELECT x, x % 7 FROM generate_series(1, {rows}) t(x)");
        match owner.simple_query(&sql).await {
            Ok(_) => {
                expected += rows;
                successes += 1;
            }
            Err(e) => {
                assert_eq!(code(&e), "57014", "seed {seed} round {round}: {e}");
                cancels += 1;
            }
        }
        owner.batch_execute("RESET statement_timeout").await.unwrap();
        assert_eq!(
            count(&owner, "src").await,
            expected,
            "seed {seed} round {round}: the table disagrees with what the client was told"
        );
    }
    println!("{successes} inserts succeeded, {cancels} were cancelled");
    let view = owner.query("SELECT g, n FROM v ORDER BY g", &[]).await.unwrap();
    let query = owner.query("SELECT g, count(*) FROM src GROUP BY g ORDER BY g", &[]).await.unwrap();
    let rows = |rows: &[tokio_postgres::Row]| {
        rows.iter().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))).collect::<Vec<_>>()
    };
    assert_eq!(rows(&view), rows(&query), "seed {seed}: the view is stale");
}

/// Finding 6: memory was unbounded (COPY held its whole input; one GROUP BY took 9.6 GB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_are_held_to_their_memory_limit() {
    let options = sluice::DatabaseOptions {
        memory_limit_bytes: Some(64 << 20),
        query_memory_limit_bytes: Some(16 << 20),
        ..Default::default()
    };
    let warehouse = Warehouse::start_with(options).await;
    let client = warehouse.connect("reader").await;
    // A result larger than the query's limit is refused, not collected.
    let err =
        client.simple_query("SELECT x, repeat('x', 100) FROM generate_series(1, 2000000) t(x)").await.unwrap_err();
    assert_eq!(code(&err), "53200", "{err}");
    // A grouping that does not fit either spills or is refused; the server goes on.
    match client
        .simple_query("SELECT x, count(*) FROM generate_series(1, 3000000) t(x) GROUP BY x HAVING count(*) > 1")
        .await
    {
        Ok(_) => {}
        Err(e) => assert_eq!(code(&e), "53200", "{e}"),
    }
    let one: i64 = client.query_one("SELECT 1::bigint", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}

/// Finding 6, COPY: rows are written to files as they arrive (bounded memory), committed once
/// at the end; a failed COPY leaves no files behind and no rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_streams_into_files_and_commits_once() {
    use futures::SinkExt;
    let warehouse = Warehouse::start().await;
    let client = warehouse.connect("user").await;
    client.batch_execute("CREATE TABLE big (id bigint, pad text)").await.unwrap();
    let sink = client.copy_in("COPY big FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    let pad = "p".repeat(200);
    let rows = 400_000;
    for chunk in 0..40 {
        let mut text = String::new();
        for i in 0..rows / 40 {
            text.push_str(&format!("{}\t{pad}\n", chunk * (rows / 40) + i));
        }
        sink.send(bytes::Bytes::from(text)).await.unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), rows as u64);
    assert_eq!(count(&client, "big").await, rows as i64);
    let history = client.query("SELECT version FROM table_history('big')", &[]).await.unwrap();
    assert_eq!(history.len(), 2, "one commit for the table, one for the COPY");

    let files_before = files_under(&warehouse.data()).len();
    let sink = client.copy_in("COPY big FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    let mut text = String::new();
    for i in 0..rows {
        text.push_str(&format!("{i}\t{pad}\n"));
    }
    sink.send(bytes::Bytes::from(text)).await.unwrap();
    sink.send(bytes::Bytes::from_static(b"not a number\tx\n")).await.unwrap();
    assert!(sink.finish().await.is_err());
    assert_eq!(count(&client, "big").await, rows as i64);
    assert_eq!(files_under(&warehouse.data()).len(), files_before, "a failed COPY left files");
}

/// Findings 7 and 9: COPY followed symbolic links out of the allowed folders and read the
/// server's own files (the TLS private key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_files_stay_in_the_allowed_folders() {
    let warehouse = Warehouse::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("s.csv"), "1\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), warehouse.data().join("link")).unwrap();
    std::fs::create_dir_all(warehouse.data().join("_sluice/tls")).unwrap();
    std::fs::write(warehouse.data().join("_sluice/tls/server.key"), "secret\n").unwrap();
    std::fs::write(warehouse.data().join("in.csv"), "7\n").unwrap();
    let owner = warehouse.connect("owner").await;
    owner.batch_execute("CREATE TABLE k (line text)").await.unwrap();
    for sql in [
        "COPY k FROM 'link/s.csv'",
        "COPY k TO 'link/out.txt'",
        "COPY k FROM '_sluice/tls/server.key'",
        "COPY k FROM '../x.csv'",
        "COPY k TO '_sluice/catalog/x'",
    ] {
        let err = owner.simple_query(sql).await.unwrap_err();
        assert_eq!(code(&err), "42501", "{sql}: {err}");
    }
    // Writing into a table's folder (its log) is refused too.
    let table_folder = files_under(&warehouse.data())
        .into_iter()
        .find(|p| p.to_string_lossy().contains("_delta_log"))
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap();
    let sql = format!("COPY k TO '{}/00000000000000000009.json'", table_folder.display());
    assert_eq!(code(&owner.simple_query(&sql).await.unwrap_err()), "42501");
    assert!(!outside.path().join("out.txt").exists());
    owner.simple_query("COPY k FROM 'in.csv'").await.unwrap();
    owner.simple_query("COPY k TO 'out.csv'").await.unwrap();
    assert_eq!(count(&owner, "k").await, 1);
}

/// File sources and `read_files` name server folders: the same rules as COPY's files, for every
/// role (a link out of the data folder, the server's own folder, a folder outside), and a link
/// inside a landing folder is not followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_sources_stay_in_the_allowed_folders() {
    let warehouse = Warehouse::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("s.csv"), "secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), warehouse.data().join("link")).unwrap();
    std::fs::create_dir_all(warehouse.data().join("_sluice/tls")).unwrap();
    std::fs::write(warehouse.data().join("_sluice/tls/server.csv"), "secret\n").unwrap();
    std::fs::create_dir_all(warehouse.data().join("in")).unwrap();
    std::fs::write(warehouse.data().join("in/a.csv"), "x\nfine\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("s.csv"), warehouse.data().join("in/b.csv")).unwrap();
    for user in ["user", "owner"] {
        let client = warehouse.connect(user).await;
        for sql in [
            "CREATE SOURCE s FROM FILES (path 'link', format 'csv')".to_string(),
            "CREATE SOURCE s FROM FILES (path '_sluice/tls', format 'csv')".to_string(),
            "CREATE SOURCE s FROM FILES (path '.', format 'csv')".to_string(),
            format!("CREATE SOURCE s FROM FILES (path '{}', format 'csv')", outside.path().display()),
            "SELECT * FROM read_files('link/*.csv', format => 'csv')".to_string(),
            "SELECT * FROM read_files('_sluice/tls/*.csv', format => 'csv')".to_string(),
            "SELECT * FROM read_files('../*.csv', format => 'csv')".to_string(),
        ] {
            let err = client.simple_query(&sql).await.unwrap_err();
            assert_eq!(code(&err), "42501", "{user}: {sql}: {err}");
        }
        let rows = client
            .simple_query("SELECT x FROM read_files('in/*.csv', format => 'csv', header => 'true')")
            .await
            .unwrap();
        let values: Vec<String> = rows
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect();
        assert_eq!(values, vec!["fine".to_string()], "{user}: the link in the folder is not followed");
    }
    let user = warehouse.connect("user").await;
    user.batch_execute("CREATE SOURCE s FROM FILES (path 'in', format 'csv', header 'true')").await.unwrap();
}
