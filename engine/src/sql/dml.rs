//! DML: INSERT, UPDATE, DELETE, MERGE INTO and TRUNCATE.
//!
//! Each statement is one Delta commit, so a failing statement leaves the table as it was (files it
//! wrote before failing are never referenced, and VACUUM removes them).
//!
//! UPDATE, DELETE and MERGE find their target rows with an ordinary DataFusion query over the
//! target table extended with two hidden columns, `__sluice_file` and `__sluice_row` (each row's
//! file and physical row index). The query can therefore use joins, subqueries and any function;
//! its result names exactly the rows to mask with deletion vectors, and carries the new values.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::compute::{cast_with_options, filter_record_batch, CastOptions};
use arrow::datatypes::{Schema, SchemaRef, UInt64Type};
use datafusion::common::DFSchema;
use datafusion::logical_expr::ColumnarValue;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    self, AssignmentTarget, Delete, Expr, FromTable, Ident, Insert, Merge, MergeAction, MergeClauseKind,
    MergeInsertKind, ObjectName, Query, SelectItem, TableFactor, TableObject, TableWithJoins, Truncate, Update,
    UpdateTableFromKind,
};
use roaring::RoaringTreemap;
use sluice_storage::actions::Add;
use sluice_storage::snapshot::Snapshot;
use sluice_storage::table::Table;
use sluice_storage::write::{Mutation, SaveMode, WriteRequest};

use super::catalog_provider::TEMP_SCHEMA;
use crate::catalog::TableEntry;
use crate::change::{ChangedRows, ColumnMatch, Operation, WriteContext, Written};
use crate::error::{Error, Result};
use crate::keys::KeyGuard;
use crate::names::{normalize, table_name, TableName};
use crate::provider::storage_scan::{FILE_COLUMN, ROW_COLUMN};
use crate::provider::SluiceTable;
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::parser::{parse_statement_text, Overriding, SluiceStatement};

/// A target table of DML with its statement snapshot.
pub(crate) struct Target {
    pub name: TableName,
    pub entry: TableEntry,
    pub table: Arc<Table>,
    pub snapshot: Arc<Snapshot>,
}

impl QueryContext {
    pub(crate) async fn target(&self, name: &ObjectName) -> Result<Target> {
        if let Ok(view) = table_name(name) {
            if self.catalog_state().views.contains_key(&crate::catalog::key(&view.schema, &view.name)) {
                return Err(Error::NotSupported(format!(
                    "writing into view {view} (views are read-only in Sluice: write into the tables it reads)"
                )));
            }
        }
        let (entry, table, snapshot) = self.resolve_table(name).await?;
        if entry.kind == crate::catalog::TableKind::MaterializedView {
            return Err(Error::data(
                "42809",
                format!("cannot change materialized view \"{}\": its rows come from its query", entry.name),
            ));
        }
        Ok(Target { name: table_name(name)?, entry, table, snapshot })
    }

