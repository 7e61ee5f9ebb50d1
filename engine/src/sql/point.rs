//! Point statements, run without DataFusion's planners: `UPDATE t SET c = c + 1, d = 5 WHERE k =
//! 42` and `SELECT c, d FROM t WHERE k = 42`, where `k` alone is a unique key of `t`.
//!
//! An UPDATE finds its rows and their new values with a query (see [`crate::sql::dml`]), and a
//! SELECT is one. For the statements an OLTP client sends most (one row by its key; columns set
//! to constants or to a column plus or minus a constant, or read as they are), planning costs far
//! more CPU than running: SQL to a logical plan, the analyzer and optimizer, the physical planner
//! and its optimizer, each walking the plan. Here the statement's one filter goes straight to the
//! table's scan (which finds the row through the key index, in a transaction block through the
//! block's own snapshot and index, exactly as the query's scan would).
//!
//! - An UPDATE's new values are computed on the rows the scan returns: integer arithmetic as
//!   [`crate::functions::arithmetic`] computes it (22003 on overflow, as PostgreSQL). The result
//!   has the query's shape (every column's new value, then the file and row columns), so what
//!   follows (row locks, casts to the columns' types, constraints, keys, the commit) is the same
//!   code for both.
//! - A SELECT returns the columns it names (or `*`, all of them), under their names or aliases,
//!   with the types and field metadata the planned query gives them.
//!
//! Anything else takes the query: another filter, a join or FROM, an expression other than
//! those above, a key that is not an integer, a constant that is not one; for a SELECT also
//! ORDER BY, LIMIT, DISTINCT, locking clauses, a view or a catalog table.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{lit, Operator};
use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, CastKind, Expr, GroupByExpr, Ident, ObjectName, Query, Select, SelectFlavor, SelectItem,
    SetExpr, TableFactor, TableWithJoins, UnaryOperator, Update, Value, WildcardAdditionalOptions,
};
use sluice_storage::snapshot::Snapshot;

use crate::error::{Error, Result};
use crate::names::normalize;
use crate::provider::SluiceTable;
use crate::sql::context::{QueryContext, StatementResult};
use crate::sql::dml::Target;

/// A new value of a column, of the forms a point update computes itself.
enum Assigned {
    Constant(ScalarValue),
    Column(usize),
    /// `column + constant` or `column - constant`.
    Arithmetic(usize, Operator, ScalarValue),
}

