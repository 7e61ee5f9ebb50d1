//! A table written by delta-rs (the `deltalake` Python package), attached with LOCATION, queried,
//! updated, deleted from and appended to by Sluice, and read back correctly by delta-rs; and a
//! materialized view's Delta table, read by delta-rs after REFRESH MATERIALIZED VIEW; and the
//! comments of COMMENT ON, where delta-rs shows them.

use sluice::Database;

use crate::common::{rows, run_python};

const WRITE: &str = r#"
import sys
import pyarrow as pa
from deltalake import write_deltalake
path = sys.argv[1]
write_deltalake(path, pa.table({"id": pa.array(range(0, 10), pa.int64()), "v": [f"v{i}" for i in range(10)], "part": ["a", "b"] * 5}), partition_by=["part"])
write_deltalake(path, pa.table({"id": pa.array(range(10, 20), pa.int64()), "v": [f"v{i}" for i in range(10, 20)], "part": ["a", "b"] * 5}), partition_by=["part"], mode="append")
"#;

const READ: &str = r#"
import sys
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
data = pa.table(QueryBuilder().register("t", DeltaTable(sys.argv[1])).execute("SELECT id, v, part FROM t").read_all())
for row in sorted(zip(*[data.column(c).to_pylist() for c in ["id", "v", "part"]])):
    print("|".join(str(x) for x in row))
"#;

#[tokio::test]
async fn a_deltalake_table_is_queried_changed_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("from_delta_rs");
    let table = table.to_str().unwrap();
    run_python(WRITE, &[table]);
    let db = Database::open(dir.path().join("warehouse").to_str().unwrap()).await.unwrap();
    db.execute(&format!("CREATE TABLE dl LOCATION '{table}'")).await.unwrap();
    assert_eq!(rows(&db.query("SELECT count(*), sum(id) FROM dl").await.unwrap()), ["20|190"]);
    assert_eq!(rows(&db.query("SELECT count(*) FROM dl WHERE part = 'a'").await.unwrap()), ["10"]);
    db.execute("UPDATE dl SET v = 'changed' WHERE id < 3").await.unwrap();
    db.execute("DELETE FROM dl WHERE id % 4 = 0").await.unwrap();
    db.execute("INSERT INTO dl VALUES (100, 'new', 'c')").await.unwrap();
    let ours: Vec<String> = rows(&db.query("SELECT id, v, part FROM dl").await.unwrap());
    assert_eq!(ours.len(), 16);
    let theirs: Vec<String> = run_python(READ, &[table]).lines().map(str::to_string).collect();
    let mut ours_sorted: Vec<(i64, String)> =
        ours.iter().map(|r| (r.split('|').next().unwrap().parse().unwrap(), r.clone())).collect();
    ours_sorted.sort();
    let ours_sorted: Vec<String> = ours_sorted.into_iter().map(|(_, r)| r).collect();
    assert_eq!(ours_sorted, theirs, "delta-rs reads back what Sluice wrote");
    assert!(theirs.contains(&"1|changed|b".to_string()));
}

/// Prints the column names, then the rows sorted, of the Delta table at argv[1] (NULL as `NULL`).
const READ_VIEW: &str = r#"
import sys
from deltalake import DeltaTable
data = DeltaTable(sys.argv[1]).to_pyarrow_table()
print("|".join(data.column_names))
columns = [data.column(c).to_pylist() for c in data.column_names]
for row in sorted("|".join("NULL" if x is None else str(x) for x in row) for row in zip(*columns)):
    print(row)
"#;

/// What delta-rs reads from the view's folder: its columns and its rows, sorted.
fn read_with_delta_rs(table: &str) -> (String, Vec<String>) {
    let output = run_python(READ_VIEW, &[table]);
    let mut lines = output.lines().map(str::to_string);
    let columns = lines.next().unwrap_or_default();
    (columns, lines.collect())
}

