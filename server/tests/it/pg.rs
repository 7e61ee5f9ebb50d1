//! The pgwire server with tokio-postgres: typed parameters, binary results, NoData, errors and
//! recovery, cancel and timeouts, COPY, cursors, roles, limits, 100 concurrent clients, and a
//! fuzzer of raw protocol messages.

use std::net::SocketAddr;
use std::time::Duration;

use futures::SinkExt;
use sluice_server::pg::{serve, Server, ServerConfig, UserConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

struct TestServer {
    server: Server,
    dir: tempfile::TempDir,
}

impl TestServer {
    async fn start() -> Self {
        Self::start_with(vec![], 64).await
    }

    async fn start_with(users: Vec<UserConfig>, connections_max: usize) -> Self {
        Self::start_limited(users, connections_max, sluice_server::pg::socket::MESSAGE_BYTES_MAX_DEFAULT).await
    }

    async fn start_limited(users: Vec<UserConfig>, connections_max: usize, message_bytes_max: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = sluice::Database::open(dir.path().to_str().unwrap()).await.unwrap();
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            connections_max,
            users,
            tls: None,
            allowed_paths: vec![dir.path().to_path_buf()],
            message_bytes_max,
            ..Default::default()
        };
        let server = serve(db, config).await.unwrap();
        Self { server, dir }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr
    }

    fn url(&self, user: &str, password: Option<&str>) -> String {
        let mut url = format!("host=127.0.0.1 port={} user={user} dbname=sluice", self.addr().port());
        if let Some(p) = password {
            url.push_str(&format!(" password={p}"));
        }
        url
    }

    async fn connect_as(&self, user: &str, password: Option<&str>) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(&self.url(user, password), NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    async fn connect(&self) -> Client {
        self.connect_as("tester", None).await.unwrap()
    }
}

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_take_typed_parameters() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE p (id bigint, name text, score double precision, ok boolean, n int)")
        .await
        .unwrap();
    let insert = client.prepare("INSERT INTO p VALUES ($1, $2, $3, $4, $5)").await.unwrap();
    // The server infers and reports the parameter types from the table.
    let types: Vec<String> = insert.params().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(types, ["int8", "text", "float8", "bool", "int4"]);
    assert!(insert.columns().is_empty());
    for i in 0..5i64 {
        let name = format!("row {i}");
        let n = i as i32 * 10;
        let inserted = client.execute(&insert, &[&i, &name, &(i as f64 / 2.0), &(i % 2 == 0), &n]).await.unwrap();
        assert_eq!(inserted, 1);
    }
    let select = client.prepare("SELECT name, score FROM p WHERE id >= $1 AND ok = $2 ORDER BY id").await.unwrap();
    assert_eq!(select.params().iter().map(|t| t.name()).collect::<Vec<_>>(), ["int8", "bool"]);
    let rows = client.query(&select, &[&2i64, &true]).await.unwrap();
    let got: Vec<(String, f64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, [("row 2".to_string(), 1.0), ("row 4".to_string(), 2.0)]);
    // A statement prepared with an explicit type.
    let typed = client
        .prepare_typed("SELECT count(*) FROM p WHERE n > $1", &[tokio_postgres::types::Type::INT4])
        .await
        .unwrap();
    let count: i64 = client.query_one(&typed, &[&15i32]).await.unwrap().get(0);
    assert_eq!(count, 3);
    // NULL parameters.
    let no_text: Option<String> = None;
    client.execute(&insert, &[&9i64, &no_text, &none::<f64>(), &none::<bool>(), &none::<i32>()]).await.unwrap();
    let row = client.query_one("SELECT name IS NULL, score FROM p WHERE id = 9", &[]).await.unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, Option<f64>>(1), None);
}