impl QueryContext {
    /// The rows the query of `update` would give (each column's new value, then the file and
    /// row columns), computed without planning when it is a point update (see the module docs);
    /// `None` when it is not one.
    pub(super) async fn point_update_rows(
        &self,
        target: &Target,
        update: &Update,
        assignments: &HashMap<String, Expr>,
        alias: &Ident,
    ) -> Result<Option<Vec<RecordBatch>>> {
        if update.from.is_some() || !update.table.joins.is_empty() {
            return Ok(None);
        }
        let schema = target.snapshot.arrow_schema();
        let Some(selection) = update.selection.as_ref() else { return Ok(None) };
        let Some((key, key_name, value)) = unique_key_equality(&target.snapshot, selection, alias) else {
            return Ok(None);
        };
        let mut computed = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            computed.push(match assignments.get(field.name()) {
                None => None,
                Some(expr) => match assigned(expr, alias, &schema) {
                    Some(assigned) => Some(assigned),
                    None => return Ok(None),
                },
            });
        }
        let provider = self.dml_provider(target);
        tracing::debug!(table = target.entry.qualified_name(), "a point update, computed without a plan");
        let scanned = self.rows_with_key(&provider, None, (key, &key_name), &value).await?;
        let columns = schema.fields().len();
        let mut rows = Vec::with_capacity(scanned.len());
        for batch in scanned {
            let mut out: Vec<ArrayRef> = Vec::with_capacity(columns + 2);
            for (at, assigned) in computed.iter().enumerate() {
                let column = |i: usize| {
                    batch.columns().get(i).cloned().ok_or_else(|| Error::Internal("a point update's column".into()))
                };
                out.push(match assigned {
                    None => column(at)?,
                    Some(Assigned::Column(i)) => column(*i)?,
                    Some(Assigned::Constant(v)) => v.to_array_of_size(batch.num_rows())?,
                    Some(Assigned::Arithmetic(i, op, v)) => {
                        crate::functions::arithmetic::integer_arithmetic(*op, &column(*i)?, v, batch.num_rows())?
                    }
                });
            }
            for hidden in [columns, columns + 1] {
                out.push(
                    batch
                        .columns()
                        .get(hidden)
                        .cloned()
                        .ok_or_else(|| Error::Internal("a point update's row".into()))?,
                );
            }
            let fields: Vec<arrow::datatypes::Field> = out
                .iter()
                .enumerate()
                .map(|(i, array)| {
                    let name = batch.schema().fields().get(i).map_or_else(|| format!("c{i}"), |f| f.name().clone());
                    arrow::datatypes::Field::new(name, array.data_type().clone(), true)
                })
                .collect();
            rows.push(RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), out)?);
        }
        Ok(Some(rows))
    }

    /// The result of `query` when it is a point query (see the module docs); `None` when it is
    /// not one.
    pub(super) async fn point_query(&self, query: &Query) -> Result<Option<StatementResult>> {
        let Some((name, alias, select)) = point_select(query) else { return Ok(None) };
        let Ok(table_name) = crate::names::table_name(name) else { return Ok(None) };
        // An unqualified `pg_...` may name a catalog table, which PostgreSQL finds first.
        if name.0.len() == 1 && table_name.name.starts_with("pg_") {
            return Ok(None);
        }
        let entry = {
            let state = self.catalog_state();
            match state.table(&table_name.schema, &table_name.name) {
                Some(entry) if entry.kind == crate::catalog::TableKind::Table => entry.clone(),
                _ => return Ok(None),
            }
        };
        let (table, snapshot) =
            super::catalog_provider::statement_snapshot(&self.db, &self.snapshots, &self.staging, &entry).await?;
        // Columns are qualified by the alias, or by the table's name when there is none.
        let alias = alias.cloned().unwrap_or_else(|| Ident::new(table_name.name.clone()));
        let Some(selection) = select.selection.as_ref() else { return Ok(None) };
        let Some((key, key_name, value)) = unique_key_equality(&snapshot, selection, &alias) else {
            return Ok(None);
        };
        let schema = snapshot.arrow_schema();
        let Some(output) = selected_columns(&select.projection, &alias, &schema) else { return Ok(None) };
        // The scan reads the selected columns and the key.
        let mut read: Vec<usize> = output.iter().map(|(column, _)| *column).chain([key]).collect();
        read.sort_unstable();
        read.dedup();
        let at = |column: usize| read.iter().position(|c| *c == column);
        let Some(key_at) = at(key) else { return Ok(None) };
        let fields = output
            .iter()
            .map(|(column, name)| schema.fields().get(*column).map(|f| f.as_ref().clone().with_name(name)))
            .collect::<Option<Vec<_>>>();
        let Some(fields) = fields else { return Ok(None) };
        let result_schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()));
        let provider = super::catalog_provider::statement_provider(&self.db, &self.staging, &entry.id, table, snapshot);
        tracing::debug!(table = entry.qualified_name(), "a point query, run without a plan");
        let scanned = self.rows_with_key(&provider, Some(&read), (key_at, &key_name), &value).await?;
        let mut batches = Vec::with_capacity(scanned.len());
        for batch in scanned {
            let columns = output
                .iter()
                .map(|(column, _)| at(*column).and_then(|i| batch.columns().get(i)).cloned())
                .collect::<Option<Vec<ArrayRef>>>()
                .ok_or_else(|| Error::Internal("a point query's column".into()))?;
            let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            batches.push(RecordBatch::try_new_with_options(result_schema.clone(), columns, &options)?);
        }
        Ok(Some(StatementResult::Rows { schema: result_schema, batches }))
    }

    /// The rows `provider` scans (the columns `projection` names) whose key (`key`: its position
    /// in the scan and its name) is `value`. The scan finds them through the key index when it
    /// can, and returns every row otherwise.
    async fn rows_with_key(
        &self,
        provider: &SluiceTable,
        projection: Option<&Vec<usize>>,
        key: (usize, &str),
        value: &ScalarValue,
    ) -> Result<Vec<RecordBatch>> {
        let filter = datafusion::logical_expr::Expr::Column(Column::new_unqualified(key.1)).eq(lit(value.clone()));
        // The key index locates the rows (it always does for a unique key, once it is built): a
        // scan of those rows needs neither the session's state nor its functions, whose copies
        // (`SessionContext::state`, `task_ctx`) cost more than the read.
        let all: Vec<usize> = (0..provider.schema().fields().len()).collect();
        let columns = projection.unwrap_or(&all);
        let config = self.ctx.copied_config();
        let located = provider.located_scan(columns, std::slice::from_ref(&filter), config.target_partitions()).await?;
        let (plan, task) = match located {
            Some(plan) => {
                let runtime = self.ctx.runtime_env();
                let session = self.ctx.session_id();
                let (scalar, higher, aggregate, window) =
                    (HashMap::new(), HashMap::new(), HashMap::new(), HashMap::new());
                let task = TaskContext::new(None, session, config, scalar, higher, aggregate, window, runtime);
                (plan, Arc::new(task))
            }
            None => (provider.scan(&self.ctx.state(), projection, &[filter], None).await?, self.ctx.task_ctx()),
        };
        let scanned = datafusion::physical_plan::collect(plan, task).await?;
        let mut rows = Vec::with_capacity(scanned.len());
        for batch in scanned {
            let Some(keys) = batch.columns().get(key.0) else { continue };
            let matching = arrow::compute::kernels::cmp::eq(keys, &value.to_scalar()?)?;
            let batch = arrow::compute::filter_record_batch(&batch, &matching)?;
            if batch.num_rows() > 0 {
                rows.push(batch);
            }
        }
        Ok(rows)
    }
}

