//! Text compared with a timestamp column is read as the column's type (`date_data =
//! '0001-03-04 05:06:07'`, `ts IN ('1000-01-01', ...)`), as PostgreSQL reads an untyped literal
//! as the type of what it is compared with. DataFusion's coercion reads it at nanoseconds, which
//! cannot hold years before 1677 or after 2262, where Sluice's (and Delta's, and PostgreSQL's)
//! timestamps are microseconds.

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (before type coercion): see the module docs.
#[derive(Debug)]
pub struct TimestampLiterals;

impl AnalyzerRule for TimestampLiterals {
    fn name(&self) -> &str {
        "sluice_timestamp_literals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        super::read_compared_literals(
            plan,
            |e, schema| match e.get_type(schema) {
                Ok(data_type @ DataType::Timestamp(..)) => Some(data_type),
                _ => None,
            },
            |literal, data_type| Ok(as_type(literal, data_type)),
        )
    }
}

/// A text literal cast to `data_type`; whether it was one.
fn as_type(expr: &mut Expr, data_type: &DataType) -> bool {
    if !matches!(expr, Expr::Literal(ScalarValue::Utf8(Some(_)) | ScalarValue::Utf8View(Some(_)), _)) {
        return false;
    }
    let literal = std::mem::replace(expr, Expr::Literal(ScalarValue::Null, None));
    *expr = Expr::Cast(Cast::new(Box::new(literal), data_type.clone()));
    true
}