    /// Runs a query (given as SQL built from the statement's own pieces) and collects it.
    pub(super) async fn run_source(&self, query: Query) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        match self.run_query(query).await? {
            StatementResult::Rows { schema, batches } => Ok((schema, batches)),
            _ => Err(Error::Internal("a query returned no rows".into())),
        }
    }

    pub(crate) async fn insert_statement(&self, insert: Insert) -> Result<StatementResult> {
        self.insert_overriding(insert, None).await
    }

    /// An INSERT, with its OVERRIDING clause if it has one.
    pub(crate) async fn insert_overriding(
        &self,
        insert: Insert,
        overriding: Option<Overriding>,
    ) -> Result<StatementResult> {
        let on = match insert.on {
            None => None,
            Some(ast::OnInsert::OnConflict(on)) => Some(on),
            Some(other) => return Err(Error::NotSupported(format!("INSERT ... {other}"))),
        };
        if insert.or.is_some() || insert.ignore || !insert.assignments.is_empty() || insert.partitioned.is_some() {
            return Err(Error::NotSupported("this form of INSERT (PostgreSQL's INSERT has no such clause)".into()));
        }
        let TableObject::TableName(name) = &insert.table else {
            return Err(Error::NotSupported("INSERT INTO a table function".into()));
        };
        let columns: Vec<String> = insert
            .columns
            .iter()
            .map(|c| c.0.last().map(|p| p.to_string().trim_matches('"').to_string()).unwrap_or_default())
            .collect();
        let columns: Vec<String> = insert
            .columns
            .iter()
            .zip(columns)
            .map(|(c, text)| match c.0.last() {
                Some(ast::ObjectNamePart::Identifier(ident)) => normalize(ident),
                _ => text,
            })
            .collect();
        let target = self.target(name).await?;
        let list = if columns.is_empty() {
            target.snapshot.schema().fields.iter().map(|f| f.name.clone()).collect()
        } else {
            columns
        };
        let implicit = insert.columns.is_empty();
        let (mut batches, mut list) = self.insert_source(&target, insert.source, list, implicit, overriding).await?;
        if overriding == Some(Overriding::User) {
            // The values given for identity columns are dropped: the columns are generated.
            let is_identity =
                |name: &String| target.snapshot.schema().field(name).and_then(crate::identity::Identity::of).is_some();
            if list.iter().any(is_identity) {
                let kept: Vec<usize> =
                    list.iter().enumerate().filter(|(_, name)| !is_identity(name)).map(|(i, _)| i).collect();
                list.retain(|name| !is_identity(name));
                batches = batches.iter().map(|b| b.project(&kept)).collect::<std::result::Result<_, _>>()?;
            }
        }
        if on.is_some() || insert.returning.is_some() {
            if insert.overwrite {
                return Err(Error::NotSupported("INSERT OVERWRITE with ON CONFLICT or RETURNING".into()));
            }
            let alias = match &insert.table_alias {
                Some(alias) => alias.alias.clone(),
                None => Ident::with_quote('"', &target.name.name),
            };
            return self.insert_with(&target, batches, list, on, insert.returning, alias).await;
        }
        let mode = if insert.overwrite { SaveMode::Overwrite } else { SaveMode::Append };
        let rows = self.write_rows(&target, batches, ColumnMatch::Position(list), mode).await?;
        Ok(StatementResult::Command { tag: format!("INSERT 0 {rows}"), rows: Some(rows) })
    }

    /// The rows an INSERT's source gives, and the target columns they fill in order. `DEFAULT
    /// VALUES` is one row of defaults; a VALUES list with `DEFAULT` items is run per pattern of
    /// them, each row then filled to the table's columns (the list is then every column).
    async fn insert_source(
        &self,
        target: &Target,
        source: Option<Box<Query>>,
        list: Vec<String>,
        implicit: bool,
        overriding: Option<Overriding>,
    ) -> Result<(Vec<RecordBatch>, Vec<String>)> {
        let all: Vec<String> = target.snapshot.schema().fields.iter().map(|f| f.name.clone()).collect();
        let always: Vec<&str> = target
            .snapshot
            .schema()
            .fields
            .iter()
            .filter(|_| overriding.is_none())
            .filter(|f| crate::identity::Identity::of(f).is_some_and(|i| !i.allow_explicit_insert))
            .map(|f| f.name.as_str())
            .collect();
        let generated: Vec<&str> = target
            .snapshot
            .schema()
            .fields
            .iter()
            .filter(|f| super::generated::expression_of(f).is_some())
            .map(|f| f.name.as_str())
            .collect();
        let refuse_always = |columns: &[String]| {
            if let Some(column) = columns.iter().find(|c| generated.contains(&c.as_str())) {
                return Err(Error::data(
                    "428C9",
                    format!("cannot insert a non-DEFAULT value into column \"{column}\" (it is a generated column)"),
                ));
            }
            match columns.iter().find(|c| always.contains(&c.as_str())) {
                Some(column) => Err(Error::data(
                    "428C9",
                    format!(
                        "cannot insert a non-DEFAULT value into column \"{column}\" (it is an identity column \
                         defined as GENERATED ALWAYS)"
                    ),
                )),
                None => Ok(()),
            }
        };
        let Some(source) = source else {
            let one = RecordBatch::try_new_with_options(
                Arc::new(Schema::empty()),
                vec![],
                &RecordBatchOptions::new().with_row_count(Some(1)),
            )?;
            return Ok((vec![self.to_table_rows(target, &one, &ColumnMatch::Position(vec![])).await?], all));
        };
        let mut source = source;
        if let ast::SetExpr::Values(values) = source.body.as_mut() {
            let names: &[String] = if list.is_empty() { &all } else { &list };
            typed_values_literals(values, names, target);
        }
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            let (batches, list) = self.run_insert_source(*source, list, implicit).await?;
            refuse_always(&list)?;
            return Ok((batches, list));
        };
        let is_default = is_default_keyword;
        if !values.rows.iter().flat_map(|r| r.content.iter()).any(is_default) {
            let (batches, list) = self.run_insert_source(*source, list, implicit).await?;
            refuse_always(&list)?;
            return Ok((batches, list));
        }
        // Rows by which of their items are DEFAULT.
        let mut groups: Vec<(Vec<bool>, ValuesRows)> = Vec::new();
        for row in &values.rows {
            let row = &row.content;
            check_width(row.len(), list.len(), implicit)?;
            let mask: Vec<bool> = row.iter().map(is_default).collect();
            let kept = ast::Parens::with_empty_span(row.iter().filter(|e| !is_default(e)).cloned().collect());
            match groups.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, rows)) => rows.push(kept),
                None => groups.push((mask, vec![kept])),
            }
        }
        let mut conformed = Vec::new();
        for (mask, rows) in groups {
            let columns: Vec<String> = list.iter().zip(&mask).filter(|(_, d)| !**d).map(|(c, _)| c.clone()).collect();
            refuse_always(&columns)?;
            let batches = if columns.is_empty() {
                vec![RecordBatch::try_new_with_options(
                    Arc::new(Schema::empty()),
                    vec![],
                    &RecordBatchOptions::new().with_row_count(Some(rows.len())),
                )?]
            } else {
                let mut query = source.clone();
                if let ast::SetExpr::Values(values) = query.body.as_mut() {
                    values.rows = rows;
                }
                self.run_source(*query).await?.1
            };
            for batch in &batches {
                conformed.push(self.to_table_rows(target, batch, &ColumnMatch::Position(columns.clone())).await?);
            }
        }
        Ok((conformed, all))
    }

    /// Runs an INSERT's source; with no column list, a narrower source fills the first columns.
    async fn run_insert_source(
        &self,
        source: Query,
        mut list: Vec<String>,
        implicit: bool,
    ) -> Result<(Vec<RecordBatch>, Vec<String>)> {
        let (schema, batches) = self.run_source(source).await?;
        let width = schema.fields().len();
        check_width(width, list.len(), implicit)?;
        list.truncate(width);
        Ok((batches, list))
    }

    pub(crate) async fn insert_by_name(
        &self,
        name: &ObjectName,
        query: Query,
        overwrite: bool,
    ) -> Result<StatementResult> {
        let target = self.target(name).await?;
        let (_, batches) = self.run_source(query).await?;
        let mode = if overwrite { SaveMode::Overwrite } else { SaveMode::Append };
        let rows = self.write_rows(&target, batches, ColumnMatch::ByName, mode).await?;
        Ok(StatementResult::Command { tag: format!("INSERT 0 {rows}"), rows: Some(rows) })
    }

    /// Appends batches whose columns are matched by name (the `Database::insert` API).
    pub(crate) async fn insert_batches(
        &self,
        name: &TableName,
        batches: Vec<RecordBatch>,
        mode: Option<SaveMode>,
    ) -> Result<u64> {
        let object = crate::names::object_name(&name.schema, &name.name);
        let target = self.target(&object).await?;
        self.write_rows(&target, batches, ColumnMatch::ByName, mode.unwrap_or_default()).await
    }

    async fn write_rows(
        &self,
        target: &Target,
        batches: Vec<RecordBatch>,
        columns: ColumnMatch,
        mode: SaveMode,
    ) -> Result<u64> {
        Ok(self.write_rows_with(target, batches, columns, mode, WriteContext::default()).await?.rows)
    }

    /// Writes rows in one commit: conformed to the table, checked against its expectations, with
    /// a flow's txn when one writes; then runs the flows the table feeds.
    pub(crate) async fn write_rows_with(
        &self,
        target: &Target,
        batches: Vec<RecordBatch>,
        columns: ColumnMatch,
        mode: SaveMode,
        context: WriteContext,
    ) -> Result<Written> {
        let mut conformed = Vec::with_capacity(batches.len());
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            conformed.push(self.to_table_rows(target, batch, &columns).await?);
        }
        let origin = context.source_version.unwrap_or_else(|| super::quality::write_version(target));
        let checked = super::quality::check_expectations(self, &target.entry, conformed, origin).await?;
        let rows: u64 = checked.kept.iter().map(|b| b.num_rows() as u64).sum();
        if !checked.quarantined.is_empty() {
            super::quality::write_quarantine(self, &checked.quarantined, &context.txns).await?;
        }
        let written = Written { rows, violations: checked.violations };
        let commit_txns_only = context.commit_empty && !context.txns.is_empty();
        if checked.kept.is_empty() && mode == SaveMode::Append && !commit_txns_only {
            return Ok(written);
        }
        let no_rows_deleted = HashMap::new();
        let deleted = if mode == SaveMode::Overwrite { None } else { Some(&no_rows_deleted) };
        let keys = self.check_keys(target, deleted, &checked.kept).await?;
        let snapshot = keys.as_ref().map(|k| k.snapshot().clone()).unwrap_or_else(|| target.snapshot.clone());
        let request = WriteRequest {
            batches: checked.kept.clone(),
            mode,
            txns: context.txns.clone(),
            schema: self.db.identity.advanced_schema(&target.entry.id, snapshot.schema()),
            reads_data: keys.as_ref().is_some_and(|k| !k.is_empty()),
            ..Default::default()
        };
        let outcome = target.table.write_on(&snapshot, request).await.map_err(storage_data_error)?;
        let rows = Some(ChangedRows::inserted(checked.kept));
        self.db.writer.commit(&target.entry.qualified_name(), Operation::Write, rows, outcome).await?;
        keys_committed(keys).await;
        Ok(written)
    }

    /// For a target with keys, identity columns or foreign keys (either end): locks the table
    /// (its key index) and checks the rows a commit inserts (`deleted`: the rows it deletes, by
    /// file path; `None`: all of them). The caller holds the guard until its commit is done (an
    /// append commits on the guard's snapshot, with the identity columns' new high-water marks),
    /// then hands it to [`keys_committed`]. A removed key that a foreign key references with
    /// A removed key that a foreign key references with ON UPDATE SET NULL or SET DEFAULT is
    /// refused (0A000) here: only UPDATE runs those actions (it calls `check_writes` itself).
    pub(crate) async fn check_keys(
        &self,
        target: &Target,
        deleted: Option<&HashMap<String, RoaringTreemap>>,
        inserted: &[RecordBatch],
    ) -> Result<Option<KeyGuard>> {
        let (guard, cascades) = self.check_writes(target, deleted, inserted, false).await?;
        if let Some(cascade) = cascades.first() {
            // UPDATE runs its cascades (update_statement); other writes that change keys do not.
            return Err(Error::NotSupported(format!(
                "this change of a key that foreign key {} references with ON UPDATE {} (use UPDATE)",
                cascade.key_name(),
                cascade.action_words()
            )));
        }
        Ok(guard)
    }

    /// [`QueryContext::check_keys`], and the foreign keys that reference the target: with
    /// `deleting` (a DELETE), what their ON DELETE actions ask of the referencing tables, to run
    /// after the write ([`QueryContext::run_cascades`]).
    pub(crate) async fn check_writes(
        &self,
        target: &Target,
        deleted: Option<&HashMap<String, RoaringTreemap>>,
        inserted: &[RecordBatch],
        deleting: bool,
    ) -> Result<(Option<KeyGuard>, Vec<super::references::Cascade>)> {
        let referenced = self.catalog_state().is_referenced(&target.entry.id);
        if deleted.is_none() && referenced {
            return Err(Error::NotSupported(format!(
                "replacing every row of {} (INSERT OVERWRITE): foreign keys reference it",
                target.name
            )));
        }
        let removes = referenced && deleted.is_some_and(|rows| rows.values().any(|r| !r.is_empty()));
        let references = !target.entry.foreign_keys.is_empty() && inserted.iter().any(|b| b.num_rows() > 0);
        if crate::keys::unique_defs(target.snapshot.configuration()).is_empty()
            && crate::identity::identity_columns(target.snapshot.schema()).is_empty()
            && !removes
            && !references
        {
            return Ok((None, Vec::new()));
        }
        let guard = if references {
            Box::pin(self.lock_for_write(target)).await?
        } else {
            Box::pin(self.lock_keys(target)).await?
        };
        // Rows found at the statement's snapshot, checked at a later one: another writer may
        // have moved them (an autocommit statement runs again on the newer snapshot).
        let reads_rows = deleted.is_none_or(|rows| rows.values().any(|r| !r.is_empty()));
        if reads_rows && !target.table.is_staged() && guard.snapshot().version() != target.snapshot.version() {
            return Err(Error::SerializationFailure(format!(
                "could not serialize access due to concurrent update of {} (version {} since the statement read version {})",
                target.name,
                guard.snapshot().version(),
                target.snapshot.version()
            )));
        }
        guard.check(&target.name.name, deleted, inserted)?;
        if references {
            self.check_parents(target, &guard, deleted, inserted)?;
        }
        let cascades = match deleted {
            Some(deleted) if removes => {
                Box::pin(self.check_children(target, &guard, deleted, inserted, deleting)).await?
            }
            _ => Vec::new(),
        };
        if !cascades.is_empty() && !target.table.is_staged() {
            return Err(Error::Internal(format!(
                "a cascade from {} outside a transaction (it would not commit with the write)",
                target.name
            )));
        }
        Ok((Some(guard), cascades))
    }

    /// Locks the key index a write to `target` checks against: the table's, or for a staged
    /// handle the transaction block's copy (see [`crate::staging`]).
    pub(crate) async fn lock_keys(&self, target: &Target) -> Result<KeyGuard> {
        self.lock_table_keys(&target.entry.id, &target.table).await
    }

    /// Locks the key index of the table with id `id` for a write through `table`: the table's
    /// own, or for a staged handle the transaction block's copy (see [`crate::staging`]). DDL
    /// that a block stages (ALTER TABLE, CREATE and DROP INDEX) changes the block's copy, never
    /// the index others read.
    pub(crate) async fn lock_table_keys(&self, id: &str, table: &Arc<Table>) -> Result<KeyGuard> {
        if table.is_staged() {
            let cell = self.staging.keys_of(&self.db, id).await?;
            return crate::keys::lock_cell(cell, table).await;
        }
        self.db.keys.lock(id, table).await
    }

    /// Builds rows of the table's schema from a source batch: matched columns cast to the column
    /// types, the others filled from their defaults (or NULL), constraints checked.
    pub(crate) async fn to_table_rows(
        &self,
        target: &Target,
        batch: &RecordBatch,
        columns: &ColumnMatch,
    ) -> Result<RecordBatch> {
        let schema = target.snapshot.schema();
        let arrow_schema = target.snapshot.arrow_schema();
        let source_names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
        let mut assigned: HashMap<String, ArrayRef> = HashMap::new();
        match columns {
            ColumnMatch::Position(list) => {
                if batch.num_columns() != list.len() {
                    return Err(Error::data(
                        "42601",
                        format!("INSERT has {} expressions but {} target columns", batch.num_columns(), list.len()),
                    ));
                }
                for (name, column) in list.iter().zip(batch.columns()) {
                    let field =
                        schema.field(name).ok_or_else(|| Error::undefined_column_of(name, &target.name.name))?;
                    if assigned.insert(field.name.clone(), column.clone()).is_some() {
                        return Err(Error::data("42701", format!("column \"{name}\" specified more than once")));
                    }
                }
            }
            ColumnMatch::ByName => {
                for (name, column) in source_names.iter().zip(batch.columns()) {
                    let field =
                        schema.field(name).ok_or_else(|| Error::undefined_column_of(name, &target.name.name))?;
                    assigned.insert(field.name.clone(), column.clone());
                }
            }
        }
        let rows = batch.num_rows();
        let mut out = Vec::with_capacity(schema.fields.len());
        for (field, arrow_field) in schema.fields.iter().zip(arrow_schema.fields()) {
            let column = match assigned.remove(&field.name) {
                Some(column) => self.assigned_column(&column, arrow_field.data_type(), &field.name)?,
                None => match (crate::identity::Identity::of(field), target.entry.defaults.get(&field.name)) {
                    (Some(identity), _) => {
                        let values = self.db.identity.allocate(&target.entry.id, &field.name, identity, rows)?;
                        if let Some(last) = values.values().last() {
                            // The session's currval, as PostgreSQL's nextval in the default sets it.
                            let key =
                                super::sequences::sequence_key(&target.entry.schema, &target.entry.name, &field.name);
                            self.remember_sequence_value(key, *last, true);
                        }
                        cast_column(&(Arc::new(values) as ArrayRef), arrow_field.data_type(), &field.name)?
                    }
                    (None, Some(default)) => {
                        self.default_values(default, arrow_field.data_type(), rows, &field.name).await?
                    }
                    (None, None) => arrow::array::new_null_array(arrow_field.data_type(), rows),
                },
            };
            let generated = super::generated::expression_of(field).is_some();
            if !field.nullable && column.null_count() > 0 && !generated {
                return Err(Error::NotNullViolation { table: target.name.to_string(), column: field.name.clone() });
            }
            let column = crate::types::conform(field, &column, &self.time_zone())?;
            self.check_enum_values(field, &column)?;
            out.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let rows = if super::generated::has_generated(schema) {
            // Generated columns are computed from the others, then checked for NULL.
            let relaxed = arrow_schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true));
            let relaxed =
                Arc::new(Schema::new_with_metadata(relaxed.collect::<Vec<_>>(), arrow_schema.metadata().clone()));
            let rows = self.compute_generated(schema, RecordBatch::try_new_with_options(relaxed, out, &options)?)?;
            for (field, column) in schema.fields.iter().zip(rows.columns()) {
                if !field.nullable && column.null_count() > 0 {
                    return Err(Error::NotNullViolation { table: target.name.to_string(), column: field.name.clone() });
                }
            }
            RecordBatch::try_new_with_options(arrow_schema, rows.columns().to_vec(), &options)?
        } else {
            RecordBatch::try_new_with_options(arrow_schema, out, &options)?
        };
        self.check_constraints(target, &rows).await?;
        Ok(rows)
    }

    /// A value assigned to a column, in the column's type. Text written to a date/time column
    /// (INSERT, UPDATE, COPY) is read as PostgreSQL's input functions read it under the session's
    /// settings: `1/8/1999` in the DateStyle order, and a `timestamptz` without an offset in the
    /// session's time zone.
    fn assigned_column(
        &self,
        column: &ArrayRef,
        data_type: &arrow::datatypes::DataType,
        name: &str,
    ) -> Result<ArrayRef> {
        use arrow::datatypes::DataType as T;
        let text = matches!(column.data_type(), T::Utf8 | T::LargeUtf8 | T::Utf8View);
        if text && matches!(data_type, T::Date32 | T::Date64 | T::Timestamp(..)) {
            let zone = self.time_zone();
            return crate::datetime::column_from_session_text(column, data_type, self.date_order(), &zone);
        }
        cast_column(column, data_type, name)
    }

    /// An expression with its statement-time functions (`now()`, `current_date`, ...) folded to
    /// this statement's time, as the planner does for queries: they cannot run unfolded.
    fn simplified(
        &self,
        expr: datafusion::logical_expr::Expr,
        schema: &DFSchema,
    ) -> Result<datafusion::logical_expr::Expr> {
        use datafusion::optimizer::simplify_expressions::ExprSimplifier;
        // Read in place (`SessionContext::state` clones the whole session state).
        let (options, started) = {
            let state = self.ctx.state_ref();
            let state = state.read();
            (state.config_options().as_ref().clone(), state.execution_props().query_execution_start_time)
        };
        let context = datafusion::logical_expr::simplify::SimplifyContext::builder()
            .with_schema(Arc::new(schema.clone()))
            .with_config_options(Arc::new(options))
            .with_query_execution_start_time(started.or_else(|| Some(chrono::Utc::now())))
            .build();
        Ok(ExprSimplifier::new(context).simplify(expr)?)
    }

    pub(crate) async fn default_values(
        &self,
        default: &str,
        data_type: &arrow::datatypes::DataType,
        rows: usize,
        column: &str,
    ) -> Result<ArrayRef> {
        if let Some(values) = self.sequence_default(default, rows).await? {
            return cast_column(&values, data_type, column);
        }
        let empty = DFSchema::empty();
        let expr = self.simplified(self.ctx.parse_sql_expr(default, &empty)?, &empty)?;
        let physical = self.ctx.create_physical_expr(expr, &empty)?;
        let batch = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        let value = physical.evaluate(&batch)?.into_array(rows)?;
        cast_column(&value, data_type, column)
    }

    async fn check_constraints(&self, target: &Target, rows: &RecordBatch) -> Result<()> {
        let constraints = target.snapshot.constraints();
        if constraints.is_empty() || rows.num_rows() == 0 {
            return Ok(());
        }
        let df_schema = DFSchema::try_from(rows.schema().as_ref().clone())?;
        for (name, expr) in constraints {
            let logical = self.simplified(self.ctx.parse_sql_expr(&expr, &df_schema)?, &df_schema)?;
            let physical = self.ctx.create_physical_expr(logical, &df_schema)?;
            let result = match physical.evaluate(rows)? {
                ColumnarValue::Array(array) => array,
                ColumnarValue::Scalar(scalar) => scalar.to_array_of_size(rows.num_rows())?,
            };
            let result = arrow::compute::cast(&result, &arrow::datatypes::DataType::Boolean)?;
            // SQL semantics: a NULL result passes the check.
            if result.as_boolean().iter().any(|v| v == Some(false)) {
                return Err(Error::CheckViolation { table: target.name.to_string(), constraint: name });
            }
        }
        Ok(())
    }

    /// Registers the target with its hidden columns for one statement; returns its name in
    /// [`TEMP_SCHEMA`].
    pub(super) fn register_dml_relation(&self, target: &Target) -> String {
        let temp = self.temp_name("dml");
        self.temp.insert(&temp, Arc::new(self.dml_provider(target)));
        temp
    }

    /// The target with its hidden columns, finding rows by key where it can.
    pub(super) fn dml_provider(&self, target: &Target) -> SluiceTable {
        super::catalog_provider::statement_provider(
            &self.db,
            &self.staging,
            &target.entry.id,
            target.table.clone(),
            target.snapshot.clone(),
        )
        .with_hidden_columns()
    }

    /// The target relation of an UPDATE or DELETE, replaced by its registered relation with
    /// hidden columns under the statement's alias (or the table's name): `relation` is the
    /// statement's own, so its other properties stay as written.
    fn dml_relation(&self, target: &Target, relation: &TableFactor) -> Result<(TableFactor, Ident)> {
        let TableFactor::Table { alias, .. } = relation else {
            return Err(Error::NotSupported("UPDATE or DELETE of this kind of relation".into()));
        };
        let alias = alias.as_ref().map(|a| a.name.clone()).unwrap_or_else(|| Ident::with_quote('"', &target.name.name));
        let temp = self.register_dml_relation(target);
        let mut replaced = relation.clone();
        if let TableFactor::Table { name, alias: replaced_alias, .. } = &mut replaced {
            *name = crate::names::object_name(TEMP_SCHEMA, &temp);
            *replaced_alias = Some(ast::TableAlias { explicit: true, name: alias.clone(), columns: vec![], at: None });
        }
        Ok((replaced, alias))
    }

    /// Plans and runs a query built from a statement's syntax tree.
    pub(super) async fn collect_built(&self, query: Query) -> Result<Vec<RecordBatch>> {
        // `SET id = nextval('s')` and the like: a value per row, handed out before the commit.
        let (query, per_row) = self.resolve_sequences(query).await?;
        let plan = self.plan_statement(ast::Statement::Query(Box::new(query))).await?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        per_row.begin(self).await;
        let batches = frame.collect().await?;
        per_row.finish(self).await?;
        Ok(batches)
    }

    pub(crate) async fn delete_statement(&self, delete: Delete) -> Result<StatementResult> {
        let (result, cascades) = self.delete_rows(delete).await?;
        self.run_cascades(cascades).await?;
        Ok(result)
    }

    /// A DELETE, and what its foreign keys' ON DELETE actions ask of the tables that reference
    /// the rows it deleted (for [`QueryContext::run_cascades`]).
    pub(super) async fn delete_rows(
        &self,
        delete: Delete,
    ) -> Result<(StatementResult, Vec<super::references::Cascade>)> {
        for _ in 0..RERUNS_MAX {
            if let Some(done) = self.delete_once(delete.clone()).await? {
                return Ok(done);
            }
        }
        Err(rows_kept_changing())
    }

    /// [`QueryContext::delete_rows`] once; `None`: it waited for a row lock and runs again.
    async fn delete_once(&self, delete: Delete) -> Result<Option<(StatementResult, Vec<super::references::Cascade>)>> {
        if delete.limit.is_some() || !delete.order_by.is_empty() {
            return Err(Error::NotSupported("DELETE with ORDER BY or LIMIT".into()));
        }
        let relations = match &delete.from {
            FromTable::WithFromKeyword(r) | FromTable::WithoutKeyword(r) => r,
        };
        let Some(first) = relations.first() else { return Err(Error::Plan("DELETE needs a table".into())) };
        let TableFactor::Table { name, .. } = &first.relation else {
            return Err(Error::NotSupported("DELETE from this kind of relation".into()));
        };
        let target = self.target(name).await?;
        let (relation, alias) = self.dml_relation(&target, &first.relation)?;
        let mut from = vec![TableWithJoins { relation, joins: vec![] }];
        from.extend(relations.iter().skip(1).cloned());
        from.extend(delete.using.iter().flatten().cloned());
        // The deleted rows themselves are selected too when a view reads the table and each
        // target row can come once (no USING, no second table): the views get them from here
        // instead of reading them back from the files through the change data feed.
        let hand_over = from.len() == 1 && self.db.writer.wants_rows(&target.entry.qualified_name());
        let select_old = hand_over || delete.returning.is_some();
        let mut projection = if select_old { old_columns(&target, &alias) } else { vec![] };
        projection.push(SelectItem::UnnamedExpr(column_of(&alias, FILE_COLUMN)));
        projection.push(SelectItem::UnnamedExpr(column_of(&alias, ROW_COLUMN)));
        let batches = self.collect_built(select_query(projection, from, delete.selection.clone())?).await?;
        let first = if select_old { target.snapshot.arrow_schema().fields().len() } else { 0 };
        let (deleted, count) = row_sets(&target.snapshot, &batches, first, false)?;
        if self.lock_rows(&target, &deleted).await? {
            return Ok(None);
        }
        if let Some(items) = &delete.returning {
            let schema = target.snapshot.arrow_schema();
            self.returning(schema, vec![], alias.clone(), items.clone()).await?;
        }
        let mut pending = Vec::new();
        if count > 0 {
            // A table that foreign keys reference: its removed keys are checked (and their
            // cascades found) under its key index's lock, held until the commit is done.
            let (keys, cascades) = if self.catalog_state().is_referenced(&target.entry.id) {
                self.check_writes(&target, Some(&by_path_rows(&deleted)), &[], true).await?
            } else {
                (None, Vec::new())
            };
            let mutation = Mutation { deleted, operation: "DELETE".into(), ..Default::default() };
            let outcome = target.table.mutate(&target.snapshot, mutation).await?;
            let handed = if hand_over {
                Some(ChangedRows { deleted: old_rows(&target, &batches, 0)?, inserted: Vec::new() })
            } else {
                None
            };
            self.db.writer.commit(&target.entry.qualified_name(), Operation::Delete, handed, outcome).await?;
            keys_committed(keys).await;
            pending = cascades;
        }
        if let Some(items) = delete.returning {
            // Each deleted row once, though a USING join may have found it more than once.
            let rows = distinct_rows(old_rows(&target, &batches, 0)?, &batches, first)?;
            let schema = target.snapshot.arrow_schema();
            let (schema, batches) = self.returning(schema, rows, alias, items).await?;
            return Ok(Some((StatementResult::Returned { tag: format!("DELETE {count}"), schema, batches }, pending)));
        }
        Ok(Some((StatementResult::count("DELETE", count), pending)))
    }

    pub(crate) async fn update_statement(&self, update: Update) -> Result<StatementResult> {
        for _ in 0..RERUNS_MAX {
            if let Some(done) = self.update_once(update.clone()).await? {
                return Ok(done);
            }
        }
        Err(rows_kept_changing())
    }

    /// [`QueryContext::update_statement`] once; `None`: it waited for a row lock and runs again.
    async fn update_once(&self, update: Update) -> Result<Option<StatementResult>> {
        if update.limit.is_some() {
            return Err(Error::NotSupported("UPDATE with LIMIT".into()));
        }
        let TableFactor::Table { name, .. } = &update.table.relation else {
            return Err(Error::NotSupported("UPDATE of this kind of relation".into()));
        };
        let target = self.target(name).await?;
        let mut assignments = assignment_map(&update.assignments, &target)?;
        defaults_assigned(&mut assignments, &target)?;
        for field in &target.snapshot.schema().fields {
            let always = crate::identity::Identity::of(field).is_some_and(|i| !i.allow_explicit_insert)
                || super::generated::expression_of(field).is_some();
            if always && assignments.contains_key(&field.name) {
                return Err(Error::data("428C9", format!("column \"{}\" can only be updated to DEFAULT", field.name)));
            }
        }
        let (relation, alias) = self.dml_relation(&target, &update.table.relation)?;
        let mut from = vec![TableWithJoins { relation, joins: update.table.joins.clone() }];
        match &update.from {
            Some(UpdateTableFromKind::BeforeSet(tables) | UpdateTableFromKind::AfterSet(tables)) => {
                from.extend(tables.iter().cloned())
            }
            None => {}
        }
        let mut projection: Vec<SelectItem> = target
            .snapshot
            .schema()
            .fields
            .iter()
            .map(|f| SelectItem::ExprWithAlias {
                expr: assignments.get(&f.name).cloned().unwrap_or_else(|| column_of(&alias, &f.name)),
                alias: Ident::with_quote('"', &f.name),
            })
            .collect();
        // As for DELETE: the old rows are selected too when a view reads the table (an UPDATE
        // matches each target row at most once, which row_sets checks), and when the table keeps
        // a change data feed (they are the update's preimages).
        let change_feed = target.snapshot.property_is_true(sluice_storage::protocol::ENABLE_CHANGE_DATA_FEED_KEY);
        let hand_over = self.db.writer.wants_rows(&target.entry.qualified_name()) || change_feed;
        if hand_over {
            projection.extend(old_columns(&target, &alias));
        }
        projection.push(SelectItem::UnnamedExpr(column_of(&alias, FILE_COLUMN)));
        projection.push(SelectItem::UnnamedExpr(column_of(&alias, ROW_COLUMN)));
        let point =
            if hand_over { None } else { self.point_update_rows(&target, &update, &assignments, &alias).await? };
        let batches = match point {
            Some(batches) => batches,
            None => self.collect_built(select_query(projection, from, update.selection.clone())?).await?,
        };
        let columns = target.snapshot.schema().fields.len();
        let first = if hand_over { columns + target.snapshot.arrow_schema().fields().len() } else { columns };
        let (deleted, count) = row_sets(&target.snapshot, &batches, first, true)?;
        if self.lock_rows(&target, &deleted).await? {
            return Ok(None);
        }
        let mut inserted = Vec::new();
        for batch in &batches {
            let values = batch.project(&(0..columns).collect::<Vec<_>>())?;
            let names = target.snapshot.schema().fields.iter().map(|f| f.name.clone()).collect();
            inserted.push(self.to_table_rows(&target, &values, &ColumnMatch::Position(names)).await?);
        }
        if let Some(items) = &update.returning {
            let schema = target.snapshot.arrow_schema();
            self.returning(schema, vec![], alias.clone(), items.clone()).await?;
        }
        if count > 0 {
            let handed = if hand_over {
                Some(ChangedRows { deleted: old_rows(&target, &batches, columns)?, inserted: inserted.clone() })
            } else {
                None
            };
            let mut change_data = Vec::new();
            if let (true, Some(handed)) = (change_feed, &handed) {
                for old in &handed.deleted {
                    change_data.push(sluice_storage::write::with_change_type(old, "update_preimage")?);
                }
                for new in handed.inserted.iter().filter(|b| b.num_rows() > 0) {
                    change_data.push(sluice_storage::write::with_change_type(new, "update_postimage")?);
                }
            }
            let (keys, cascades) = self.check_writes(&target, Some(&by_path_rows(&deleted)), &inserted, false).await?;
            let schema = self.db.identity.advanced_schema(&target.entry.id, target.snapshot.schema());
            // Keys checked: a concurrent data commit (another process's) conflicts (40001).
            let reads_data = keys.as_ref().is_some_and(|k| !k.is_empty());
            let mutation = Mutation {
                deleted,
                inserted: inserted.clone(),
                change_data,
                operation: "UPDATE".into(),
                schema,
                reads_data,
                ..Default::default()
            };
            let outcome = target.table.mutate(&target.snapshot, mutation).await.map_err(storage_data_error)?;
            self.db.writer.commit(&target.entry.qualified_name(), Operation::Update, handed, outcome).await?;
            keys_committed(keys).await;
            // ON UPDATE SET NULL / SET DEFAULT, in the statement's transaction (see Session).
            self.run_cascades(cascades).await?;
        }
        if let Some(items) = update.returning {
            let schema = target.snapshot.arrow_schema();
            let (schema, batches) = self.returning(schema, inserted, alias, items).await?;
            return Ok(Some(StatementResult::Returned { tag: format!("UPDATE {count}"), schema, batches }));
        }
        Ok(Some(StatementResult::count("UPDATE", count)))
    }

    /// At READ COMMITTED in a block, and outside a block: locks the keys of the rows `deleted`
    /// (by file) of a keyed table, which an UPDATE or DELETE is about to change (see
    /// [`crate::row_locks`]). Returns true when the rows may have changed since the statement
    /// read them (it took one from another block, which has ended, or another transaction
    /// committed a change of one since the version the statement read): the statement must then
    /// run again on the table's latest version (prepared here). Nothing of the statement was
    /// staged or committed yet. Outside a block the session holds the locks until the statement
    /// ends (see `Session::run`): a block that changes one of the rows meanwhile waits for it.
    async fn lock_rows(&self, target: &Target, deleted: &[(Arc<Add>, RoaringTreemap)]) -> Result<bool> {
        let autocommit = !target.table.is_staged() && self.staging.outside_block();
        let in_block = target.table.is_staged() && self.staging.read_committed();
        if !(autocommit || in_block) || deleted.is_empty() {
            return Ok(false);
        }
        // Past that many rows in the block (or the statement), a statement takes no row locks
        // (memory stays bounded): its conflicts are found at COMMIT, as at REPEATABLE READ.
        let owner = self.staging.owner();
        let rows: u64 = deleted.iter().map(|(_, rows)| rows.len()).sum();
        let held = self.db.row_locks.held_by(owner);
        if usize::try_from(rows).map_or(true, |rows| rows + held > ROW_LOCKS_PER_BLOCK_MAX) {
            return Ok(false);
        }
        let keys = {
            let guard = self.lock_keys(target).await?;
            let Some(index) = guard.unique_indexes().first().copied() else { return Ok(false) };
            guard.keys_in_rows(index, &by_path_rows(deleted))
        };
        if keys.is_empty() {
            return Ok(false);
        }
        let wait = self.db.options.row_lock_wait;
        let taken = self.db.row_locks.lock(owner, &target.entry.id, keys, wait).await.map_err(|_| {
            Error::data(
                "40P01",
                format!(
                    "deadlock detected: a row of {} this statement changes is held by a transaction that waits \
                     for a row this transaction holds",
                    target.name
                ),
            )
        })?;
        if autocommit {
            // It waited for a block that has ended: the statement runs again on the version that
            // block committed (its commit, under the locks, then conflicts with nobody's).
            if taken {
                self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
            }
            return Ok(taken);
        }
        // Locked without a wait: their last holder may still have committed after the statement
        // read them.
        if !taken && !self.staging.rows_changed_since_read(&target.entry.id, deleted).await? {
            return Ok(false);
        }
        self.staging.refresh_for_rerun(&target.entry.id).await?;
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(true)
    }

    pub(crate) async fn merge_statement(&self, merge: Merge) -> Result<StatementResult> {
        let TableFactor::Table { name, .. } = &merge.table else {
            return Err(Error::NotSupported("MERGE into this kind of relation".into()));
        };
        let target = self.target(name).await?;
        let state = self.catalog_state();
        if let Some((child, key)) = state.references_to(&target.entry.id).find(|(_, k)| !k.on_delete.checks_only()) {
            return Err(Error::NotSupported(format!(
                "MERGE into {}: foreign key {} of {} references it with ON DELETE {} (use DELETE and INSERT or UPDATE)",
                target.name,
                key.name,
                child.name,
                key.on_delete.words()
            )));
        }
        drop(state);
        super::generated::refuse_merge_values(target.snapshot.schema(), &merge)?;
        let (relation, t) = self.dml_relation(&target, &merge.table)?;
        // The source, read inside `(SELECT *, TRUE AS "__sluice_present" FROM <source>) AS s`.
        let (source, s) = match &merge.source {
            TableFactor::Table { name, alias, .. } => {
                let s = match alias {
                    Some(alias) => alias.name.clone(),
                    None => match name.0.last() {
                        Some(ast::ObjectNamePart::Identifier(ident)) => ident.clone(),
                        _ => return Err(Error::NotSupported(format!("MERGE source {name}"))),
                    },
                };
                let mut source = merge.source.clone();
                if let TableFactor::Table { alias, .. } = &mut source {
                    *alias = None;
                }
                (source, s)
            }
            TableFactor::Derived { alias: Some(alias), .. } => {
                let s = alias.name.clone();
                let mut source = merge.source.clone();
                if let TableFactor::Derived { alias: Some(alias), .. } = &mut source {
                    // Its column names (`AS s(a, b)`) stay on the subquery the reader reads.
                    alias.name = Ident::with_quote('"', "__sluice_derived");
                }
                (source, s)
            }
            other => return Err(Error::NotSupported(format!("MERGE source {other}"))),
        };
        let present = Ident::with_quote('"', "__sluice_present");
        let is_null = |e: Expr| Expr::IsNull(Box::new(e));
        let is_not_null = |e: Expr| Expr::IsNotNull(Box::new(e));
        let and =
            |l: Expr, r: Expr| Expr::BinaryOp { left: Box::new(l), op: ast::BinaryOperator::And, right: Box::new(r) };
        let source_column = Expr::CompoundIdentifier(vec![s.clone(), present.clone()]);
        let matched = and(is_not_null(column_of(&t, ROW_COLUMN)), is_not_null(source_column.clone()));
        let not_matched = is_null(column_of(&t, ROW_COLUMN));
        let not_matched_by_source = is_null(source_column);
        let fields = &target.snapshot.schema().fields;
        let mut cases = Vec::new();
        let mut outputs = Vec::new();
        let (mut keeps_target, mut keeps_source) = (false, false);
        for (i, clause) in merge.clauses.iter().enumerate() {
            let kind = match clause.clause_kind {
                MergeClauseKind::Matched => matched.clone(),
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                    keeps_source = true;
                    not_matched.clone()
                }
                MergeClauseKind::NotMatchedBySource => {
                    keeps_target = true;
                    not_matched_by_source.clone()
                }
            };
            let condition = match &clause.predicate {
                Some(p) => and(kind, Expr::Nested(Box::new(p.clone()))),
                None => kind,
            };
            cases.push(ast::CaseWhen { condition, result: Expr::value(ast::Value::Number(i.to_string(), false)) });
            let output = |j: usize, expr: Expr| SelectItem::ExprWithAlias {
                expr,
                alias: Ident::with_quote('"', format!("__c{i}_{j}")),
            };
            match &clause.action {
                MergeAction::Update(update) => {
                    let assignments = assignment_map(&update.assignments, &target)?;
                    for (j, f) in fields.iter().enumerate() {
                        let value = assignments.get(&f.name).cloned().unwrap_or_else(|| column_of(&t, &f.name));
                        outputs.push(output(j, value));
                    }
                }
                MergeAction::Insert(insert) => {
                    let MergeInsertKind::Values(values) = &insert.kind else {
                        return Err(Error::NotSupported("MERGE INSERT ROW".into()));
                    };
                    let row = values.rows.first().ok_or_else(|| Error::Plan("MERGE INSERT needs VALUES".into()))?;
                    let listed: Vec<String> = if insert.columns.is_empty() {
                        fields.iter().map(|f| f.name.clone()).collect()
                    } else {
                        insert
                            .columns
                            .iter()
                            .map(|c| match c.0.last() {
                                Some(ast::ObjectNamePart::Identifier(ident)) => normalize(ident),
                                _ => c.to_string(),
                            })
                            .collect()
                    };
                    if listed.len() != row.len() {
                        return Err(Error::data("42601", "MERGE INSERT has a different number of columns and values"));
                    }
                    for name in &listed {
                        if target.snapshot.schema().field(name).is_none() {
                            return Err(Error::UndefinedColumn(name.clone()));
                        }
                    }
                    for (j, f) in fields.iter().enumerate() {
                        let value = match listed.iter().position(|n| n.eq_ignore_ascii_case(&f.name)) {
                            Some(k) => match row.get(k) {
                                Some(value) => value.clone(),
                                None => {
                                    return Err(Error::Parse {
                                        message: "INSERT has more target columns than expressions".into(),
                                        line: 0,
                                        column: 0,
                                    })
                                }
                            },
                            // A column default is an expression the catalog stores as text.
                            None => match target.entry.defaults.get(&f.name) {
                                Some(default) => parse_expression(default)?,
                                None => Expr::value(ast::Value::Null),
                            },
                        };
                        outputs.push(output(j, value));
                    }
                }
                MergeAction::Delete { .. } => {}
            }
        }
        let join = match (keeps_target, keeps_source) {
            (true, true) => ast::JoinOperator::FullOuter,
            (true, false) => ast::JoinOperator::LeftOuter,
            (false, true) => ast::JoinOperator::RightOuter,
            (false, false) => ast::JoinOperator::Inner,
        };
        let mut projection = vec![
            SelectItem::ExprWithAlias { expr: column_of(&t, FILE_COLUMN), alias: Ident::with_quote('"', "__f") },
            SelectItem::ExprWithAlias { expr: column_of(&t, ROW_COLUMN), alias: Ident::with_quote('"', "__r") },
            SelectItem::ExprWithAlias {
                expr: Expr::Case {
                    case_token: AttachedToken::empty(),
                    end_token: AttachedToken::empty(),
                    operand: None,
                    conditions: cases,
                    else_result: None,
                },
                alias: Ident::with_quote('"', "__action"),
            },
        ];
        projection.extend(outputs);
        // With a change data feed, the target rows' old values too: the updates' preimages and
        // the deleted rows (NULL for a source row that matched none).
        if target.snapshot.property_is_true(sluice_storage::protocol::ENABLE_CHANGE_DATA_FEED_KEY) {
            projection.extend(old_columns(&target, &t));
        }
        let query =
            merge_query(projection, relation, source, &s, join(ast::JoinConstraint::On(merge.on.as_ref().clone())))?;
        let batches = self.collect_built(query).await?;
        self.apply_merge(&target, &merge, &batches).await
    }

    async fn apply_merge(&self, target: &Target, merge: &Merge, batches: &[RecordBatch]) -> Result<StatementResult> {
        let fields = &target.snapshot.schema().fields;
        let mut deleted: HashMap<String, RoaringTreemap> = HashMap::new();
        let mut inserted = Vec::new();
        let mut change_data = Vec::new();
        let change_feed = target.snapshot.property_is_true(sluice_storage::protocol::ENABLE_CHANGE_DATA_FEED_KEY);
        let mut affected = 0u64;
        for batch in batches {
            // The target rows' old values (see merge_statement), when the table keeps a change feed.
            let old = if change_feed {
                let indexes: Vec<usize> = (0..fields.len())
                    .map(|j| batch.schema().index_of(&format!("__old{j}")).map_err(|e| Error::Internal(e.to_string())))
                    .collect::<Result<_>>()?;
                // Nullable here (a source row that matched none has no old row); each clause's
                // rows below are whole rows again.
                let schema = target.snapshot.arrow_schema();
                let nullable: Vec<arrow::datatypes::Field> =
                    schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
                let columns = batch.project(&indexes)?.columns().to_vec();
                Some((crate::types::batch_of(&Arc::new(Schema::new(nullable)), columns, batch.num_rows())?, schema))
            } else {
                None
            };
            let files =
                batch.column_by_name("__f").ok_or_else(|| Error::Internal("no __f".into()))?.as_string::<i32>().clone();
            let rows = batch
                .column_by_name("__r")
                .ok_or_else(|| Error::Internal("no __r".into()))?
                .as_primitive::<UInt64Type>()
                .clone();
            let actions = arrow::compute::cast(
                batch.column_by_name("__action").ok_or_else(|| Error::Internal("no __action".into()))?,
                &arrow::datatypes::DataType::Int64,
            )?;
            let actions = actions.as_primitive::<arrow::datatypes::Int64Type>();
            for row in 0..batch.num_rows() {
                affected += 1;
                let action = actions.value(row) as usize;
                let touches_target = matches!(
                    merge.clauses.get(action).map(|c| &c.action),
                    Some(MergeAction::Update(_) | MergeAction::Delete { .. })
                );
                if touches_target && !files.is_null(row) {
                    let set = deleted.entry(files.value(row).to_string()).or_default();
                    if !set.insert(rows.value(row)) {
                        return Err(Error::data(
                            "21000",
                            "MERGE matched one target row with several source rows; the source must match each target row at most once",
                        ));
                    }
                }
            }
            for (i, clause) in merge.clauses.iter().enumerate() {
                let mask: BooleanArray = actions.iter().map(|a| Some(a == Some(i as i64))).collect();
                if mask.true_count() == 0 {
                    continue;
                }
                // The change rows: an update's pre- and postimage, a delete's old row, an insert.
                if let Some((old, schema)) = &old {
                    let kind = match clause.action {
                        MergeAction::Update(_) => Some("update_preimage"),
                        MergeAction::Delete { .. } => Some("delete"),
                        MergeAction::Insert(_) => None,
                    };
                    if let Some(kind) = kind {
                        let rows = filter_record_batch(old, &mask)?;
                        let rows = RecordBatch::try_new(schema.clone(), rows.columns().to_vec())?;
                        change_data.push(sluice_storage::write::with_change_type(&rows, kind)?);
                    }
                }
                if matches!(clause.action, MergeAction::Delete { .. }) {
                    continue;
                }
                let selected = filter_record_batch(batch, &mask)?;
                let indexes: Vec<usize> = (0..fields.len())
                    .map(|j| {
                        selected.schema().index_of(&format!("__c{i}_{j}")).map_err(|e| Error::Internal(e.to_string()))
                    })
                    .collect::<Result<_>>()?;
                let values = selected.project(&indexes)?;
                let names = fields.iter().map(|f| f.name.clone()).collect();
                let rows = self.to_table_rows(target, &values, &ColumnMatch::Position(names)).await?;
                if change_feed {
                    let kind =
                        if matches!(clause.action, MergeAction::Update(_)) { "update_postimage" } else { "insert" };
                    change_data.push(sluice_storage::write::with_change_type(&rows, kind)?);
                }
                inserted.push(rows);
            }
        }
        let deleted = with_files(&target.snapshot, deleted)?;
        if affected > 0 {
            let keys = self.check_keys(target, Some(&by_path_rows(&deleted)), &inserted).await?;
            let schema = self.db.identity.advanced_schema(&target.entry.id, target.snapshot.schema());
            let reads_data = keys.as_ref().is_some_and(|k| !k.is_empty());
            let mutation = Mutation {
                deleted,
                inserted,
                change_data,
                operation: "MERGE".into(),
                schema,
                reads_data,
                ..Default::default()
            };
            let outcome = target.table.mutate(&target.snapshot, mutation).await.map_err(storage_data_error)?;
            self.db.writer.commit(&target.entry.qualified_name(), Operation::Merge, None, outcome).await?;
            keys_committed(keys).await;
        }
        Ok(StatementResult::count("MERGE", affected))
    }

    pub(crate) async fn truncate_statement(&self, truncate: Truncate) -> Result<StatementResult> {
        let mut named = Vec::with_capacity(truncate.table_names.len());
        for target in &truncate.table_names {
            named.push(self.target(&target.name).await?.entry);
        }
        let cascade = truncate.cascade == Some(ast::CascadeOption::Cascade);
        for entry in self.truncated_with_references(named, cascade)? {
            let target = self.target(&crate::names::object_name(&entry.schema, &entry.name)).await?;
            let request =
                WriteRequest { mode: SaveMode::Overwrite, operation: Some("TRUNCATE".into()), ..Default::default() };
            let outcome = target.table.write_on(&target.snapshot, request).await?;
            self.db.writer.commit(&target.entry.qualified_name(), Operation::Truncate, None, outcome).await?;
        }
        Ok(StatementResult::command("TRUNCATE TABLE"))
    }
}

