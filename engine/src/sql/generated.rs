//! Generated columns: `GENERATED ALWAYS AS (expr) STORED`, as PostgreSQL has them and as Delta
//! Lake keeps them (the column's `delta.generationExpression` metadata, with the
//! `generatedColumns` writer feature, so Spark and delta-rs check or compute them too).
//!
//! Every writer computes them: the rows a statement writes pass through
//! [`QueryContext::to_table_rows`](crate::sql::context::QueryContext), which ends by evaluating
//! each generation expression over the row's other columns, so INSERT, COPY, UPDATE, MERGE and
//! upserts store what the expression gives. A value given for one is refused as PostgreSQL
//! refuses it (428C9). The expression may read only the table's ordinary columns, with
//! immutable functions (42P17 otherwise).
//!
//! Not supported (0A000): adding a generated column to an existing table (Delta allows them only
//! at creation), and dropping, renaming or retyping a column an expression reads.

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{ColumnarValue, Volatility};
use datafusion::sql::sqlparser::ast::{Expr, Visit, Visitor};
use sluice_storage::schema::{StructField, StructType};

use crate::error::{Error, Result};
use crate::sql::context::QueryContext;

/// The Delta column metadata key that holds a generation expression.
pub const GENERATION_KEY: &str = "delta.generationExpression";

/// A column's generation expression, if it is a generated column.
pub fn expression_of(field: &StructField) -> Option<&str> {
    field.metadata.get(GENERATION_KEY).and_then(|v| v.as_str())
}

/// Whether any column of `schema` is generated.
pub fn has_generated(schema: &StructType) -> bool {
    schema.fields.iter().any(|f| expression_of(f).is_some())
}

/// The generated columns a column's change would break: those whose expressions read `column`.
pub fn readers_of(schema: &StructType, column: &str) -> Vec<String> {
    schema
        .fields
        .iter()
        .filter(|f| expression_of(f).is_some_and(|e| columns_in(e).iter().any(|c| c == column)))
        .map(|f| f.name.clone())
        .collect()
}

/// The refusal of a change to a column that generation expressions read.
pub fn refuse_change_of_read_column(schema: &StructType, column: &str, what: &str) -> Result<()> {
    match readers_of(schema, column).first() {
        Some(generated) => Err(Error::NotSupported(format!(
            "{what} column \"{column}\", which the generated column \"{generated}\" reads"
        ))),
        None => Ok(()),
    }
}

