//! Durable subscriptions over pgwire: a consumer reads with a cursor, acknowledges versions, and
//! after the server is killed and started again resumes after what it acknowledged.

use tokio_postgres::NoTls;

use crate::serve::{serve, text};

async fn connect(port: u16) -> tokio_postgres::Client {
    let dsn = format!("host=127.0.0.1 port={port} user=me dbname=sluice");
    let (client, connection) = tokio_postgres::connect(&dsn, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Fetches from the cursor until `count` rows came (a FETCH with nothing pending waits for the
/// next change).
async fn fetch_rows(client: &tokio_postgres::Client, cursor: &str, count: usize) -> Vec<String> {
    let mut rows = Vec::new();
    let fetch = format!("FETCH ALL FROM {cursor}");
    while rows.len() < count {
        let fetched = tokio::time::timeout(std::time::Duration::from_secs(30), client.simple_query(&fetch)).await;
        rows.extend(text(&fetched.expect("rows within 30 s").unwrap()));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscription_resumes_after_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let writer = connect(server.port).await;
    // One statement per query: a multi-statement query is one transaction (one version).
    for sql in [
        "CREATE TABLE orders (id int, amount int)",
        "INSERT INTO orders VALUES (1, 10), (2, 20)",
        "CREATE SUBSCRIPTION feed FROM orders",
        "INSERT INTO orders VALUES (3, 30)",
        "DELETE FROM orders WHERE id = 2",
    ] {
        writer.batch_execute(sql).await.unwrap();
    }
    let reader = connect(server.port).await;
    reader.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION feed").await.unwrap();
    // The rows as of CREATE SUBSCRIPTION (version 1), then the insert (2) and the delete (3).
    let mut first = fetch_rows(&reader, "c", 4).await;
    first[..2].sort();
    assert_eq!(first, ["1|1|1|10", "1|1|2|20", "2|1|3|30", "3|-1|2|20"]);
    // The consumer processed version 2 only, and the server dies.
    reader.batch_execute("COMMIT; ALTER SUBSCRIPTION feed ACKNOWLEDGE VERSION 2").await.unwrap();
    drop(server);

    let server = serve(dir.path(), &[]);
    let writer = connect(server.port).await;
    writer.batch_execute("INSERT INTO orders VALUES (4, 40)").await.unwrap();
    let reader = connect(server.port).await;
    reader.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION feed").await.unwrap();
    // From version 3 on: no gap, no repeat.
    assert_eq!(fetch_rows(&reader, "c", 2).await, ["3|-1|2|20", "4|1|4|40"]);
    // COPY reads the same place (a reader that does not acknowledge).
    let follower = connect(server.port).await;
    let mut stream = Box::pin(follower.copy_out("COPY (SUBSCRIBE TO SUBSCRIPTION feed) TO STDOUT").await.unwrap());
    let mut copied = String::new();
    while copied.lines().count() < 2 {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), futures::StreamExt::next(&mut stream))
            .await
            .expect("COPY rows within 30 s")
            .expect("the COPY goes on")
            .unwrap();
        copied.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(copied.lines().collect::<Vec<_>>(), ["3\t-1\t2\t20", "4\t1\t4\t40"]);
    drop(stream);
    drop(follower);
    reader.batch_execute("COMMIT; ALTER SUBSCRIPTION feed ACKNOWLEDGE 4").await.unwrap();
    let status = reader
        .simple_query("SELECT name, \"table\", acknowledged_version, pending_versions FROM sluice.subscriptions")
        .await
        .unwrap();
    assert_eq!(text(&status), ["feed|public.orders|4|0"]);

    // Bad input: clear errors, and the server keeps serving.
    for (sql, code) in [
        ("ALTER SUBSCRIPTION feed ACKNOWLEDGE 99", "22023"),
        ("ALTER SUBSCRIPTION nope ACKNOWLEDGE 1", "42704"),
        ("CREATE SUBSCRIPTION feed FROM orders", "42710"),
        ("CREATE SUBSCRIPTION other FROM missing", "42P01"),
        ("CREATE SUBSCRIPTION s CONNECTION 'host=elsewhere' PUBLICATION p", "0A000"),
        ("ALTER SUBSCRIPTION feed DISABLE", "0A000"),
        ("DROP TABLE orders", "2BP01"),
        ("DECLARE d CURSOR FOR SUBSCRIBE TO SUBSCRIPTION nope", "42704"),
    ] {
        let err = reader.simple_query(sql).await.unwrap_err();
        assert_eq!(err.code().map(|c| c.code()), Some(code), "{sql}: {err}");
    }
    reader.batch_execute("CREATE SUBSCRIPTION IF NOT EXISTS feed FROM orders; DROP SUBSCRIPTION feed").await.unwrap();
    reader.batch_execute("DROP SUBSCRIPTION IF EXISTS feed; DROP TABLE orders").await.unwrap();
}
