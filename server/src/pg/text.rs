//! Values in PostgreSQL's text forms, where arrow-pg's differ from them.
//!
//! A column sent in text format is rendered here, before arrow-pg encodes the row, when its type
//! is one whose text PostgreSQL writes differently from arrow-pg:
//!
//! - `float8`/`float4`: the shortest text that reads back as the same value (with the default
//!   `extra_float_digits` of 1 or more), fixed-point for decimal exponents from -4 up to 14 (5 for
//!   `float4`) and `1e+20` style beyond; `Infinity`, `-Infinity`, `NaN`; with
//!   `extra_float_digits` of 0 or less, `15 + extra_float_digits` significant digits (`6 + ...`
//!   for `float4`), as `%g` prints them.
//! - `timestamp`: `2024-01-01 10:00:00`, fractional seconds only when there are some, without
//!   trailing zeros.
//! - `timestamptz`: the same, in the session's `TimeZone`, followed by the zone's offset (`+00`,
//!   `-05`, `+05:30`).
//! - `time`: `10:00:00`, fractional seconds as for timestamps.
//! - `numeric`: every digit, to the column's scale (arrow-pg's decimals hold 28 digits, and a
//!   wider value failed to encode); an unconstrained `numeric` (stored with 38 digits, 10 after
//!   the point, as are sums of one) without its trailing fractional zeros, as
//!   PostgreSQL prints `1.5::numeric` (it keeps each value's own scale, `1.50` stays `1.50`;
//!   Sluice's decimals have one scale per column, so it prints the shortest).
//!
//! - `date`, `timestamp`, `timestamptz` in the session's `DateStyle`: ISO as above; SQL
//!   (`02/01/2024 10:00:00 EST`, day first with DMY), Postgres (`Tue 02 Jan 10:00:00 2024 EST`)
//!   and German (`02.01.2024 10:00:00 EST`), a zoned value followed by its zone's abbreviation.
//!
//! The column keeps its type in the row description; only the bytes of its values change.

use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{
    DataType, Field, Float32Type, Float64Type, Schema, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit,
};
use arrow::error::ArrowError;
use chrono::{DateTime, Offset, TimeZone, Timelike};
use pgwire::api::portal::Format;
use pgwire::types::format::FormatOptions;
use sluice::datetime::DateOrder;

/// `batch` with its text-format columns of the types above rendered as PostgreSQL text.
pub fn render(batch: RecordBatch, format: &Format, options: &FormatOptions) -> Result<RecordBatch, ArrowError> {
    let style = DateStyle::of(&options.date_style);
    let zone = arrow::array::timezone::Tz::from_str(&options.time_zone)
        .or_else(|_| arrow::array::timezone::Tz::from_str("UTC"))?;
    let mut columns: Option<Vec<ArrayRef>> = None;
    for (i, column) in batch.columns().iter().enumerate() {
        if !is_text(format, i) {
            continue;
        }
        let rendered = match column.data_type() {
            DataType::Float64 => {
                Some(floats(column.as_primitive::<Float64Type>().iter(), |v| float8(v, options.extra_float_digits)))
            }
            DataType::Float32 => {
                Some(floats(column.as_primitive::<Float32Type>().iter(), |v| float4(v, options.extra_float_digits)))
            }
            DataType::Timestamp(_, zoned) => {
                Some(timestamps(column, zoned.is_some(), &zone, &options.time_zone, style)?)
            }
            DataType::Date32 | DataType::Date64 if style != DateStyle::ISO => Some(dates(column, style)?),
            DataType::Time64(_) | DataType::Time32(_) => Some(times(column)),
            DataType::Decimal128(..) => Some(sluice::types::decimal_column_text(column)?),
            DataType::Interval(_) => Some(intervals(column)?),
            DataType::List(element) if is_list(element.data_type()) => Some(nested_arrays(column)?),
            _ => None,
        };
        if let Some(rendered) = rendered {
            if let Some(slot) = columns.get_or_insert_with(|| batch.columns().to_vec()).get_mut(i) {
                *slot = rendered;
            }
        }
    }
    let Some(columns) = columns else { return Ok(batch) };
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

fn is_list(data_type: &DataType) -> bool {
    matches!(data_type, DataType::List(_) | DataType::LargeList(_))
}

/// A list of lists (a multidimensional array: arrow-pg writes one dimension) as PostgreSQL
/// prints it (see `sluice::types::array_column_text`).
pub(super) fn nested_arrays(column: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    sluice::types::array_column_text(column)
}

/// Intervals as PostgreSQL prints them (see [`sluice::datetime::interval_output`]).
fn intervals(column: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    sluice::datetime::interval_column_text(column).map_err(|e| ArrowError::CastError(e.to_string()))
}

/// Whether column `i` goes out in text format (a single format code stands for every column).
pub(super) fn is_text(format: &Format, i: usize) -> bool {
    match format {
        Format::Individual(codes) => codes.get(i).or(codes.first()).is_none_or(|code| *code == 0),
        other => other.is_text(i),
    }
}

fn floats<T>(values: impl Iterator<Item = Option<T>>, text: impl Fn(T) -> String) -> ArrayRef {
    Arc::new(values.map(|v| v.map(&text)).collect::<StringArray>())
}

/// A `float8` as PostgreSQL prints it.
pub fn float8(value: f64, extra_float_digits: i8) -> String {
    float_text(value, special(value.is_nan(), value.is_infinite(), value < 0.0), 15, extra_float_digits)
}

/// A `float4` as PostgreSQL prints it.
pub fn float4(value: f32, extra_float_digits: i8) -> String {
    float_text(value, special(value.is_nan(), value.is_infinite(), value < 0.0), 6, extra_float_digits)
}

/// A float of a type with `significant` decimal digits (DBL_DIG, FLT_DIG): the shortest exact
/// text, or `significant + extra_float_digits` digits when that is 0 or less.
fn float_text(
    value: impl std::fmt::LowerExp,
    special: Option<&str>,
    significant: i32,
    extra_float_digits: i8,
) -> String {
    if let Some(special) = special {
        return special.into();
    }
    if extra_float_digits > 0 {
        return decimal_text(&format!("{value:e}"), significant);
    }
    let digits = (significant + i32::from(extra_float_digits)).max(1);
    decimal_text(&format!("{value:.*e}", (digits - 1) as usize), digits)
}

fn special(nan: bool, infinite: bool, negative: bool) -> Option<&'static str> {
    match (nan, infinite, negative) {
        (true, _, _) => Some("NaN"),
        (_, true, true) => Some("-Infinity"),
        (_, true, false) => Some("Infinity"),
        _ => None,
    }
}

