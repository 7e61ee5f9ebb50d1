//! dbt (dbt-core with dbt-postgres, from .venv-dbt: scripts/venv-dbt.sh) against `sluice serve`:
//! the plain dbt project in tests/dbt seeded, run twice (the second run takes the incremental
//! path: a temporary table, then delete+insert), tested, and documented; the results read back
//! with tokio-postgres and from dbt's own artifacts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::serve::serve;

use tokio_postgres::{NoTls, SimpleQueryMessage};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

struct Dbt {
    program: String,
    project: PathBuf,
    port: u16,
}

impl Dbt {
    /// Runs one dbt command in the project, which must succeed; returns its stdout.
    fn run(&self, args: &[&str]) -> String {
        let project = self.project.to_str().unwrap();
        let output = Command::new(&self.program)
            .args(args)
            .args(["--profiles-dir", project, "--project-dir", project])
            .current_dir(&self.project)
            .env("SLUICE_PORT", self.port.to_string())
            .env("SLUICE_HOST", "127.0.0.1")
            .env("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} (run ./scripts/test, which makes .venv-dbt): {e}", self.program));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "dbt {} failed ({}):\n{stdout}\n{}\n--- the end of logs/dbt.log:\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            self.log_tail(12_000),
        );
        stdout
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.project.join("logs/dbt.log")).unwrap_or_default()
    }

    fn log_tail(&self, chars: usize) -> String {
        let log = self.log();
        let start = log.len().saturating_sub(chars);
        let start = (start..log.len()).find(|&i| log.is_char_boundary(i)).unwrap_or(log.len());
        log[start..].to_string()
    }

    fn artifact(&self, name: &str) -> serde_json::Value {
        let path = self.project.join("target").join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }
}

/// The rows of one query, as text (the simple query protocol), NULL as "NULL".
fn query(port: u16, sql: &str) -> Vec<Vec<String>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dsn = format!("host=127.0.0.1 port={port} user=sluice dbname=sluice connect_timeout=10");
        let (client, connection) = tokio_postgres::connect(&dsn, NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let messages = client.simple_query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        drop(client);
        let _ = connection.await;
        messages
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => {
                    Some((0..row.len()).map(|i| row.get(i).unwrap_or("NULL").to_string()).collect())
                }
                _ => None,
            })
            .collect()
    })
}

/// (customer_id, order_count, total_amount) of customer_totals, by customer.
fn totals(port: u16) -> Vec<(i64, i64, f64)> {
    query(port, "SELECT customer_id, order_count, total_amount FROM customer_totals ORDER BY customer_id")
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap(), r[2].parse().unwrap()))
        .collect()
}

fn order_ids(port: u16) -> Vec<i64> {
    query(port, "SELECT order_id FROM orders_incremental ORDER BY order_id")
        .into_iter()
        .map(|r| r[0].parse().unwrap())
        .collect()
}