/// The rows of `rows` whose (file, row) at `first` of `batches` (the same rows) come first.
fn distinct_rows(rows: Vec<RecordBatch>, batches: &[RecordBatch], first: usize) -> Result<Vec<RecordBatch>> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(rows.len());
    for (values, batch) in rows.into_iter().zip(batches.iter().filter(|b| b.num_rows() > 0)) {
        let files = batch.column(first).as_string::<i32>();
        let positions = batch.column(first + 1).as_primitive::<UInt64Type>();
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| Some(seen.insert((files.value(i).to_string(), positions.value(i)))))
            .collect();
        out.push(filter_record_batch(&values, &keep)?);
    }
    Ok(out)
}

/// The rows of a VALUES list.
type ValuesRows = Vec<ast::Parens<Vec<Expr>>>;

/// Refuses a source of `width` columns for `targets` target columns, as PostgreSQL does (fewer
/// is fine without a column list).
fn check_width(width: usize, targets: usize, implicit: bool) -> Result<()> {
    if width > targets {
        return Err(Error::data("42601", "INSERT has more expressions than target columns"));
    }
    if width < targets && !implicit {
        return Err(Error::data("42601", "INSERT has more target columns than expressions"));
    }
    Ok(())
}

/// The most rows the UPDATEs and DELETEs of a READ COMMITTED block lock (see
/// [`QueryContext::lock_rows`]).
const ROW_LOCKS_PER_BLOCK_MAX: usize = 10_000;