#[tokio::test]
async fn deltalake_reads_a_materialized_view_after_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("warehouse");
    let db = Database::open(warehouse.to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE orders (id bigint, customer text, amount bigint)").await.unwrap();
    db.execute("CREATE TABLE customers (name text, region text)").await.unwrap();
    db.execute(
        "CREATE MATERIALIZED VIEW v AS SELECT c.region, o.customer, count(*) AS orders, sum(o.amount) AS total, \
         max(o.amount) AS largest FROM orders o JOIN customers c ON o.customer = c.name GROUP BY c.region, o.customer",
    )
    .await
    .unwrap();
    db.execute("INSERT INTO customers VALUES ('ann', 'north'), ('bob', 'south'), ('cy', 'north')").await.unwrap();
    let values: Vec<String> =
        (0..300).map(|i| format!("({i}, '{}', {})", ["ann", "bob", "cy", "dee"][i % 4], i * 3)).collect();
    db.execute(&format!("INSERT INTO orders VALUES {}", values.join(", "))).await.unwrap();
    db.execute("REFRESH MATERIALIZED VIEW v").await.unwrap();
    let location = rows(&db.query("SELECT location FROM sluice.tables WHERE name = 'v'").await.unwrap());
    assert_eq!(location.len(), 1, "the view is in sluice.tables: {location:?}");
    let location = std::path::Path::new(&location[0]);
    let folder = if location.is_absolute() { location.to_path_buf() } else { warehouse.join(location) };
    let folder = folder.to_str().unwrap();

    let (columns, theirs) = read_with_delta_rs(folder);
    assert_eq!(columns, "region|customer|orders|total|largest", "delta-rs sees the view's columns only");
    let ours = rows(&db.query("SELECT * FROM v").await.unwrap());
    assert_eq!(ours, ["north|ann|75|33300|888", "north|cy|75|33750|894", "south|bob|75|33525|891"]);
    assert_eq!(theirs, ours, "delta-rs reads the view's checkpoint");

    // Changes that update, delete and add groups reach delta-rs with the next refresh.
    db.execute("UPDATE orders SET amount = amount + 1 WHERE customer = 'ann'").await.unwrap();
    db.execute("DELETE FROM orders WHERE customer = 'cy'").await.unwrap();
    db.execute("INSERT INTO customers VALUES ('dee', 'east')").await.unwrap();
    db.execute("REFRESH MATERIALIZED VIEW v").await.unwrap();
    let ours = rows(&db.query("SELECT * FROM v").await.unwrap());
    assert_eq!(ours, ["east|dee|75|33975|897", "north|ann|75|33375|889", "south|bob|75|33525|891"]);
    let (_, theirs) = read_with_delta_rs(folder);
    assert_eq!(theirs, ours, "delta-rs reads the view's second checkpoint");
}

/// Prints the table's writer features, its identity column's metadata and key properties, then
/// its rows sorted (NULL as `NULL`).
const READ_KEYED: &str = r#"
import sys, json
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1])
protocol = table.protocol()
print(",".join(sorted(protocol.writer_features or [])))
field = [f for f in table.schema().fields if f.name == "id"][0]
print(",".join(sorted(k for k in field.metadata if k.startswith("delta.identity"))))
config = table.metadata().configuration
print(",".join(sorted(f"{k}={v}" for k, v in config.items() if k.startswith("sluice.key.") or k.startswith("sluice.index."))))
import pyarrow as pa
from deltalake import QueryBuilder
data = pa.table(QueryBuilder().register("t", table).execute("SELECT id, code, n FROM t").read_all())
columns = [data.column(c).to_pylist() for c in data.column_names]
for row in sorted("|".join("NULL" if x is None else str(x) for x in row) for row in zip(*columns)):
    print(row)
"#;

