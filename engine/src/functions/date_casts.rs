//! Casts of text to `date`, `timestamp` and `timestamptz` as PostgreSQL's input functions read
//! text: `x::date` on a text column, `d = '05/01/2024'` (an untyped literal compared with a
//! date, which type coercion casts) and the parameters of a prepared statement. Arrow's cast
//! reads only ISO dates and knows no `DateStyle`; [`DateTimeCasts`] runs after type coercion and
//! replaces each such cast by [`CAST_FUNCTION`], which reads each value with
//! [`crate::datetime::column_from_session_text`]: `1/8/1999` in the session's `DateStyle`
//! order, a `timestamptz` without an offset in its time zone, 22007 for text that is no date,
//! 22008 for a field out of range. The order and zone are those of the session's config options
//! when the cast runs (or is folded), so a prepared statement reads with the settings of its
//! EXECUTE, as in PostgreSQL.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::datetime::DateOrder;

/// The name of the cast, `__pg_datetime_cast(text)`: each call knows its target type (a
/// `timestamp` and a `timestamptz` cast of one column are two functions).
pub const CAST_FUNCTION: &str = "__pg_datetime_cast";

/// Whether a cast from `from` to `to` is one this module makes.
fn is_ours(from: &DataType, to: &DataType) -> bool {
    matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        && matches!(to, DataType::Date32 | DataType::Date64 | DataType::Timestamp(..))
}

/// `expr` (text) read as `target`, by the session's input rules when the cast runs.
pub fn cast(expr: Expr, target: &DataType) -> Expr {
    let function = Arc::new(ScalarUDF::new_from_impl(DateTimeCast {
        target: target.clone(),
        // Stable: the result depends on the session's DateStyle and TimeZone.
        signature: Signature::any(1, Volatility::Stable),
    }));
    Expr::ScalarFunction(ScalarFunction::new_udf(function, vec![expr]))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DateTimeCast {
    target: DataType,
    signature: Signature,
}

impl ScalarUDFImpl for DateTimeCast {
    fn name(&self) -> &str {
        CAST_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.target.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let target = &self.target;
        let Some(value) = args.args.first() else {
            return Err(DataFusionError::Plan(format!("{CAST_FUNCTION} needs a value")));
        };
        let order = DateOrder::of_config(&args.config_options);
        let zone = args.config_options.execution.time_zone.clone().unwrap_or_else(|| "UTC".into());
        let read = |array| crate::datetime::column_from_session_text(array, target, order, &zone);
        Ok(match value {
            ColumnarValue::Scalar(s) => {
                let values = read(&s.to_array_of_size(1)?)?;
                ColumnarValue::Scalar(ScalarValue::try_from_array(&values, 0)?)
            }
            ColumnarValue::Array(array) => ColumnarValue::Array(read(array)?),
        })
    }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// Replaces casts of text to dates and timestamps by [`CAST_FUNCTION`] (see the module docs).
/// Runs after type coercion, which adds the casts of untyped literals.
#[derive(Debug, Default)]
pub struct DateTimeCasts;

impl AnalyzerRule for DateTimeCasts {
    fn name(&self) -> &str {
        "sluice_datetime_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                let schema = super::expression_schema(&plan)?;
                super::rewrite_node_expressions(plan, |expr| {
                    expr.transform_up(|e| match e {
                        Expr::Cast(c) => match c.expr.get_type(&schema) {
                            Ok(from) if is_ours(&from, c.field.data_type()) => {
                                Ok(Transformed::yes(cast(*c.expr, c.field.data_type())))
                            }
                            Ok(DataType::Interval(_) | DataType::List(_) | DataType::LargeList(_))
                                if is_text(c.field.data_type()) =>
                            {
                                // The function an explicit `::text` becomes, which prints an
                                // interval as PostgreSQL does (Arrow's cast: `1 hours 30 mins`),
                                // and an array (Arrow's: `[1, 2]`, PostgreSQL's `{1,2}`).
                                let function = Arc::new(super::json::udf("__pg_text", &[], super::json::Op::Text));
                                let text = Expr::ScalarFunction(ScalarFunction::new_udf(function, vec![*c.expr]));
                                Ok(Transformed::yes(match c.field.data_type() {
                                    DataType::Utf8 => text,
                                    other => {
                                        Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(text), other.clone()))
                                    }
                                }))
                            }
                            _ => Ok(Transformed::no(Expr::Cast(c))),
                        },
                        other => Ok(Transformed::no(other)),
                    })
                })
            })?
            .data)
    }
}
