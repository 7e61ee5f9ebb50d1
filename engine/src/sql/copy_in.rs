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
        Ok(StagedCopy {
            target,
            control,
            pending: vec![],
            pending_bytes: 0,
            adds: vec![],
            rows: 0,
            quarantined: vec![],
            violations: BTreeMap::new(),
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
        let checked = super::quality::check_expectations(self, &copy.target.entry, pending, None).await?;
        for (constraint, count) in checked.violations {
            *copy.violations.entry(constraint).or_default() += count;
        }
        copy.quarantined.extend(checked.quarantined);
        copy.rows += checked.kept.iter().map(|b| b.num_rows() as u64).sum::<u64>();
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
            let mut transaction = Transaction::new(Some(&copy.target.snapshot), "COPY");
            transaction.parameter("mode", "Append");
            transaction.add_actions(copy.adds.iter().cloned().map(Action::Add));
            let outcome = copy.target.table.commit(&copy.target.snapshot, transaction).await?;
            self.db.writer.commit(&copy.target.entry.qualified_name(), Operation::Copy, None, outcome).await?;
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