/// How many times an UPDATE or DELETE runs again after waiting for row locks (each time, the
/// rows it found had moved on to other holders) before it gives up with 40001.
const RERUNS_MAX: usize = 8;

fn rows_kept_changing() -> Error {
    Error::SerializationFailure(format!(
        "could not serialize access: the rows of the statement changed under it {RERUNS_MAX} times while it waited \
         for their locks"
    ))
}

/// Rows a mutation deletes, by file path.
pub(crate) fn by_path_rows(deleted: &[(Arc<Add>, RoaringTreemap)]) -> HashMap<String, RoaringTreemap> {
    deleted.iter().map(|(add, rows)| (add.path.clone(), rows.clone())).collect()
}

/// Catches a key index up with the commit its guard's holder made. A failure here leaves the
/// commit standing; the index catches up when the next writer locks it.
pub(crate) async fn keys_committed(keys: Option<KeyGuard>) {
    if let Some(keys) = keys {
        if let Err(e) = keys.committed().await {
            tracing::warn!("key index catch-up after a commit failed (the next writer retries): {e}");
        }
    }
}

/// The target's stored columns as select items (`alias.col AS "__old<i>"`), for the rows a
/// DELETE or UPDATE hands over to the views that read the table.
fn old_columns(target: &Target, alias: &Ident) -> Vec<SelectItem> {
    let schema = target.snapshot.arrow_schema();
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| SelectItem::ExprWithAlias {
            expr: column_of(alias, f.name()),
            alias: Ident::with_quote('"', format!("__old{i}")),
        })
        .collect()
}