/// delta-rs reads a table with an identity column, keys and an index: the identityColumns writer
/// feature, the column's identity metadata (start, step, high-water mark), the keys as table
/// properties, and the rows.
#[tokio::test]
async fn deltalake_reads_a_table_with_an_identity_column_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("warehouse");
    let db = Database::open(warehouse.to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, code text UNIQUE, n int)")
        .await
        .unwrap();
    db.execute("INSERT INTO ident (code, n) VALUES ('a', 1), ('b', 2), ('c', 3)").await.unwrap();
    db.execute("CREATE INDEX ON ident (n)").await.unwrap();
    db.execute("DELETE FROM ident WHERE code = 'b'").await.unwrap();
    db.execute("INSERT INTO ident (code, n) VALUES ('d', 4)").await.unwrap();
    let location = rows(&db.query("SELECT location FROM sluice.tables WHERE name = 'ident'").await.unwrap());
    let location = std::path::Path::new(&location[0]);
    let folder = if location.is_absolute() { location.to_path_buf() } else { warehouse.join(location) };
    let output = run_python(READ_KEYED, &[folder.to_str().unwrap()]);
    let lines: Vec<&str> = output.lines().collect();
    assert!(lines[0].split(',').any(|f| f == "identityColumns"), "writer features: {}", lines[0]);
    assert_eq!(
        lines[1],
        "delta.identity.allowExplicitInsert,delta.identity.highWaterMark,delta.identity.start,delta.identity.step"
    );
    assert_eq!(
        lines[2],
        "sluice.index.ident_n_idx=INDEX (n),sluice.key.ident_code_key=UNIQUE (code),sluice.key.ident_pkey=PRIMARY KEY (id)"
    );
    assert_eq!(&lines[3..], ["1|a|1", "3|c|3", "4|d|4"]);
}

const READ_COMMENTS: &str = r#"
import sys
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1])
print(table.metadata().description)
for field in table.schema().fields:
    print(f"{field.name}={field.metadata.get('comment')}")
config = table.metadata().configuration
print(",".join(sorted(f"{k}={v}" for k, v in config.items() if k.startswith("sluice.comment."))))
"#;

/// COMMENT ON TABLE, COLUMN and CONSTRAINT are kept where delta-rs (and Spark) read them: the
/// Delta description, the `comment` of the field's metadata, and a table property; removing one
/// takes it away there too.
#[tokio::test]
async fn deltalake_reads_comments() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("warehouse");
    let db = Database::open(warehouse.to_str().unwrap()).await.unwrap();
    db.execute("CREATE TABLE noted (id int PRIMARY KEY, code text, n int)").await.unwrap();
    db.execute("COMMENT ON TABLE noted IS 'a table with comments'").await.unwrap();
    db.execute("COMMENT ON COLUMN noted.code IS 'the code'").await.unwrap();
    db.execute("COMMENT ON COLUMN public.noted.n IS 'a count'").await.unwrap();
    db.execute("COMMENT ON CONSTRAINT noted_pkey ON noted IS 'one row per id'").await.unwrap();
    let location = rows(&db.query("SELECT location FROM sluice.tables WHERE name = 'noted'").await.unwrap());
    let location = std::path::Path::new(&location[0]);
    let folder = if location.is_absolute() { location.to_path_buf() } else { warehouse.join(location) };
    let output = run_python(READ_COMMENTS, &[folder.to_str().unwrap()]);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(
        lines,
        [
            "a table with comments",
            "id=None",
            "code=the code",
            "n=a count",
            "sluice.comment.constraint.noted_pkey=one row per id"
        ]
    );

    db.execute("COMMENT ON TABLE noted IS NULL").await.unwrap();
    db.execute("COMMENT ON COLUMN noted.code IS ''").await.unwrap();
    db.execute("COMMENT ON CONSTRAINT noted_pkey ON noted IS NULL").await.unwrap();
    let output = run_python(READ_COMMENTS, &[folder.to_str().unwrap()]);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines, ["None", "id=None", "code=None", "n=a count", ""]);
}
