//! Queries: rewriting what DataFusion does not know (Delta time travel on a table reference) and
//! running the rest through DataFusion.
//!
//! `t VERSION AS OF 3` and `t TIMESTAMP AS OF '...'` become references to a statement-local
//! relation in `__temp` that reads that snapshot.

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::datatypes::{Field, Schema};
use datafusion::sql::sqlparser::ast::{
    Expr, ObjectName, Query, SelectItem, SetExpr, Statement, TableFactor, TableVersion, VisitMut, Visitor, VisitorMut,
};

use super::catalog_provider::TEMP_SCHEMA;
use crate::error::{Error, Result};
use crate::names::{object_name, table_name};
use crate::provider::SluiceTable;
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::parser::{SluiceStatement, TimeTravel};

/// What a statement takes and returns, as far as it is known before running it.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// The types of `$1..$n` where they could be inferred.
    pub parameter_types: Vec<Option<DataType>>,
    /// The columns the statement returns (None for commands).
    pub result_schema: Option<SchemaRef>,
}

struct TimeTravelCollector<'a> {
    session: &'a QueryContext,
    found: Vec<(String, ObjectName, TableVersion)>,
}

impl VisitorMut for TimeTravelCollector<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, version, .. } = factor {
            if let Some(v) = version.take() {
                let temp = self.session.temp_name("time_travel");
                let original = std::mem::replace(name, object_name(TEMP_SCHEMA, &temp));
                self.found.push((temp, original, v));
            }
        }
        ControlFlow::Continue(())
    }
}

/// The relations a statement reads by name (not table functions), and the names its CTEs give.
#[derive(Default)]
struct Relations {
    named: Vec<ObjectName>,
    ctes: std::collections::HashSet<String>,
}

impl Visitor for Relations {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        for cte in query.with.iter().flat_map(|with| &with.cte_tables) {
            self.ctes.insert(cte.alias.name.value.to_lowercase());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args: None, .. } = factor {
            self.named.push(name.clone());
        }
        ControlFlow::Continue(())
    }
}

impl QueryContext {
    /// The error of a statement DataFusion could not plan: a relation it names that does not exist
    /// is `UndefinedTable` (42P01), found by asking the catalog (not by reading DataFusion's
    /// message); other errors keep their kind.
    pub(crate) fn planning_error(&self, statement: &Statement, error: datafusion::error::DataFusionError) -> Error {
        let error = Error::from(error);
        if !matches!(&error, Error::DataFusion(_)) {
            return error;
        }
        let mut relations = Relations::default();
        let _ = datafusion::sql::sqlparser::ast::Visit::visit(statement, &mut relations);
        for name in relations.named {
            let parts: Vec<String> = name.0.iter().map(|p| p.to_string().trim_matches('"').to_string()).collect();
            if parts.len() == 1 && parts.first().is_some_and(|p| relations.ctes.contains(&p.to_lowercase())) {
                continue;
            }
            let reference = datafusion::common::TableReference::from(name.to_string());
            if self.ctx.table_exist(reference).unwrap_or(false) {
                continue;
            }
            return Error::UndefinedTable(match parts.as_slice() {
                [schema, table] if schema == "public" => table.clone(),
                [_, schema, table] if schema == "public" => table.clone(),
                _ => parts.join("."),
            });
        }
        error
    }

    /// Rewrites a statement for DataFusion, registering the relations it needs.
    pub(crate) async fn rewrite(&self, mut statement: Statement) -> Result<Statement> {
        let state = self.catalog_state();
        let pending = super::views::pending_views(&state, &self.staging);
        if pending.is_empty() {
            super::views::expand(&state.views, &mut statement)?;
        } else {
            let mut views = state.views.clone();
            views.extend(pending);
            super::views::expand(&views, &mut statement)?;
        }
        super::enums::rewrite_casts(&state, &mut statement)?;
        crate::datetime::with_date_order(self.date_order(), || super::postgres_forms::rewrite(&mut statement))?;
        let mut collector = TimeTravelCollector { session: self, found: vec![] };
        let _ = statement.visit(&mut collector);
        for (temp, name, version) in collector.found {
            let travel = match version {
                TableVersion::VersionAsOf(e) => TimeTravel::Version(e),
                TableVersion::TimestampAsOf(e) | TableVersion::ForSystemTimeAsOf(e) => TimeTravel::Timestamp(e),
                other => return Err(Error::NotSupported(format!("table version {other}"))),
            };
            let (entry, table, _) = self.resolve_table(&name).await?;
            let snapshot = self.snapshot_at(&table, &travel).await?;
            let _ = entry;
            self.temp.insert(&temp, Arc::new(SluiceTable::new(table, snapshot, self.db.scan_options())));
        }
        let calls = crate::files::read::collect(&mut statement, TEMP_SCHEMA, &|| self.temp_name("read_files"));
        for call in calls {
            let relation = crate::files::read::relation(&self.db, self.privileges(), &call.args).await?;
            self.temp.insert(&call.temp, relation);
        }
        Ok(statement)
    }