fn none<T>() -> Option<T> {
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_in_binary_for_every_type() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE all_types (b boolean, s smallint, i int, l bigint, r real, d double precision,
               t text, v varchar(10), bin bytea, day date, ts timestamp, tz timestamptz, j json,
               ia int[], ta text[]);
             INSERT INTO all_types VALUES (true, 7, -42, 9000000000, 1.5, -2.25, 'héllo', 'v', '\\x0102ff',
               '2024-02-29', '2024-01-02 03:04:05', '2024-01-02 03:04:05+02', '{\"a\": 1}',
               [1, NULL, 3], ['x', 'y']);
             INSERT INTO all_types (b) VALUES (NULL);",
        )
        .await
        .unwrap();
    // tokio-postgres asks for every column in binary.
    let rows = client.query("SELECT * FROM all_types ORDER BY b NULLS LAST", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);
    let row = &rows[0];
    assert!(row.get::<_, bool>("b"));
    assert_eq!(row.get::<_, i16>("s"), 7);
    assert_eq!(row.get::<_, i32>("i"), -42);
    assert_eq!(row.get::<_, i64>("l"), 9_000_000_000);
    assert_eq!(row.get::<_, f32>("r"), 1.5);
    assert_eq!(row.get::<_, f64>("d"), -2.25);
    assert_eq!(row.get::<_, &str>("t"), "héllo");
    assert_eq!(row.get::<_, &str>("v"), "v");
    assert_eq!(row.get::<_, Vec<u8>>("bin"), vec![1u8, 2, 255]);
    assert_eq!(row.get::<_, chrono::NaiveDate>("day"), chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap());
    assert_eq!(row.get::<_, chrono::NaiveDateTime>("ts").to_string(), "2024-01-02 03:04:05");
    let tz: chrono::DateTime<chrono::Utc> = row.get("tz");
    assert_eq!(tz.to_rfc3339(), "2024-01-02T01:04:05+00:00");
    assert_eq!(row.get::<_, Vec<Option<i32>>>("ia"), vec![Some(1), None, Some(3)]);
    assert_eq!(row.get::<_, Vec<String>>("ta"), vec!["x".to_string(), "y".to_string()]);
    let types: Vec<&str> = row.columns().iter().map(|c| c.type_().name()).collect();
    assert_eq!(
        types,
        [
            "bool",
            "int2",
            "int4",
            "int8",
            "float4",
            "float8",
            "text",
            "varchar",
            "bytea",
            "date",
            "timestamp",
            "timestamptz",
            "json",
            "_int4",
            "_text"
        ]
    );
    // The NULL row decodes as NULLs of every type.
    let nulls = &rows[1];
    assert_eq!(nulls.get::<_, Option<i32>>("i"), None);
    assert_eq!(nulls.get::<_, Option<chrono::NaiveDateTime>>("ts"), None);
    assert_eq!(nulls.get::<_, Option<Vec<Option<i32>>>>("ia"), None);
    // Numeric travels as Postgres' binary numeric; its text form keeps the scale.
    let text = client.simple_query("SELECT CAST(12.30 AS numeric(10, 2)) AS n").await.unwrap();
    let value = text.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    });
    assert_eq!(value.as_deref(), Some("12.30"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_has_no_data_and_errors_carry_sqlstates() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    let create = client.prepare("CREATE TABLE e (id int, v text)").await.unwrap();
    assert!(create.columns().is_empty(), "DDL describes as NoData");
    client.execute(&create, &[]).await.unwrap();
    let cases = [
        ("SELEC 1", SqlState::SYNTAX_ERROR),
        ("SELECT * FROM missing", SqlState::UNDEFINED_TABLE),
        ("SELECT nope FROM e", SqlState::UNDEFINED_COLUMN),
        ("CREATE TABLE e (x int)", SqlState::DUPLICATE_TABLE),
        ("SELECT 1 / 0", SqlState::DIVISION_BY_ZERO),
    ];
    for (sql, expected) in cases {
        let simple = client.simple_query(sql).await.unwrap_err();
        assert_eq!(code(&simple), expected.code(), "{sql} (simple): {simple}");
        let extended = client.query(sql, &[]).await.unwrap_err();
        assert_eq!(code(&extended), expected.code(), "{sql} (extended): {extended}");
        // The connection recovers at once.
        let one: i64 = client.query_one("SELECT 1::bigint", &[]).await.unwrap().get(0);
        assert_eq!(one, 1);
    }
    // A multi-statement query is one implicit transaction, as in PostgreSQL: an error undoes
    // the statements before it, and the rest do not run.
    let err = client.batch_execute("INSERT INTO e VALUES (1, 'a'); SELECT 1/0; INSERT INTO e VALUES (2, 'b')").await;
    assert_eq!(code(&err.unwrap_err()), "22012");
    let n: i64 = client.query_one("SELECT count(*) FROM e", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    client.batch_execute("INSERT INTO e VALUES (1, 'a'); INSERT INTO e VALUES (2, 'b')").await.unwrap();
    let n: i64 = client.query_one("SELECT count(*) FROM e", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    // SAVEPOINT needs a block, which the implicit transaction is not.
    let err = client.batch_execute("INSERT INTO e VALUES (5, 'e'); SAVEPOINT s").await;
    assert_eq!(code(&err.unwrap_err()), "25P01");
    // BEGIN ... COMMIT in one query; a COMMIT ends the implicit transaction, the statements after
    // it run in their own.
    client.batch_execute("BEGIN; INSERT INTO e VALUES (3, 'c'); COMMIT").await.unwrap();
    let err =
        client.batch_execute("INSERT INTO e VALUES (4, 'd'); COMMIT; INSERT INTO e VALUES (6, 'f'); SELECT 1/0").await;
    assert_eq!(code(&err.unwrap_err()), "22012");
    let ids: Vec<i32> =
        client.query("SELECT id FROM e ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    // DDL is part of the implicit transaction: the error undoes the INSERT and the CREATE TABLE.
    client.batch_execute("INSERT INTO e VALUES (7, 'g'); CREATE TABLE e2 (a int); SELECT 1/0").await.unwrap_err();
    let n: i64 = client.query_one("SELECT count(*) FROM e WHERE id = 7", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    let err = client.query_one("SELECT count(*) FROM e2", &[]).await.unwrap_err();
    assert_eq!(code(&err), "42P01");
    // A session-local temporary table, made and used in one query.
    client.batch_execute("CREATE TEMP TABLE e (x int); INSERT INTO e VALUES (42)").await.unwrap();
    let x: i32 = client.query_one("SELECT x FROM e", &[]).await.unwrap().get(0);
    assert_eq!(x, 42);
    let n: i64 = client.query_one("SELECT count(*) FROM public.e", &[]).await.unwrap().get(0);
    assert_eq!(n, 4);
    let other = server.connect().await;
    let n: i64 = other.query_one("SELECT count(*) FROM e", &[]).await.unwrap().get(0);
    assert_eq!(n, 4, "another session sees the permanent table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_queries_can_be_cancelled_or_time_out() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    let long = "SELECT count(*) FROM generate_series(1, 4000000000) a";
    let token = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await.unwrap();
    });
    let started = std::time::Instant::now();
    let err = client.simple_query(long).await.unwrap_err();
    canceller.await.unwrap();
    assert_eq!(code(&err), "57014", "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The extended protocol too.
    let token = client.cancel_token();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await.unwrap();
    });
    let err = client.query(long, &[]).await.unwrap_err();
    assert_eq!(code(&err), "57014", "{err}");
    // statement_timeout.
    client.batch_execute("SET statement_timeout = 200").await.unwrap();
    let err = client.simple_query(long).await.unwrap_err();
    assert_eq!(code(&err), "57014", "{err}");
    client.batch_execute("RESET statement_timeout").await.unwrap();
    let one: i64 = client.query_one("SELECT 1::bigint", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE c (id int, name text, amount numeric(10,2))").await.unwrap();
    // Text format, with NULL and escapes.
    let sink = client.copy_in("COPY c FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\tann\t1.50\n2\t\\N\t2\n3\ttab\\there\t-0.25\n")).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 3);
    // CSV with a header, in several chunks split mid-row.
    let sink = client.copy_in("COPY c (id, name, amount) FROM STDIN WITH (FORMAT csv, HEADER true)").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"id,name,amount\n4,\"quoted, comma\",4.")).await.unwrap();
    sink.send(bytes::Bytes::from_static(b"5\n5,,\n")).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    // Bad data fails the whole COPY and commits nothing.
    let sink = client.copy_in("COPY c FROM STDIN WITH (FORMAT csv)").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"6,x,1\nseven,y,2\n")).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert!(err.code().is_some(), "{err}");
    let n: i64 = client.query_one("SELECT count(*) FROM c", &[]).await.unwrap().get(0);
    assert_eq!(n, 5);

    let out = client.copy_out("COPY (SELECT * FROM c ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)").await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(out).await.unwrap();
    let text: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    assert_eq!(text, "id,name,amount\n1,ann,1.50\n2,,2.00\n3,tab\there,-0.25\n4,\"quoted, comma\",4.50\n5,,\n");
    let out = client.copy_out("COPY c TO STDOUT").await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(out).await.unwrap();
    let text: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    assert!(text.contains("2\t\\N\t2.00\n"), "{text}");
    assert!(text.contains("3\ttab\\there\t-0.25\n"), "{text}");
    // Binary COPY out starts with Postgres' signature.
    let out = client.copy_out("COPY c TO STDOUT (FORMAT binary)").await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(out).await.unwrap();
    let all: Vec<u8> = chunks.concat();
    assert!(all.starts_with(b"PGCOPY\n\xff\r\n\0"));
    // Server-side files stay inside the data folder.
    let err = client.simple_query("COPY c FROM '/etc/passwd'").await.unwrap_err();
    assert_eq!(code(&err), "42501", "{err}");
    let file = server.dir.path().join("out.csv");
    client.simple_query(&format!("COPY c TO '{}' WITH (FORMAT csv)", file.display())).await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 5);
}