#[test]
fn dbt_seeds_runs_incrementally_tests_and_documents_a_project() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), &[]);
    let project = dir.path().join("project");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dbt"), &project);
    let program =
        std::env::var("SLUICE_DBT").unwrap_or_else(|_| format!("{}/../.venv-dbt/bin/dbt", env!("CARGO_MANIFEST_DIR")));
    let dbt = Dbt { program, project, port: server.port };
    let port = server.port;

    // Seeds: two CSV files loaded into new tables.
    dbt.run(&["seed"]);
    assert_eq!(query(port, "SELECT count(*) FROM customers"), [["4"]]);
    assert_eq!(query(port, "SELECT count(*) FROM orders"), [["7"]]);
    assert_eq!(query(port, "SELECT name, country FROM customers WHERE customer_id = 3"), [["Linus", "fi"]]);

    // First run: a view, a table, and the incremental model built whole (orders 1 to 4).
    dbt.run(&["run"]);
    assert_eq!(
        query(port, "SELECT customer_id, customer_name, country_code FROM stg_customers ORDER BY customer_id"),
        [["1", "Ada", "UK"], ["2", "Grace", "US"], ["3", "Linus", "FI"], ["4", "Edsger", "NL"]]
    );
    assert_eq!(
        query(
            port,
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' \
             AND table_name IN ('stg_customers', 'customer_totals', 'orders_incremental') ORDER BY table_name"
        ),
        [["customer_totals", "BASE TABLE"], ["orders_incremental", "BASE TABLE"], ["stg_customers", "VIEW"]]
    );
    assert_eq!(order_ids(port), [1, 2, 3, 4]);
    assert_eq!(totals(port), [(1, 2, 15.75), (2, 1, 20.0), (3, 1, 7.75), (4, 0, 0.0)]);
    assert!(!dbt.log().contains("create temporary table"), "the first run builds the incremental model whole");

    // Second run: the incremental path takes orders 4 to 7 into a temporary table, deletes order 4
    // from the model and inserts the four rows.
    let log_before = dbt.log().len();
    dbt.run(&["run", "--vars", "{max_order_id: 7}"]);
    let second = dbt.log()[log_before..].to_string();
    assert!(second.contains("create temporary table \"orders_incremental__dbt_tmp"), "{second}");
    assert!(second.contains("delete from \"sluice\".\"public\".\"orders_incremental\""), "{second}");
    assert!(second.contains("insert into \"sluice\".\"public\".\"orders_incremental\""), "{second}");
    let results = dbt.artifact("run_results.json");
    let incremental = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["unique_id"] == "model.sluice_dbt.orders_incremental")
        .expect("orders_incremental in run_results.json");
    assert_eq!(incremental["status"], "success", "{incremental}");
    assert_eq!(incremental["adapter_response"]["rows_affected"], 4, "{incremental}");
    assert_eq!(order_ids(port), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        query(port, "SELECT customer_id, amount, ordered_at FROM orders_incremental WHERE order_id = 4"),
        [["3", "7.75", "2024-01-04"]]
    );
    assert_eq!(totals(port), [(1, 3, 16.75), (2, 2, 32.0), (3, 1, 7.75), (4, 1, 3.5)]);

    // Schema tests: unique, not_null, and a relationships test, all passing.
    let tested = dbt.run(&["test"]);
    assert!(tested.contains("PASS=10 WARN=0 ERROR=0"), "{tested}");
    let results = dbt.artifact("run_results.json");
    let tests = results["results"].as_array().unwrap();
    assert_eq!(tests.len(), 10);
    assert!(tests.iter().all(|t| t["status"] == "pass"), "{results}");
    assert!(tests.iter().any(|t| t["unique_id"].as_str().unwrap().starts_with("test.sluice_dbt.relationships_")));

    // A failing test must fail: a duplicate order id breaks unique_orders_incremental_order_id.
    query(port, "INSERT INTO orders_incremental VALUES (7, 1, 1.0, '2024-01-07')");
    let project = dbt.project.to_str().unwrap();
    let failing = Command::new(&dbt.program)
        .args(["test", "--select", "orders_incremental", "--profiles-dir", project, "--project-dir", project])
        .current_dir(&dbt.project)
        .env("SLUICE_PORT", port.to_string())
        .env("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&failing.stdout);
    assert!(!failing.status.success(), "dbt test passed on a duplicate key:\n{stdout}");
    assert!(stdout.contains("FAIL 1 unique_orders_incremental_order_id"), "{stdout}");
    query(port, "DELETE FROM orders_incremental WHERE order_id = 7 AND amount = 1.0");
    query(port, "INSERT INTO orders_incremental VALUES (7, 1, 1.0, '2024-01-07')");
    assert_eq!(order_ids(port), [1, 2, 3, 4, 5, 6, 7]);

    // Docs: the catalog lists every model's and seed's columns, with their types.
    dbt.run(&["docs", "generate"]);
    let catalog = dbt.artifact("catalog.json");
    let columns = |node: &str| -> Vec<String> {
        let node = &catalog["nodes"][node];
        let columns = node["columns"].as_object().unwrap_or_else(|| panic!("{node} in {catalog}"));
        let mut columns: Vec<(i64, String)> =
            columns.values().map(|c| (c["index"].as_i64().unwrap(), c["name"].as_str().unwrap().to_string())).collect();
        columns.sort();
        columns.into_iter().map(|(_, name)| name).collect()
    };
    assert_eq!(columns("model.sluice_dbt.stg_customers"), ["customer_id", "customer_name", "country_code"]);
    assert_eq!(
        columns("model.sluice_dbt.customer_totals"),
        ["customer_id", "customer_name", "order_count", "total_amount"]
    );
    assert_eq!(columns("model.sluice_dbt.orders_incremental"), ["order_id", "customer_id", "amount", "ordered_at"]);
    assert_eq!(columns("seed.sluice_dbt.customers"), ["customer_id", "name", "country"]);
    assert_eq!(catalog["nodes"]["model.sluice_dbt.stg_customers"]["metadata"]["type"], "VIEW");
    assert_eq!(catalog["nodes"]["model.sluice_dbt.customer_totals"]["metadata"]["type"], "BASE TABLE");
    assert_eq!(catalog["nodes"]["model.sluice_dbt.orders_incremental"]["columns"]["ordered_at"]["type"], "date");
    assert!(catalog["errors"].is_null(), "{}", catalog["errors"]);
}
