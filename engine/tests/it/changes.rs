//! Every commit reaches flows and views through the one writer (`sluice::change`): a listener sees
//! each commit of each write path exactly once, with its version, its kind and the rows it
//! changed when the writer had them at hand.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::future::BoxFuture;
use sluice::change::{Change, CommitListener, Operation};
use sluice::control::StatementControl;
use sluice::{Database, Privileges};

use crate::common::rows;

/// What a listener saw of one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    table: String,
    version: u64,
    operation: Operation,
    /// Rows (deleted, inserted), when the writer handed them over.
    rows: Option<(usize, usize)>,
}

/// A commit as a step expects it: table, kind, rows (deleted, inserted) handed over.
type Step = (String, Operation, Option<(usize, usize)>);

#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Vec<Seen>>,
    /// How many of `seen` [`Recorder::take`] returned.
    taken: Mutex<usize>,
}

impl CommitListener for Recorder {
    fn committed<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, sluice::Result<()>> {
        Box::pin(async move {
            let seen = Seen {
                table: change.table.clone(),
                version: change.version,
                operation: change.operation,
                rows: change.rows.as_ref().map(|r| (r.deleted_count(), r.inserted_count())),
            };
            self.seen.lock().unwrap().push(seen);
            Ok(())
        })
    }
}

impl Recorder {
    /// The commits seen since the last call, of the tables named (others are the views' own
    /// checkpoints, which the worker makes when it likes), by table name: listeners run in turn,
    /// so a sync flow's commit reaches this listener before the source's commit that caused it.
    fn take(&self, tables: &[&str]) -> Vec<Step> {
        let seen = self.seen.lock().unwrap();
        let mut taken = self.taken.lock().unwrap();
        let new = seen.get(*taken..).unwrap_or_default();
        *taken = seen.len();
        let mut new: Vec<_> = new
            .iter()
            .filter(|s| tables.contains(&s.table.as_str()))
            .map(|s| (s.table.clone(), s.operation, s.rows))
            .collect();
        new.sort_by(|a, b| b.0.cmp(&a.0));
        new
    }

    /// Every version of `table` seen, in order.
    pub fn versions(&self, table: &str) -> Vec<u64> {
        self.seen.lock().unwrap().iter().filter(|s| s.table == table).map(|s| s.version).collect()
    }
}

fn batch(ids: &[i64], values: &[&str]) -> RecordBatch {
    let schema =
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("v", DataType::Utf8, true)]));
    RecordBatch::try_new(
        schema,
        vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(StringArray::from(values.to_vec()))],
    )
    .unwrap()
}

/// The versions of a table's log after `after`, by DESCRIBE HISTORY.
pub async fn history_after(db: &Database, table: &str, after: u64) -> BTreeSet<u64> {
    let history = db.query(&format!("DESCRIBE HISTORY {table}")).await.unwrap();
    let mut versions = BTreeSet::new();
    for batch in &history {
        let column = batch.column_by_name("version").unwrap();
        let column = arrow::compute::cast(column, &DataType::Int64).unwrap();
        let column = column.as_any().downcast_ref::<Int64Array>().unwrap();
        versions.extend(column.values().iter().map(|v| *v as u64).filter(|v| *v > after));
    }
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_path_tells_the_listener_once_per_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().to_str().unwrap()).await.unwrap();
    db.execute(
        "CREATE TABLE t (id bigint, v text);
         CREATE TABLE s (id bigint, v text);
         INSERT INTO s VALUES (10, 'ten'), (11, 'eleven');
         CREATE STREAMING TABLE down AS SELECT id, v FROM STREAM(t);
         CREATE MATERIALIZED VIEW per_v AS SELECT v, count(*) AS n FROM t GROUP BY v;",
    )
    .await
    .unwrap();
    let start: BTreeMap<&str, u64> = BTreeMap::from([
        ("public.t", history_after(&db, "t", 0).await.last().copied().unwrap_or(0)),
        ("public.down", history_after(&db, "down", 0).await.last().copied().unwrap_or(0)),
    ]);
    let recorder = Arc::new(Recorder::default());
    db.on_commit(recorder.clone());
    let tables = ["public.t", "public.down", "public.s"];
    let t = |operation, rows| ("public.t".to_string(), operation, rows);
    let down = |rows| ("public.down".to_string(), Operation::Write, rows);

    // INSERT: the table's commit, then the sync flow's commit into its target, each once.
    db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Write, Some((0, 2))), down(Some((0, 2)))]);

    // The in-process API.
    db.insert("t", vec![batch(&[3], &["c"])]).await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Write, Some((0, 1))), down(Some((0, 1)))]);

    // COPY (its rows are in files it wrote, not at hand).
    let session = db.session();
    let control = StatementControl::new(Privileges::OWNER);
    let mut copy = session.copy_begin("t", control).await.unwrap();
    session.copy_rows(&mut copy, vec![batch(&[4, 5], &["d", "e"])]).await.unwrap();
    assert_eq!(session.copy_commit(copy).await.unwrap(), 2);
    assert_eq!(recorder.take(&tables), vec![t(Operation::Copy, None), down(Some((0, 2)))]);

    // A view reads t, so UPDATE and DELETE hand over the rows they changed.
    db.execute("UPDATE t SET v = 'z' WHERE id = 1").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Update, Some((1, 1)))]);
    db.execute("DELETE FROM t WHERE id IN (2, 3)").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Delete, Some((2, 0)))]);

    // MERGE that inserts: the flow carries its new rows (read from the log).
    db.execute(
        "MERGE INTO t USING s ON t.id = s.id
         WHEN MATCHED THEN UPDATE SET v = s.v
         WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
    )
    .await
    .unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Merge, None), down(Some((0, 2)))]);

    db.execute("OPTIMIZE t").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Optimize, None)]);

    let before_truncate = history_after(&db, "t", 0).await.last().copied().unwrap();
    db.execute("TRUNCATE t").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Truncate, None)]);

    db.execute(&format!("RESTORE TABLE t TO VERSION AS OF {before_truncate}")).await.unwrap();
    let restored = recorder.take(&tables);
    // The restored rows are new rows to the flow (as a RESTORE of a Delta source is to a stream).
    assert_eq!(restored, vec![t(Operation::Restore, None), down(Some((0, 5)))]);

    db.execute("ALTER TABLE t ADD COLUMN w int").await.unwrap();
    assert_eq!(recorder.take(&tables), vec![t(Operation::Metadata, None)]);

    // The view saw every change: its rows equal its query's.
    assert_eq!(
        rows(&db.query("SELECT v, n FROM per_v").await.unwrap()),
        rows(&db.query("SELECT v, count(*) FROM t GROUP BY v").await.unwrap())
    );

    // Exactly once: every version committed since the listener subscribed was seen once.
    for (table, short) in [("public.t", "t"), ("public.down", "down")] {
        let logged: Vec<u64> = history_after(&db, short, start[table]).await.into_iter().collect();
        assert_eq!(recorder.versions(table), logged, "{table}");
    }
}