/// `alias."column"`.
pub(super) fn column_of(alias: &Ident, column: &str) -> Expr {
    Expr::CompoundIdentifier(vec![alias.clone(), Ident::with_quote('"', column)])
}

/// `SELECT <projection> FROM <from> [WHERE <selection>]`, built from parts of a statement's syntax
/// tree: no SQL text of the statement is formatted and parsed again.
pub(crate) fn select_query(
    projection: Vec<SelectItem>,
    from: Vec<TableWithJoins>,
    selection: Option<Expr>,
) -> Result<Query> {
    // The shape of a plain SELECT, from a constant (the parser fills the many fields of the
    // syntax tree that such a query leaves empty); its parts are then replaced.
    let SluiceStatement::Standard(statement) = parse_statement_text("SELECT 1 FROM t")? else {
        return Err(Error::Internal("the SELECT template is not a query".into()));
    };
    let ast::Statement::Query(mut query) = *statement else {
        return Err(Error::Internal("the SELECT template is not a query".into()));
    };
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return Err(Error::Internal("the SELECT template is not a SELECT".into()));
    };
    select.projection = projection;
    select.from = from;
    select.selection = selection;
    Ok(*query)
}

/// The old rows selected by [`old_columns`] at `first`, in the table's schema.
fn old_rows(target: &Target, batches: &[RecordBatch], first: usize) -> Result<Vec<RecordBatch>> {
    let schema = target.snapshot.arrow_schema();
    let count = schema.fields().len();
    batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .map(|batch| {
            let columns = batch.columns().get(first..first + count).unwrap_or_default().to_vec();
            crate::types::batch_of(&schema, columns, batch.num_rows())
        })
        .collect()
}

