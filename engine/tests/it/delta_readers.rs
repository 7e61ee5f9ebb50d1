//! The interop matrix: tables of every common shape, written by Sluice through SQL, read by the
//! everyday Python readers (deltalake's `to_pandas`, `to_pyarrow_dataset` and `QueryBuilder`,
//! polars' `read_delta` and `scan_delta`), each compared row by row with what Sluice reads
//! (`delta_readers.py`). A reader may refuse a table only where [`REFUSALS`] says it does (the
//! README's table of readers names the same); no reader may refuse a table without deletes, and
//! no reader may read other rows than Sluice, except where [`MISREADS`] names a reader's bug.

use std::collections::BTreeMap;

use sluice::Database;

use crate::common::{rows, run_python};

/// Each shape: its name and the statements that make table `t_<name>`.
const SHAPES: &[(&str, &[&str])] = &[
    (
        "plain",
        &[
            "CREATE TABLE t_plain (id bigint, name text, amount numeric(10,2), ok boolean, d date, f double precision)",
            "INSERT INTO t_plain VALUES (1, 'a', 1.50, true, '2026-01-01', 0.5), (2, NULL, NULL, NULL, NULL, NULL), \
             (3, 'c', -3.25, false, '1999-12-31', 1e10)",
            "INSERT INTO t_plain VALUES (4, 'd', 4.00, true, '2026-12-04', -2.5)",
        ],
    ),
    (
        "partitioned",
        &[
            "CREATE TABLE t_partitioned (id bigint, region text, day date, v double precision) \
             PARTITIONED BY (region, day)",
            "INSERT INTO t_partitioned VALUES (1, 'eu', '2026-01-01', 1.5), (2, 'us', '2026-01-02', 2.5), \
             (3, NULL, NULL, 3.5), (4, 'eu', '2026-01-02', 4.5)",
        ],
    ),
    (
        "identity",
        &[
            "CREATE TABLE t_identity (id bigint GENERATED ALWAYS AS IDENTITY, name text)",
            "INSERT INTO t_identity (name) VALUES ('a'), ('b'), ('c')",
        ],
    ),
    (
        "keyed",
        &[
            "CREATE TABLE t_keyed (id bigint PRIMARY KEY, email text UNIQUE, v text)",
            "CREATE INDEX t_keyed_v ON t_keyed (v)",
            "INSERT INTO t_keyed VALUES (1, 'a@x', 'a'), (2, 'b@x', 'b')",
            "INSERT INTO t_keyed VALUES (3, 'c@x', 'c') ON CONFLICT (id) DO NOTHING",
        ],
    ),
    (
        "nested",
        &[
            "CREATE TABLE t_nested (id bigint, ints int[], words text[])",
            "INSERT INTO t_nested VALUES (1, '{1,2,3}', '{a,b}'), (2, '{}', NULL), (3, NULL, '{\"x y\",z}')",
        ],
    ),
    (
        "structs",
        &["CREATE TABLE t_structs AS SELECT CAST(1 AS bigint) AS id, named_struct('a', 1, 'b', 'x') AS s, \
             make_array(named_struct('k', 'p', 'n', 2.5)) AS items"],
    ),
    (
        "timestamps",
        &[
            "CREATE TABLE t_timestamps (id bigint, local timestamp, zoned timestamptz)",
            "INSERT INTO t_timestamps VALUES (1, '2026-12-04 10:00:00', '2026-12-04 10:00:00+02'), \
             (2, '1970-01-01 00:00:00.123456', '1999-12-31 23:59:59.5+00'), (3, NULL, NULL)",
        ],
    ),
    (
        "times",
        &[
            "CREATE TABLE t_times (id bigint, t time, tz time with time zone)",
            "INSERT INTO t_times VALUES (1, '12:57:18.000396', '12:57:18.000396+05:30'), (2, '00:00', '23:59:59-08'), \
             (3, NULL, NULL)",
        ],
    ),
    (
        "cdf",
        &[
            "CREATE TABLE t_cdf (id bigint, v text) TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
            "INSERT INTO t_cdf VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO t_cdf VALUES (3, 'c')",
        ],
    ),
    (
        "v2_checkpoint",
        &[
            "CREATE TABLE t_v2_checkpoint (id bigint, v text) \
             TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')",
            "INSERT INTO t_v2_checkpoint VALUES (1, 'a')",
            "INSERT INTO t_v2_checkpoint VALUES (2, 'b')",
            "INSERT INTO t_v2_checkpoint VALUES (3, 'c')",
        ],
    ),
    (
        "column_mapping",
        &[
            "CREATE TABLE t_column_mapping (id bigint, name text, gone text)",
            "INSERT INTO t_column_mapping VALUES (1, 'a', 'x'), (2, 'b', 'y')",
            "ALTER TABLE t_column_mapping RENAME COLUMN name TO label",
            "ALTER TABLE t_column_mapping DROP COLUMN gone",
            "INSERT INTO t_column_mapping VALUES (3, 'c')",
        ],
    ),
    (
        "deleted",
        &[
            "CREATE TABLE t_deleted (id bigint, v text)",
            "INSERT INTO t_deleted SELECT g, 'v' || g FROM generate_series(1, 20) AS s(g)",
            "DELETE FROM t_deleted WHERE id % 5 = 0",
            "UPDATE t_deleted SET v = 'changed' WHERE id < 4",
        ],
    ),
    (
        "cdf_updated",
        &[
            "CREATE TABLE t_cdf_updated (id bigint, v text) TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
            "INSERT INTO t_cdf_updated VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "UPDATE t_cdf_updated SET v = 'B' WHERE id = 2",
            "DELETE FROM t_cdf_updated WHERE id = 3",
        ],
    ),
    (
        "reorged",
        &[
            "CREATE TABLE t_reorged (id bigint, v text)",
            "INSERT INTO t_reorged SELECT g, 'v' || g FROM generate_series(1, 20) AS s(g)",
            "DELETE FROM t_reorged WHERE id % 5 = 0",
            "UPDATE t_reorged SET v = 'changed' WHERE id < 4",
            "REORG TABLE t_reorged APPLY (PURGE)",
        ],
    ),
    (
        "feature_dropped",
        &[
            "CREATE TABLE t_feature_dropped (id bigint, v text)",
            "INSERT INTO t_feature_dropped SELECT g, 'v' || g FROM generate_series(1, 20) AS s(g)",
            "DELETE FROM t_feature_dropped WHERE id % 5 = 0",
            "UPDATE t_feature_dropped SET v = 'changed' WHERE id < 4",
            "ALTER TABLE t_feature_dropped DROP FEATURE deletionVectors",
            "INSERT INTO t_feature_dropped VALUES (100, 'after')",
            "DELETE FROM t_feature_dropped WHERE id = 1",
        ],
    ),
    (
        "copy_on_write",
        &[
            "CREATE TABLE t_copy_on_write (id bigint, v text) TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
            "INSERT INTO t_copy_on_write SELECT g, 'v' || g FROM generate_series(1, 20) AS s(g)",
            "DELETE FROM t_copy_on_write WHERE id % 5 = 0",
            "UPDATE t_copy_on_write SET v = 'changed' WHERE id < 4",
        ],
    ),
];

