//! Rows of a table found by key, with where each lives, and the one commit that deletes some of
//! them and inserts others together with a streaming writer's txn: how an AUTO CDC run
//! ([`crate::flow::cdc`]) applies a batch of changes to its target exactly once.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{Schema, SchemaRef, UInt64Type};
use datafusion::datasource::MemTable;
use roaring::RoaringTreemap;
use sluice_storage::actions::Txn;
use sluice_storage::write::Mutation;

use super::dml::{by_path_rows, cast_column, keys_committed, storage_data_error, with_files, Target};
use crate::change::{ColumnMatch, Operation};
use crate::error::{Error, Result};
use crate::names::{quoted, TEMP_SCHEMA};
use crate::provider::storage_scan::{FILE_COLUMN, ROW_COLUMN};
use crate::provider::{FoundRows, SluiceTable};
use crate::sql::context::QueryContext;
use crate::syntax::parser::{parse_statement_text, SluiceStatement};

/// The relation the keys looked up are registered as while [`QueryContext::located_rows`] runs.
const KEYS_RELATION: &str = "__sluice_lookup_keys";
/// Keys a lookup finds through an index at most (more: it joins them with the table).
const LOOKUP_KEYS_MAX: usize = 65_536;

/// Live rows of a table (its columns, in its schema) and, for each, its file and row index.
pub(crate) struct Located {
    pub rows: RecordBatch,
    paths: Vec<String>,
    row_ids: Vec<u64>,
}

impl QueryContext {
    /// The live rows of `target` whose columns named like `keys`' columns equal one of its rows
    /// (every row when `keys` is None), and that satisfy `predicate` (SQL over the table's
    /// columns), with their locations. With `keys_only`, the rows hold the key columns alone
    /// (`keys`' columns): a caller that needs only where the rows are reads a sliver of a wide
    /// table.
    pub(crate) async fn located_rows(
        &self,
        target: &Target,
        keys: Option<&RecordBatch>,
        predicate: Option<&str>,
        keys_only: bool,
    ) -> Result<Located> {
        let columns: Option<Vec<String>> = match keys {
            Some(keys) if keys_only => Some(keys.schema().fields().iter().map(|f| f.name().clone()).collect()),
            _ => None,
        };
        self.lookup(target, keys, predicate, columns.as_deref()).await
    }

