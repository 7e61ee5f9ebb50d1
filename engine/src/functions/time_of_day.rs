//! Casts to `time` and `time with time zone`, as PostgreSQL makes them: `CAST(x AS TIME(p))`
//! and `x::timetz` are rewritten to `__pg_time(x [, p])` and `__pg_timetz(x [, p])` (see
//! `sql::postgres_forms`), which read text as PostgreSQL reads it, take a timestamp's time of day
//! (a `timestamptz`'s in the session's zone), a `timetz`'s local time, or a `time` in the
//! session's zone, and round to the precision. The values are those of [`crate::time_of_day`].
//! [`TimeTzLiterals`] reads the text literals compared with `timetz` values as `timetz`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray, Time64MicrosecondArray};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::{Error, Result};
use crate::time_of_day::{self, TimeTz, TIME_MICROS};

/// The name of the cast to `time`.
pub const TIME_CAST: &str = "__pg_time";
/// The name of the cast to `timetz`.
pub const TIMETZ_CAST: &str = "__pg_timetz";

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimeCast {
    name: &'static str,
    with_zone: bool,
    signature: Signature,
}

/// The two casts, to register in a session.
pub fn functions() -> Vec<ScalarUDF> {
    [(TIME_CAST, false), (TIMETZ_CAST, true)]
        .into_iter()
        .map(|(name, with_zone)| {
            // Stable: a value without its own offset takes the session zone's.
            ScalarUDF::from(TimeCast { name, with_zone, signature: Signature::variadic_any(Volatility::Stable) })
        })
        .collect()
}

/// The precision argument, if there is one (a constant).
fn precision(args: &[ColumnarValue]) -> DfResult<Option<u32>> {
    match args.get(1) {
        None => Ok(None),
        Some(ColumnarValue::Scalar(value)) => match value.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(Some(p)) => Ok(Some(u32::try_from(p.clamp(0, 6)).unwrap_or(6))),
            _ => Ok(None),
        },
        Some(ColumnarValue::Array(_)) => {
            Err(Error::NotSupported("a time precision that is not a constant".into()).into())
        }
    }
}

impl ScalarUDFImpl for TimeCast {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(if self.with_zone { DataType::Utf8 } else { TIME_MICROS })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let precision = args.scalar_arguments.get(1).copied().flatten().map(|p| p.to_string());
        let field = if self.with_zone {
            let mut field = time_of_day::timetz_field(self.name, true);
            if let Some(p) = precision {
                field.metadata_mut().insert(crate::types::DECLARED_TYPE_KEY.into(), format!("timetz({p})"));
            }
            field
        } else {
            Field::new(self.name, TIME_MICROS, true)
        };
        Ok(Arc::new(field))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(value) = args.args.first() else {
            return Err(Error::Plan(format!("{} takes a value", self.name)).into());
        };
        let precision = precision(&args.args)?;
        let zone = args.config_options.execution.time_zone.clone().unwrap_or_else(|| "UTC".into());
        let scalar = matches!(value, ColumnarValue::Scalar(_));
        let array = value.clone().into_array(args.number_rows)?;
        let timetz = args.arg_fields.first().is_some_and(|f| time_of_day::is_timetz_field(f));
        let values = if self.with_zone {
            to_timetz(&array, timetz, &zone, precision)?
        } else {
            to_time(&array, timetz, &zone, precision)?
        };
        Ok(if scalar && values.len() == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&values, 0)?)
        } else {
            ColumnarValue::Array(values)
        })
    }
}

fn cannot_cast(from: &DataType, to: &str) -> Error {
    Error::data("42846", format!("cannot cast type {} to {to}", crate::types::arrow_type_pg_name(from)))
}

/// Microseconds since midnight of each value of a timestamp column: a zoned one's local time in
/// `zone`, with the offset there.
fn times_of_timestamps(array: &ArrayRef, zoned: Option<Arc<str>>, zone: &str) -> Result<Vec<Option<TimeTz>>> {
    // The unit changes, the zone stays: the numbers are UTC (or zone-less) microseconds.
    let micros = arrow::compute::cast(array, &DataType::Timestamp(TimeUnit::Microsecond, zoned.clone()))?;
    let micros = arrow::compute::cast(&micros, &DataType::Int64)?;
    let zoned = zoned.is_some();
    let values = micros.as_primitive::<Int64Type>();
    Ok(values
        .iter()
        .map(|v| {
            let v = v?;
            if zoned {
                Some(TimeTz::at(chrono::DateTime::from_timestamp_micros(v)?, zone))
            } else {
                Some(TimeTz::of_local(v.rem_euclid(time_of_day::DAY_MICROS), zone))
            }
        })
        .collect())
}

