//! Partition values: their text form in the log, Hive-style directory names, and turning them
//! back into Arrow columns when reading.
//!
//! The log keeps partition values as strings keyed by physical column name; `null` (or, for all
//! types, the empty string) is the NULL partition, whose directory is `__HIVE_DEFAULT_PARTITION__`.
//! A `timestamp` value written without a zone ("2021-09-08 11:11:11") is in the *writer's* local
//! zone, which the log does not record: [`PartitionReadOptions::timestamp_zone`] says how to read
//! it (UTC unless told otherwise, as delta-rs does). Sluice writes ISO-8601 UTC values with `Z`.
//! A time of day (a `long` column, see [`crate::schema`]) is written and read as its number of
//! microseconds.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, StringArray, UInt32Array};
use arrow::compute::{cast_with_options, take, CastOptions};
use arrow::datatypes::{DataType as ArrowType, TimeUnit};
use arrow::util::display::FormatOptions;

use crate::error::{Error, Result};

/// The directory name of the NULL partition.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// How zone-less partition values are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionReadOptions {
    /// The zone (IANA name or `+hh:mm`) in which zone-less `timestamp` partition values were
    /// written; `None` means UTC.
    pub timestamp_zone: Option<String>,
}

/// Builds a column of `rows` copies of a partition value of type `data_type`.
pub fn partition_column(
    value: Option<&str>,
    data_type: &ArrowType,
    rows: usize,
    options: &PartitionReadOptions,
) -> Result<ArrayRef> {
    let value = value.filter(|v| !v.is_empty());
    let Some(text) = value else {
        return Ok(new_null_array(data_type, rows));
    };
    let single = parse_value(text, data_type, options)?;
    if rows == 1 {
        return Ok(single);
    }
    let indexes = UInt32Array::from(vec![0u32; rows]);
    Ok(take(single.as_ref(), &indexes, None)?)
}

fn parse_value(text: &str, data_type: &ArrowType, options: &PartitionReadOptions) -> Result<ArrayRef> {
    let strings: ArrayRef = Arc::new(StringArray::from(vec![text]));
    let strict = CastOptions { safe: false, format_options: FormatOptions::default() };
    let bad = |e: arrow::error::ArrowError| Error::InvalidData {
        location: String::new(),
        message: format!("partition value '{text}' is not a valid {data_type}: {e}"),
    };
    match data_type {
        ArrowType::Binary => Ok(Arc::new(arrow::array::BinaryArray::from(vec![text.as_bytes()]))),
        ArrowType::Timestamp(unit, Some(_)) => {
            let has_zone = text.ends_with('Z') || text.ends_with('z') || has_offset(text);
            let zone: Arc<str> = match (&options.timestamp_zone, has_zone) {
                (Some(zone), false) => zone.as_str().into(),
                _ => "UTC".into(),
            };
            let parsed = cast_with_options(&strings, &ArrowType::Timestamp(*unit, Some(zone)), &strict).map_err(bad)?;
            Ok(cast_with_options(&parsed, data_type, &strict).map_err(bad)?)
        }
        ArrowType::Timestamp(unit, None) => {
            let parsed = cast_with_options(&strings, &ArrowType::Timestamp(*unit, None), &strict).map_err(bad)?;
            Ok(parsed)
        }
        ArrowType::Time32(_) | ArrowType::Time64(_) => {
            let micros = cast_with_options(&strings, &ArrowType::Int64, &strict).map_err(bad)?;
            Ok(cast_with_options(&micros, data_type, &strict).map_err(bad)?)
        }
        _ => cast_with_options(&strings, data_type, &strict).map_err(bad),
    }
}

fn has_offset(text: &str) -> bool {
    // "...T11:11:11+07:00" or "... 11:11:11-0700": a sign after the time part.
    let time_start = text.find([' ', 'T']).unwrap_or(text.len());
    text[time_start..].contains(['+', '-'])
}

