//! `INSERT ... ON CONFLICT` and `RETURNING`.
//!
//! ON CONFLICT finds the rows a proposed row conflicts with in the target's key index (see
//! [`crate::keys`]), under the index's lock, so the decision and the commit see the same table.
//! DO NOTHING drops the conflicting proposals (a key proposed twice conflicts with its first
//! proposal, as in PostgreSQL). DO UPDATE reads the conflicting rows at their locations, joins
//! each with its proposal (`excluded`) in an ordinary query that computes the SET list and the
//! WHERE, and commits the deletions of the old rows and the new rows in one commit.
//!
//! RETURNING evaluates its list over the rows a statement wrote (or deleted), registered as a
//! relation under the target's name or alias.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, ConflictTarget, Expr, Ident, OnConflict, OnConflictAction, SelectItem, TableFactor,
    TableWithJoins,
};
use roaring::RoaringTreemap;
use sluice_storage::scan::RowMask;
use sluice_storage::write::{Mutation, WriteRequest};

use super::catalog_provider::TEMP_SCHEMA;
use super::dml::{assignment_map, column_of, keys_committed, select_query, storage_data_error, Target};
use crate::change::{ChangedRows, ColumnMatch, Operation};
use crate::error::{Error, Result};
use crate::keys::{KeyGuard, Loc};
use crate::names::normalize;
use crate::sql::context::{QueryContext, StatementResult};

/// The column pairing a conflicting row with its proposal.
const PAIR_COLUMN: &str = "__sluice_pair";

/// What an INSERT wrote, for its tag and RETURNING.
struct Inserted {
    count: u64,
    rows: Vec<RecordBatch>,
}