/// The key column (its position and name) and value of `selection`, when it is `k = constant`
/// for a column `k` that alone is a unique key of the table, and the constant is one `k` can hold
/// (any other takes the query, which says what PostgreSQL says).
fn unique_key_equality(snapshot: &Snapshot, selection: &Expr, alias: &Ident) -> Option<(usize, String, ScalarValue)> {
    let schema = snapshot.arrow_schema();
    let (key, value) = key_equality(selection, alias, &schema)?;
    let key_field = schema.fields().get(key)?;
    let key_name = key_field.name().clone();
    if !crate::keys::unique_defs(snapshot.configuration()).iter().any(|d| d.is_on(std::slice::from_ref(&key_name))) {
        return None;
    }
    let value = crate::keys::in_type(&value, key_field.data_type())?;
    Some((key, key_name, value))
}

/// The table (its name and alias) and the SELECT of a query of the point form: one plain
/// SELECT from one table, without any clause other than its WHERE.
fn point_select(query: &Query) -> Option<(&ObjectName, Option<&Ident>, &Select)> {
    let plain_query = query.with.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && query.fetch.is_none()
        && query.locks.is_empty()
        && query.for_clause.is_none()
        && query.settings.is_none()
        && query.format_clause.is_none()
        && query.pipe_operators.is_empty();
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let plain_select = select.optimizer_hints.is_empty()
        && select.distinct.is_none()
        && select.select_modifiers.is_none()
        && select.top.is_none()
        && select.exclude.is_none()
        && select.into.is_none()
        && select.lateral_views.is_empty()
        && select.prewhere.is_none()
        && select.connect_by.is_empty()
        && matches!(&select.group_by, GroupByExpr::Expressions(exprs, modifiers) if exprs.is_empty() && modifiers.is_empty())
        && select.cluster_by.is_empty()
        && select.distribute_by.is_empty()
        && select.sort_by.is_empty()
        && select.having.is_none()
        && select.named_window.is_empty()
        && select.qualify.is_none()
        && select.value_table_mode.is_none()
        && select.flavor == SelectFlavor::Standard;
    if !plain_query || !plain_select {
        return None;
    }
    let [TableWithJoins { relation, joins }] = select.from.as_slice() else { return None };
    if !joins.is_empty() {
        return None;
    }
    let TableFactor::Table {
        name,
        alias,
        args: None,
        with_hints,
        version: None,
        with_ordinality: false,
        partitions,
        json_path: None,
        sample: None,
        index_hints,
    } = relation
    else {
        return None;
    };
    if !with_hints.is_empty() || !partitions.is_empty() || !index_hints.is_empty() {
        return None;
    }
    let alias = match alias {
        None => None,
        Some(alias) if alias.columns.is_empty() => Some(&alias.name),
        Some(_) => return None,
    };
    Some((name, alias, select))
}

/// The columns (position, output name) a point query's select list gives: columns, aliased or
/// not, and `*` alone.
fn selected_columns(
    projection: &[SelectItem],
    alias: &Ident,
    schema: &arrow::datatypes::Schema,
) -> Option<Vec<(usize, String)>> {
    if let [SelectItem::Wildcard(options)] = projection {
        return (*options == WildcardAdditionalOptions::default())
            .then(|| schema.fields().iter().enumerate().map(|(i, f)| (i, f.name().clone())).collect());
    }
    let mut columns = Vec::with_capacity(projection.len());
    for item in projection {
        columns.push(match item {
            SelectItem::UnnamedExpr(expr) => {
                let column = column_of(expr, alias, schema)?;
                (column, schema.fields().get(column)?.name().clone())
            }
            // Sluice's own aliases (duplicate names) take the query, which names them.
            SelectItem::ExprWithAlias { expr, alias: name }
                if super::postgres_forms::output_name(&name.value).is_none() =>
            {
                (column_of(expr, alias, schema)?, normalize(name))
            }
            _ => return None,
        });
    }
    Some(columns)
}

