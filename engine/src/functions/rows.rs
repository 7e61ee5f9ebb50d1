//! Whole rows as values: `row_to_json(t)`, `to_json(t)`, `to_jsonb(t)`, `json_agg(t)` of a table
//! alias `t`, and `row_to_json(row(a, b))`.
//!
//! The statement rewrite (`crate::sql::whole_rows`) turns the alias into `t.*` and `row(a, b)`
//! into `__pg_row('f1', a, 'f2', b)`. The analyzer rule [`WholeRows`] then expands each `t.*`
//! left in a function's arguments into `__pg_row('id', t.id, 'name', t.name, ...)` over the
//! columns `t` has at that point of the plan, in their order: a struct whose fields keep their
//! columns' types (a `jsonb` column stays a document in the row's JSON).
//!
//! [`json_texts`] prints values as PostgreSQL's `to_json` prints them: rows as objects in column
//! order with no spaces (`{"id":1,"name":"a"}`), arrays as `[1,2]`, numbers unquoted (a numeric
//! as its exact text), timestamps as `"2024-01-01T10:00:00.5"`, `jsonb` values as their
//! canonical text and `json` values as written.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::documents::TextType;

/// The function that makes a row (a struct) of name/value pairs; names are literals.
pub const ROW: &str = "__pg_row";

/// The analyzer rule (first of all): see the module docs.
#[derive(Debug)]
pub struct WholeRows;

impl AnalyzerRule for WholeRows {
    fn name(&self) -> &str {
        "sluice_whole_rows"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        // Every statement passes here: one read of the plan, and no schema rebuilt, when no
        // function takes a whole row (the rewrite below recomputes every node's schema).
        if !takes_whole_rows(&plan) {
            return Ok(plan);
        }
        Ok(plan
            .transform_up_with_subqueries(|node| {
                let schema = datafusion::logical_expr::utils::merge_schema(&node.inputs());
                let node =
                    super::rewrite_node_expressions(node, |expr| expr.transform_up(|e| expand_arguments(e, &schema)))?;
                // A parent reads the types its child now has (a list of rows, not of wildcards).
                node.transform_data(|p| {
                    if p.inputs().is_empty() {
                        Ok(Transformed::no(p))
                    } else {
                        p.recompute_schema().map(Transformed::yes)
                    }
                })
            })?
            .data)
    }
}

/// Whether a function or aggregate of the plan (subqueries included) has a `t.*` argument.
fn takes_whole_rows(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            found = expr.exists(|e| Ok(takes_whole_row(e)))?;
            Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
        })
    });
    found
}

fn takes_whole_row(expr: &Expr) -> bool {
    match expr {
        Expr::ScalarFunction(function) => function.args.iter().any(is_qualified_wildcard),
        Expr::AggregateFunction(aggregate) => aggregate.params.args.iter().any(is_qualified_wildcard),
        _ => false,
    }
}

/// `f(t.*)` as `f(__pg_row('c1', t.c1, ...))`, for scalar functions and aggregates.
fn expand_arguments(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match expr {
        Expr::ScalarFunction(ScalarFunction { func, args }) if args.iter().any(is_qualified_wildcard) => {
            let args = args.into_iter().map(|a| expand(a, schema)).collect::<DfResult<_>>()?;
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction { func, args })))
        }
        Expr::AggregateFunction(mut aggregate) if aggregate.params.args.iter().any(is_qualified_wildcard) => {
            let args = std::mem::take(&mut aggregate.params.args);
            aggregate.params.args = args.into_iter().map(|a| expand(a, schema)).collect::<DfResult<_>>()?;
            Ok(Transformed::yes(Expr::AggregateFunction(AggregateFunction { ..aggregate })))
        }
        other => Ok(Transformed::no(other)),
    }
}

#[allow(deprecated)] // DataFusion keeps `t.*` in a function's arguments as this variant.
fn is_qualified_wildcard(expr: &Expr) -> bool {
    matches!(expr, Expr::Wildcard { qualifier: Some(_), .. })
}

#[allow(deprecated)]
fn expand(expr: Expr, schema: &DFSchema) -> DfResult<Expr> {
    let Expr::Wildcard { qualifier: Some(qualifier), .. } = expr else { return Ok(expr) };
    let mut args = Vec::new();
    for index in schema.fields_indices_with_qualified(&qualifier) {
        let (relation, field) = schema.qualified_field(index);
        args.push(Expr::Literal(ScalarValue::Utf8(Some(field.name().clone())), None));
        args.push(Expr::Column(datafusion::common::Column::new(relation.cloned(), field.name())));
    }
    if args.is_empty() {
        return plan_err!("missing FROM-clause entry for table \"{qualifier}\"");
    }
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(row_function()), args)))
}