impl QueryContext {
    /// An INSERT with ON CONFLICT or RETURNING: `batches` are the source rows, `list` the
    /// target columns they fill in order.
    pub(crate) async fn insert_with(
        &self,
        target: &Target,
        batches: Vec<RecordBatch>,
        list: Vec<String>,
        on: Option<OnConflict>,
        returning: Option<Vec<SelectItem>>,
        alias: Ident,
    ) -> Result<StatementResult> {
        if !target.entry.expectations.is_empty() {
            return Err(Error::NotSupported(
                "ON CONFLICT or RETURNING on a table with expectations (use a plain INSERT)".into(),
            ));
        }
        let schema = target.snapshot.arrow_schema();
        let mut conformed = Vec::new();
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            conformed.push(self.to_table_rows(target, batch, &ColumnMatch::Position(list.clone())).await?);
        }
        let proposed = concat_batches(&schema, &conformed)?;
        if let Some(items) = &returning {
            // A RETURNING list that does not plan fails the statement before it writes.
            self.returning(schema.clone(), vec![], alias.clone(), items.clone()).await?;
        }
        let inserted = match on {
            None => self.insert_checked(target, proposed).await?,
            Some(OnConflict { conflict_target, action }) => {
                // The tables its foreign keys reference are locked with it (see references.rs).
                let guard = if target.entry.foreign_keys.is_empty() {
                    self.lock_keys(target).await?
                } else {
                    self.lock_for_write(target).await?
                };
                let update = match action {
                    OnConflictAction::DoNothing => None,
                    OnConflictAction::DoUpdate(update) => Some(update),
                };
                let arbiters = arbiters(&guard, target, conflict_target.as_ref(), update.is_some())?;
                match update {
                    None => self.insert_do_nothing(target, guard, &arbiters, proposed).await?,
                    Some(update) => {
                        self.insert_do_update(target, guard, arbiters.first().copied(), proposed, update, &alias)
                            .await?
                    }
                }
            }
        };
        let tag = format!("INSERT 0 {}", inserted.count);
        match returning {
            None => Ok(StatementResult::Command { tag, rows: Some(inserted.count) }),
            Some(items) => {
                let (schema, batches) = self.returning(schema, inserted.rows, alias, items).await?;
                Ok(StatementResult::Returned { tag, schema, batches })
            }
        }
    }

    /// Inserts rows, refusing a duplicate key.
    async fn insert_checked(&self, target: &Target, proposed: RecordBatch) -> Result<Inserted> {
        let rows = vec![proposed];
        let keys = self.check_keys(target, Some(&HashMap::new()), &rows).await?;
        self.append(target, keys, rows).await
    }

    /// Appends checked rows in one commit and tells the writer.
    async fn append(&self, target: &Target, keys: Option<KeyGuard>, rows: Vec<RecordBatch>) -> Result<Inserted> {
        let count: u64 = rows.iter().map(|b| b.num_rows() as u64).sum();
        if count > 0 {
            let snapshot = keys.as_ref().map(|k| k.snapshot().clone()).unwrap_or_else(|| target.snapshot.clone());
            let schema = self.db.identity.advanced_schema(&target.entry.id, snapshot.schema());
            let reads_data = keys.as_ref().is_some_and(|k| !k.is_empty());
            let request = WriteRequest { batches: rows.clone(), schema, reads_data, ..Default::default() };
            let outcome = target.table.write_on(&snapshot, request).await.map_err(storage_data_error)?;
            let changed = Some(ChangedRows::inserted(rows.clone()));
            self.db.writer.commit(&target.entry.qualified_name(), Operation::Write, changed, outcome).await?;
        }
        keys_committed(keys).await;
        Ok(Inserted { count, rows })
    }

    async fn insert_do_nothing(
        &self,
        target: &Target,
        guard: KeyGuard,
        arbiters: &[usize],
        proposed: RecordBatch,
    ) -> Result<Inserted> {
        let keys: Vec<Vec<Option<Vec<u8>>>> =
            arbiters.iter().map(|&a| guard.keys_of(a, &proposed)).collect::<Result<_>>()?;
        let mut seen: Vec<HashSet<&[u8]>> = vec![HashSet::new(); arbiters.len()];
        let mut keep = Vec::with_capacity(proposed.num_rows());
        for row in 0..proposed.num_rows() {
            let conflict = arbiters.iter().enumerate().any(|(j, &index)| {
                keys.get(j).and_then(|k| k.get(row)).and_then(Option::as_deref).is_some_and(|key| {
                    guard.lookup(index, key).is_some() || seen.get(j).is_some_and(|s| s.contains(key))
                })
            });
            if !conflict {
                for (j, set) in seen.iter_mut().enumerate() {
                    if let Some(key) = keys.get(j).and_then(|k| k.get(row)).and_then(Option::as_deref) {
                        set.insert(key);
                    }
                }
            }
            keep.push(!conflict);
        }
        let kept = filter_record_batch(&proposed, &BooleanArray::from(keep))?;
        let rows = vec![kept];
        guard.check(&target.name.name, Some(&HashMap::new()), &rows)?;
        self.check_references(target, &guard, &HashMap::new(), &rows).await?;
        self.append(target, Some(guard), rows).await
    }

    async fn insert_do_update(
        &self,
        target: &Target,
        guard: KeyGuard,
        arbiter: Option<usize>,
        proposed: RecordBatch,
        update: ast::DoUpdate,
        alias: &Ident,
    ) -> Result<Inserted> {
        let Some(arbiter) = arbiter else {
            return Err(Error::Internal("ON CONFLICT DO UPDATE without an arbiter index".into()));
        };
        let keys = guard.keys_of(arbiter, &proposed)?;
        let mut seen = HashSet::new();
        for key in keys.iter().flatten() {
            if !seen.insert(key.as_slice()) {
                return Err(Error::data(
                    "21000",
                    "ON CONFLICT DO UPDATE command cannot affect row a second time (rows proposed for insertion \
                     within the same command have duplicate constrained values)",
                ));
            }
        }
        let mut conflicts: Vec<(u32, Loc)> = Vec::new();
        let mut fresh = Vec::with_capacity(proposed.num_rows());
        // The proposal each written row comes from, to return them in that order.
        let mut order: Vec<u32> = Vec::new();
        for (row, key) in keys.iter().enumerate() {
            match key.as_deref().and_then(|k| guard.lookup(arbiter, k)) {
                Some(loc) => {
                    conflicts.push((row as u32, loc));
                    fresh.push(false);
                }
                None => {
                    fresh.push(true);
                    order.push(row as u32);
                }
            }
        }
        let fresh = filter_record_batch(&proposed, &BooleanArray::from(fresh))?;
        let snapshot = guard.snapshot().clone();
        let schema = snapshot.arrow_schema();
        let mut rows = vec![fresh];
        let mut deleted_rows: HashMap<String, RoaringTreemap> = HashMap::new();
        let mut old = Vec::new();
        if !conflicts.is_empty() {
            // The conflicting rows, read at their locations, in the order of `conflicts`.
            let mut by_file: HashMap<u32, RoaringTreemap> = HashMap::new();
            for (_, loc) in &conflicts {
                by_file.entry(loc.file).or_default().insert(loc.row as u64);
            }
            let mut position: HashMap<(u32, u32), u32> = HashMap::new();
            let mut existing = Vec::new();
            let mut count = 0u32;
            for (file, rows) in by_file {
                let path = guard.path_of(Loc { file, row: 0 }).ok_or_else(|| Error::Internal("a key's file".into()))?;
                let add = snapshot
                    .file_by_path(path)
                    .ok_or_else(|| Error::Internal(format!("the key index names {path}, not in the table")))?;
                for row in rows.iter() {
                    position.insert((file, row as u32), count);
                    count += 1;
                }
                existing.extend(target.table.read_rows(&snapshot, add, RowMask::Only(Arc::new(rows))).await?);
            }
            let existing = concat_batches(&schema, &existing)?;
            if existing.num_rows() != count as usize {
                return Err(Error::Internal("the key index and the table disagree on a file's rows".into()));
            }
            let take: Vec<u32> =
                conflicts.iter().filter_map(|(_, loc)| position.get(&(loc.file, loc.row))).copied().collect();
            let existing = take_record_batch(&existing, &UInt32Array::from(take))?;
            let proposals: Vec<u32> = conflicts.iter().map(|(row, _)| *row).collect();
            let excluded = take_record_batch(&proposed, &UInt32Array::from(proposals))?;
            let pairs = Int64Array::from_iter_values(0..conflicts.len() as i64);
            let left =
                self.temp_relation("conflicting", &with_column(&existing, PAIR_COLUMN, &pairs)?, alias.clone())?;
            let right =
                self.temp_relation("excluded", &with_column(&excluded, PAIR_COLUMN, &pairs)?, Ident::new("excluded"))?;
            let assignments = assignment_map(&update.assignments, target)?;
            let names: Vec<String> = target.snapshot.schema().fields.iter().map(|f| f.name.clone()).collect();
            let mut projection: Vec<SelectItem> = names
                .iter()
                .map(|name| SelectItem::ExprWithAlias {
                    expr: assignments.get(name).cloned().unwrap_or_else(|| column_of(alias, name)),
                    alias: Ident::with_quote('"', name),
                })
                .collect();
            projection.push(SelectItem::UnnamedExpr(column_of(alias, PAIR_COLUMN)));
            let pair_join = Expr::BinaryOp {
                left: Box::new(column_of(alias, PAIR_COLUMN)),
                op: BinaryOperator::Eq,
                right: Box::new(column_of(&Ident::new("excluded"), PAIR_COLUMN)),
            };
            let selection = match update.selection {
                Some(condition) => Expr::BinaryOp {
                    left: Box::new(pair_join),
                    op: BinaryOperator::And,
                    right: Box::new(Expr::Nested(Box::new(condition))),
                },
                None => pair_join,
            };
            let from = vec![
                TableWithJoins { relation: left, joins: vec![] },
                TableWithJoins { relation: right, joins: vec![] },
            ];
            let (_, updated) = self.run_source(select_query(projection, from, Some(selection))?).await?;
            let mut updated_pairs = Vec::new();
            for batch in updated.iter().filter(|b| b.num_rows() > 0) {
                let values = batch.project(&(0..names.len()).collect::<Vec<_>>())?;
                rows.push(self.to_table_rows(target, &values, &ColumnMatch::Position(names.clone())).await?);
                let pair = cast_pairs(batch.column(names.len()))?;
                updated_pairs.extend(pair.values().iter().map(|p| *p as u32));
            }
            for pair in &updated_pairs {
                let Some((proposal, loc)) = conflicts.get(*pair as usize) else { continue };
                order.push(*proposal);
                let path = guard.path_of(*loc).unwrap_or_default().to_string();
                deleted_rows.entry(path).or_default().insert(loc.row as u64);
            }
            old.push(take_record_batch(&existing, &UInt32Array::from(updated_pairs))?);
        }
        let rows = concat_batches(&schema, &rows)?;
        let mut sorted: Vec<u32> = (0..order.len() as u32).collect();
        sorted.sort_by_key(|i| order.get(*i as usize).copied().unwrap_or_default());
        let rows = vec![take_record_batch(&rows, &UInt32Array::from(sorted))?];
        let count = order.len() as u64;
        if deleted_rows.is_empty() {
            guard.check(&target.name.name, Some(&HashMap::new()), &rows)?;
            self.check_references(target, &guard, &HashMap::new(), &rows).await?;
            return self.append(target, Some(guard), rows).await;
        }
        guard.check(&target.name.name, Some(&deleted_rows), &rows)?;
        self.check_references(target, &guard, &deleted_rows, &rows).await?;
        let deleted = deleted_rows
            .into_iter()
            .map(|(path, set)| {
                snapshot
                    .file_by_path(&path)
                    .map(|add| (add.clone(), set))
                    .ok_or_else(|| Error::Internal(format!("the key index names {path}, not in the table")))
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = self.db.identity.advanced_schema(&target.entry.id, snapshot.schema());
        let mutation = Mutation {
            deleted,
            inserted: rows.clone(),
            operation: "MERGE".into(),
            schema,
            reads_data: true,
            ..Default::default()
        };
        let outcome = target.table.mutate(&snapshot, mutation).await.map_err(storage_data_error)?;
        let changed = Some(ChangedRows { deleted: old, inserted: rows.clone() });
        self.db.writer.commit(&target.entry.qualified_name(), Operation::Merge, changed, outcome).await?;
        keys_committed(Some(guard)).await;
        Ok(Inserted { count, rows })
    }

    /// Registers rows as a relation of this statement under `alias`.
    pub(crate) fn temp_relation(&self, hint: &str, rows: &RecordBatch, alias: Ident) -> Result<TableFactor> {
        let temp = self.temp_name(hint);
        let table = MemTable::try_new(rows.schema(), vec![vec![rows.clone()]])?;
        self.temp.insert(&temp, Arc::new(table));
        table_relation(crate::names::object_name(TEMP_SCHEMA, &temp), Some(alias))
    }

    /// The rows of a RETURNING list over rows of the table's schema.
    pub(crate) async fn returning(
        &self,
        schema: SchemaRef,
        rows: Vec<RecordBatch>,
        alias: Ident,
        items: Vec<SelectItem>,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let rows = concat_batches(&schema, &rows)?;
        let relation = self.temp_relation("returning", &rows, alias)?;
        let query = select_query(items, vec![TableWithJoins { relation, joins: vec![] }], None)?;
        self.run_source(query).await
    }
}

/// `name [AS alias]` as a relation.
pub(crate) fn table_relation(name: ast::ObjectName, alias: Option<Ident>) -> Result<TableFactor> {
    let mut relation = relation_template()?;
    if let TableFactor::Table { name: n, alias: a, .. } = &mut relation {
        *n = name;
        *a = alias.map(|name| ast::TableAlias { explicit: true, name, columns: vec![], at: None });
    }
    Ok(relation)
}

/// The parsed shape of a table reference (`FROM t`), whose name and alias are then replaced.
fn relation_template() -> Result<TableFactor> {
    let parsed = crate::syntax::parser::parse_statement_text("SELECT 1 FROM t")?;
    let crate::syntax::parser::SluiceStatement::Standard(statement) = parsed else {
        return Err(Error::Internal("the FROM template is not a query".into()));
    };
    let ast::Statement::Query(query) = *statement else {
        return Err(Error::Internal("the FROM template is not a query".into()));
    };
    let ast::SetExpr::Select(select) = *query.body else {
        return Err(Error::Internal("the FROM template is not a SELECT".into()));
    };
    select
        .from
        .into_iter()
        .next()
        .map(|f| f.relation)
        .ok_or_else(|| Error::Internal("the FROM template has no relation".into()))
}

fn with_column(batch: &RecordBatch, name: &str, column: &Int64Array) -> Result<RecordBatch> {
    let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(name, DataType::Int64, false)));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(column.clone()));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