/// The key column (by position) and constant of `column = constant` (either way round).
fn key_equality(selection: &Expr, alias: &Ident, schema: &arrow::datatypes::Schema) -> Option<(usize, ScalarValue)> {
    let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = unnested(selection) else { return None };
    match (column_of(left, alias, schema), constant(right)) {
        (Some(column), Some(value)) => Some((column, value)),
        _ => Some((column_of(right, alias, schema)?, constant(left)?)),
    }
}

/// The new value `expr` gives, if it is of a form a point update computes.
fn assigned(expr: &Expr, alias: &Ident, schema: &arrow::datatypes::Schema) -> Option<Assigned> {
    if let Some(value) = constant(expr) {
        return Some(Assigned::Constant(value));
    }
    if let Some(column) = column_of(expr, alias, schema) {
        return Some(Assigned::Column(column));
    }
    let Expr::BinaryOp { left, op, right } = unnested(expr) else { return None };
    let (column, value) = match (op, column_of(left, alias, schema), constant(right)) {
        (BinaryOperator::Plus | BinaryOperator::Minus, Some(column), Some(value)) => (column, value),
        // `constant + column` is `column + constant`.
        (BinaryOperator::Plus, None, None) => (column_of(right, alias, schema)?, constant(left)?),
        _ => return None,
    };
    let operator = if *op == BinaryOperator::Plus { Operator::Plus } else { Operator::Minus };
    let integer = |t: &DataType| matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64);
    let field = schema.fields().get(column)?;
    (integer(field.data_type()) && integer(&value.data_type())).then_some(Assigned::Arithmetic(column, operator, value))
}

fn unnested(expr: &Expr) -> &Expr {
    match expr {
        Expr::Nested(inner) => unnested(inner),
        other => other,
    }
}

/// The position of the table column `expr` names (`c`, or `alias.c`).
fn column_of(expr: &Expr, alias: &Ident, schema: &arrow::datatypes::Schema) -> Option<usize> {
    let name = match unnested(expr) {
        // `SET c = DEFAULT` names no column.
        keyword if super::dml::is_default_keyword(keyword) => return None,
        Expr::Identifier(ident) => normalize(ident),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [qualifier, ident] if normalize(qualifier) == normalize(alias) => normalize(ident),
            _ => return None,
        },
        _ => return None,
    };
    schema.index_of(&name).ok()
}

/// An integer constant, typed as PostgreSQL types it: a bare number is an `integer` when it
/// fits one, else a `bigint`; `CAST(n AS smallint | integer | bigint)` (a bound parameter's
/// form, see [`crate::sql::params`]) is of that type, when `n` fits it.
fn constant(expr: &Expr) -> Option<ScalarValue> {
    match unnested(expr) {
        Expr::Value(value) => match &value.value {
            Value::Number(text, false) => {
                let n: i64 = text.parse().ok()?;
                Some(i32::try_from(n).map_or(ScalarValue::Int64(Some(n)), |n| ScalarValue::Int32(Some(n))))
            }
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => match constant(expr)? {
            ScalarValue::Int32(Some(n)) => Some(ScalarValue::Int32(Some(n.checked_neg()?))),
            // `-2147483648` is an integer in PostgreSQL too.
            ScalarValue::Int64(Some(n)) => {
                let n = n.checked_neg()?;
                Some(i32::try_from(n).map_or(ScalarValue::Int64(Some(n)), |n| ScalarValue::Int32(Some(n))))
            }
            _ => None,
        },
        Expr::Cast { kind: CastKind::Cast | CastKind::DoubleColon, expr, data_type, format: None, array: false } => {
            let value = constant(expr)?;
            let target = match data_type {
                ast::DataType::SmallInt(None) | ast::DataType::Int2(None) => DataType::Int16,
                ast::DataType::Int(None) | ast::DataType::Integer(None) | ast::DataType::Int4(None) => DataType::Int32,
                ast::DataType::BigInt(None) | ast::DataType::Int8(None) => DataType::Int64,
                _ => return None,
            };
            crate::keys::in_type(&value, &target)
        }
        _ => None,
    }
}