/// The (shape, reader, reason) triples where the reader refuses the table, and the words its
/// refusal must contain. deltalake 1.6's `to_pandas` and `to_pyarrow_dataset` refuse the
/// deletionVectors and v2Checkpoint reader features (its QueryBuilder reads both), so a table that
/// still declares deletion vectors after REORG is refused too; polars 2.1 refuses column mapping and
/// v2Checkpoint (it reads deletion vectors).
const REFUSALS: &[(&str, &str, &str)] = &[
    ("deleted", "deltalake.to_pandas", "deletionVectors"),
    ("deleted", "deltalake.to_pyarrow_dataset", "deletionVectors"),
    ("cdf_updated", "deltalake.to_pandas", "deletionVectors"),
    ("cdf_updated", "deltalake.to_pyarrow_dataset", "deletionVectors"),
    ("reorged", "deltalake.to_pandas", "deletionVectors"),
    ("reorged", "deltalake.to_pyarrow_dataset", "deletionVectors"),
    ("v2_checkpoint", "deltalake.to_pandas", "v2Checkpoint"),
    ("v2_checkpoint", "deltalake.to_pyarrow_dataset", "v2Checkpoint"),
    ("v2_checkpoint", "polars.read_delta", "v2Checkpoint"),
    ("v2_checkpoint", "polars.scan_delta", "v2Checkpoint"),
    ("column_mapping", "polars.read_delta", "column mapping"),
    ("column_mapping", "polars.scan_delta", "column mapping"),
];