    /// The snapshot a time-travel clause names.
    pub(crate) async fn snapshot_at(
        &self,
        table: &sluice_storage::table::Table,
        travel: &TimeTravel,
    ) -> Result<Arc<sluice_storage::snapshot::Snapshot>> {
        match travel {
            TimeTravel::Version(expr) => {
                let version = self.evaluate_constant(expr, &DataType::Int64).await?;
                let version = version.as_primitive::<arrow::datatypes::Int64Type>().value(0);
                let version =
                    u64::try_from(version).map_err(|_| Error::Plan(format!("version {version} is negative")))?;
                Ok(table.snapshot_at_version(version).await?)
            }
            TimeTravel::Timestamp(expr) => {
                let timestamp = self
                    .evaluate_constant(expr, &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())))
                    .await?;
                let ms = timestamp.as_primitive::<arrow::datatypes::TimestampMillisecondType>().value(0);
                Ok(table.snapshot_at_timestamp(ms).await?)
            }
        }
    }

    /// Evaluates a constant expression to a one-element array of `data_type`.
    pub(crate) async fn evaluate_constant(&self, expr: &Expr, data_type: &DataType) -> Result<arrow::array::ArrayRef> {
        let sql = format!("SELECT {expr}");
        let batches = self.ctx.sql(&sql).await?.collect().await?;
        let column = batches.first().filter(|b| b.num_rows() == 1).map(|b| b.column(0).clone());
        let Some(column) = column else { return Err(Error::Plan(format!("{expr} is not a single value"))) };
        if column.is_null(0) {
            return Err(Error::Plan(format!("{expr} is NULL")));
        }
        Ok(arrow::compute::cast(&column, data_type)?)
    }

    /// Plans and runs a query.
    pub(crate) async fn run_query(&self, query: Query) -> Result<StatementResult> {
        if let Some(result) = self.point_query(&query).await? {
            return Ok(result);
        }
        let locked = self.locked_tables(&query)?;
        let (query, per_row) = self.resolve_sequences(query).await?;
        let (statement, plan) = self.plan_rewritten(Statement::Query(Box::new(query))).await?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        per_row.begin(self).await;
        let batches = self.collect(frame).await?;
        // The values nextval gave per row are handed out before anyone sees them.
        per_row.finish(self).await?;
        let renamed = postgres_names(&statement, &schema);
        let batches = batches
            .into_iter()
            .map(|b| RecordBatch::try_new(renamed.clone(), b.columns().to_vec()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.hold_locked(&locked);
        Ok(StatementResult::Rows { schema: renamed, batches })
    }

    /// The tables a `SELECT ... FOR UPDATE | NO KEY UPDATE | SHARE | KEY SHARE [OF t, ...]` locks
    /// (all it reads without `OF`). Sluice has no row locks: in a transaction block, COMMIT fails
    /// with 40001 if another session committed to one of them since the block read it (see
    /// [`crate::staging::Reliance::Locked`]); outside one the lock would end with the statement,
    /// so nothing is held. `NOWAIT` holds as written (Sluice never waits); `SKIP LOCKED` is
    /// refused, since no row is ever skipped.
    fn locked_tables(&self, query: &Query) -> Result<Vec<crate::names::TableName>> {
        use datafusion::sql::sqlparser::ast::NonBlock;
        let mut names = Vec::new();
        for lock in &query.locks {
            if matches!(lock.nonblock, Some(NonBlock::SkipLocked)) {
                return Err(Error::NotSupported(
                    "SELECT ... SKIP LOCKED (Sluice has no row locks to skip; without it, a transaction that \
                     read rows FOR UPDATE fails at COMMIT with 40001 when another changed their table)"
                        .into(),
                ));
            }
            match &lock.of {
                // `OF` names a table as the FROM clause does: by its alias, or its name.
                Some(name) => names.push(match aliased_table(query, name) {
                    Some(table) => crate::names::table_name(&table)?,
                    None => crate::names::table_name(name)?,
                }),
                None => names.extend(crate::names::relations_in(query)),
            }
        }
        Ok(names)
    }

    /// Records, in a transaction block, the version at which the block read each table in
    /// `locked` (see [`Self::locked_tables`]).
    fn hold_locked(&self, locked: &[crate::names::TableName]) {
        if locked.is_empty() || !self.staging.holds_catalog() {
            return;
        }
        let state = self.catalog_state();
        for name in locked {
            let Some(entry) = state.table(&name.schema, &name.name) else { continue };
            let Some(version) = self.staging.staged_handle(&entry.id).and_then(|t| t.stage_base_version()) else {
                continue;
            };
            self.staging.rely(crate::staging::Reliance::Locked { table: entry.id.clone(), version });
        }
    }

    /// The parameter types and result columns of a statement, where they can be known without
    /// running it: queries and other statements DataFusion plans give both; INSERT, UPDATE and
    /// DELETE give their parameter types; Sluice's own statements give their fixed columns.
    pub async fn describe_statement(&self, statement: &SluiceStatement) -> Described {
        if let SluiceStatement::InsertOverriding { insert, .. } = statement {
            return Box::pin(self.describe_statement(&SluiceStatement::Standard(insert.clone()))).await;
        }
        match statement {
            SluiceStatement::DescribeHistory { .. } => {
                Described { result_schema: Some(crate::provider::history::history_schema()), ..Default::default() }
            }
            SluiceStatement::Optimize { .. } => {
                Described { result_schema: Some(super::ddl::optimize_schema()), ..Default::default() }
            }
            SluiceStatement::Vacuum { .. } => {
                Described { result_schema: Some(super::ddl::vacuum_schema()), ..Default::default() }
            }
            SluiceStatement::Streaming(streaming)
                if matches!(
                    **streaming,
                    crate::syntax::streaming::StreamingStatement::ExplainMaterializedView { .. }
                ) =>
            {
                let schema = arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
                    "plan",
                    arrow::datatypes::DataType::Utf8,
                    false,
                )]);
                Described { result_schema: Some(Arc::new(schema)), ..Default::default() }
            }
            SluiceStatement::Standard(standard) => {
                let returns_rows = matches!(
                    **standard,
                    Statement::Query(_)
                        | Statement::Explain { .. }
                        | Statement::ExplainTable { .. }
                        | Statement::ShowTables { .. }
                        | Statement::ShowColumns { .. }
                );
                let plannable = returns_rows
                    || matches!(**standard, Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_));
                if !plannable {
                    return Described::default();
                }
                let (for_parameters, returning) =
                    split_returning(super::sequences::without_sequence_calls((**standard).clone()));
                let planned = self.plan_statement(for_parameters).await;
                let returning_schema = match returning {
                    Some((relation, items)) => self.returning_schema(relation, items).await.ok(),
                    None => None,
                };
                self.temp.clear();
                self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
                let Ok(plan) = planned else {
                    // DataFusion does not plan every INSERT that Sluice runs (an INSERT ... SELECT
                    // with ORDER BY, say); its RETURNING columns are known all the same.
                    return Described { result_schema: returning_schema, ..Default::default() };
                };
                let types = plan.get_parameter_types().unwrap_or_default();
                let count =
                    types.keys().filter_map(|k| k.trim_start_matches('$').parse::<usize>().ok()).max().unwrap_or(0);
                let casts = placeholder_casts(standard);
                let count = count.max(casts.keys().copied().max().unwrap_or(0));
                // `$1::int` types `$1` as Postgres does, where DataFusion leaves it open.
                let parameter_types = (1..=count)
                    .map(|n| types.get(&format!("${n}")).cloned().flatten().or_else(|| casts.get(&n).cloned()))
                    .collect();
                let result_schema = returns_rows
                    .then(|| {
                        let schema = Arc::new(plan.schema().as_arrow().clone()) as SchemaRef;
                        postgres_names(standard, &schema)
                    })
                    .or(returning_schema);
                Described { parameter_types, result_schema }
            }
            _ => Described::default(),
        }
    }

    /// The columns of a RETURNING list over `relation` (the statement's target).
    async fn returning_schema(
        &self,
        relation: datafusion::sql::sqlparser::ast::TableFactor,
        items: Vec<datafusion::sql::sqlparser::ast::SelectItem>,
    ) -> Result<SchemaRef> {
        use datafusion::sql::sqlparser::ast::TableWithJoins;
        let from = vec![TableWithJoins { relation, joins: vec![] }];
        let query = super::dml::select_query(items, from, None)?;
        let plan = self.plan_statement(Statement::Query(Box::new(query))).await?;
        Ok(Arc::new(plan.schema().as_arrow().clone()))
    }

    /// Finds a table by name: its catalog entry, handle and statement snapshot.
    /// Takes the snapshots of the tables a statement names, together, while no transaction is
    /// committing to several tables (see [`crate::staging`]): the statement sees such a
    /// transaction in all of them or in none. One table needs nothing (its snapshot is one
    /// version of its log).
    pub(crate) async fn pin_tables(&self, statement: &SluiceStatement) -> Result<()> {
        let SluiceStatement::Standard(statement) = statement else { return Ok(()) };
        let names = crate::names::relations_in(&**statement);
        if names.len() < 2 {
            return Ok(());
        }
        let state = self.catalog_state();
        let entries: Vec<crate::catalog::TableEntry> = names
            .iter()
            .filter_map(|name| state.table(&name.schema, &name.name))
            .filter(|entry| entry.kind != crate::catalog::TableKind::MaterializedView)
            .cloned()
            .collect();
        if entries.len() < 2 {
            return Ok(());
        }
        let _gate = self.db.commit_gate.read().await;
        for entry in &entries {
            super::catalog_provider::load_snapshot(&self.db, &self.snapshots, &self.staging, entry).await?;
        }
        Ok(())
    }

    pub(crate) async fn resolve_table(
        &self,
        name: &ObjectName,
    ) -> Result<(crate::catalog::TableEntry, Arc<sluice_storage::table::Table>, Arc<sluice_storage::snapshot::Snapshot>)>
    {
        let name = table_name(name)?;
        let state = self.catalog_state();
        let entry =
            state.table(&name.schema, &name.name).cloned().ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
        let (table, snapshot) =
            super::catalog_provider::statement_snapshot(&self.db, &self.snapshots, &self.staging, &entry).await?;
        Ok((entry, table, snapshot))
    }
}

