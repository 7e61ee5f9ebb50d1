//! COPY FROM, staged: rows are conformed, checked and written to data files as they arrive, and
//! committed together in one commit when the client finishes. Memory holds at most
//! [`COPY_STAGE_BYTES_MAX`] of rows at a time, whatever the size of the COPY; nothing is visible
//! before the commit, and a COPY that fails or is cancelled deletes the files it wrote.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use sluice_storage::actions::{Action, Add};
use sluice_storage::commit::Transaction;

use super::dml::Target;
use crate::change::ColumnMatch;
use crate::change::Operation;
use crate::control::StatementControl;
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;

/// Rows held before they are written to a data file.
pub const COPY_STAGE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// A COPY FROM in progress.
pub struct StagedCopy {
    target: Target,
    control: Arc<StatementControl>,
    pending: Vec<RecordBatch>,
    pending_bytes: usize,
    adds: Vec<Add>,
    rows: u64,
    quarantined: Vec<(String, RecordBatch)>,
    violations: BTreeMap<String, u64>,
    /// For a keyed table: the written rows' key columns (the others as NULL-typed columns, which
    /// hold no memory), checked at the commit.
    checked: Option<Vec<usize>>,
    checked_rows: Vec<RecordBatch>,
}

impl std::fmt::Debug for StagedCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedCopy")
            .field("table", &self.target.entry.qualified_name())
            .field("rows", &self.rows)
            .finish()
    }
}

impl StagedCopy {
    /// Rows taken so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

impl QueryContext {
    /// Starts a COPY into `table` (by column name), run under `control` like a statement.
    pub async fn copy_begin(&self, table: &str, control: Arc<StatementControl>) -> Result<StagedCopy> {
        if control.privileges().read_only {
            return Err(Error::ReadOnly(format!("this role is read-only and cannot write to {table}")));
        }
        self.db.catalog.refresh().await?;
        let name = crate::names::parse_table_name(table)?;
        let target = self.target(&crate::names::object_name(&name.schema, &name.name)).await?;
        let schema = target.snapshot.schema();
        let columns: Vec<usize> = crate::keys::unique_defs(target.snapshot.configuration())
            .iter()
            .flat_map(|k| k.columns.iter())
            .filter_map(|c| schema.index_of(c))
            .collect();
        let checked = (!columns.is_empty()).then_some(columns);
        Ok(StagedCopy {
            target,
            control,
            pending: vec![],
            pending_bytes: 0,
            adds: vec![],
            rows: 0,
            quarantined: vec![],
            violations: BTreeMap::new(),
            checked,
            checked_rows: vec![],
        })
    }

    /// Takes rows of a COPY; writes a data file whenever enough are held.
    pub async fn copy_rows(&self, copy: &mut StagedCopy, batches: Vec<RecordBatch>) -> Result<()> {
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            let rows = self.to_table_rows(&copy.target, batch, &ColumnMatch::ByName).await?;
            copy.pending_bytes += rows.get_array_memory_size();
            copy.pending.push(rows);
            if copy.pending_bytes >= COPY_STAGE_BYTES_MAX {
                self.copy_flush(copy).await?;
            }
        }
        Ok(())
    }

    async fn copy_flush(&self, copy: &mut StagedCopy) -> Result<()> {
        let pending = std::mem::take(&mut copy.pending);
        copy.pending_bytes = 0;
        let origin = super::quality::write_version(&copy.target);
        let checked = super::quality::check_expectations(self, &copy.target.entry, pending, origin).await?;
        for (constraint, count) in checked.violations {
            *copy.violations.entry(constraint).or_default() += count;
        }
        copy.quarantined.extend(checked.quarantined);
        copy.rows += checked.kept.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        if let Some(columns) = &copy.checked {
            for batch in &checked.kept {
                copy.checked_rows.push(only_columns(batch, columns)?);
            }
        }
        if !checked.kept.is_empty() {
            let adds = copy.target.table.write_files(&copy.target.snapshot, &checked.kept, true).await?;
            copy.adds.extend(adds);
        }
        Ok(())
    }

    /// Commits a COPY's rows in one commit; returns the rows written.
    pub async fn copy_commit(&self, mut copy: StagedCopy) -> Result<u64> {
        let control = copy.control.clone();
        let result = sluice_storage::gate::gated(control, async {
            self.copy_flush(&mut copy).await?;
            if !copy.quarantined.is_empty() {
                super::quality::write_quarantine(self, &copy.quarantined, &[]).await?;
            }
            if copy.adds.is_empty() {
                return Ok(0);
            }
            let no_rows_deleted = std::collections::HashMap::new();
            let keys = self.check_keys(&copy.target, Some(&no_rows_deleted), &copy.checked_rows).await?;
            let snapshot = keys.as_ref().map(|k| k.snapshot().clone()).unwrap_or_else(|| copy.target.snapshot.clone());
            let mut transaction = Transaction::new(Some(&snapshot), "COPY");
            if keys.as_ref().is_some_and(|k| !k.is_empty()) {
                transaction.reads_data();
            }
            transaction.parameter("mode", "Append");
            transaction.add_actions(copy.adds.iter().cloned().map(Action::Add));
            if let Some(schema) = self.db.identity.advanced_schema(&copy.target.entry.id, snapshot.schema()) {
                transaction.add_action(Action::Metadata(sluice_storage::write::with_schema(&snapshot, &schema)));
            }
            let outcome = copy.target.table.commit(&snapshot, transaction).await?;
            self.db.writer.commit(&copy.target.entry.qualified_name(), Operation::Copy, None, outcome).await?;
            super::dml::keys_committed(keys).await;
            Ok(copy.rows)
        })
        .await;
        if result.is_err() && !copy.control.committing() {
            self.copy_abort(copy).await;
        }
        result
    }

    /// Drops a COPY: deletes the data files it wrote (never committed).
    pub async fn copy_abort(&self, copy: StagedCopy) {
        let store = copy.target.table.store();
        for add in &copy.adds {
            let path = store.path(&sluice_storage::store::decode_path(store, &add.path));
            if let Err(e) = store.delete(&path).await {
                tracing::warn!("could not delete {} of a failed COPY: {e}", add.path);
            }
        }
    }
}

/// `batch` with only `columns` kept, the others replaced by NULL-typed columns.
fn only_columns(batch: &RecordBatch, columns: &[usize]) -> Result<RecordBatch> {
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut arrays = Vec::with_capacity(schema.fields().len());
    for (i, field) in schema.fields().iter().enumerate() {
        if columns.contains(&i) {
            fields.push(field.clone());
            arrays.push(batch.column(i).clone());
        } else {
            fields.push(Arc::new(Field::new(field.name(), DataType::Null, true)));
            arrays.push(Arc::new(arrow::array::NullArray::new(batch.num_rows())) as arrow::array::ArrayRef);
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}