/// COPY text reads dates as PostgreSQL's input does: in the session's DateStyle order, and a
/// timestamptz without an offset in the session's zone (PostgreSQL 15 gives the same rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_reads_dates_in_the_session_date_style() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE cd (n int, d date, ts timestamp, tz timestamptz)").await.unwrap();
    client.batch_execute("SET DateStyle = 'SQL, DMY'; SET TimeZone = 'America/New_York'").await.unwrap();
    let sink = client.copy_in("COPY cd FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\t02/01/2024\t03/01/2024 10:00\t04/01/2024 10:00\n2\t\\N\t\\N\t\\N\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    client.batch_execute("SET DateStyle = 'ISO, MDY'").await.unwrap();
    let rows = client.simple_query("SELECT d, ts, tz FROM cd WHERE n = 1").await.unwrap();
    let row = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
        _ => None,
    });
    let row = row.unwrap();
    assert_eq!(row.get(0), Some("2024-01-02"));
    assert_eq!(row.get(1), Some("2024-01-03 10:00:00"));
    assert_eq!(row.get(2), Some("2024-01-04 10:00:00-05"));
    // Text that is no date is PostgreSQL's 22007.
    let sink = client.copy_in("COPY cd FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"3\tbanana\t\\N\t\\N\n")).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(code(&err), "22007", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_binary_for_every_type() {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    use tokio_postgres::types::Type;
    let server = TestServer::start().await;
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE TABLE b (flag boolean, small smallint, id int, big bigint, r real, d double precision, \
             name text, raw bytea, day date, at timestamp, atz timestamptz, amount numeric(12,3), u uuid)",
        )
        .await
        .unwrap();
    let sink = client.copy_in("COPY b FROM STDIN (FORMAT binary)").await.unwrap();
    let types = [
        Type::BOOL,
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::TEXT,
        Type::BYTEA,
        Type::DATE,
        Type::TIMESTAMP,
        Type::TIMESTAMPTZ,
        Type::NUMERIC,
        Type::UUID,
    ];
    let writer = BinaryCopyInWriter::new(sink, &types);
    futures::pin_mut!(writer);
    let day = chrono::NaiveDate::from_ymd_opt(1999, 12, 31).unwrap();
    let at = day.and_hms_micro_opt(23, 59, 58, 123_456).unwrap();
    let atz = chrono::DateTime::<chrono::Utc>::from_naive_utc_and_offset(at, chrono::Utc);
    let amount = rust_decimal::Decimal::new(-1_234_567, 3);
    let uuid = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    writer
        .as_mut()
        .write(&[
            &true,
            &7i16,
            &-8i32,
            &(1i64 << 40),
            &1.5f32,
            &-2.25f64,
            &"héllo",
            &vec![0u8, 255],
            &day,
            &at,
            &atz,
            &amount,
            &uuid,
        ])
        .await
        .unwrap();
    writer
        .as_mut()
        .write(&[
            &None::<bool>,
            &None::<i16>,
            &None::<i32>,
            &None::<i64>,
            &None::<f32>,
            &None::<f64>,
            &None::<&str>,
            &None::<Vec<u8>>,
            &None::<chrono::NaiveDate>,
            &None::<chrono::NaiveDateTime>,
            &None::<chrono::DateTime<chrono::Utc>>,
            &None::<rust_decimal::Decimal>,
            &None::<uuid::Uuid>,
        ])
        .await
        .unwrap();
    assert_eq!(writer.finish().await.unwrap(), 2);
    let row = client.query_one("SELECT * FROM b WHERE flag", &[]).await.unwrap();
    assert_eq!(row.get::<_, i16>(1), 7);
    assert_eq!(row.get::<_, i64>(3), 1 << 40);
    assert_eq!(row.get::<_, f32>(4), 1.5);
    assert_eq!(row.get::<_, &str>(6), "héllo");
    assert_eq!(row.get::<_, Vec<u8>>(7), vec![0u8, 255]);
    assert_eq!(row.get::<_, chrono::NaiveDate>(8), day);
    assert_eq!(row.get::<_, chrono::NaiveDateTime>(9), at);
    assert_eq!(row.get::<_, chrono::DateTime<chrono::Utc>>(10), atz);
    assert_eq!(row.get::<_, rust_decimal::Decimal>(11), amount);
    let text: String = client.query_one("SELECT u::text FROM b WHERE flag", &[]).await.unwrap().get(0);
    assert_eq!(text, uuid.to_string());
    let nulls: i64 =
        client.query_one("SELECT count(*) FROM b WHERE flag IS NULL AND amount IS NULL", &[]).await.unwrap().get(0);
    assert_eq!(nulls, 1);
    // What Sluice writes in binary, it reads back in binary.
    client.batch_execute("CREATE TABLE b2 AS SELECT * FROM b WHERE false").await.unwrap();
    let out = client.copy_out("COPY b TO STDOUT (FORMAT binary)").await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(out).await.unwrap();
    let sink = client.copy_in("COPY b2 FROM STDIN (FORMAT binary)").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(chunks.concat())).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    let same: i64 =
        client.query_one("SELECT count(*) FROM (SELECT * FROM b EXCEPT SELECT * FROM b2)", &[]).await.unwrap().get(0);
    assert_eq!(same, 0);
    // A truncated stream fails the COPY and commits nothing.
    let sink = client.copy_in("COPY b2 FROM STDIN (FORMAT binary)").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0\0\0\x0d")).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(code(&err), "22P04", "{err}");
    let n: i64 = client.query_one("SELECT count(*) FROM b2", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_the_size_limit_end_only_their_connection() {
    let server = TestServer::start_limited(vec![], 8, 64 * 1024).await;
    let client = server.connect().await;
    let other = server.connect().await;
    let small = format!("SELECT '{}' AS s", "x".repeat(1000));
    client.simple_query(&small).await.unwrap();
    let big = format!("SELECT '{}' AS s", "x".repeat(100 * 1024));
    let err = client.simple_query(&big).await.unwrap_err();
    assert_eq!(code(&err), "54000", "{err}");
    assert!(client.simple_query("SELECT 1").await.is_err(), "the connection is closed");
    let n: i32 = other.query_one("SELECT 2", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    let again = server.connect().await;
    again.simple_query(&small).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_settings_and_version() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE k AS SELECT * FROM generate_series(1, 10) AS g(x)").await.unwrap();
    let rows = |messages: Vec<SimpleQueryMessage>| -> Vec<String> {
        messages
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect()
    };
    client.simple_query("BEGIN").await.unwrap();
    client.simple_query("DECLARE cur CURSOR FOR SELECT x FROM k ORDER BY x").await.unwrap();
    assert_eq!(rows(client.simple_query("FETCH 3 FROM cur").await.unwrap()), ["1", "2", "3"]);
    assert_eq!(rows(client.simple_query("FETCH NEXT FROM cur").await.unwrap()), ["4"]);
    assert_eq!(rows(client.simple_query("FETCH ALL FROM cur").await.unwrap()).len(), 6);
    client.simple_query("CLOSE cur").await.unwrap();
    let err = client.simple_query("FETCH 1 FROM cur").await.unwrap_err();
    assert_eq!(code(&err), "34000");
    client.simple_query("COMMIT").await.unwrap();

    assert_eq!(rows(client.simple_query("SHOW server_version").await.unwrap())[0].split(' ').next(), Some("16.6"));
    let version: String = client.query_one("SELECT version()", &[]).await.unwrap().get(0);
    assert!(version.starts_with("PostgreSQL 16.6 (Sluice "), "{version}");
    client.simple_query("SET application_name = 'tests'").await.unwrap();
    assert_eq!(rows(client.simple_query("SHOW application_name").await.unwrap()), ["tests"]);
    client.simple_query("SET search_path TO public").await.unwrap();
    let setting: String = client.query_one("SELECT current_setting('application_name')", &[]).await.unwrap().get(0);
    assert_eq!(setting, "tests");
    client.simple_query("RESET ALL").await.unwrap();
    assert_eq!(rows(client.simple_query("SHOW application_name").await.unwrap()), [""]);
    let err = client.simple_query("SHOW no_such_setting").await.unwrap_err();
    assert_eq!(code(&err), "42704");
}

/// Cursors need a transaction block as in PostgreSQL: over the extended protocol the statements
/// up to Sync are no block (25P01), a multi-statement query's implicit block is one; COMMIT
/// closes them (34000); subscription cursors follow the same rule, and their WITH HOLD is 0A000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_live_in_transaction_blocks() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    client.batch_execute("CREATE TABLE cb (x int); INSERT INTO cb VALUES (1), (2)").await.unwrap();
    let err = client.execute("DECLARE c CURSOR FOR SELECT x FROM cb", &[]).await.unwrap_err();
    assert_eq!(code(&err), "25P01", "{err}");
    let err = client.simple_query("DECLARE c CURSOR FOR SUBSCRIBE TO cb").await.unwrap_err();
    assert_eq!(code(&err), "25P01", "{err}");
    let err = client.simple_query("BEGIN; DECLARE s CURSOR WITH HOLD FOR SUBSCRIBE TO cb").await.unwrap_err();
    assert_eq!(code(&err), "0A000", "{err}");
    client.simple_query("ROLLBACK").await.unwrap();
    // A multi-statement query is a block: the cursor is there for its FETCH, gone after.
    client.batch_execute("DECLARE m CURSOR FOR SELECT x FROM cb; FETCH ALL FROM m").await.unwrap();
    let err = client.simple_query("FETCH ALL FROM m").await.unwrap_err();
    assert_eq!(code(&err), "34000", "{err}");
    let transaction = client.transaction().await.unwrap();
    transaction.execute("DECLARE t CURSOR FOR SELECT x FROM cb ORDER BY x", &[]).await.unwrap();
    let rows = transaction.simple_query("FETCH 1 FROM t").await.unwrap();
    assert_eq!(rows.iter().filter(|m| matches!(m, SimpleQueryMessage::Row(_))).count(), 1);
    transaction.commit().await.unwrap();
    let err = client.simple_query("FETCH 1 FROM t").await.unwrap_err();
    assert_eq!(code(&err), "34000", "{err}");
    // WITH HOLD outlives the commit.
    client.execute("DECLARE h CURSOR WITH HOLD FOR SELECT x FROM cb ORDER BY x", &[]).await.unwrap();
    let rows = client.simple_query("FETCH ALL FROM h").await.unwrap();
    assert_eq!(rows.iter().filter(|m| matches!(m, SimpleQueryMessage::Row(_))).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_return_rows_in_pieces() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let transaction = client.transaction().await.unwrap();
    let statement = transaction.prepare("SELECT x FROM generate_series(1, 10) AS g(x) ORDER BY x").await.unwrap();
    let portal = transaction.bind(&statement, &[]).await.unwrap();
    let first = transaction.query_portal(&portal, 4).await.unwrap();
    assert_eq!(first.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>(), [1, 2, 3, 4]);
    let rest = transaction.query_portal(&portal, 100).await.unwrap();
    assert_eq!(rest.len(), 6);
    transaction.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_passwords_and_read_only_roles() {
    let users = vec![
        UserConfig { name: "admin".into(), password: "s3cret".into(), read_only: false, ..Default::default() },
        UserConfig { name: "viewer".into(), password: "look".into(), read_only: true, ..Default::default() },
    ];
    let server = TestServer::start_with(users, 16).await;
    let err = server.connect_as("admin", Some("wrong")).await.unwrap_err();
    assert_eq!(code(&err), "28P01", "{err}");
    assert!(server.connect_as("nobody", Some("x")).await.is_err());
    let admin = server.connect_as("admin", Some("s3cret")).await.unwrap();
    admin.batch_execute("CREATE TABLE r (x int); INSERT INTO r VALUES (1)").await.unwrap();
    admin.batch_execute("CREATE ROLE analyst PASSWORD 'pw' IN ROLE pg_read_all_data").await.unwrap();
    admin.batch_execute("CREATE ROLE writer PASSWORD 'pw2'").await.unwrap();

    for (user, password) in [("viewer", "look"), ("analyst", "pw")] {
        let reader = server.connect_as(user, Some(password)).await.unwrap();
        let n: i64 = reader.query_one("SELECT count(*) FROM r", &[]).await.unwrap().get(0);
        assert_eq!(n, 1);
        for sql in ["INSERT INTO r VALUES (2)", "CREATE TABLE r2 (x int)", "DROP TABLE r", "DELETE FROM r"] {
            let err = reader.simple_query(sql).await.unwrap_err();
            assert_eq!(code(&err), "25006", "{user}: {sql}: {err}");
        }
    }
    let writer = server.connect_as("writer", Some("pw2")).await.unwrap();
    writer.batch_execute("INSERT INTO r VALUES (3)").await.unwrap();
    assert!(server.connect_as("writer", Some("bad")).await.is_err());

    // pg_stat_activity: a role that does not own the warehouse sees of another role's connection
    // only who it is, as PostgreSQL shows a non-superuser; the owner sees every statement.
    admin.batch_execute("SELECT 'the admin''s statement'").await.unwrap();
    let rows = writer
        .query("SELECT query, state, client_addr, backend_start FROM pg_stat_activity WHERE usename = 'admin'", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "<insufficient privilege>");
    assert_eq!(rows[0].get::<_, Option<String>>(1), None);
    assert_eq!(rows[0].get::<_, Option<String>>(2), None);
    let own: String =
        writer.query_one("SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid()", &[]).await.unwrap().get(0);
    assert!(own.contains("pg_backend_pid"), "{own}");
    let seen: String =
        admin.query_one("SELECT query FROM pg_stat_activity WHERE usename = 'writer'", &[]).await.unwrap().get(0);
    assert!(seen.contains("pg_stat_activity"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_clients_run_a_hundred_queries_each() {
    let server = TestServer::start_with(vec![], 128).await;
    let setup = server.connect().await;
    setup.batch_execute("CREATE TABLE h (id int, v text); INSERT INTO h VALUES (1, 'one'), (2, 'two')").await.unwrap();
    let mut tasks = Vec::new();
    for client_no in 0..100 {
        let url = server.url(&format!("c{client_no}"), None);
        tasks.push(tokio::spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            let statement = client.prepare("SELECT v FROM h WHERE id = $1").await.unwrap();
            for i in 0..100 {
                let id = 1 + (i + client_no) % 2;
                let v: String = client.query_one(&statement, &[&id]).await.unwrap().get(0);
                assert_eq!(v, if id == 1 { "one" } else { "two" });
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_are_refused() {
    let server = TestServer::start_with(vec![], 2).await;
    let a = server.connect().await;
    let b = server.connect().await;
    let err = server.connect_as("third", None).await.unwrap_err();
    assert_eq!(code(&err), "53300", "{err}");
    drop(a);
    // The slot frees once the server has seen the first client go.
    let started = std::time::Instant::now();
    let c = loop {
        match server.connect_as("tester", None).await {
            Ok(c) => break c,
            Err(e) if started.elapsed() < Duration::from_secs(10) => {
                assert_eq!(code(&e), "53300", "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no slot after the first client left: {e}"),
        }
    };
    c.simple_query("SELECT 1").await.unwrap();
    b.simple_query("SELECT 1").await.unwrap();
}

/// A small deterministic generator (no dependency needed for test noise).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn startup(user: &str) -> Vec<u8> {
    let mut body = 196608i32.to_be_bytes().to_vec();
    for part in ["user", user, "database", "sluice", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut out = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

/// Well-formed frontend messages to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut parse = b"s1\0SELECT $1::int + 1\0".to_vec();
    parse.extend_from_slice(&1i16.to_be_bytes());
    parse.extend_from_slice(&23i32.to_be_bytes());
    let mut bind = b"\0s1\0".to_vec();
    bind.extend_from_slice(&[0, 1, 0, 1, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7, 0, 1, 0, 1]);
    vec![
        message(b'Q', b"SELECT 1\0"),
        message(b'Q', b"SELECT * FROM f WHERE x = 'a'\0"),
        message(b'P', &parse),
        message(b'B', &bind),
        message(b'D', b"S\x73\x31\0"),
        message(b'E', b"\0\0\0\0\0"),
        message(b'S', b""),
        message(b'H', b""),
        message(b'C', b"Ss1\0"),
        message(b'd', b"1\tx\n"),
        message(b'c', b""),
        message(b'f', b"nope\0"),
        message(b'X', b""),
        message(b'p', b"password\0"),
    ]
}

fn mutate(noise: &mut Noise, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seeds[noise.below(seeds.len())].clone();
    match noise.below(6) {
        0 => {
            // Random bytes.
            let len = noise.below(64);
            bytes = (0..len).map(|_| noise.next() as u8).collect();
        }
        1 => {
            // Flip some bytes.
            for _ in 0..1 + noise.below(4) {
                let i = noise.below(bytes.len());
                bytes[i] = noise.next() as u8;
            }
        }
        2 => {
            // A lying length.
            let len = (noise.next() as i32).to_be_bytes();
            if bytes.len() >= 5 {
                bytes[1..5].copy_from_slice(&len);
            }
        }
        3 => {
            // Truncated.
            let keep = noise.below(bytes.len().max(1));
            bytes.truncate(keep);
        }
        4 => {
            // Two messages glued, the second cut.
            let other = seeds[noise.below(seeds.len())].clone();
            let keep = noise.below(other.len());
            bytes.extend_from_slice(&other[..keep]);
        }
        _ => {}
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_costs_only_its_own_connection() {
    let server = TestServer::start_with(vec![], 256).await;
    let watcher = server.connect().await;
    watcher.batch_execute("CREATE TABLE f (x text); INSERT INTO f VALUES ('a')").await.unwrap();
    let seeds = seeds();
    let mut noise = Noise(0x5eed_1234_abcd_ef01);
    let mut sent = 0usize;
    let mut connections = 0usize;
    while sent < 10_000 {
        let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        connections += 1;
        // Most connections start properly, some send garbage from the first byte.
        if noise.below(5) != 0 {
            let _ = socket.write_all(&startup("fuzz")).await;
        }
        for _ in 0..1 + noise.below(40) {
            let bytes = mutate(&mut noise, &seeds);
            if socket.write_all(&bytes).await.is_err() {
                break;
            }
            sent += 1;
        }
        // Read whatever comes back, briefly, then drop the connection (sometimes mid-query).
        let mut buffer = vec![0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(2), socket.read(&mut buffer)).await;
        if connections.is_multiple_of(100) {
            let n: i64 = watcher.query_one("SELECT count(*) FROM f", &[]).await.unwrap().get(0);
            assert_eq!(n, 1);
        }
    }
    // The server still serves its other client and new ones.
    let n: i64 = watcher.query_one("SELECT count(*) FROM f", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
    let fresh = server.connect().await;
    fresh.simple_query("SELECT 1").await.unwrap();
    assert!(sent >= 10_000 && connections > 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_pipeline_reads_its_own_writes_over_pgwire() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client
        .batch_execute(
            "CREATE STREAMING TABLE bronze (topic text NOT NULL, key text, payload text,
               CONSTRAINT known EXPECT (topic IN ('orders', 'payments', 'clicks')) ON VIOLATION FAIL UPDATE)
             PUSH INTO silver_orders AS SELECT key, CAST(payload->>'amount' AS DOUBLE) AS amount
               FROM bronze WHERE topic = 'orders'
             PUSH INTO silver_payments AS SELECT key, CAST(payload->>'paid' AS DOUBLE) AS paid
               FROM bronze WHERE topic = 'payments'
             PUSH INTO silver_clicks AS SELECT key, payload->>'page' AS page FROM bronze WHERE topic = 'clicks';
             CREATE STREAMING TABLE gold AS
               SELECT key, amount FROM STREAM(silver_orders)
               UNION ALL SELECT key, paid AS amount FROM STREAM(silver_payments);",
        )
        .await
        .unwrap();
    let insert = client.prepare("INSERT INTO bronze VALUES ($1, $2, $3)").await.unwrap();
    for i in 0..30i64 {
        let (topic, payload) = match i % 3 {
            0 => ("orders", format!("{{\"amount\": {i}}}")),
            1 => ("payments", format!("{{\"paid\": {i}}}")),
            _ => ("clicks", "{\"page\": \"/\"}".to_string()),
        };
        let key = format!("k{i}");
        assert_eq!(client.execute(&insert, &[&topic, &key, &payload]).await.unwrap(), 1);
        // Visible downstream as soon as the INSERT returns.
        let table = ["silver_orders", "silver_payments", "silver_clicks"][(i % 3) as usize];
        let seen: i64 =
            client.query_one(&format!("SELECT count(*) FROM {table} WHERE key = $1"), &[&key]).await.unwrap().get(0);
        assert_eq!(seen, 1, "{key} in {table}");
        if i % 3 != 2 {
            let gold: i64 = client.query_one("SELECT count(*) FROM gold WHERE key = $1", &[&key]).await.unwrap().get(0);
            assert_eq!(gold, 1, "{key} in gold");
        }
    }
    let total: f64 = client.query_one("SELECT sum(amount) FROM gold", &[]).await.unwrap().get(0);
    assert_eq!(total, (0..30).filter(|i| i % 3 != 2).sum::<i64>() as f64);
    let flows: i64 =
        client.query_one("SELECT count(*) FROM sluice.flows WHERE state = 'idle'", &[]).await.unwrap().get(0);
    assert_eq!(flows, 5);
    // FAIL UPDATE: the writer gets 23514 and nothing is written.
    let err = client.execute(&insert, &[&"metrics", &"m", &"{}"]).await.unwrap_err();
    assert_eq!(code(&err), "23514", "{err}");
    let err = client.simple_query("DROP TABLE silver_orders").await.unwrap_err();
    assert_eq!(code(&err), "2BP01", "{err}");
    let bronze: i64 = client.query_one("SELECT count(*) FROM bronze", &[]).await.unwrap().get(0);
    assert_eq!(bronze, 30);
}

/// `idle_in_transaction_session_timeout`: a client idle inside a block is disconnected with
/// 25P03, its staged writes dropped; outside a block it may idle.
#[tokio::test]
async fn idle_in_transaction_sessions_are_closed_and_their_writes_dropped() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client
        .batch_execute("CREATE TABLE idle_t (a int); SET idle_in_transaction_session_timeout = '300ms'")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.batch_execute("BEGIN; INSERT INTO idle_t VALUES (1)").await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let err = client.simple_query("COMMIT").await.unwrap_err();
    assert!(
        client.is_closed() || err.is_closed() || err.code() == Some(&SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT),
        "{err:?}"
    );
    let other = server.connect().await;
    let count = other.query_one("SELECT count(*) FROM idle_t", &[]).await.unwrap();
    assert_eq!(count.get::<_, i64>(0), 0);
    let bad = other.batch_execute("SET idle_in_transaction_session_timeout = 'soon'").await.unwrap_err();
    assert_eq!(code(&bad), "22023");
}

/// Views are listed in `pg_views` with their definitions (dbt lists relations there).
#[tokio::test]
async fn views_are_listed_in_pg_views() {
    let server = TestServer::start().await;
    let client = server.connect().await;
    client.batch_execute("CREATE TABLE vt (a int); CREATE VIEW vv AS SELECT a FROM vt WHERE a > 1").await.unwrap();
    let rows = client
        .query("SELECT schemaname, viewname, definition FROM pg_catalog.pg_views WHERE schemaname = 'public'", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(1), "vv");
    assert!(rows[0].get::<_, String>(2).contains("WHERE a > 1"), "{}", rows[0].get::<_, String>(2));
    let rows = client.query("SELECT viewname FROM pg_views WHERE viewname = 'vv'", &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
}

/// `pg_stat_activity` shows every connection with its own pid (`pg_backend_pid()`), user,
/// application, state and last statement; a connection that closed is gone from it.
#[tokio::test(flavor = "multi_thread")]
async fn pg_stat_activity_lists_the_connections() {
    let server = TestServer::start().await;
    let watcher = server.connect().await;
    let other = server.connect().await;
    other.batch_execute("SET application_name = 'loader'").await.unwrap();
    other.batch_execute("BEGIN").await.unwrap();
    other.batch_execute("SELECT 41 + 1").await.unwrap();
    let other_pid: i32 = other.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let own_pid: i32 = watcher.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    assert_ne!(own_pid, other_pid);
    let rows = watcher
        .query(
            "SELECT pid, application_name, state, query, xact_start IS NOT NULL FROM pg_stat_activity \
             WHERE pid != pg_backend_pid() AND state = 'idle in transaction'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), other_pid);
    assert_eq!(rows[0].get::<_, String>(1), "loader");
    assert_eq!(rows[0].get::<_, String>(3), "SELECT pg_backend_pid()");
    assert!(rows[0].get::<_, bool>(4));
    // A failed statement leaves the block aborted, as pg_stat_activity says.
    assert!(other.batch_execute("SELECT 1 / 0").await.is_err());
    let state: String =
        watcher.query_one("SELECT state FROM pg_stat_activity WHERE pid = $1", &[&other_pid]).await.unwrap().get(0);
    assert_eq!(state, "idle in transaction (aborted)");
    let own: String =
        watcher.query_one("SELECT state FROM pg_stat_activity WHERE pid = pg_backend_pid()", &[]).await.unwrap().get(0);
    assert_eq!(own, "active");
    drop(other);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let count: i64 = watcher
            .query_one("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = $1", &[&other_pid])
            .await
            .unwrap()
            .get(0);
        if count == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a closed connection stays in pg_stat_activity");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `DECLARE c CURSOR FOR SUBSCRIBE TO t`: FETCH returns the snapshot's rows, then waits for the
/// next change another client commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_from_a_subscription_cursor_waits_for_changes() {
    let server = TestServer::start().await;
    let reader = server.connect().await;
    let writer = server.connect().await;
    writer.batch_execute("CREATE TABLE f (id int, name text); INSERT INTO f VALUES (1, 'a'), (2, 'b')").await.unwrap();
    reader.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE TO f").await.unwrap();
    let text = |rows: &[tokio_postgres::SimpleQueryMessage]| -> Vec<String> {
        rows.iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    Some((1..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>().join("|"))
                }
                _ => None,
            })
            .collect()
    };
    let first = text(&reader.simple_query("FETCH 1 FROM c").await.unwrap());
    assert_eq!(first.len(), 1);
    let rest = text(&reader.simple_query("FETCH ALL FROM c").await.unwrap());
    let mut snapshot: Vec<String> = first.into_iter().chain(rest).collect();
    snapshot.sort();
    assert_eq!(snapshot, ["1|1|a", "1|2|b"]);
    // Nothing pending: FETCH waits for the writer's commit.
    let delayed = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        writer.batch_execute("DELETE FROM f WHERE id = 1").await.unwrap();
        writer
    });
    let change = text(&reader.simple_query("FETCH ALL FROM c").await.unwrap());
    assert_eq!(change, ["-1|1|a"]);
    let _writer = delayed.await.unwrap();
    let err = reader.simple_query("DECLARE c CURSOR FOR SUBSCRIBE TO f").await.unwrap_err();
    assert_eq!(code(&err), "42P03", "{err}");
    reader
        .batch_execute("ROLLBACK; BEGIN; DECLARE d CURSOR FOR SUBSCRIBE f WITH (SNAPSHOT = false); CLOSE d; COMMIT")
        .await
        .unwrap();
}

/// Reads backend messages until one of type `until` (inclusive); returns their types.
async fn read_until(socket: &mut tokio::net::TcpStream, until: u8) -> Vec<u8> {
    let mut kinds = Vec::new();
    loop {
        let mut header = [0u8; 5];
        tokio::time::timeout(Duration::from_secs(30), socket.read_exact(&mut header))
            .await
            .expect("the server answers")
            .unwrap();
        let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0u8; length - 4];
        socket.read_exact(&mut body).await.unwrap();
        kinds.push(header[0]);
        if header[0] == until {
            return kinds;
        }
    }
}

/// The replies to Parse, Bind and Execute wait for the client's Sync or Flush, as PostgreSQL's
/// do (the server writes them in one go); a Flush gets them without ending the transaction,
/// and a COPY's start is sent at once (the client waits for it before it sends the rows).
#[tokio::test]
async fn extended_protocol_replies_come_with_flush_and_sync() {
    let server = TestServer::start().await;
    let setup = server.connect().await;
    setup.batch_execute("CREATE TABLE held (a int)").await.unwrap();
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    socket.write_all(&startup("held")).await.unwrap();
    read_until(&mut socket, b'Z').await;

    let mut parse = b"\0SELECT $1::int + 1\0".to_vec();
    parse.extend_from_slice(&1i16.to_be_bytes());
    parse.extend_from_slice(&23i32.to_be_bytes());
    let mut bind = b"\0\0".to_vec();
    bind.extend_from_slice(&[0, 1, 0, 0, 0, 1, 0, 0, 0, 1, b'7', 0, 0]);
    let mut pipeline = message(b'P', &parse);
    pipeline.extend(message(b'B', &bind));
    pipeline.extend(message(b'E', b"\0\0\0\0\0"));
    pipeline.extend(message(b'H', b""));
    socket.write_all(&pipeline).await.unwrap();
    assert_eq!(read_until(&mut socket, b'C').await, b"12DC");
    socket.write_all(&message(b'S', b"")).await.unwrap();
    assert_eq!(read_until(&mut socket, b'Z').await, b"Z");

    // COPY FROM STDIN through the extended protocol, as tokio-postgres and pgjdbc send it.
    let mut copy = message(b'P', b"\0COPY held FROM STDIN\0\0\0");
    copy.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
    copy.extend(message(b'E', b"\0\0\0\0\0"));
    socket.write_all(&copy).await.unwrap();
    assert_eq!(read_until(&mut socket, b'G').await, b"12G");
    let mut rows = message(b'd', b"1\n2\n");
    rows.extend(message(b'c', b""));
    rows.extend(message(b'S', b""));
    socket.write_all(&rows).await.unwrap();
    assert_eq!(read_until(&mut socket, b'Z').await, b"CZ");
    let n: i64 = setup.query_one("SELECT count(*) FROM held", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
}