/// `scientific` (Rust's `{:e}` form, `-1.25e-7`) as `%g` writes it: fixed-point when the
/// exponent is from -4 to `fixed_below - 1`, else `1.25e-07`; trailing zeros of the digits go.
fn decimal_text(scientific: &str, fixed_below: i32) -> String {
    let Some((mantissa, exponent)) = scientific.split_once('e') else { return scientific.to_string() };
    let Ok(exponent) = exponent.parse::<i32>() else { return scientific.to_string() };
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = match digits.trim_end_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    if (-4..fixed_below).contains(&exponent) {
        let text = if exponent >= 0 {
            let point = exponent as usize + 1;
            match (digits.get(..point), digits.get(point..)) {
                (Some(whole), Some(fraction)) if !fraction.is_empty() => format!("{whole}.{fraction}"),
                _ => format!("{digits}{}", "0".repeat(point.saturating_sub(digits.len()))),
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize))
        };
        return format!("{sign}{text}");
    }
    let (first, rest) = digits.split_at_checked(1).unwrap_or((digits, ""));
    let point = if rest.is_empty() { String::new() } else { format!(".{rest}") };
    let exponent_sign = if exponent < 0 { '-' } else { '+' };
    format!("{sign}{first}{point}e{exponent_sign}{:02}", exponent.abs())
}

/// `.5`, `.123456`: the fraction of a second as PostgreSQL prints it (empty when whole).
fn fraction(nanos: u32) -> String {
    let micros = nanos / 1_000;
    if micros == 0 {
        return String::new();
    }
    let text = format!(".{micros:06}");
    text.trim_end_matches('0').to_string()
}

/// PostgreSQL's `DateStyle`: the output style and the order of a date's fields (input reads
/// `1/8/1999` in it; output puts the day first with DMY only, as PostgreSQL's does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DateStyle {
    form: DateForm,
    order: DateOrder,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateForm {
    Iso,
    Sql,
    Postgres,
    German,
}

impl DateStyle {
    const ISO: DateStyle = DateStyle { form: DateForm::Iso, order: DateOrder::MonthDayYear };

