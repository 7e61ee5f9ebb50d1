//! Functions Sluice adds to SQL: JSON on text `table_changes` and `table_history`.

pub mod arithmetic;
pub mod cast_names;
pub mod date_casts;
pub mod enums;
pub mod format;
pub mod interval;
pub mod json;
pub mod json_build;
pub mod math;
pub mod number_format;
pub mod rows;
pub mod single_row;
pub mod table_changes;
pub mod time_of_day;
pub mod timestamp_literals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::execution::context::SessionContext;
use sluice_storage::snapshot::Snapshot;

use crate::warehouse::Warehouse;

/// DataFusion's `generate_series` table function, by the name FROM's rewrite calls it
/// (`crate::sql::lateral`).
pub const SERIES: &str = "__pg_generate_series";
/// The function that turns a LIKE pattern escaped with another character into one escaped with a
/// backslash (DataFusion's only escape character), for patterns that are not literals.
pub const LIKE_PATTERN: &str = "__pg_like_pattern";

/// The longest `pg_sleep` (in seconds): a sleeping statement holds one of the query threads.
const LONGEST_SLEEP_S: f64 = 60.0;

/// `pg_sleep(seconds)`: waits, then returns void (an empty text here). The runtime is told the
/// thread blocks, so other statements go on meanwhile; longer than [`LONGEST_SLEEP_S`] is
/// refused rather than cut short.
fn pg_sleep(
    args: &[datafusion::logical_expr::ColumnarValue],
) -> datafusion::error::Result<datafusion::logical_expr::ColumnarValue> {
    use arrow::array::AsArray;
    use datafusion::logical_expr::ColumnarValue;
    let seconds: f64 = match args.first() {
        Some(ColumnarValue::Scalar(v)) => match v.cast_to(&arrow::datatypes::DataType::Float64)? {
            datafusion::common::ScalarValue::Float64(s) => s.unwrap_or(0.0),
            _ => 0.0,
        },
        Some(ColumnarValue::Array(a)) => {
            let a = arrow::compute::cast(a, &arrow::datatypes::DataType::Float64)?;
            a.as_primitive::<arrow::datatypes::Float64Type>().iter().flatten().filter(|s| *s > 0.0).sum()
        }
        None => 0.0,
    };
    if seconds.is_nan() || seconds > LONGEST_SLEEP_S {
        return Err(crate::error::Error::NotSupported(format!(
            "pg_sleep of more than {LONGEST_SLEEP_S} seconds (it holds a query thread)"
        ))
        .into());
    }
    if seconds > 0.0 {
        let wait = || std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            _ => wait(),
        }
    }
    Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Utf8(Some(String::new()))))
}