/// The query a MERGE runs: the target joined with its source, each row's action (the number of
/// the first clause it meets) and each clause's new values, keeping the rows some clause acts on:
///
/// ```sql
/// SELECT * FROM (SELECT <projection> FROM <target> <join> (SELECT *, TRUE AS "__sluice_present"
///   FROM <source>) AS <s> ON <on>) AS "__merge" WHERE "__action" IS NOT NULL
/// ```
///
/// built on the parsed shape of that query (a constant) from parts of the statement's syntax tree.
fn merge_query(
    projection: Vec<SelectItem>,
    target: TableFactor,
    source: TableFactor,
    alias: &Ident,
    join: ast::JoinOperator,
) -> Result<Query> {
    let shape = "SELECT * FROM (SELECT 1 FROM t JOIN (SELECT *, TRUE AS \"__sluice_present\" FROM s) AS s ON TRUE) \
                 AS \"__merge\" WHERE \"__action\" IS NOT NULL";
    let unexpected = || Error::Internal("the MERGE query's shape is not the expected one".into());
    let SluiceStatement::Standard(statement) = parse_statement_text(shape)? else { return Err(unexpected()) };
    let ast::Statement::Query(mut query) = *statement else { return Err(unexpected()) };
    let ast::SetExpr::Select(outer) = query.body.as_mut() else { return Err(unexpected()) };
    let Some(TableFactor::Derived { subquery: inner, .. }) = outer.from.first_mut().map(|f| &mut f.relation) else {
        return Err(unexpected());
    };
    let ast::SetExpr::Select(inner) = inner.body.as_mut() else { return Err(unexpected()) };
    inner.projection = projection;
    let Some(from) = inner.from.first_mut() else { return Err(unexpected()) };
    from.relation = target;
    let Some(joined) = from.joins.first_mut() else { return Err(unexpected()) };
    joined.join_operator = join;
    let TableFactor::Derived { subquery: reader, alias: Some(reader_alias), .. } = &mut joined.relation else {
        return Err(unexpected());
    };
    reader_alias.name = alias.clone();
    let ast::SetExpr::Select(reader) = reader.body.as_mut() else { return Err(unexpected()) };
    let Some(read) = reader.from.first_mut() else { return Err(unexpected()) };
    read.relation = source;
    Ok(*query)
}

