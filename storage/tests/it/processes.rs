//! Several processes on one table: concurrent writers, and a writer killed with SIGKILL.
//!
//! The children are this same test binary, started with `--ignored --exact processes::child` and
//! told what to do through environment variables.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;
use sluice_storage::commit::CommitOutcome;
use sluice_storage::table::Table;

use crate::roundtrip::{batch, create, ids};

fn child_command(role: &str, table: &std::path::Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "processes::child", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("SLUICE_CHILD_ROLE", role)
        .env("SLUICE_CHILD_TABLE", table)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The body of a child process (does nothing when run as an ordinary test).
#[test]
#[ignore]
fn child() {
    let Ok(role) = std::env::var("SLUICE_CHILD_ROLE") else { return };
    let table_path = std::env::var("SLUICE_CHILD_TABLE").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let table = Table::open_uri(&table_path).await.unwrap();
        let start: i64 = std::env::var("SLUICE_CHILD_START").unwrap().parse().unwrap();
        let count: i64 = std::env::var("SLUICE_CHILD_COUNT").unwrap().parse().unwrap();
        for id in start..start + count {
            let outcome = table.append(vec![batch(id..id + 1)]).await.unwrap();
            assert!(matches!(outcome, CommitOutcome::Committed(_)), "blind appends never conflict");
            println!("ok {id}");
            if role == "crash" && id % 10 == 9 {
                let _ = table.optimize(Some(u64::MAX)).await.unwrap();
            }
        }
    });
}

#[tokio::test]
async fn four_writer_processes_append_a_thousand_commits() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    let children: Vec<_> = (0..4)
        .map(|writer| {
            child_command("append", dir.path())
                .env("SLUICE_CHILD_START", (writer * 1000).to_string())
                .env("SLUICE_CHILD_COUNT", "250")
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let snapshot = table.snapshot().await.unwrap();
    assert_eq!(snapshot.version(), 1000, "exactly 1000 data commits after the create");
    let history = table.history(None).await.unwrap();
    assert_eq!(history.iter().filter(|h| h.operation.as_deref() == Some("WRITE")).count(), 1000);
    let expected: Vec<i64> = (0..4).flat_map(|w| w * 1000..w * 1000 + 250).collect();
    assert_eq!(ids(&table, None).await, expected, "every row present, none twice");
}

#[tokio::test]
async fn a_writer_killed_at_random_never_breaks_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let _ = create(dir.path(), &[], &[("delta.checkpointInterval", "3")]).await;
    let mut acknowledged: BTreeSet<i64> = BTreeSet::new();
    let mut next = 0i64;
    let mut rng = crate::common::rng_from(crate::common::seed("processes"));
    let kills = 50;
    for round in 0..kills {
        let mut child = child_command("crash", dir.path())
            .env("SLUICE_CHILD_START", next.to_string())
            .env("SLUICE_CHILD_COUNT", "1000000")
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| line.strip_prefix("ok ").and_then(|id| id.parse::<i64>().ok()))
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(30..400)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "round {round}: the child should have been killed");
        let acked = reader.join().unwrap();
        let in_flight = acked.last().map_or(next, |last| last + 1);
        acknowledged.extend(acked);

        // The table opens, and holds exactly the acknowledged rows plus perhaps the one in flight.
        let table =
            Table::open_uri(dir.path().to_str().unwrap()).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        let present = ids(&table, None).await;
        let present_set: BTreeSet<i64> = present.iter().copied().collect();
        assert_eq!(present.len(), present_set.len(), "round {round}: a row appears twice");
        let missing: Vec<_> = acknowledged.difference(&present_set).collect();
        assert!(missing.is_empty(), "round {round}: acknowledged rows lost: {missing:?}");
        let extra: Vec<_> = present_set.difference(&acknowledged).copied().collect();
        assert!(
            extra.is_empty() || extra == [in_flight],
            "round {round}: unexpected rows {extra:?} (in flight: {in_flight})"
        );
        acknowledged.extend(extra);
        next = acknowledged.last().map_or(0, |l| l + 1);
    }
    assert!(acknowledged.len() > kills, "the writers made progress between kills");
}
