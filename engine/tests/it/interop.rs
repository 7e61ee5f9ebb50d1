//! A table written by delta-rs (the `deltalake` Python package), attached with LOCATION, queried,
//! updated, deleted from and appended to by Sluice, and read back correctly by delta-rs.

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
