//! Intervals as PostgreSQL computes them: `interval * number` and `interval / number` (which
//! DataFusion does not plan), with fractions of months carried into days (30 to a month) and of
//! days into time, as PostgreSQL carries them; and `age(a, b)` / `age(a)`, the symbolic difference
//! in years, months and days (borrowing the days of the earlier date's month, as PostgreSQL does).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, Float64Type, IntervalMonthDayNano, TimeUnit, TimestampMicrosecondType};
use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::common::{exec_err, DFSchema, ExprSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;

const NANOS_PER_DAY: f64 = 86_400e9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Multiply,
    Divide,
    Age,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalFunction {
    name: &'static str,
    kind: Kind,
    signature: Signature,
}

fn udf(name: &'static str, kind: Kind) -> ScalarUDF {
    ScalarUDF::from(IntervalFunction { name, kind, signature: Signature::variadic_any(Volatility::Stable) })
}

/// The functions: `age`, and the two the planner below calls.
pub fn functions() -> Vec<ScalarUDF> {
    vec![udf("age", Kind::Age), udf("__pg_interval_mul", Kind::Multiply), udf("__pg_interval_div", Kind::Divide)]
}

/// `interval * number`, `number * interval` and `interval / number`.
pub fn multiply(interval: IntervalMonthDayNano, factor: f64) -> Option<IntervalMonthDayNano> {
    let months = interval.months as f64 * factor;
    let whole_months = months.trunc();
    let days = interval.days as f64 * factor + (months - whole_months) * 30.0;
    let whole_days = days.trunc();
    // Time is kept to the microsecond, as PostgreSQL keeps it.
    let nanos = ((interval.nanoseconds as f64 * factor + (days - whole_days) * NANOS_PER_DAY) / 1e3).round() * 1e3;
    let fits = |v: f64, limit: f64| v.is_finite() && v.abs() <= limit;
    if !fits(whole_months, i32::MAX as f64) || !fits(whole_days, i32::MAX as f64) || !fits(nanos, i64::MAX as f64) {
        return None;
    }
    Some(IntervalMonthDayNano::new(whole_months as i32, whole_days as i32, nanos as i64))
}

/// The value PostgreSQL compares intervals by (`interval_cmp_value`): the whole span in
/// nanoseconds, a month counted as 30 days and a day as 24 hours, so `'1 day' = '24 hours'` and
/// `'25 hours' > '1 day'`. Arrow compares months, then days, then time.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ComparisonKey {
    signature: Signature,
}

/// The function giving an interval's comparison key, a `numeric(38,0)` of nanoseconds.
pub fn comparison_key() -> ScalarUDF {
    ScalarUDF::from(ComparisonKey { signature: Signature::any(1, Volatility::Immutable) })
}

/// An interval's span in nanoseconds (see [`ComparisonKey`]).
pub fn span_nanos(interval: IntervalMonthDayNano) -> i128 {
    (i128::from(interval.months) * 30 + i128::from(interval.days)) * 86_400_000_000_000
        + i128::from(interval.nanoseconds)
}

impl ScalarUDFImpl for ComparisonKey {
    fn name(&self) -> &str {
        "__pg_interval_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(38, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(intervals) = arrays.first() else { return exec_err!("__pg_interval_key takes an interval") };
        let intervals =
            arrow::compute::cast(intervals, &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))?;
        let keys: arrow::array::Decimal128Array = intervals
            .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
            .iter()
            .map(|v| v.map(span_nanos))
            .collect();
        let keys: ArrayRef = Arc::new(keys.with_precision_and_scale(38, 0)?);
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&keys, 0)?));
        }
        Ok(ColumnarValue::Array(keys))
    }
}

fn days_in_month(year: i32, month: u32) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// `age(a, b)`: `a - b` in years, months, days and time.
pub fn age(a: NaiveDateTime, b: NaiveDateTime) -> IntervalMonthDayNano {
    let (later, earlier, sign) = if a >= b { (a, b, 1) } else { (b, a, -1) };
    let mut micros = i64::from(later.nanosecond() / 1000) - i64::from(earlier.nanosecond() / 1000);
    let mut seconds = i64::from(later.second()) - i64::from(earlier.second());
    let mut minutes = i64::from(later.minute()) - i64::from(earlier.minute());
    let mut hours = i64::from(later.hour()) - i64::from(earlier.hour());
    let mut days = i64::from(later.day()) - i64::from(earlier.day());
    let mut months = i64::from(later.month()) - i64::from(earlier.month());
    let mut years = i64::from(later.year()) - i64::from(earlier.year());
    if micros < 0 {
        micros += 1_000_000;
        seconds -= 1;
    }
    if seconds < 0 {
        seconds += 60;
        minutes -= 1;
    }
    if minutes < 0 {
        minutes += 60;
        hours -= 1;
    }
    if hours < 0 {
        hours += 24;
        days -= 1;
    }
    while days < 0 {
        days += days_in_month(earlier.year(), earlier.month());
        months -= 1;
    }
    while months < 0 {
        months += 12;
        years -= 1;
    }
    let time = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros;
    IntervalMonthDayNano::new((sign * (years * 12 + months)) as i32, (sign * days) as i32, sign * time * 1000)
}

fn timestamps(array: &ArrayRef) -> DfResult<ArrayRef> {
    Ok(arrow::compute::cast(array, &DataType::Timestamp(TimeUnit::Microsecond, None))?)
}

