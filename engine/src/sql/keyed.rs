//! Rows of a table found by key, with where each lives, and the one commit that deletes some of
//! them and inserts others together with a streaming writer's txn: how an AUTO CDC run
//! ([`crate::flow::cdc`]) applies a batch of changes to its target exactly once.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::array::{AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{Schema, SchemaRef, UInt64Type};
use arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use roaring::RoaringTreemap;
use sluice_storage::actions::Txn;
use sluice_storage::write::Mutation;

use super::dml::{by_path_rows, cast_column, keys_committed, storage_data_error, with_files, Target};
use crate::change::{ColumnMatch, Operation};
use crate::error::{Error, Result};
use crate::names::{quoted, TEMP_SCHEMA};
use crate::provider::storage_scan::{FILE_COLUMN, ROW_COLUMN};
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
        // The target through the relation that exposes each row's file and index.
        self.clear_statement_state();
        let relation = self.register_dml_relation(target);
        if let (Some(keys), None) = (keys, predicate) {
            if let Some(located) = self.indexed_lookup(target, &relation, keys, &schema).await? {
                return Ok(located);
            }
        }
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
        let SluiceStatement::Standard(statement) = parse_statement_text(&text)? else {
            return Err(Error::Internal("a lookup is not a query".into()));
        };
        let batches = match self.plan_statement(*statement).await {
            Ok(plan) => self.ctx.execute_logical_plan(plan).await?.collect().await.map_err(Error::from),
            Err(e) => Err(e),
        };
        self.clear_statement_state();
        located_from(&schema, batches?)
    }

    /// The rows of `relation` (the target's registered relation) whose key columns hold one of
    /// `keys`' rows, found through the index of a key or index of the table on exactly those
    /// columns: a filter (each column among its values in `keys`) that the index answers (see
    /// [`crate::keys::TableKeys::locate`]), so that only the rows the keys name are read; with
    /// several columns the rows found are then narrowed to the keys' combinations. `None` if no
    /// key or index of the table is on those columns, or there are too many keys.
    async fn indexed_lookup(
        &self,
        target: &Target,
        relation: &str,
        keys: &RecordBatch,
        schema: &SchemaRef,
    ) -> Result<Option<Located>> {
        let names: Vec<String> = keys.schema().fields().iter().map(|f| f.name().clone()).collect();
        let indexed = crate::keys::key_defs(target.snapshot.configuration()).iter().any(|d| d.is_on(&names));
        if !indexed || names.is_empty() || keys.num_rows() > LOOKUP_KEYS_MAX {
            return Ok(None);
        }
        let table_schema = target.snapshot.arrow_schema();
        let unqualified = |n: &str| datafusion::prelude::Expr::Column(datafusion::common::Column::new_unqualified(n));
        let mut filters = Vec::with_capacity(names.len());
        let mut wanted = Vec::with_capacity(names.len());
        for (name, column) in names.iter().zip(keys.columns()) {
            let Ok(field) = table_schema.field_with_name(name) else { return Ok(None) };
            // 0.0 = -0.0 and NaN: the index does not look floats up.
            if field.data_type().is_floating() {
                return Ok(None);
            }
            let column = cast_column(column, field.data_type(), name)?;
            let mut seen = std::collections::HashSet::new();
            let mut values = Vec::new();
            for i in (0..column.len()).filter(|i| column.is_valid(*i)) {
                let value = ScalarValue::try_from_array(&column, i)?;
                if seen.insert(value.clone()) {
                    values.push(datafusion::prelude::lit(value));
                }
            }
            filters.push(unqualified(name).in_list(values, false));
            wanted.push(column);
        }
        let Some(filter) = datafusion::logical_expr::utils::conjunction(filters) else { return Ok(None) };
        let frame = self.ctx.table(datafusion::common::TableReference::partial(TEMP_SCHEMA, relation)).await?;
        let mut selected: Vec<datafusion::prelude::Expr> =
            schema.fields().iter().map(|f| unqualified(f.name())).collect();
        selected.push(unqualified(FILE_COLUMN));
        selected.push(unqualified(ROW_COLUMN));
        let batches = frame.filter(filter)?.select(selected)?.collect().await;
        self.clear_statement_state();
        let mut located = located_from(schema, batches?)?;
        if names.len() > 1 {
            located.retain_keys(&names, &wanted)?;
        }
        Ok(Some(located))
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

impl QueryContext {
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

impl Located {
    /// Keeps the rows whose columns `names` hold one of the rows of `wanted` (arrays of the
    /// rows' types, in `names`' order).
    fn retain_keys(&mut self, names: &[String], wanted: &[ArrayRef]) -> Result<()> {
        let fields: Vec<SortField> = wanted.iter().map(|a| SortField::new(a.data_type().clone())).collect();
        let converter = RowConverter::new(fields)?;
        let wanted = converter.convert_columns(wanted)?;
        let wanted: std::collections::HashSet<&[u8]> = wanted.iter().map(|r| r.data()).collect();
        let mut found = Vec::with_capacity(names.len());
        for name in names {
            let column = self
                .rows
                .column_by_name(name)
                .ok_or_else(|| Error::Internal(format!("a lookup lost its key column {name}")))?;
            found.push(column.clone());
        }
        let found = converter.convert_columns(&found)?;
        let keep: Vec<bool> = found.iter().map(|r| wanted.contains(r.data())).collect();
        if keep.iter().all(|k| *k) {
            return Ok(());
        }
        let mask = arrow::array::BooleanArray::from(keep.clone());
        self.rows = arrow::compute::filter_record_batch(&self.rows, &mask)?;
        let mut kept = keep.iter();
        self.paths.retain(|_| kept.next().copied().unwrap_or(false));
        let mut kept = keep.iter();
        self.row_ids.retain(|_| kept.next().copied().unwrap_or(false));
        Ok(())
    }

    /// Adds another lookup's rows (of the same table and snapshot).
    pub fn append(&mut self, other: Located) -> Result<()> {
        self.rows = concat_batches(&self.rows.schema(), [&self.rows, &other.rows])?;
        self.paths.extend(other.paths);
        self.row_ids.extend(other.row_ids);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    #[test]
    fn a_composite_lookup_keeps_the_keys_combinations_only() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("tenant", DataType::Utf8, true),
            Field::new("id", DataType::Int32, true),
        ]));
        let rows = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "b", "b"])),
                Arc::new(Int32Array::from(vec![1, 2, 1, 2])),
            ],
        )
        .unwrap();
        let mut located = Located {
            rows,
            paths: vec!["f1".into(), "f1".into(), "f2".into(), "f2".into()],
            row_ids: vec![0, 1, 0, 1],
        };
        // The filter found every (tenant, id) in {a, b} x {1, 2}; the keys were (a, 1) and (b, 2).
        let wanted: Vec<ArrayRef> =
            vec![Arc::new(StringArray::from(vec!["b", "a"])), Arc::new(Int32Array::from(vec![2, 1]))];
        located.retain_keys(&["tenant".into(), "id".into()], &wanted).unwrap();
        assert_eq!(located.rows.num_rows(), 2);
        assert_eq!(located.paths, ["f1", "f2"]);
        assert_eq!(located.row_ids, [0, 1]);
        let ids = located.rows.column(1).as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!(ids.values().to_vec(), [1, 2]);
    }
}