/// The text form of every value of a partition column (`None` for NULL).
pub fn partition_strings(column: &dyn Array) -> Result<Vec<Option<String>>> {
    match column.data_type() {
        ArrowType::Timestamp(unit, zone) => {
            let micros = cast_with_options(
                &column.slice(0, column.len()),
                &ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone()),
                &CastOptions::default(),
            )?;
            let micros = micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            let _ = unit;
            Ok(micros
                .iter()
                .map(|v| {
                    v.and_then(chrono::DateTime::from_timestamp_micros).map(|t| {
                        if zone.is_some() {
                            t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
                        } else {
                            t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string()
                        }
                    })
                })
                .collect())
        }
        ArrowType::Time32(_) | ArrowType::Time64(_) => {
            let micros = cast_with_options(
                &column.slice(0, column.len()),
                &ArrowType::Time64(TimeUnit::Microsecond),
                &CastOptions::default(),
            )?;
            let micros = cast_with_options(&micros, &ArrowType::Int64, &CastOptions::default())?;
            Ok(micros.as_primitive::<arrow::datatypes::Int64Type>().iter().map(|v| v.map(|v| v.to_string())).collect())
        }
        ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => {
            let binary =
                cast_with_options(&column.slice(0, column.len()), &ArrowType::Binary, &CastOptions::default())?;
            Ok(binary.as_binary::<i32>().iter().map(|v| v.map(|b| String::from_utf8_lossy(b).into_owned())).collect())
        }
        _ => {
            let text = cast_with_options(&column.slice(0, column.len()), &ArrowType::Utf8, &CastOptions::default())?;
            Ok(text.as_string::<i32>().iter().map(|v| v.map(str::to_string)).collect())
        }
    }
}

/// Escapes a partition value for a directory name, as Hive and Spark do.
pub fn escape_directory_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escape = matches!(
            c,
            '\u{01}'
                ..='\u{1F}'
                    | '"'
                    | '#'
                    | '%'
                    | '\''
                    | '*'
                    | '/'
                    | ':'
                    | '='
                    | '?'
                    | '\\'
                    | '\u{7F}'
                    | '{'
                    | '['
                    | ']'
                    | '^'
        );
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The directory (relative to the table root) of a partition: `a=1/b=__HIVE_DEFAULT_PARTITION__`.
pub fn partition_directory(columns: &[String], values: &[Option<String>]) -> String {
    columns
        .iter()
        .zip(values)
        .map(|(column, value)| {
            let value = match value.as_deref() {
                None | Some("") => NULL_PARTITION.to_string(),
                Some(v) => escape_directory_value(v),
            };
            format!("{}={}", escape_directory_value(column), value)
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, TimestampMicrosecondArray};

    #[test]
    fn parses_partition_values() {
        let options = PartitionReadOptions::default();
        let column = partition_column(Some("42"), &ArrowType::Int64, 3, &options).unwrap();
        assert_eq!(column.as_primitive::<arrow::datatypes::Int64Type>().values().to_vec(), vec![42, 42, 42]);
        assert_eq!(partition_column(None, &ArrowType::Int64, 2, &options).unwrap().null_count(), 2);
        assert_eq!(partition_column(Some(""), &ArrowType::Utf8, 2, &options).unwrap().null_count(), 2);
        assert!(partition_column(Some("x"), &ArrowType::Int64, 1, &options).is_err());
        let decimal = partition_column(Some("-2342342.23423"), &ArrowType::Decimal128(12, 5), 1, &options).unwrap();
        assert_eq!(decimal.as_primitive::<arrow::datatypes::Decimal128Type>().value(0), -234234223423);
    }

    #[test]
    fn reads_zoneless_timestamps_in_the_given_zone() {
        let utc = ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let value = Some("2021-09-08 11:11:11");
        let as_utc = partition_column(value, &utc, 1, &PartitionReadOptions::default()).unwrap();
        let pacific = PartitionReadOptions { timestamp_zone: Some("-07:00".into()) };
        let as_pacific = partition_column(value, &utc, 1, &pacific).unwrap();
        let get = |a: &ArrayRef| a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>().value(0);
        assert_eq!(get(&as_pacific) - get(&as_utc), 7 * 3600 * 1_000_000);
        let explicit = partition_column(Some("2021-09-08T11:11:11Z"), &utc, 1, &pacific).unwrap();
        assert_eq!(get(&explicit), get(&as_utc));
    }

    #[test]
    fn formats_and_escapes() {
        let ts = TimestampMicrosecondArray::from(vec![Some(1_631_099_471_000_000), None]).with_timezone("UTC");
        assert_eq!(partition_strings(&ts).unwrap(), vec![Some("2021-09-08T11:11:11.000000Z".to_string()), None]);
        assert_eq!(partition_strings(&Int64Array::from(vec![1])).unwrap(), vec![Some("1".to_string())]);
        assert_eq!(escape_directory_value("/%20%f"), "%2F%2520%25f");
        assert_eq!(
            partition_directory(&["a".into(), "b".into()], &[Some("x=y".into()), None]),
            "a=x%3Dy/b=__HIVE_DEFAULT_PARTITION__"
        );
    }
}