/// The (shape, reader) pairs where the reader reads other rows than the table has, without an
/// error: deltalake 1.6's `to_pandas` and `to_pyarrow_dataset` read a renamed column (column
/// mapping) by its new name from files that store it under its physical name, so they return
/// NULL for it. The README warns about it; its QueryBuilder reads the table right.
const MISREADS: &[(&str, &str)] =
    &[("column_mapping", "deltalake.to_pandas"), ("column_mapping", "deltalake.to_pyarrow_dataset")];

/// Shapes without any delete: every reader must read them.
const NEVER_REFUSED: &[&str] =
    &["plain", "partitioned", "identity", "keyed", "nested", "structs", "timestamps", "times", "cdf"];

#[tokio::test]
async fn every_reader_reads_every_shape_sluice_writes() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("warehouse");
    let db = Database::open(warehouse.to_str().unwrap()).await.unwrap();
    let mut args = Vec::new();
    for (shape, statements) in SHAPES {
        for statement in *statements {
            db.execute(statement).await.unwrap_or_else(|e| panic!("{shape}: {statement}: {e}"));
        }
        let table = format!("t_{shape}");
        let location =
            rows(&db.query(&format!("SELECT location FROM sluice.tables WHERE name = '{table}'")).await.unwrap());
        let location = std::path::Path::new(&location[0]);
        let folder = if location.is_absolute() { location.to_path_buf() } else { warehouse.join(location) };
        let batches = db.query(&format!("SELECT * FROM {table}")).await.unwrap();
        let expected = dir.path().join(format!("{shape}.parquet"));
        let schema = batches.first().map(|b| b.schema()).unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&expected).unwrap(), schema, None).unwrap();
        for batch in &batches {
            writer.write(batch).unwrap();
        }
        writer.close().unwrap();
        args.push(shape.to_string());
        args.push(folder.to_str().unwrap().to_string());
        args.push(expected.to_str().unwrap().to_string());
    }
    let script = include_str!("delta_readers.py");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run_python(script, &args);
    let refusals: BTreeMap<(&str, &str), &str> = REFUSALS.iter().map(|(s, r, why)| ((*s, *r), *why)).collect();
    let mut failures = Vec::new();
    let mut seen = 0;
    for line in output.lines() {
        let mut fields = line.splitn(4, '\t');
        let (Some(shape), Some(reader), Some(status), detail) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            failures.push(format!("unexpected output line: {line}"));
            continue;
        };
        seen += 1;
        let detail = detail.unwrap_or("");
        match status {
            "ok" => {}
            "refused" if refusals.contains_key(&(shape, reader)) && !NEVER_REFUSED.contains(&shape) => {
                let why = refusals.get(&(shape, reader)).copied().unwrap_or_default();
                assert!(detail.contains(why), "{shape}/{reader} refused for another reason than {why}: {detail}");
            }
            "mismatch" if MISREADS.contains(&(shape, reader)) => {}
            _ => failures.push(format!("{shape} / {reader}: {status}: {detail}")),
        }
    }
    assert_eq!(seen, SHAPES.len() * 5, "every reader reported on every shape:\n{output}");
    assert!(failures.is_empty(), "readers disagree with Sluice:\n{}\n\nfull report:\n{output}", failures.join("\n"));
}