    /// [`Self::located_rows`], with `columns` (None: all of them).
    async fn lookup(
        &self,
        target: &Target,
        keys: Option<&RecordBatch>,
        predicate: Option<&str>,
        columns: Option<&[String]>,
    ) -> Result<Located> {
        let table_schema = target.snapshot.arrow_schema();
        let schema = match columns {
            Some(columns) => {
                let indexes = columns
                    .iter()
                    .map(|c| {
                        table_schema
                            .index_of(c)
                            .map_err(|_| Error::Plan(format!("table {} has no column {c}", target.name)))
                    })
                    .collect::<Result<Vec<usize>>>()?;
                Arc::new(table_schema.project(&indexes)?)
            }
            None => table_schema.clone(),
        };
        let mut selected: Vec<String> = schema.fields().iter().map(|f| format!("t.{}", quoted(f.name()))).collect();
        selected.push(format!("t.{}", quoted(FILE_COLUMN)));
        selected.push(format!("t.{}", quoted(ROW_COLUMN)));
        self.clear_statement_state();
        if let (Some(keys), None) = (keys, predicate) {
            if let Some(located) = self.indexed_lookup(target, keys, &schema, &selected).await? {
                return Ok(located);
            }
        }
        // The target through the relation that exposes each row's file and index.
        let relation = self.register_dml_relation(target);
        let table = format!("{}.{} AS t", quoted(TEMP_SCHEMA), quoted(&relation));
        let mut text = format!("SELECT {} FROM {table}", selected.join(", "));
        if let Some(keys) = keys {
            // The keys in the table's types, so that the join compares like with like.
            let mut fields = Vec::new();
            let mut arrays = Vec::new();
            let mut on = Vec::new();
            for (field, column) in keys.schema().fields().iter().zip(keys.columns()) {
                let target_field = table_schema
                    .field_with_name(field.name())
                    .map_err(|_| Error::Plan(format!("table {} has no column {}", target.name, field.name())))?;
                arrays.push(cast_column(column, target_field.data_type(), field.name())?);
                fields.push(target_field.clone().with_nullable(true));
                on.push(format!("t.{0} = k.{0}", quoted(field.name())));
            }
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
            self.temp.insert(KEYS_RELATION, Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?));
            // The keys first: a hash join builds its table from its first input (the table's
            // scan has no row count to swap them by), and the keys are the few.
            text = format!(
                "SELECT {} FROM {}.{KEYS_RELATION} AS k JOIN {table} ON {}",
                selected.join(", "),
                quoted(TEMP_SCHEMA),
                on.join(" AND ")
            );
        }
        if let Some(predicate) = predicate {
            text.push_str(&format!(" WHERE {predicate}"));
        }
        located_from(&schema, self.run_lookup(&text).await?)
    }

    /// Runs a lookup's query (over relations it registered, forgotten after it).
    async fn run_lookup(&self, text: &str) -> Result<Vec<RecordBatch>> {
        let SluiceStatement::Standard(statement) = parse_statement_text(text)? else {
            return Err(Error::Internal("a lookup is not a query".into()));
        };
        let batches = match self.plan_statement(*statement).await {
            Ok(plan) => self.ctx.execute_logical_plan(plan).await?.collect().await.map_err(Error::from),
            Err(e) => Err(e),
        };
        self.clear_statement_state();
        batches
    }

    /// The rows of `target` whose key columns hold one of `keys`' rows, found through the
    /// index of a key or index of the table on exactly those columns (see
    /// [`crate::keys::TableKeys::locate_keys`]): only those rows are read, none when the columns
    /// asked for are the keys. `None` if the table has no such index (or it is busy, or a
    /// transaction block's), or there are too many keys: the caller joins.
    async fn indexed_lookup(
        &self,
        target: &Target,
        keys: &RecordBatch,
        schema: &SchemaRef,
        selected: &[String],
    ) -> Result<Option<Located>> {
        if target.table.is_staged() || keys.num_rows() > LOOKUP_KEYS_MAX {
            return Ok(None);
        }
        let names: Vec<String> = keys.schema().fields().iter().map(|f| f.name().clone()).collect();
        let table_schema = target.snapshot.arrow_schema();
        let mut arrays = Vec::with_capacity(names.len());
        for (name, column) in names.iter().zip(keys.columns()) {
            let Ok(field) = table_schema.field_with_name(name) else { return Ok(None) };
            // 0.0 = -0.0 and NaN: the index does not look floats up.
            if field.data_type().is_floating() {
                return Ok(None);
            }
            arrays.push(cast_column(column, field.data_type(), name)?);
        }
        let found = self.db.keys.locate_keys(&target.entry.id, &target.snapshot, &names, &arrays).await;
        let Some(found) = found else { return Ok(None) };
        // The target as a relation whose scan reads the rows found (and exposes their places).
        let relation = self.temp_name("dml");
        let provider = SluiceTable::new(target.table.clone(), target.snapshot.clone(), self.db.scan_options())
            .with_hidden_columns()
            .with_locator(Arc::new(FoundRows(found)));
        self.temp.insert(&relation, Arc::new(provider));
        let text = format!("SELECT {} FROM {}.{} AS t", selected.join(", "), quoted(TEMP_SCHEMA), quoted(&relation));
        Ok(Some(located_from(schema, self.run_lookup(&text).await?)?))
    }

    /// Deletes the rows of `located` at `delete` and inserts `inserted` (columns matched to the
    /// table's by name) in one commit of `target` carrying `txn`; returns the version. The commit
    /// conflicts with any concurrent data commit (it read the rows it replaces).
    pub(crate) async fn replace_rows(
        &self,
        target: &Target,
        located: &Located,
        delete: &[usize],
        inserted: Vec<RecordBatch>,
        txn: Txn,
        operation: &str,
    ) -> Result<u64> {
        let mut sets: HashMap<String, RoaringTreemap> = HashMap::new();
        for &row in delete {
            let (Some(path), Some(id)) = (located.paths.get(row), located.row_ids.get(row)) else {
                return Err(Error::Internal(format!("no located row {row}")));
            };
            sets.entry(path.clone()).or_default().insert(*id);
        }
        let deleted = with_files(&target.snapshot, sets)?;
        let mut rows = Vec::new();
        for batch in inserted.iter().filter(|b| b.num_rows() > 0) {
            rows.push(self.to_table_rows(target, batch, &ColumnMatch::ByName).await?);
        }
        let keys = self.check_keys(target, Some(&by_path_rows(&deleted)), &rows).await?;
        let schema = self.db.identity.advanced_schema(&target.entry.id, target.snapshot.schema());
        let mutation = Mutation {
            deleted,
            inserted: rows,
            operation: operation.to_string(),
            txn: Some(txn),
            schema,
            reads_data: true,
            ..Default::default()
        };
        let outcome = target.table.mutate(&target.snapshot, mutation).await.map_err(storage_data_error)?;
        let version = self.db.writer.commit(&target.entry.qualified_name(), Operation::Merge, None, outcome).await?;
        keys_committed(keys).await;
        Ok(version)
    }
}

/// A lookup's rows (the table's columns of `schema`, then each row's file and row index) as
/// [`Located`].
fn located_from(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<Located> {
    let width = schema.fields().len();
    let mut paths = Vec::new();
    let mut row_ids = Vec::new();
    let mut rows = Vec::new();
    for batch in &batches {
        let (Some(files), Some(ids)) = (batch.columns().get(width), batch.columns().get(width + 1)) else {
            return Err(Error::Internal("a lookup lost its row locations".into()));
        };
        let files = files.as_string::<i32>();
        paths.extend((0..batch.num_rows()).map(|i| files.value(i).to_string()));
        row_ids.extend(ids.as_primitive::<UInt64Type>().values().iter().copied());
        rows.push(RecordBatch::try_new(schema.clone(), batch.columns().iter().take(width).cloned().collect())?);
    }
    let rows = concat_batches(schema, &rows)?;
    Ok(Located { rows, paths, row_ids })
}

impl Located {
    /// Adds another lookup's rows (of the same table and snapshot).
    pub fn append(&mut self, other: Located) -> Result<()> {
        self.rows = concat_batches(&self.rows.schema(), [&self.rows, &other.rows])?;
        self.paths.extend(other.paths);
        self.row_ids.extend(other.row_ids);
        Ok(())
    }
}
