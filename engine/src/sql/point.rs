//! Point updates: `UPDATE t SET c = c + 1, d = 5 WHERE k = 42`, where `k` alone is a unique key
//! of `t`, run without DataFusion's planners.
//!
//! An UPDATE finds its rows and their new values with a query (see [`crate::sql::dml`]). For the
//! statement an OLTP client sends most (one row by its key, columns set to constants or to a
//! column plus or minus a constant), planning that query costs far more CPU than running it:
//! SQL to a logical plan, the analyzer and optimizer, the physical planner and its optimizer,
//! each walking the plan. Here the statement's one filter goes straight to the table's scan
//! (which finds the row through the key index, in a transaction block through the block's own
//! snapshot and index, exactly as the query's scan would), and the new values are computed on
//! the rows it returns: integer arithmetic as [`crate::functions::arithmetic`] computes it
//! (22003 on overflow, as PostgreSQL). The result has the query's shape (every column's new
//! value, then the file and row columns), so what follows (row locks, casts to the columns'
//! types, constraints, keys, the commit) is the same code for both.
//!
//! Anything else takes the query: another filter, a join or FROM, an expression other than
//! those above, a key that is not an integer, a constant that is not one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::{lit, Operator};
use datafusion::sql::sqlparser::ast::{self, BinaryOperator, CastKind, Expr, Ident, UnaryOperator, Update, Value};

use crate::error::{Error, Result};
use crate::names::normalize;
use crate::sql::context::QueryContext;
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
        let Some((key, value)) = update.selection.as_ref().and_then(|s| key_equality(s, alias, &schema)) else {
            return Ok(None);
        };
        let Some(key_field) = schema.fields().get(key) else { return Ok(None) };
        let key_name = key_field.name().clone();
        if !crate::keys::unique_defs(target.snapshot.configuration())
            .iter()
            .any(|d| d.is_on(std::slice::from_ref(&key_name)))
        {
            return Ok(None);
        }
        // A value the key column cannot hold takes the query (which says what PostgreSQL says).
        let Some(value) = crate::keys::in_type(&value, key_field.data_type()) else { return Ok(None) };
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
        let filter = datafusion::logical_expr::Expr::Column(Column::new_unqualified(&key_name)).eq(lit(value.clone()));
        let state = self.ctx.state();
        let plan = provider.scan(&state, None, &[filter], None).await?;
        let scanned = datafusion::physical_plan::collect(plan, self.ctx.task_ctx()).await?;
        let columns = schema.fields().len();
        let mut rows = Vec::with_capacity(scanned.len());
        for batch in scanned {
            // The scan's rows are the key's when the index found them, every row otherwise.
            let Some(keys) = batch.columns().get(key) else { continue };
            let matching = arrow::compute::kernels::cmp::eq(keys, &value.to_scalar()?)?;
            let batch = arrow::compute::filter_record_batch(&batch, &matching)?;
            if batch.num_rows() == 0 {
                continue;
            }
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