/// The column names an expression's text reads (lower-cased unless quoted).
fn columns_in(expression: &str) -> Vec<String> {
    struct Columns(Vec<String>);
    impl Visitor for Columns {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            match expr {
                Expr::Identifier(ident) => self.0.push(crate::names::normalize(ident)),
                Expr::CompoundIdentifier(parts) => {
                    if let Some(last) = parts.last() {
                        self.0.push(crate::names::normalize(last));
                    }
                }
                _ => {}
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let Ok(expr) = crate::syntax::parser::parse_expression_text(expression) else { return vec![] };
    let mut columns = Columns(vec![]);
    let _ = expr.visit(&mut columns);
    columns.0
}

/// Checks the generation expressions of a new table's columns: each reads only ordinary columns
/// of the table and calls only immutable functions, and gives a value of (or castable to) its
/// column's type.
pub fn check_definitions(cx: &QueryContext, schema: &StructType) -> Result<()> {
    if !has_generated(schema) {
        return Ok(());
    }
    let arrow_schema = schema.to_arrow();
    let df_schema = DFSchema::try_from(arrow_schema)?;
    for field in &schema.fields {
        let Some(text) = expression_of(field) else { continue };
        for column in columns_in(text) {
            match schema.field(&column) {
                None => return Err(Error::UndefinedColumn(column)),
                Some(read) if expression_of(read).is_some() => {
                    return Err(Error::data(
                        "42P17",
                        format!("cannot use generated column \"{column}\" in column generation expression"),
                    ))
                }
                Some(_) => {}
            }
        }
        let parsed = crate::syntax::parser::parse_expression_text(text)?;
        if has_subquery(&parsed) {
            return Err(Error::data("0A000", "cannot use subquery in column generation expression"));
        }
        let logical = cx.ctx.parse_sql_expr(text, &df_schema)?;
        let mut volatile = false;
        logical.apply(|e| {
            if let datafusion::logical_expr::Expr::ScalarFunction(f) = e {
                if f.func.signature().volatility != Volatility::Immutable {
                    volatile = true;
                }
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })?;
        if volatile {
            return Err(Error::data("42P17", "generation expression is not immutable"));
        }
    }
    Ok(())
}

/// Refuses a MERGE whose clauses give a generated column a value (428C9, as INSERT and UPDATE).
pub fn refuse_merge_values(schema: &StructType, merge: &datafusion::sql::sqlparser::ast::Merge) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{AssignmentTarget, MergeAction, ObjectName, ObjectNamePart};
    if !has_generated(schema) {
        return Ok(());
    }
    let generated = |name: &ObjectName| match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => {
            let column = crate::names::normalize(ident);
            schema.field(&column).and_then(expression_of).map(|_| column)
        }
        _ => None,
    };
    for clause in &merge.clauses {
        match &clause.action {
            MergeAction::Update(update) => {
                let assigned = update.assignments.iter().filter_map(|a| match &a.target {
                    AssignmentTarget::ColumnName(name) => generated(name),
                    AssignmentTarget::Tuple(_) => None,
                });
                if let Some(column) = assigned.into_iter().next() {
                    return Err(Error::data("428C9", format!("column \"{column}\" can only be updated to DEFAULT")));
                }
            }
            MergeAction::Insert(insert) => {
                if let Some(column) = insert.columns.iter().find_map(generated) {
                    return Err(Error::data(
                        "428C9",
                        format!(
                            "cannot insert a non-DEFAULT value into column \"{column}\" (it is a generated column)"
                        ),
                    ));
                }
            }
            MergeAction::Delete { .. } => {}
        }
    }
    Ok(())
}

fn has_subquery(expr: &Expr) -> bool {
    struct Subqueries(bool);
    impl Visitor for Subqueries {
        type Break = ();
        fn pre_visit_query(&mut self, _: &datafusion::sql::sqlparser::ast::Query) -> std::ops::ControlFlow<()> {
            self.0 = true;
            std::ops::ControlFlow::Break(())
        }
    }
    let mut found = Subqueries(false);
    let _ = expr.visit(&mut found);
    found.0
}

use datafusion::common::tree_node::TreeNode;

impl QueryContext {
    /// `rows` (in the table's columns) with every generated column computed from the others.
    pub(crate) fn compute_generated(&self, schema: &StructType, rows: RecordBatch) -> Result<RecordBatch> {
        if !has_generated(schema) || rows.num_rows() == 0 {
            return Ok(rows);
        }
        let df_schema = DFSchema::try_from(rows.schema().as_ref().clone())?;
        let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
        for (at, field) in schema.fields.iter().enumerate() {
            let Some(text) = expression_of(field) else { continue };
            let logical = self.ctx.parse_sql_expr(text, &df_schema)?;
            let physical = self.ctx.create_physical_expr(logical, &df_schema)?;
            let value = match physical.evaluate(&rows)? {
                ColumnarValue::Array(array) => array,
                ColumnarValue::Scalar(scalar) => scalar.to_array_of_size(rows.num_rows())?,
            };
            let Some(target) = rows.schema().fields().get(at).map(|f| f.data_type().clone()) else {
                return Err(Error::Internal(format!("generated column {} is not in the rows", field.name)));
            };
            let value = super::dml::cast_column(&value, &target, &field.name)?;
            let value = crate::types::conform(field, &value, &self.time_zone())?;
            if let Some(slot) = columns.get_mut(at) {
                *slot = value;
            }
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows.num_rows()));
        Ok(RecordBatch::try_new_with_options(rows.schema(), columns, &options)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_an_expression_reads() {
        assert_eq!(columns_in("normal + 42"), vec!["normal"]);
        assert_eq!(columns_in("upper(\"Name\") || t.b"), vec!["Name", "b"]);
    }

    #[test]
    fn readers_of_a_column_are_the_generated_columns_that_name_it() {
        use sluice_storage::schema::{DataType, PrimitiveType};
        let mut generated = StructField::new("g", DataType::Primitive(PrimitiveType::Long), true);
        generated.metadata.insert(GENERATION_KEY.into(), serde_json::Value::String("a * 2".into()));
        let schema = StructType::new(vec![
            StructField::new("a", DataType::Primitive(PrimitiveType::Long), true),
            StructField::new("b", DataType::Primitive(PrimitiveType::Long), true),
            generated,
        ]);
        assert_eq!(readers_of(&schema, "a"), vec!["g"]);
        assert!(readers_of(&schema, "b").is_empty());
        assert!(has_generated(&schema));
    }
}