/// The table the top-level FROM clause of `query` reads under the alias `alias`, if any.
fn aliased_table(query: &Query, alias: &ObjectName) -> Option<ObjectName> {
    use datafusion::sql::sqlparser::ast::{SetExpr, TableFactor};
    let [part] = alias.0.as_slice() else { return None };
    let wanted = part.as_ident().map(crate::names::normalize)?;
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    select
        .from
        .iter()
        .flat_map(|from| std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)))
        .find_map(|relation| match relation {
            TableFactor::Table { name, alias: Some(a), .. } if crate::names::normalize(&a.name) == wanted => {
                Some(name.clone())
            }
            _ => None,
        })
}

/// A DML statement without its ON CONFLICT and RETURNING clauses (which DataFusion does not
/// plan), and its target relation with the RETURNING list, if it has one.
fn split_returning(
    statement: Statement,
) -> (Statement, Option<(datafusion::sql::sqlparser::ast::TableFactor, Vec<datafusion::sql::sqlparser::ast::SelectItem>)>)
{
    use datafusion::sql::sqlparser::ast::{FromTable, TableObject};
    match statement {
        Statement::Insert(mut insert) => {
            insert.on = None;
            let returning = insert.returning.take();
            let relation = match (&insert.table, returning) {
                (TableObject::TableName(name), Some(items)) => {
                    let alias = insert.table_alias.as_ref().map(|a| a.alias.clone());
                    super::upsert::table_relation(name.clone(), alias).ok().map(|r| (r, items))
                }
                _ => None,
            };
            (Statement::Insert(insert), relation)
        }
        Statement::Update(mut update) => {
            let returning = update.returning.take().map(|items| (update.table.relation.clone(), items));
            (Statement::Update(update), returning)
        }
        Statement::Delete(mut delete) => {
            let first = match &delete.from {
                FromTable::WithFromKeyword(r) | FromTable::WithoutKeyword(r) => r.first().map(|t| t.relation.clone()),
            };
            let returning = delete.returning.take().and_then(|items| Some((first?, items)));
            (Statement::Delete(delete), returning)
        }
        other => (other, None),
    }
}