/// Each stored `timetz` text as its value.
fn stored_timetz(array: &ArrayRef) -> Result<Vec<Option<TimeTz>>> {
    let text = arrow::compute::cast(array, &DataType::Utf8)?;
    text.as_string::<i32>().iter().map(|v| v.map(|v| TimeTz::input(v, "UTC")).transpose()).collect()
}

fn to_time(array: &ArrayRef, timetz: bool, zone: &str, precision: Option<u32>) -> Result<ArrayRef> {
    let micros: Vec<Option<i64>> = match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if timetz => {
            stored_timetz(array)?.into_iter().map(|t| t.map(|t| t.micros)).collect()
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let times = crate::datetime::column_from_text(array, &TIME_MICROS)?;
            let times = arrow::compute::cast(&times, &DataType::Int64)?;
            times.as_primitive::<Int64Type>().iter().collect()
        }
        DataType::Timestamp(_, zoned) => {
            times_of_timestamps(array, zoned.clone(), zone)?.into_iter().map(|t| t.map(|t| t.micros)).collect()
        }
        DataType::Null | DataType::Time32(_) | DataType::Time64(_) => {
            let times = arrow::compute::cast(array, &TIME_MICROS)?;
            let times = arrow::compute::cast(&times, &DataType::Int64)?;
            times.as_primitive::<Int64Type>().iter().collect()
        }
        other => return Err(cannot_cast(other, "time without time zone")),
    };
    let rounded: Time64MicrosecondArray =
        micros.into_iter().map(|v| v.map(|v| precision.map_or(v, |p| time_of_day::round_micros(v, p)))).collect();
    Ok(Arc::new(rounded))
}

fn to_timetz(array: &ArrayRef, timetz: bool, zone: &str, precision: Option<u32>) -> Result<ArrayRef> {
    let values: Vec<Option<TimeTz>> = match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if timetz => stored_timetz(array)?,
        DataType::Null | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            return time_of_day::timetz_column(array, zone, precision)
        }
        DataType::Time32(_) | DataType::Time64(_) => return time_of_day::timetz_column(array, zone, precision),
        DataType::Timestamp(_, zoned) => times_of_timestamps(array, zoned.clone(), zone)?,
        other => return Err(cannot_cast(other, "time with time zone")),
    };
    let text: StringArray = values.into_iter().map(|v| v.map(|v| v.rounded(precision).text())).collect();
    debug_assert_eq!(text.len(), array.len());
    Ok(Arc::new(text))
}

/// Text literals compared with `timetz` values read as `timetz` (`tz = '13:02:03+02:00'` finds
/// the stored `13:02:03+02`), as PostgreSQL reads an untyped literal as the other side's type.
/// The session's zone is the literal's when it names none.
#[derive(Debug, Default)]
pub struct TimeTzLiterals;

impl AnalyzerRule for TimeTzLiterals {
    fn name(&self) -> &str {
        "sluice_timetz_literals"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let zone = config.execution.time_zone.clone().unwrap_or_else(|| "UTC".into());
        super::read_compared_literals(
            plan,
            |e, schema| e.to_field(schema).is_ok_and(|(_, f)| time_of_day::is_timetz_field(&f)).then_some(()),
            |literal, ()| read_literal(literal, &zone),
        )
    }
}

/// A text literal replaced by its `timetz` text; whether it was one.
fn read_literal(expr: &mut Expr, zone: &str) -> DfResult<bool> {
    let Expr::Literal(ScalarValue::Utf8(Some(text)) | ScalarValue::Utf8View(Some(text)), _) = expr else {
        return Ok(false);
    };
    let stored = TimeTz::input(text, zone)?.text();
    *expr = Expr::Literal(ScalarValue::Utf8(Some(stored)), None);
    Ok(true)
}