/// `SET c = DEFAULT` as PostgreSQL reads it: the column's default (NULL without one); a
/// generated column is computed anyway, so the assignment goes. An identity column's next
/// value is refused (0A000), not taken for the column's old value.
fn defaults_assigned(assignments: &mut HashMap<String, Expr>, target: &Target) -> Result<()> {
    let is_default = is_default_keyword;
    let defaulted: Vec<String> = assignments.iter().filter(|(_, e)| is_default(e)).map(|(c, _)| c.clone()).collect();
    for column in defaulted {
        let Some(field) = target.snapshot.schema().field(&column) else { continue };
        if super::generated::expression_of(field).is_some() {
            assignments.remove(&column);
            continue;
        }
        if crate::identity::Identity::of(field).is_some() {
            return Err(Error::NotSupported(format!(
                "UPDATE ... SET {column} = DEFAULT on an identity column (set a value, or leave the column as it is)"
            )));
        }
        let value = match target.entry.defaults.get(&column) {
            Some(text) => parse_expression(text)?,
            None => Expr::value(ast::Value::Null),
        };
        assignments.insert(column, value);
    }
    Ok(())
}

/// The `DEFAULT` keyword where a value goes (sqlparser reads it as an unquoted identifier).
pub(super) fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// An expression the catalog stores as text (a column default).
fn parse_expression(text: &str) -> Result<Expr> {
    let dialect = crate::syntax::dialect::SluiceDialect::default();
    datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(text)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|e| Error::Internal(format!("the stored default {text} does not parse: {e}")))
}