    /// The style of a `DateStyle` value as the settings keep it (`SQL, DMY`); ISO when unknown.
    pub(crate) fn of(setting: &str) -> DateStyle {
        let upper = setting.to_ascii_uppercase();
        let words: Vec<&str> = upper.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).collect();
        let form = match words.first().copied() {
            Some("SQL") => DateForm::Sql,
            Some("POSTGRES") => DateForm::Postgres,
            Some("GERMAN") => DateForm::German,
            _ => DateForm::Iso,
        };
        let named = |names: &[&str]| words.iter().any(|w| names.contains(w));
        let order = if named(&["DMY", "EURO", "EUROPEAN"]) {
            DateOrder::DayMonthYear
        } else if named(&["YMD"]) {
            DateOrder::YearMonthDay
        } else if form == DateForm::German && !named(&["MDY", "US", "NONEURO", "NONEUROPEAN"]) {
            DateOrder::DayMonthYear
        } else {
            DateOrder::MonthDayYear
        };
        DateStyle { form, order }
    }

    /// The order input reads a date's fields in (German implies DMY).
    pub(crate) fn order(self) -> DateOrder {
        self.order
    }

    /// Whether output puts the day before the month (DMY; YMD prints as MDY in PostgreSQL).
    fn day_first(self) -> bool {
        self.order == DateOrder::DayMonthYear
    }

    /// The `strftime` form of a date (without time) in this style.
    fn date_format(self) -> &'static str {
        match (self.form, self.day_first()) {
            (DateForm::Iso, _) => "%Y-%m-%d",
            (DateForm::Sql, true) => "%d/%m/%Y",
            (DateForm::Sql, false) => "%m/%d/%Y",
            (DateForm::Postgres, true) => "%d-%m-%Y",
            (DateForm::Postgres, false) => "%m-%d-%Y",
            (DateForm::German, _) => "%d.%m.%Y",
        }
    }

    /// A timestamp's text: `zone` is the offset or zone name PostgreSQL appends (empty for
    /// `timestamp`).
    fn timestamp(self, local: chrono::NaiveDateTime, zone: &str) -> String {
        let seconds = fraction(local.nanosecond());
        match self.form {
            DateForm::Iso => format!("{}{seconds}{zone}", local.format("%Y-%m-%d %H:%M:%S")),
            // `Tue Jan 02 10:00:00.25 2024 EST`, or `Tue 02 Jan ...` with the day first.
            DateForm::Postgres => {
                let day_month = if self.day_first() { "%d %b" } else { "%b %d" };
                let text =
                    format!("{}{seconds} {}", local.format(&format!("%a {day_month} %H:%M:%S")), local.format("%Y"));
                if zone.is_empty() {
                    text
                } else {
                    format!("{text} {zone}")
                }
            }
            DateForm::Sql | DateForm::German => {
                let text = format!("{} {}{seconds}", local.format(self.date_format()), local.format("%H:%M:%S"));
                if zone.is_empty() {
                    text
                } else {
                    format!("{text} {zone}")
                }
            }
        }
    }
}

/// Dates in a style other than ISO (`02/01/2024`, `02-01-2024`, `02.01.2024`).
fn dates(column: &ArrayRef, style: DateStyle) -> Result<ArrayRef, ArrowError> {
    let days = arrow::compute::cast(column, &DataType::Date32)?;
    let days = days.as_primitive::<arrow::datatypes::Date32Type>();
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let rendered: StringArray = days
        .iter()
        .map(|d| {
            let date = epoch.checked_add_signed(chrono::Duration::days(i64::from(d?)))?;
            Some(date.format(style.date_format()).to_string())
        })
        .collect();
    Ok(Arc::new(rendered))
}

/// The zone a timestamptz is followed by in the SQL, Postgres and German styles: the zone's
/// abbreviation at that moment (`EST`, `CEST`, `UTC`), else the offset as ISO writes it.
fn zone_abbreviation(zone_name: &str, utc: chrono::NaiveDateTime, offset: i32) -> String {
    use chrono_tz::OffsetName;
    match zone_name.parse::<chrono_tz::Tz>() {
        Ok(tz) => match tz.offset_from_utc_datetime(&utc).abbreviation() {
            Some(abbreviation) => abbreviation.to_string(),
            None => offset_text(offset),
        },
        Err(_) => offset_text(offset),
    }
}