/// Registers Sluice's functions in a session context.
pub fn register(ctx: &SessionContext, db: Arc<Warehouse>, snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>) {
    for function in json::functions() {
        ctx.register_udf(function);
    }
    for function in json_build::functions() {
        ctx.register_udf(function);
    }
    ctx.register_udf(rows::row_function());
    ctx.register_udf(cast_names::function());
    ctx.register_udf(format::function());
    for function in time_of_day::functions() {
        ctx.register_udf(function);
    }
    for function in enums::functions() {
        ctx.register_udf(function);
    }
    for function in number_format::functions() {
        ctx.register_udf(function);
    }
    // DataFusion's streaming generate_series under a second name, which FROM's rewrite calls
    // (see crate::sql::lateral).
    let series = ctx.state().table_functions().get("generate_series").map(|f| f.function().clone());
    if let Some(series) = series {
        ctx.register_udtf(SERIES, Arc::new(IntegerSeries(series)));
    }
    // One process, never a standby.
    ctx.register_udf(datafusion::logical_expr::create_udf(
        "pg_is_in_recovery",
        vec![],
        arrow::datatypes::DataType::Boolean,
        datafusion::logical_expr::Volatility::Stable,
        Arc::new(|_| {
            Ok(datafusion::logical_expr::ColumnarValue::Scalar(datafusion::common::ScalarValue::Boolean(Some(false))))
        }),
    ));
    // Text to text, one value at a time: the quoting functions, and the blank-padding of the
    // month and day names `to_char` formatted (see `pad_names`).
    for (name, quote) in [
        ("quote_literal", format::quote_literal as fn(&str) -> String),
        ("quote_ident", format::quote_ident),
        (PAD_NAMES, pad_names),
    ] {
        ctx.register_udf(datafusion::logical_expr::create_udf(
            name,
            vec![arrow::datatypes::DataType::Utf8],
            arrow::datatypes::DataType::Utf8,
            datafusion::logical_expr::Volatility::Immutable,
            Arc::new(move |args| {
                use arrow::array::AsArray;
                let arrays = datafusion::logical_expr::ColumnarValue::values_to_arrays(args)?;
                let Some(texts) = arrays.first() else {
                    return Err(datafusion::error::DataFusionError::Plan(format!("{name} takes one argument")));
                };
                let texts = arrow::compute::cast(texts, &arrow::datatypes::DataType::Utf8)?;
                let quoted: arrow::array::StringArray = texts.as_string::<i32>().iter().map(|t| t.map(quote)).collect();
                Ok(datafusion::logical_expr::ColumnarValue::Array(Arc::new(quoted)))
            }),
        ));
    }
    // A LIKE pattern with its own escape character, computed at run time (see
    // `sql::postgres_forms`): `__pg_like_pattern(pattern, escape)`.
    ctx.register_udf(datafusion::logical_expr::create_udf(
        LIKE_PATTERN,
        vec![arrow::datatypes::DataType::Utf8, arrow::datatypes::DataType::Utf8],
        arrow::datatypes::DataType::Utf8,
        datafusion::logical_expr::Volatility::Immutable,
        Arc::new(like_patterns),
    ));
    ctx.register_udf(datafusion::logical_expr::create_udf(
        "pg_sleep",
        vec![arrow::datatypes::DataType::Float64],
        arrow::datatypes::DataType::Utf8,
        datafusion::logical_expr::Volatility::Volatile,
        Arc::new(pg_sleep),
    ));
    // Upper-cased month and day names of `to_char` (see `sql::postgres_forms`).
    ctx.register_udf(datafusion::functions::string::upper().as_ref().clone().with_aliases(["__pg_upper"]));
    for function in interval::functions() {
        ctx.register_udf(function);
    }
    for function in arithmetic::functions() {
        ctx.register_udf(function);
    }
    for function in math::functions() {
        ctx.register_udf(function);
    }
    // PostgreSQL's other name for ceil.
    ctx.register_udf(datafusion::functions::math::ceil().as_ref().clone().with_aliases(["ceiling"]));
    // PostgreSQL's name for a random (version 4) UUID.
    ctx.register_udf(datafusion::functions::string::uuid().as_ref().clone().with_aliases(["gen_random_uuid"]));
    ctx.register_udtf("table_changes", Arc::new(table_changes::TableChanges { db: db.clone(), snapshots }));
    ctx.register_udtf("table_history", Arc::new(table_changes::TableHistory { db }));
}

/// The function that blank-pads the month and day names `to_char` formatted between
/// [`NAME_START`] and [`NAME_END`] (see `sql::postgres_forms::chrono_format_with`).
pub const PAD_NAMES: &str = "__pg_pad_names";
/// The marks around a name to pad in a `to_char` format (control characters no pattern holds).
pub const NAME_START: char = '\u{1}';
pub const NAME_END: char = '\u{2}';

/// `text` with each name between the marks blank-padded to nine characters (PostgreSQL's width
/// for month and day names: `September`, `Wednesday`) and the marks removed.
fn pad_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some((before, after)) = rest.split_once(NAME_START) {
        out.push_str(before);
        let (name, next) = after.split_once(NAME_END).unwrap_or((after, ""));
        out.push_str(name);
        out.extend(std::iter::repeat_n(' ', 9usize.saturating_sub(name.chars().count())));
        rest = next;
    }
    out.push_str(rest);
    out
}

/// DataFusion's generate_series, which takes only `bigint` literals, over arguments of any integer
/// type: an argument that folds to an `integer` (`array_upper(current_schemas(false), 1)` in
/// pgjdbc's type lookup) is widened before the call.
#[derive(Debug)]
struct IntegerSeries(Arc<dyn datafusion::catalog::TableFunctionImpl>);

