//! Alerts: a failing flow POSTs to a local receiver within seconds, and its clearing after the
//! flow is fixed and resumed; a SQL condition fires; a receiver that is down is retried and the
//! failure shows in `sluice.alerts`; malformed alerts are refused.

use std::time::Duration;

use sluice::Database;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::common::{rows, wait_for};

/// A webhook receiver on loopback: each POST's JSON body arrives on the channel.
async fn receiver() -> (String, mpsc::Receiver<serde_json::Value>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (sender, received) = mpsc::channel(100);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buffer).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            let _ = sender.send(serde_json::from_str(body).unwrap()).await;
                            let _ = socket
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                                .await;
                            break;
                        }
                    }
                }
            });
        }
    });
    (url, received)
}

async fn next(received: &mut mpsc::Receiver<serde_json::Value>) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(20), received.recv()).await.expect("no webhook call in 20 s").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_flow_alerts_and_clears_after_resume() {
    let (url, mut received) = receiver().await;
    let db = Database::open("memory://").await.unwrap();
    db.execute(
        "CREATE STREAMING TABLE bronze (id bigint, payload text)
         PUSH INTO silver AS SELECT id, CAST(payload AS BIGINT) AS n FROM bronze",
    )
    .await
    .unwrap();
    db.execute(&format!("CREATE ALERT route_down ON FAILURE OF FLOW bronze_to_silver NOTIFY WEBHOOK '{url}' WITH (cooldown_seconds = 0)"))
        .await
        .unwrap();
    db.execute("INSERT INTO bronze VALUES (1, '10'), (2, 'twenty')").await.unwrap();
    let fired = next(&mut received).await;
    assert_eq!(fired["state"], "firing");
    assert_eq!(fired["alert"], "route_down");
    let text = fired["text"].as_str().unwrap();
    assert!(text.contains("route_down") && text.contains("bronze_to_silver") && text.contains("twenty"), "{text}");
    // The receiver hands the body over before it answers, and a delivery is counted once the
    // answer arrives: wait for the count rather than race it.
    wait_for("the delivery to be counted", Duration::from_secs(10), || async {
        let shown = rows(&db.query("SELECT state, condition, deliveries >= 1 FROM sluice.alerts").await.unwrap());
        (shown == ["firing|ON FAILURE OF FLOW bronze_to_silver|true"]).then_some(())
    })
    .await;

    db.execute(
        "CREATE OR REPLACE STREAMING TABLE bronze (id bigint, payload text)
         PUSH INTO silver AS SELECT id, TRY_CAST(payload AS BIGINT) AS n FROM bronze",
    )
    .await
    .unwrap();
    db.execute("ALTER FLOW bronze_to_silver RESUME").await.unwrap();
    let cleared = next(&mut received).await;
    assert_eq!(cleared["state"], "cleared");
    wait_for("the alert to show cleared", Duration::from_secs(10), || async {
        let shown = rows(&db.query("SELECT state, last_cleared_at IS NOT NULL FROM sluice.alerts").await.unwrap());
        (shown == ["ok|true"]).then_some(())
    })
    .await;
    let events = rows(&db.query("SELECT kind FROM sluice.events WHERE flow = 'route_down'").await.unwrap());
    assert_eq!(events, ["alert cleared", "alert fired", "ddl"], "(sorted)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_over_the_system_tables_fires() {
    let (url, mut received) = receiver().await;
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE TABLE orders (id bigint)").await.unwrap();
    db.execute(&format!(
        "CREATE ALERT many_orders WHEN ((SELECT count(*) FROM orders) > 2 AND (SELECT count(*) FROM sluice.tables) > 0) \
         NOTIFY WEBHOOK '{url}'"
    ))
    .await
    .unwrap();
    db.execute("INSERT INTO orders VALUES (1), (2)").await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(received.try_recv().is_err(), "fired before its condition held");
    db.execute("INSERT INTO orders VALUES (3)").await.unwrap();
    let fired = next(&mut received).await;
    assert_eq!(fired["state"], "firing");
    assert!(fired["text"].as_str().unwrap().contains("many_orders"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_is_retried_and_the_failure_shown() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let db = Database::open("memory://").await.unwrap();
    db.execute("CREATE STREAMING TABLE bronze (id bigint, payload text) PUSH INTO silver AS SELECT id, CAST(payload AS BIGINT) AS n FROM bronze")
        .await
        .unwrap();
    db.execute(&format!(
        "CREATE ALERT nobody_listens ON FAILURE NOTIFY WEBHOOK 'http://127.0.0.1:{port}/secret-token' WITH (retries = 2)"
    ))
    .await
    .unwrap();
    db.execute("INSERT INTO bronze VALUES (1, 'x')").await.unwrap();
    let shown = wait_for("three failed deliveries", Duration::from_secs(30), || async {
        let shown = rows(
            &db.query("SELECT state, delivery_failures, deliveries, last_delivery_error FROM sluice.alerts")
                .await
                .unwrap(),
        );
        shown.first().is_some_and(|r| r.starts_with("firing|3|0|")).then_some(shown)
    })
    .await;
    assert!(shown[0].contains("attempt 3 of 3"), "{shown:?}");
    // The webhook's path (a Slack webhook's secret) is shown to no one, not even in its errors.
    let webhook = rows(&db.query("SELECT webhook FROM sluice.alerts").await.unwrap());
    assert_eq!(webhook, [format!("http://127.0.0.1:{port}/...")]);
    assert!(!shown[0].contains("secret-token"), "{shown:?}");
    wait_for("the failed delivery's event", Duration::from_secs(10), || async {
        let events =
            rows(&db.query("SELECT count(*) FROM sluice.events WHERE kind = 'alert delivery failed'").await.unwrap());
        (events == ["1"]).then_some(())
    })
    .await;
    // The database runs on.
    assert_eq!(rows(&db.query("SELECT count(*) FROM bronze").await.unwrap()), ["1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_alerts_are_refused() {
    let db = Database::open("memory://").await.unwrap();
    let refused = |sql: &'static str| {
        let db = db.clone();
        async move { db.execute(sql).await.unwrap_err() }
    };
    let e = refused("CREATE ALERT a WHEN (SELEC 1) NOTIFY WEBHOOK 'http://127.0.0.1:1/'").await;
    assert_eq!(e.sqlstate(), "42601", "{e}");
    let e = refused("CREATE ALERT a WHEN (1 + 1) NOTIFY WEBHOOK 'http://127.0.0.1:1/'").await;
    assert_eq!(e.sqlstate(), "42804", "{e}");
    let e =
        refused("CREATE ALERT a WHEN ((SELECT count(*) FROM nowhere) > 0) NOTIFY WEBHOOK 'http://127.0.0.1:1/'").await;
    assert_eq!(e.sqlstate(), "42P01", "{e}");
    let e = refused("CREATE ALERT a ON FAILURE NOTIFY WEBHOOK 'ftp://127.0.0.1/'").await;
    assert_eq!(e.sqlstate(), "22023", "{e}");
    let e = refused("CREATE ALERT a ON FAILURE NOTIFY WEBHOOK 'not a url'").await;
    assert_eq!(e.sqlstate(), "22023", "{e}");
    let e = refused("CREATE ALERT a ON FAILURE NOTIFY WEBHOOK 'http://127.0.0.1:1/' WITH (colour = 'red')").await;
    assert_eq!(e.sqlstate(), "22023", "{e}");
    let e = refused("CREATE ALERT a ON FAILURE OF FLOW missing NOTIFY WEBHOOK 'http://127.0.0.1:1/'").await;
    assert_eq!(e.sqlstate(), "42704", "{e}");
    let e = refused("DROP ALERT missing").await;
    assert_eq!(e.sqlstate(), "42704", "{e}");
    db.execute("DROP ALERT IF EXISTS missing").await.unwrap();
    // Only the owner makes the server POST somewhere.
    let session = db.session();
    session.set_privileges(sluice::Privileges::NORMAL);
    let e = session.execute("CREATE ALERT a ON FAILURE NOTIFY WEBHOOK 'http://127.0.0.1:1/'").await.unwrap_err();
    assert_eq!(e.sqlstate(), "42501", "{e}");
    assert_eq!(rows(&db.query("SELECT count(*) FROM sluice.alerts").await.unwrap()), ["0"]);
}