/// The result columns named as Postgres names them: an unaliased function call by the
/// function's name (`count`), any other unaliased expression `?column?`; column references and
/// aliases keep their names. Only the outermost SELECT list is renamed.
pub(crate) fn postgres_names(statement: &Statement, schema: &SchemaRef) -> SchemaRef {
    let Statement::Query(query) = statement else { return schema.clone() };
    let SetExpr::Select(select) = query.body.as_ref() else { return schema.clone() };
    if select.projection.len() != schema.fields().len() {
        // datafusion-pg-catalog aliases a column named beside a wildcard (`SELECT id, t.*`) as
        // `__alias_id`, in case the wildcard has one of that name too.
        let wildcard =
            select.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
        // And a derived table's duplicate names (`unnest(a, b)`'s two `unnest`) come through `*`.
        let aliased = |f: &Arc<Field>| {
            f.name()
                .strip_prefix(PG_CATALOG_ALIAS)
                .or_else(|| super::postgres_forms::output_name(f.name()))
                .map(str::to_string)
        };
        if !wildcard || !schema.fields().iter().any(|f| aliased(f).is_some()) {
            return schema.clone();
        }
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match aliased(f) {
                Some(name) => f.as_ref().clone().with_name(name),
                None => f.as_ref().clone(),
            })
            .collect();
        return Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    }
    let mut changed = false;
    let fields: Vec<Field> = select
        .projection
        .iter()
        .zip(schema.fields())
        .map(|(item, field)| match item {
            SelectItem::UnnamedExpr(expr) => match expression_name(expr) {
                Some(name) if name != *field.name() => {
                    changed = true;
                    field.as_ref().clone().with_name(name)
                }
                _ => field.as_ref().clone(),
            },
            SelectItem::ExprWithAlias { alias, .. } => match super::postgres_forms::output_name(&alias.value) {
                Some(name) => {
                    changed = true;
                    field.as_ref().clone().with_name(name)
                }
                None => field.as_ref().clone(),
            },
            _ => field.as_ref().clone(),
        })
        .collect();
    if !changed {
        return schema.clone();
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The prefix of datafusion-pg-catalog's aliases for columns beside a wildcard.
const PG_CATALOG_ALIAS: &str = "__alias_";

/// The types of placeholders that appear cast (`$1::int`): placeholder number -> Arrow type.
fn placeholder_casts(statement: &Statement) -> std::collections::HashMap<usize, DataType> {
    let mut found = std::collections::HashMap::new();
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(statement, |expr| {
        if let Expr::Cast { expr: inner, data_type, .. } = expr {
            if let Expr::Value(v) = inner.as_ref() {
                if let datafusion::sql::sqlparser::ast::Value::Placeholder(name) = &v.value {
                    let number = name.trim_start_matches('$').parse::<usize>().ok();
                    let arrow = crate::types::declared_type(data_type).ok().map(|t| t.arrow_type());
                    if let (Some(number), Some(arrow)) = (number, arrow) {
                        found.entry(number).or_insert(arrow);
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// The name Postgres gives a select-list item: its alias, a column's name, an unaliased function
/// call's name, else `?column?`. `None` for wildcards.
pub fn select_item_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        SelectItem::UnnamedExpr(expr) => expression_name(expr).or_else(|| column_name(expr)),
        _ => None,
    }
}

fn column_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()),
        Expr::Nested(inner) | Expr::Cast { expr: inner, .. } | Expr::Collate { expr: inner, .. } => column_name(inner),
        _ => None,
    }
}

/// Postgres' name for an unaliased expression; None keeps DataFusion's (column references).
fn expression_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => None,
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => expression_name(inner),
        // A cast is named by what it casts, or else by its type.
        Expr::Cast { expr, data_type, .. } => match expression_name(expr) {
            Some(name) if name == "?column?" => Some(cast_type_name(data_type)),
            other => other,
        },
        Expr::Function(function) => function.name.0.last().map(|part| {
            let name = match part {
                datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(ident) => ident.value.to_lowercase(),
                other => other.to_string().to_lowercase(),
            };
            // Casts to uuid/json/jsonb are calls of `__pg_<type>`.
            match name.strip_prefix("__pg_") {
                // `json_agg(x)` is planned as `__pg_json_array(array_agg(x))`.
                Some("json_array") => "json_agg".into(),
                Some("jsonb_array") => "jsonb_agg".into(),
                Some("to_char_number") => "to_char".into(),
                // `x COLLATE "C"` is named by `x` (see sql::collations).
                Some("collate") => expression_name_of_args(function).unwrap_or_else(|| "?column?".into()),
                // `~x`, an operator.
                Some("bitwise_not") => "?column?".into(),
                // `x::varchar`, read as `__pg_varchar(x::text)`: named by `x` or else `varchar`.
                Some("varchar") => match first_argument(function) {
                    Some(Expr::Cast { expr: inner, .. }) => expression_name(inner).or_else(|| column_name(inner)),
                    Some(Expr::Function(text)) if text.name.to_string() == "__pg_text" => expression_name_of_args(text),
                    _ => expression_name_of_args(function),
                }
                .filter(|name| name != "?column?")
                .unwrap_or_else(|| "varchar".into()),
                // `x::mood`, named by `x` or else by the type (see sql::enums).
                Some("enum") => super::enums::cast_name(function, expression_name, column_name),
                Some(type_name) if matches!(expression_name_of_args(function).as_deref(), None | Some("?column?")) => {
                    type_name.to_string()
                }
                Some(_) => expression_name_of_args(function).unwrap_or(name),
                // `x = ANY(array)` as datafusion-pg-catalog rewrites it.
                None if name == "array_contains" => "?column?".into(),
                // PostgreSQL's array_remove is DataFusion's array_remove_all.
                None if name == "array_remove_all" => "array_remove".into(),
                None => name,
            }
        }),
        Expr::Case { .. } => Some("case".into()),
        // `interval '1 day'` is named by its type, as a cast is.
        Expr::TypedString(typed) => Some(cast_type_name(&typed.data_type)),
        Expr::Interval(_) => Some("interval".into()),
        // `(array[1, 2])[1]` is named `array`, as its array is.
        Expr::CompoundFieldAccess { root, .. } => match root.as_ref() {
            Expr::Nested(inner) if matches!(inner.as_ref(), Expr::Array(_)) => Some("array".into()),
            other => expression_name(other).or_else(|| column_name(other)),
        },
        Expr::Extract { .. } => Some("extract".into()),
        // SQL's special forms are named by the function PostgreSQL runs.
        Expr::Position { .. } => Some("position".into()),
        Expr::Substring { shorthand: true, .. } => Some("substr".into()),
        Expr::Substring { .. } => Some("substring".into()),
        Expr::Ceil { .. } => Some("ceil".into()),
        Expr::Floor { .. } => Some("floor".into()),
        Expr::Trim { trim_where, .. } => Some(
            match trim_where {
                Some(datafusion::sql::sqlparser::ast::TrimWhereField::Leading) => "ltrim",
                Some(datafusion::sql::sqlparser::ast::TrimWhereField::Trailing) => "rtrim",
                _ => "btrim",
            }
            .into(),
        ),
        Expr::Overlay { .. } => Some("overlay".into()),
        Expr::Array(_) => Some("array".into()),
        // A scalar subquery is named by its one column (`(SELECT max(x) FROM t)` is `max`).
        Expr::Subquery(query) => Some(subquery_name(query).unwrap_or_else(|| "?column?".into())),
        _ => Some("?column?".into()),
    }
}

/// The name of a scalar subquery's column, as PostgreSQL names it.
fn subquery_name(query: &datafusion::sql::sqlparser::ast::Query) -> Option<String> {
    use datafusion::sql::sqlparser::ast::{SelectItem, SetExpr};
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    match select.projection.as_slice() {
        [SelectItem::ExprWithAlias { alias, .. }] => Some(alias.value.clone()),
        [SelectItem::UnnamedExpr(expr)] => expression_name(expr).or_else(|| column_name(expr)),
        _ => None,
    }
}

/// A call's first argument, when it is an expression.
fn first_argument(function: &datafusion::sql::sqlparser::ast::Function) -> Option<&Expr> {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return None };
    match list.args.first() {
        Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) => Some(arg),
        _ => None,
    }
}