impl datafusion::catalog::TableFunctionImpl for IntegerSeries {
    fn call_with_args(
        &self,
        args: datafusion::catalog::TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn datafusion::catalog::TableProvider>> {
        use datafusion::common::ScalarValue;
        use datafusion::logical_expr::Expr;
        let widened: Vec<Expr> = args
            .exprs()
            .iter()
            .map(|expr| match expr {
                Expr::Literal(value, metadata) if value.data_type().is_integer() && !value.is_null() => {
                    match value.cast_to(&arrow::datatypes::DataType::Int64) {
                        Ok(wide) => Expr::Literal(wide, metadata.clone()),
                        Err(_) => expr.clone(),
                    }
                }
                Expr::Literal(value, metadata) if value.data_type().is_integer() => {
                    Expr::Literal(ScalarValue::Int64(None), metadata.clone())
                }
                other => other.clone(),
            })
            .collect();
        self.0.call_with_args(datafusion::catalog::TableFunctionArgs::new(&widened, args.session()))
    }
}

/// `__pg_like_pattern(pattern, escape)`: each pattern rewritten to escape with a backslash
/// (`escape` empty: nothing is escaped), as `crate::sql::postgres_forms` does for literal ones.
fn like_patterns(
    args: &[datafusion::logical_expr::ColumnarValue],
) -> datafusion::error::Result<datafusion::logical_expr::ColumnarValue> {
    use arrow::array::AsArray;
    let arrays = datafusion::logical_expr::ColumnarValue::values_to_arrays(args)?;
    let (Some(patterns), Some(escapes)) = (arrays.first(), arrays.get(1)) else {
        return Err(datafusion::error::DataFusionError::Plan(format!("{LIKE_PATTERN} takes two arguments")));
    };
    let patterns = arrow::compute::cast(patterns, &arrow::datatypes::DataType::Utf8)?;
    let escapes = arrow::compute::cast(escapes, &arrow::datatypes::DataType::Utf8)?;
    let mut out = arrow::array::StringBuilder::with_capacity(patterns.len(), 0);
    for (pattern, escape) in patterns.as_string::<i32>().iter().zip(escapes.as_string::<i32>().iter()) {
        let (Some(pattern), Some(escape)) = (pattern, escape) else {
            out.append_null();
            continue;
        };
        let escape = match escape.chars().collect::<Vec<_>>().as_slice() {
            [c] => Some(*c),
            [] => None,
            _ => {
                return Err(datafusion::error::DataFusionError::External(Box::new(crate::error::Error::data(
                    "22025",
                    "invalid escape string",
                ))))
            }
        };
        let converted =
            like_pattern(pattern, escape).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        out.append_value(converted);
    }
    Ok(datafusion::logical_expr::ColumnarValue::Array(Arc::new(out.finish())))
}

/// A LIKE pattern that escapes with `escape` (none: nothing is escaped) as one that escapes
/// with a backslash, DataFusion's only escape character.
pub fn like_pattern(text: &str, escape: Option<char>) -> crate::error::Result<String> {
    let mut out = String::with_capacity(text.len() + 4);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => {
                    return Err(crate::error::Error::data("22025", "LIKE pattern must not end with escape character"))
                }
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// `plan` with each text literal compared (`=`, `<>`, `<`, ..., `IS [NOT] DISTINCT FROM`, `IN`)
/// with an expression of a kind `kind_of` recognizes read as that kind by `read` (which says
/// whether it changed it): PostgreSQL reads an untyped literal as the other side's type. The
/// shared step of the analyzer rules for `timetz` and timestamp literals.
pub(crate) fn read_compared_literals<K>(
    plan: datafusion::logical_expr::LogicalPlan,
    kind_of: impl Fn(&datafusion::logical_expr::Expr, &datafusion::common::DFSchema) -> Option<K>,
    read: impl Fn(&mut datafusion::logical_expr::Expr, &K) -> datafusion::error::Result<bool>,
) -> datafusion::error::Result<datafusion::logical_expr::LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::{Expr, Operator};
    Ok(plan
        .transform_up_with_subqueries(|plan| {
            let schema = datafusion::logical_expr::utils::merge_schema(&plan.inputs());
            let kind = |e: &Expr| kind_of(e, &schema);
            rewrite_node_expressions(plan, |expr| {
                expr.transform_up(|e| match e {
                    Expr::BinaryExpr(mut b)
                        if matches!(
                            b.op,
                            Operator::Eq
                                | Operator::NotEq
                                | Operator::Lt
                                | Operator::LtEq
                                | Operator::Gt
                                | Operator::GtEq
                                | Operator::IsDistinctFrom
                                | Operator::IsNotDistinctFrom
                        ) =>
                    {
                        let changed = match (kind(&b.left), kind(&b.right)) {
                            (Some(k), None) => read(&mut b.right, &k)?,
                            (None, Some(k)) => read(&mut b.left, &k)?,
                            _ => false,
                        };
                        Ok(Transformed::new_transformed(Expr::BinaryExpr(b), changed))
                    }
                    Expr::InList(mut list) => match kind(&list.expr) {
                        Some(k) => {
                            let mut changed = false;
                            for item in &mut list.list {
                                changed |= read(item, &k)?;
                            }
                            Ok(Transformed::new_transformed(Expr::InList(list), changed))
                        }
                        None => Ok(Transformed::no(Expr::InList(list))),
                    },
                    other => Ok(Transformed::no(other)),
                })
            })
        })?
        .data)
}

/// The schema a plan node's expressions are typed in: its inputs' columns, and a table scan's
/// (its filters) or a DML statement's target columns.
pub(crate) fn expression_schema(
    plan: &datafusion::logical_expr::LogicalPlan,
) -> datafusion::error::Result<datafusion::common::DFSchema> {
    use datafusion::common::DFSchema;
    use datafusion::logical_expr::LogicalPlan;
    let mut schema = datafusion::logical_expr::utils::merge_schema(&plan.inputs());
    if let LogicalPlan::TableScan(scan) = plan {
        schema.merge(&DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?);
    }
    if let LogicalPlan::Dml(dml) = plan {
        schema.merge(&DFSchema::try_from_qualified_schema(dml.table_name.clone(), &dml.target.schema())?);
    }
    Ok(schema)
}

/// `plan` with every node's schema taken anew from its expressions and inputs: for an analyzer
/// rule that changed the type of a column that nodes above it read.
pub(crate) fn recompute_schemas(
    plan: datafusion::logical_expr::LogicalPlan,
) -> datafusion::error::Result<datafusion::logical_expr::LogicalPlan> {
    use datafusion::common::tree_node::Transformed;
    Ok(plan.transform_up_with_subqueries(|node| node.recompute_schema().map(Transformed::yes))?.data)
}

/// One plan node with each of its expressions rewritten by `rewrite` (which walks the expression
/// as it needs), each keeping its output name, and the node's schema recomputed when one
/// changed: the per-node step of this module's analyzer rules.
pub(crate) fn rewrite_node_expressions(
    plan: datafusion::logical_expr::LogicalPlan,
    mut rewrite: impl FnMut(
        datafusion::logical_expr::Expr,
    ) -> datafusion::error::Result<
        datafusion::common::tree_node::Transformed<datafusion::logical_expr::Expr>,
    >,
) -> datafusion::error::Result<datafusion::common::tree_node::Transformed<datafusion::logical_expr::LogicalPlan>> {
    let preserver = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&plan);
    let rewritten = plan.map_expressions(|expr| {
        let name = preserver.save(&expr);
        rewrite(expr).map(|t| t.update_data(|e| name.restore(e)))
    })?;
    if rewritten.transformed {
        rewritten.map_data(|p| p.recompute_schema())
    } else {
        Ok(rewritten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_between_the_marks_are_padded_to_nine_characters() {
        let text = format!("{NAME_START}May{NAME_END}|{NAME_START}Wednesday{NAME_END}|05");
        assert_eq!(pad_names(&text), "May      |Wednesday|05");
        assert_eq!(pad_names("no marks"), "no marks");
        // An unclosed mark (not made by the format) pads what follows it.
        assert_eq!(pad_names(&format!("x{NAME_START}Mai")), "xMai      ");
    }
}