impl ScalarUDFImpl for IntervalFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays: Vec<ArrayRef> = args.args.iter().map(|a| a.clone().into_array(rows)).collect::<DfResult<_>>()?;
        let result: IntervalMonthDayNanoArray = match (self.kind, arrays.as_slice()) {
            (Kind::Multiply | Kind::Divide, [interval, factor]) => {
                let intervals =
                    arrow::compute::cast(interval, &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano))?;
                let intervals = intervals.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
                let factors = arrow::compute::cast(factor, &DataType::Float64)?;
                let factors = factors.as_primitive::<Float64Type>();
                let mut out = Vec::with_capacity(rows);
                for (interval, factor) in intervals.iter().zip(factors.iter()) {
                    let (Some(interval), Some(factor)) = (interval, factor) else {
                        out.push(None);
                        continue;
                    };
                    let factor = if self.kind == Kind::Divide {
                        if factor == 0.0 {
                            return Err(datafusion::error::DataFusionError::ArrowError(
                                Box::new(arrow::error::ArrowError::DivideByZero),
                                None,
                            ));
                        }
                        1.0 / factor
                    } else {
                        factor
                    };
                    match multiply(interval, factor) {
                        Some(v) => out.push(Some(v)),
                        None => {
                            return Err(datafusion::error::DataFusionError::ArrowError(
                                Box::new(arrow::error::ArrowError::ArithmeticOverflow("interval out of range".into())),
                                None,
                            ))
                        }
                    }
                }
                out.into_iter().collect()
            }
            (Kind::Age, [a, b]) => {
                let (a, b) = (timestamps(a)?, timestamps(b)?);
                let (a, b) =
                    (a.as_primitive::<TimestampMicrosecondType>(), b.as_primitive::<TimestampMicrosecondType>());
                (0..rows)
                    .map(|i| {
                        let (x, y) = (
                            a.is_valid(i).then(|| a.value_as_datetime(i)),
                            b.is_valid(i).then(|| b.value_as_datetime(i)),
                        );
                        match (x.flatten(), y.flatten()) {
                            (Some(x), Some(y)) => Some(age(x, y)),
                            _ => None,
                        }
                    })
                    .collect()
            }
            (Kind::Age, [a]) => {
                // Against today's midnight, as PostgreSQL's age(timestamp) measures.
                let today = chrono::Local::now().date_naive().and_hms_opt(0, 0, 0).unwrap_or_default();
                let a = timestamps(a)?;
                let a = a.as_primitive::<TimestampMicrosecondType>();
                (0..rows)
                    .map(|i| a.is_valid(i).then(|| a.value_as_datetime(i)).flatten().map(|x| age(today, x)))
                    .collect()
            }
            _ => {
                return exec_err!(
                    "{} takes {} arguments",
                    self.name,
                    if self.kind == Kind::Age { "1 or 2" } else { "2" }
                )
            }
        };
        let array: ArrayRef = Arc::new(result);
        Ok(if scalar && rows == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}

/// Plans `interval * number`, `number * interval` and `interval / number` as the functions above.
#[derive(Debug)]
pub struct IntervalArithmetic;

impl ExprPlanner for IntervalArithmetic {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> DfResult<PlannerResult<RawBinaryExpr>> {
        if !matches!(expr.op, BinaryOperator::Multiply | BinaryOperator::Divide) {
            return Ok(PlannerResult::Original(expr));
        }
        let type_of = |e: &Expr| e.get_type(schema as &dyn ExprSchema).ok();
        let is_interval = |t: &Option<DataType>| matches!(t, Some(DataType::Interval(_)));
        let is_number = |t: &Option<DataType>| t.as_ref().is_some_and(|t| t.is_numeric() || *t == DataType::Null);
        let (left, right) = (type_of(&expr.left), type_of(&expr.right));
        let (name, args) = match expr.op {
            BinaryOperator::Multiply if is_interval(&left) && is_number(&right) => {
                ("__pg_interval_mul", vec![expr.left, expr.right])
            }
            BinaryOperator::Multiply if is_number(&left) && is_interval(&right) => {
                ("__pg_interval_mul", vec![expr.right, expr.left])
            }
            BinaryOperator::Divide if is_interval(&left) && is_number(&right) => {
                ("__pg_interval_div", vec![expr.left, expr.right])
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let kind = if name == "__pg_interval_div" { Kind::Divide } else { Kind::Multiply };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
            Arc::new(udf(name, kind)),
            args,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn ages_borrow_as_postgresql_borrows() {
        assert_eq!(age(at("2024-01-01 00:00:00"), at("2023-01-01 00:00:00")), IntervalMonthDayNano::new(12, 0, 0));
        // 2001-04-10 - 1957-06-13: 43 years 9 mons 27 days (PostgreSQL's documentation).
        assert_eq!(
            age(at("2001-04-10 00:00:00"), at("1957-06-13 00:00:00")),
            IntervalMonthDayNano::new(43 * 12 + 9, 27, 0)
        );
        assert_eq!(
            age(at("2023-01-01 00:00:00"), at("2024-01-01 12:00:00")),
            IntervalMonthDayNano::new(-12, 0, -12 * 3_600_000_000_000)
        );
    }

    #[test]
    fn multiplication_carries_fractions_down() {
        let month = IntervalMonthDayNano::new(1, 0, 0);
        assert_eq!(multiply(month, 1.5), Some(IntervalMonthDayNano::new(1, 15, 0)));
        assert_eq!(multiply(IntervalMonthDayNano::new(0, 1, 0), 2.0), Some(IntervalMonthDayNano::new(0, 2, 0)));
        assert_eq!(
            multiply(IntervalMonthDayNano::new(0, 1, 0), 0.5),
            Some(IntervalMonthDayNano::new(0, 0, 43_200_000_000_000))
        );
        assert_eq!(multiply(month, f64::INFINITY), None);
    }
}