fn cast_pairs(column: &arrow::array::ArrayRef) -> Result<Int64Array> {
    let cast = arrow::compute::cast(column, &DataType::Int64)?;
    Ok(cast.as_primitive::<Int64Type>().clone())
}

/// The key indexes an ON CONFLICT clause arbitrates on.
fn arbiters(
    guard: &KeyGuard,
    target: &Target,
    conflict_target: Option<&ConflictTarget>,
    update: bool,
) -> Result<Vec<usize>> {
    let no_match =
        || Error::data("42P10", "there is no unique or exclusion constraint matching the ON CONFLICT specification");
    match conflict_target {
        Some(ConflictTarget::Columns(columns)) => {
            let columns: Vec<String> = columns.iter().map(normalize).collect();
            for column in &columns {
                if target.snapshot.schema().field(column).is_none() {
                    return Err(Error::undefined_column_of(column, &target.name.name));
                }
            }
            guard.index_on(&columns).map(|i| vec![i]).ok_or_else(no_match)
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            let name = match name.0.last() {
                Some(ast::ObjectNamePart::Identifier(ident)) => normalize(ident),
                _ => name.to_string(),
            };
            guard.index_named(&name).map(|i| vec![i]).ok_or_else(|| Error::UndefinedObject {
                kind: "constraint",
                name: format!("{name}\" for table \"{}", target.name.name),
            })
        }
        None if update => Err(Error::data(
            "42601",
            "ON CONFLICT DO UPDATE requires inference specification or constraint name (for example, ON CONFLICT \
             (column_name))",
        )),
        None => Ok(guard.unique_indexes()),
    }
}