/// `__pg_row(name, value, ...)`: a struct whose fields keep their values' types and metadata.
pub fn row_function() -> ScalarUDF {
    ScalarUDF::from(RowFunction { signature: Signature::variadic_any(Volatility::Immutable) })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RowFunction {
    signature: Signature,
}

impl RowFunction {
    fn fields(args: &ReturnFieldArgs) -> DfResult<Fields> {
        let mut fields = Vec::new();
        for (pair, names) in args.arg_fields.chunks(2).zip(args.scalar_arguments.chunks(2)) {
            let [_, value] = pair else { return plan_err!("{ROW} takes name/value pairs") };
            let name = match names.first().copied().flatten() {
                Some(ScalarValue::Utf8(Some(name))) => name.clone(),
                _ => return plan_err!("{ROW} takes literal names"),
            };
            fields.push(Field::new(name, value.data_type().clone(), true).with_metadata(value.metadata().clone()));
        }
        Ok(fields.into())
    }
}

impl ScalarUDFImpl for RowFunction {
    fn name(&self) -> &str {
        ROW
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        plan_err!("{ROW}'s type comes from its arguments")
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(Field::new(ROW, DataType::Struct(Self::fields(&args)?), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let DataType::Struct(fields) = args.return_field.data_type().clone() else {
            return plan_err!("{ROW} returns a struct");
        };
        let rows = args.number_rows;
        let columns: Vec<ArrayRef> = args
            .args
            .chunks(2)
            .filter_map(|pair| pair.get(1))
            .map(|value| value.clone().into_array(rows))
            .collect::<DfResult<_>>()?;
        let array = StructArray::try_new(fields, columns, None)?;
        Ok(ColumnarValue::Array(Arc::new(array)))
    }
}

/// Each value of a column as `to_json` prints it (NULL for a NULL value).
pub fn json_texts(array: &ArrayRef, field: &Field) -> DfResult<Vec<Option<String>>> {
    let texts = element_texts(array, field)?;
    Ok(texts.into_iter().enumerate().map(|(i, t)| (!array.is_null(i)).then_some(t)).collect())
}

/// Each value's JSON text, `null` for a NULL value (as an element of a row or an array).
fn element_texts(array: &ArrayRef, field: &Field) -> DfResult<Vec<String>> {
    let len = array.len();
    let null = |i: usize| array.is_null(i);
    let texts = match (TextType::of_field(field), array.data_type()) {
        (Some(TextType::Json), _) => {
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.unwrap_or("null").to_string()).collect()
        }
        (Some(TextType::Jsonb), _) => {
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            let mut out = Vec::with_capacity(len);
            for value in text.as_string::<i32>().iter() {
                out.push(match value {
                    Some(v) => crate::documents::jsonb_text(&crate::documents::json_in(v)?),
                    None => "null".to_string(),
                });
            }
            out
        }
        (_, DataType::Struct(fields)) => {
            let columns = array.as_struct();
            let children: Vec<Vec<String>> = columns
                .columns()
                .iter()
                .zip(fields.iter())
                .map(|(c, f)| element_texts(c, f))
                .collect::<DfResult<_>>()?;
            (0..len)
                .map(|i| {
                    if null(i) {
                        return "null".to_string();
                    }
                    let entries: Vec<String> = fields
                        .iter()
                        .zip(&children)
                        .map(|(f, c)| {
                            let value = c.get(i).map_or("null", String::as_str);
                            format!("{}:{value}", serde_json::Value::String(f.name().clone()))
                        })
                        .collect();
                    format!("{{{}}}", entries.join(","))
                })
                .collect()
        }
        (_, DataType::List(element) | DataType::LargeList(element)) => {
            let list = arrow::compute::cast(array, &DataType::List(element.clone()))?;
            let list = list.as_list::<i32>();
            let items = element_texts(list.values(), element)?;
            let offsets = list.value_offsets();
            (0..len)
                .map(|i| {
                    let (Some(start), Some(end)) = (offsets.get(i), offsets.get(i + 1)) else {
                        return "null".to_string();
                    };
                    let (start, end) = (usize::try_from(*start).unwrap_or(0), usize::try_from(*end).unwrap_or(0));
                    if null(i) {
                        "null".to_string()
                    } else {
                        format!("[{}]", items.get(start..end).unwrap_or_default().join(","))
                    }
                })
                .collect()
        }
        (_, DataType::Decimal128(..) | DataType::Decimal256(..)) => {
            // A numeric keeps its digits (`1.50`), as PostgreSQL prints it.
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.unwrap_or("null").to_string()).collect()
        }
        (_, DataType::Timestamp(_, zone)) => {
            let micros = arrow::compute::cast(array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let micros = micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            micros
                .iter()
                .map(|v| match v {
                    Some(v) => serde_json::Value::String(timestamp_text(v, zone.is_some())).to_string(),
                    None => "null".to_string(),
                })
                .collect()
        }
        (_, DataType::Time32(_) | DataType::Time64(_)) => {
            let text = crate::time_of_day::time_column_text(array)?;
            let text: &StringArray = text.as_string::<i32>();
            text.iter()
                .map(|v| v.map_or("null".to_string(), |t| serde_json::Value::String(t.into()).to_string()))
                .collect()
        }
        _ => super::json_build::values(array)?.into_iter().map(|v| v.to_string()).collect(),
    };
    Ok(texts)
}

/// A timestamp as PostgreSQL's JSON prints it: ISO 8601 with a `T`, fractional seconds without
/// trailing zeros, and `+00:00` for a `timestamptz` (Sluice's sessions print UTC).
pub(crate) fn timestamp_text(micros: i64, zoned: bool) -> String {
    let Some(time) = chrono::DateTime::from_timestamp_micros(micros) else { return micros.to_string() };
    let mut text = time.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string();
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    if zoned {
        text.push_str("+00:00");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_as_postgresql_json() {
        assert_eq!(timestamp_text(1_704_103_200_500_000, false), "2024-01-01T10:00:00.5");
        assert_eq!(timestamp_text(1_704_103_200_000_000, true), "2024-01-01T10:00:00+00:00");
    }
}