/// The name of a call's only argument, as a cast names itself after what it casts.
fn expression_name_of_args(function: &datafusion::sql::sqlparser::ast::Function) -> Option<String> {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &function.args else { return None };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] => expression_name(arg).or_else(|| column_name(arg)),
        _ => None,
    }
}

/// PostgreSQL's internal name of a type, which names an unnamed cast (`'1'::int` is `int4`).
fn cast_type_name(data_type: &datafusion::sql::sqlparser::ast::DataType) -> String {
    use datafusion::sql::sqlparser::ast::DataType as T;
    match data_type {
        T::SmallInt(_) | T::Int2(_) => "int2".into(),
        T::Int(_) | T::Integer(_) | T::Int4(_) => "int4".into(),
        T::BigInt(_) | T::Int8(_) => "int8".into(),
        T::Real | T::Float4 => "float4".into(),
        T::Double(_) | T::DoublePrecision | T::Float8 => "float8".into(),
        T::Bool | T::Boolean => "bool".into(),
        T::Varchar(_) | T::CharacterVarying(_) | T::CharVarying(_) => "varchar".into(),
        T::Char(_) | T::Character(_) => "bpchar".into(),
        T::Numeric(_) | T::Decimal(_) | T::Dec(_) => "numeric".into(),
        T::Timestamp(
            _,
            datafusion::sql::sqlparser::ast::TimezoneInfo::WithTimeZone
            | datafusion::sql::sqlparser::ast::TimezoneInfo::Tz,
        ) => "timestamptz".into(),
        T::Timestamp(..) => "timestamp".into(),
        T::Array(_) => "array".into(),
        other => other.to_string().to_lowercase(),
    }
}