fn timestamps(
    column: &ArrayRef,
    zoned: bool,
    zone: &arrow::array::timezone::Tz,
    zone_name: &str,
    style: DateStyle,
) -> Result<ArrayRef, ArrowError> {
    let micros = arrow::compute::cast(column, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
    let micros = micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    let rendered: StringArray = micros
        .iter()
        .map(|v| {
            let utc = DateTime::from_timestamp_micros(v?)?;
            Some(if zoned {
                let local = zone.from_utc_datetime(&utc.naive_utc());
                let offset = local.offset().fix().local_minus_utc();
                let suffix = if style.form == DateForm::Iso {
                    offset_text(offset)
                } else {
                    zone_abbreviation(zone_name, utc.naive_utc(), offset)
                };
                style.timestamp(local.naive_local(), &suffix)
            } else {
                style.timestamp(utc.naive_utc(), "")
            })
        })
        .collect();
    Ok(Arc::new(rendered))
}

/// `+00`, `-05`, `+05:30`, `+05:30:15`: a zone's offset as PostgreSQL appends it.
fn offset_text(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.abs();
    let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (minutes, rest) {
        (0, 0) => format!("{sign}{hours:02}"),
        (_, 0) => format!("{sign}{hours:02}:{minutes:02}"),
        _ => format!("{sign}{hours:02}:{minutes:02}:{rest:02}"),
    }
}

fn times(column: &ArrayRef) -> ArrayRef {
    let text = |nanos: Option<i64>| {
        let nanos = nanos?;
        let seconds = u32::try_from(nanos.div_euclid(1_000_000_000)).ok()?;
        let time =
            chrono::NaiveTime::from_num_seconds_from_midnight_opt(seconds, nanos.rem_euclid(1_000_000_000) as u32)?;
        Some(format!("{}{}", time.format("%H:%M:%S"), fraction(time.nanosecond())))
    };
    let rendered: StringArray = match column.data_type() {
        DataType::Time64(TimeUnit::Nanosecond) => {
            column.as_primitive::<Time64NanosecondType>().iter().map(text).collect()
        }
        DataType::Time64(_) => {
            column.as_primitive::<Time64MicrosecondType>().iter().map(|v| text(v.map(|v| v * 1_000))).collect()
        }
        DataType::Time32(TimeUnit::Millisecond) => column
            .as_primitive::<Time32MillisecondType>()
            .iter()
            .map(|v| text(v.map(|v| i64::from(v) * 1_000_000)))
            .collect(),
        _ => column
            .as_primitive::<Time32SecondType>()
            .iter()
            .map(|v| text(v.map(|v| i64::from(v) * 1_000_000_000)))
            .collect(),
    };
    Arc::new(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_postgres_prints_them() {
        for (value, text) in [
            (20.0, "20"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-1.5, "-1.5"),
            (1e20, "1e+20"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (123456789012345.0, "123456789012345"),
            (1234567890123456.0, "1.234567890123456e+15"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
            (1e300 * 10.0, "1e+301"),
        ] {
            assert_eq!(float8(value, 1), text, "{value}");
        }
        assert_eq!(float8(0.1 + 0.2, 0), "0.3");
        assert_eq!(float8(1.0 / 3.0, 0), "0.333333333333333");
        assert_eq!(float4(1234567.0, 1), "1.234567e+06");
        assert_eq!(float4(0.1, 1), "0.1");
        assert_eq!(float4(123456.0, 1), "123456");
    }

    #[test]
    fn offsets_print_as_postgres_prints_them() {
        assert_eq!(offset_text(0), "+00");
        assert_eq!(offset_text(-5 * 3600), "-05");
        assert_eq!(offset_text(5 * 3600 + 1800), "+05:30");
        assert_eq!(fraction(500_000_000), ".5");
        assert_eq!(fraction(123_456_000), ".123456");
        assert_eq!(fraction(0), "");
    }

    #[test]
    fn unconstrained_numerics_print_without_trailing_zeros() {
        let values = arrow::array::Decimal128Array::from(vec![
            Some(15_000_000_000i128),
            Some(30_000_000_000),
            Some(-5_000_000),
            Some(0),
            Some(1_234_500_000_000_000),
            None,
        ])
        .with_precision_and_scale(38, 10)
        .unwrap();
        let text = sluice::types::decimal_column_text(&(Arc::new(values) as ArrayRef)).unwrap();
        let text: Vec<Option<&str>> = text.as_string::<i32>().iter().collect();
        assert_eq!(text, [Some("1.5"), Some("3"), Some("-0.0005"), Some("0"), Some("123450"), None]);
        assert_eq!(sluice::types::without_fraction_zeros("-0.000"), "0");
        assert_eq!(sluice::types::without_fraction_zeros("100"), "100");
    }

    #[test]
    fn numerics_print_every_digit() {
        let values = arrow::array::Decimal128Array::from(vec![Some(10i128.pow(30) + 5), Some(-101), Some(0), None])
            .with_precision_and_scale(38, 2)
            .unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("n", values.data_type().clone(), true)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap();
        let rendered = render(batch, &Format::UnifiedText, &FormatOptions::default()).unwrap();
        let text: Vec<Option<&str>> = rendered.column(0).as_string::<i32>().iter().collect();
        assert_eq!(text, [Some("10000000000000000000000000000.05"), Some("-1.01"), Some("0.00"), None]);
    }
}