/// `SET col = expr` as column name to expression.
pub(super) fn assignment_map(assignments: &[ast::Assignment], target: &Target) -> Result<HashMap<String, Expr>> {
    let mut map = HashMap::new();
    for assignment in assignments {
        let AssignmentTarget::ColumnName(name) = &assignment.target else {
            return Err(Error::NotSupported("tuple assignment".into()));
        };
        let column = match name.0.last() {
            Some(ast::ObjectNamePart::Identifier(ident)) => normalize(ident),
            _ => return Err(Error::Plan(format!("bad column {name}"))),
        };
        let field = target
            .snapshot
            .schema()
            .field(&column)
            .ok_or_else(|| Error::undefined_column_of(&column, &target.name.name))?;
        if map.insert(field.name.clone(), assignment.value.clone()).is_some() {
            return Err(Error::data("42601", format!("multiple assignments to same column \"{column}\"")));
        }
    }
    Ok(map)
}

/// Rows of one file, by physical index.
type FileRows = (Arc<Add>, RoaringTreemap);

/// The rows a DML query selected, by file; errors if one row is selected twice when `unique`.
fn row_sets(snapshot: &Snapshot, batches: &[RecordBatch], first: usize, unique: bool) -> Result<(Vec<FileRows>, u64)> {
    let mut sets: HashMap<String, RoaringTreemap> = HashMap::new();
    let mut seen = HashSet::new();
    for batch in batches {
        let files = batch.column(first).as_string::<i32>();
        let rows = batch.column(first + 1).as_primitive::<UInt64Type>();
        for row in 0..batch.num_rows() {
            let file = files.value(row);
            let index = rows.value(row);
            if !seen.insert((file.to_string(), index)) {
                if unique {
                    return Err(Error::data(
                        "21000",
                        "UPDATE matched one target row more than once (the FROM join is not unique)",
                    ));
                }
                continue;
            }
            sets.entry(file.to_string()).or_default().insert(index);
        }
    }
    let count = seen.len() as u64;
    Ok((with_files(snapshot, sets)?, count))
}

/// Row sets keyed by file path, paired with the snapshot's `add` action of each file.
pub(crate) fn with_files(snapshot: &Snapshot, sets: HashMap<String, RoaringTreemap>) -> Result<Vec<FileRows>> {
    sets.into_iter()
        .map(|(path, rows)| {
            snapshot
                .file_by_path(&path)
                .map(|a| (a.clone(), rows))
                .ok_or_else(|| Error::Internal(format!("unknown file {path}")))
        })
        .collect()
}

pub(crate) fn cast_column(column: &ArrayRef, data_type: &arrow::datatypes::DataType, name: &str) -> Result<ArrayRef> {
    if column.data_type() == data_type {
        return Ok(column.clone());
    }
    use arrow::datatypes::DataType as T;
    let text = matches!(column.data_type(), T::Utf8 | T::LargeUtf8 | T::Utf8View);
    if data_type.is_integer() && (column.data_type().is_numeric() || text) {
        // Rounded, and 22003 when out of range, as PostgreSQL assigns a number to an integer.
        return Ok(crate::functions::arithmetic::to_integer(column, data_type)?);
    }
    if text && matches!(data_type, T::List(_) | T::LargeList(_)) {
        // PostgreSQL's array text, `'{a,b}'`.
        return crate::types::array_column_from_text(column, data_type);
    }
    if text && matches!(data_type, T::Date32 | T::Date64 | T::Timestamp(..) | T::Time32(_) | T::Time64(_)) {
        // PostgreSQL's date/time input (`'2024-01-01 10:00'`, `'1/8/1999'`, `'epoch'`).
        return crate::datetime::column_from_text(column, data_type);
    }
    if text && matches!(data_type, T::Interval(_)) {
        // PostgreSQL's interval input (`'1 day 02:00'`, `'3 mons'`, `'P1D'`, `'1 hour ago'`).
        return crate::datetime::interval_column_from_text(column, data_type);
    }
    if matches!(column.data_type(), T::Utf8 | T::LargeUtf8 | T::Utf8View)
        && matches!(data_type, T::Binary | T::LargeBinary | T::BinaryView)
    {
        return bytea_column(column, data_type, name);
    }
    cast_with_options(column, data_type, &CastOptions { safe: false, ..Default::default() }).map_err(|e| {
        let message = e.to_string().to_lowercase();
        if message.contains("too large to store in a decimal") {
            return Error::data("22003", "numeric field overflow");
        }
        let sqlstate = if message.contains("overflow") { "22003" } else { "22P02" };
        Error::data(sqlstate, format!("invalid value for column \"{name}\" ({data_type}): {e}"))
    })
}

pub(super) fn storage_data_error(e: sluice_storage::Error) -> Error {
    match e {
        sluice_storage::Error::InvalidData { message, .. } => Error::data("22000", message),
        other => Error::from(other),
    }
}

fn bytea_column(column: &ArrayRef, data_type: &arrow::datatypes::DataType, name: &str) -> Result<ArrayRef> {
    let text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut builder = arrow::array::BinaryBuilder::with_capacity(text.len(), text.value_data().len());
    for value in text.iter() {
        match value {
            Some(v) => builder.append_value(
                crate::types::bytea_from_text(v)
                    .map_err(|e| Error::data("22P02", format!("column \"{name}\": {e}")))?,
            ),
            None => builder.append_null(),
        }
    }
    let binary: ArrayRef = Arc::new(builder.finish());
    cast_column(&binary, data_type, name)
}

/// `INSERT INTO t (ts) VALUES ('2024-01-01'), (now())`: in a VALUES column that mixes quoted
/// literals with other expressions, the literals are read as the target column's type, as
/// PostgreSQL types an unknown literal by its INSERT column (DataFusion would refuse the list:
/// text in one row, a timestamp in the next). Columns of literals alone are left as they are.
fn typed_values_literals(values: &mut ast::Values, names: &[String], target: &Target) {
    use super::postgres_forms::{cast_quoted_cells, is_quoted};
    let other = |e: &Expr| !is_quoted(e) && !matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::Null));
    let width = values.rows.first().map_or(0, |row| row.content.len());
    for column in 0..width {
        let cells = || values.rows.iter().filter_map(|r| r.content.get(column));
        if !(cells().any(is_quoted) && cells().any(other)) {
            continue;
        }
        let Some(field) = names.get(column).and_then(|n| target.snapshot.schema().field(n).cloned()) else {
            continue;
        };
        let name = crate::types::pg_type_name(&field);
        let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
        let Ok(data_type) = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(&name)
            .and_then(|mut p| p.parse_data_type())
        else {
            continue;
        };
        cast_quoted_cells(values, column, &data_type);
    }
}