/// Names the unaliased expressions of inner queries (CTEs, derived tables, subqueries) as
/// PostgreSQL names them, so that the outer query can refer to them by those names:
/// `WITH w AS (SELECT x, count(1) FROM t GROUP BY x) SELECT count FROM w` (DataFusion would name
/// it `count(Int64(1))`). An expression is given an alias only when no other item of its list
/// has that name. The outermost list is named in
/// [`postgres_names`] instead.
pub(crate) fn name_inner_columns(statement: &mut Statement) {
    struct Inner {
        depth: usize,
    }
    impl datafusion::sql::sqlparser::ast::VisitorMut for Inner {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut datafusion::sql::sqlparser::ast::Query) -> ControlFlow<()> {
            if self.depth > 0 {
                name_set_expr(query.body.as_mut());
            }
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &mut datafusion::sql::sqlparser::ast::Query) -> ControlFlow<()> {
            self.depth = self.depth.saturating_sub(1);
            ControlFlow::Continue(())
        }
    }
    fn name_set_expr(body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => name_projection(&mut select.projection),
            SetExpr::SetOperation { left, right, .. } => {
                name_set_expr(left);
                name_set_expr(right);
            }
            _ => {}
        }
    }
    fn name_projection(projection: &mut [SelectItem]) {
        let names: Vec<Option<String>> = projection
            .iter()
            .map(|item| match item {
                SelectItem::UnnamedExpr(expr) => expression_name(expr).or_else(|| column_name(expr)),
                other => select_item_name(other),
            })
            .collect();
        for (i, item) in projection.iter_mut().enumerate() {
            let SelectItem::UnnamedExpr(expr) = item else { continue };
            let Some(name) = expression_name(expr) else { continue };
            let unique = names.iter().enumerate().all(|(j, other)| j == i || other.as_deref() != Some(name.as_str()));
            if !unique {
                continue;
            }
            *item = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: datafusion::sql::sqlparser::ast::Ident::with_quote('"', name),
            };
        }
    }
    let _ = datafusion::sql::sqlparser::ast::VisitMut::visit(statement, &mut Inner { depth: 0 });
}
