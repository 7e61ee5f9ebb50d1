//! Times of day: `time` and `time with time zone` (`timetz`) values, their PostgreSQL text and
//! binary forms, and the rounding of `time(p)`.
//!
//! A `time` is an Arrow `Time64(µs)` (a Delta `long` on disk, see `sluice_storage::schema`). A
//! `timetz` is PostgreSQL's pair of a local time and a zone offset; Sluice keeps it as text in
//! PostgreSQL's output form (`12:57:18.000396+05:30`), an Arrow string whose field metadata names
//! the type, as `uuid` and `jsonb` are kept (see [`crate::documents`]). Every value goes through
//! [`TimeTz::input`] before it is stored, so two equal values have the same text, and values with
//! the same offset sort as PostgreSQL sorts them. (PostgreSQL orders values of different offsets
//! by their UTC time first; the text orders them by their local time.)

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, StringArray, Time64MicrosecondArray};
use arrow::datatypes::{DataType, Field, Int64Type, Time64MicrosecondType, TimeUnit};
use chrono::{NaiveTime, Offset, TimeZone, Timelike};
use sluice_storage::schema::DECLARED_TYPE_KEY;

use crate::error::{Error, Result};

/// Microseconds in a day: the end of the day, `24:00:00`, which PostgreSQL accepts as a time.
pub const DAY_MICROS: i64 = 86_400_000_000;
/// The largest zone offset PostgreSQL accepts, in seconds (`TZDISP_LIMIT`: 15:59:59).
const OFFSET_SECONDS_MAX: i32 = 15 * 3600 + 59 * 60 + 59;
/// The declared type name (`sluice.type`) of a `timetz` value.
pub const TIMETZ: &str = "timetz";
/// The Arrow type of a `time`.
pub const TIME_MICROS: DataType = DataType::Time64(TimeUnit::Microsecond);

/// Whether a declared type name is `timetz` or `timetz(p)`.
pub fn is_timetz(declared: &str) -> bool {
    declared == TIMETZ || declared.strip_prefix("timetz(").is_some_and(|rest| rest.ends_with(')'))
}

/// The precision in a declared `time(p)` or `timetz(p)` name.
pub fn precision_of(declared: &str) -> Option<u32> {
    let inner = declared.strip_prefix("timetz(").or_else(|| declared.strip_prefix("time("))?;
    inner.strip_suffix(')')?.parse().ok()
}

/// Whether a field holds `timetz` values.
pub fn is_timetz_field(field: &Field) -> bool {
    field.metadata().get(DECLARED_TYPE_KEY).is_some_and(|d| is_timetz(d))
}

/// A `Utf8` field of `timetz` values.
pub fn timetz_field(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
        .with_metadata(HashMap::from([(DECLARED_TYPE_KEY.to_string(), TIMETZ.to_string())]))
}

/// `micros` rounded to `precision` fractional digits of a second, half up as PostgreSQL rounds
/// (`AdjustTimeForTypmod`).
pub fn round_micros(micros: i64, precision: u32) -> i64 {
    let Some(scale) = 10i64.checked_pow(6u32.saturating_sub(precision)) else { return micros };
    if scale <= 1 {
        return micros;
    }
    (micros + scale / 2).div_euclid(scale) * scale
}

/// A time of day as PostgreSQL prints it: `12:57:18`, `12:57:18.000396` (no trailing zeros);
/// `24:00:00` for the end of the day.
pub fn time_text(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let mut text = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction != 0 {
        text.push_str(format!(".{fraction:06}").trim_end_matches('0'));
    }
    text
}

/// `+00`, `-05`, `+05:30`, `+05:30:15`: a zone offset (seconds east of UTC) as PostgreSQL
/// prints it.
pub fn offset_text(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.unsigned_abs();
    let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (minutes, rest) {
        (0, 0) => format!("{sign}{hours:02}"),
        (_, 0) => format!("{sign}{hours:02}:{minutes:02}"),
        _ => format!("{sign}{hours:02}:{minutes:02}:{rest:02}"),
    }
}

/// The offset (seconds east of UTC) of a zone (an IANA name or `+hh:mm`) at the UTC time `at`;
/// UTC for a zone Arrow does not know.
pub fn zone_offset(zone: &str, at: chrono::DateTime<chrono::Utc>) -> i32 {
    match zone.parse::<arrow::array::timezone::Tz>() {
        Ok(tz) => tz.offset_from_utc_datetime(&at.naive_utc()).fix().local_minus_utc(),
        Err(_) => 0,
    }
}

fn micros_of(time: NaiveTime) -> i64 {
    i64::from(time.num_seconds_from_midnight()) * 1_000_000 + i64::from(time.nanosecond() / 1_000)
}

/// A `time with time zone`: a local time of day and its zone's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeTz {
    /// Microseconds since midnight, local time (up to [`DAY_MICROS`]).
    pub micros: i64,
    /// Seconds east of UTC (PostgreSQL's binary form counts them west).
    pub offset_seconds: i32,
}

impl TimeTz {
    /// A text read as PostgreSQL reads `timetz` input: a time with an offset or zone name
    /// (`12:57:18+00:00`, `04:05:06 PST8PDT`, `2024-01-01 04:05:06 America/New_York`); without
    /// one, `zone`'s offset now (the session's `TimeZone`). `now` is the time now in `zone`.
    /// 22007 for text that is no time, 22008 for a field or offset out of range.
    pub fn input(text: &str, zone: &str) -> Result<Self> {
        let now = chrono::Utc::now();
        if text.trim().eq_ignore_ascii_case("now") {
            return Ok(Self::at(now, zone));
        }
        let today = now.date_naive();
        let (time, offset) = crate::datetime::time_with_zone(text, today)?;
        let offset_seconds = offset.unwrap_or_else(|| zone_offset(zone, now));
        if offset_seconds.abs() > OFFSET_SECONDS_MAX {
            return Err(Error::data("22009", format!("time zone displacement out of range: \"{text}\"")));
        }
        Ok(Self { micros: micros_of(time), offset_seconds })
    }

    /// The local time and offset of a point in time in `zone`.
    pub fn at(utc: chrono::DateTime<chrono::Utc>, zone: &str) -> Self {
        let offset_seconds = zone_offset(zone, utc);
        let local = utc.naive_utc() + chrono::Duration::seconds(i64::from(offset_seconds));
        Self { micros: micros_of(local.time()), offset_seconds }
    }

    /// A local time in `zone` (its offset today), as a `time` becomes a `timetz`.
    pub fn of_local(micros: i64, zone: &str) -> Self {
        Self { micros, offset_seconds: zone_offset(zone, chrono::Utc::now()) }
    }

    /// The value as PostgreSQL prints it: `12:57:18+00`, `12:57:18.000396-05:30`.
    pub fn text(&self) -> String {
        format!("{}{}", time_text(self.micros), offset_text(self.offset_seconds))
    }

    /// The value rounded to `precision` fractional digits.
    pub fn rounded(self, precision: Option<u32>) -> Self {
        match precision {
            Some(p) => Self { micros: round_micros(self.micros, p), ..self },
            None => self,
        }
    }

    /// PostgreSQL's binary form (`timetz_send`): the microseconds (int64) then the offset in
    /// seconds west of UTC (int32), big-endian.
    pub fn binary(&self) -> [u8; 12] {
        let mut bytes = [0u8; 12];
        let (time, zone) = bytes.split_at_mut(8);
        time.copy_from_slice(&self.micros.to_be_bytes());
        zone.copy_from_slice(&(-self.offset_seconds).to_be_bytes());
        bytes
    }

    /// A value from its binary form; 22P03 for bytes that are not one.
    pub fn from_binary(bytes: &[u8]) -> Result<Self> {
        let invalid = || Error::data("22P03", "incorrect binary data format for type time with time zone");
        let time: [u8; 8] = bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(invalid)?;
        let zone: [u8; 4] = bytes.get(8..).and_then(|b| b.try_into().ok()).ok_or_else(invalid)?;
        let micros = i64::from_be_bytes(time);
        let offset_seconds = i32::from_be_bytes(zone).checked_neg().ok_or_else(invalid)?;
        if !(0..=DAY_MICROS).contains(&micros) {
            return Err(Error::data("22008", "time out of range"));
        }
        if offset_seconds.abs() > OFFSET_SECONDS_MAX {
            return Err(Error::data("22009", "time zone displacement out of range"));
        }
        Ok(Self { micros, offset_seconds })
    }
}

/// A column of `timetz` input (text, or `time` values in `zone`) as stored `timetz` text,
/// rounded to `precision`.
pub fn timetz_column(column: &ArrayRef, zone: &str, precision: Option<u32>) -> Result<ArrayRef> {
    let values: StringArray = match column.data_type() {
        DataType::Time32(_) | DataType::Time64(_) => {
            let micros = arrow::compute::cast(column, &TIME_MICROS)?;
            let micros = arrow::compute::cast(&micros, &DataType::Int64)?;
            micros
                .as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map(|v| TimeTz::of_local(v, zone).rounded(precision).text()))
                .collect()
        }
        _ => {
            let text = arrow::compute::cast(column, &DataType::Utf8)?;
            text.as_string::<i32>()
                .iter()
                .map(|v| v.map(|v| TimeTz::input(v, zone).map(|t| t.rounded(precision).text())).transpose())
                .collect::<Result<_>>()?
        }
    };
    Ok(Arc::new(values))
}

/// A `time` column as PostgreSQL's text.
pub fn time_column_text(column: &ArrayRef) -> Result<ArrayRef> {
    let micros = arrow::compute::cast(column, &TIME_MICROS)?;
    let text: StringArray = micros.as_primitive::<Time64MicrosecondType>().iter().map(|v| v.map(time_text)).collect();
    Ok(Arc::new(text))
}

/// A `time` column rounded to `precision` fractional digits.
pub fn round_column(column: &ArrayRef, precision: u32) -> Result<ArrayRef> {
    let micros = arrow::compute::cast(column, &TIME_MICROS)?;
    let rounded: Time64MicrosecondArray =
        micros.as_primitive::<Time64MicrosecondType>().unary(|v| round_micros(v, precision));
    Ok(Arc::new(rounded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_postgresql_prints() {
        assert_eq!(time_text(46_638_000_396), "12:57:18.000396");
        assert_eq!(time_text(46_638_000_000), "12:57:18");
        assert_eq!(time_text(46_638_500_000), "12:57:18.5");
        assert_eq!(time_text(DAY_MICROS), "24:00:00");
        assert_eq!(offset_text(0), "+00");
        assert_eq!(offset_text(-5 * 3600), "-05");
        assert_eq!(offset_text(5 * 3600 + 1800), "+05:30");
        assert_eq!(offset_text(-(3600 + 61)), "-01:01:01");
    }

    #[test]
    fn reads_timetz_as_postgresql_reads_it() {
        let read = |text: &str| TimeTz::input(text, "UTC").map(|t| t.text());
        assert_eq!(read("12:57:18.000396+00:00").unwrap(), "12:57:18.000396+00");
        assert_eq!(read("12:57:18").unwrap(), "12:57:18+00");
        assert_eq!(read("12:57:18 -05:30").unwrap(), "12:57:18-05:30");
        assert_eq!(read("1:05 pm +0200").unwrap(), "13:05:00+02");
        assert_eq!(read("2024-07-01 04:05:06 America/New_York").unwrap(), "04:05:06-04");
        assert_eq!(read("2024-01-01 04:05:06 America/New_York").unwrap(), "04:05:06-05");
        assert_eq!(read("allballs").unwrap(), "00:00:00+00");
        assert_eq!(TimeTz::input("12:00", "Asia/Kolkata").unwrap().text(), "12:00:00+05:30");
        assert_eq!(read("banana").unwrap_err().sqlstate(), "22007");
        assert_eq!(read("25:00+00").unwrap_err().sqlstate(), "22008");
    }

    #[test]
    fn binary_form_counts_the_offset_west() {
        let value = TimeTz { micros: 46_638_000_396, offset_seconds: 3600 };
        let bytes = value.binary();
        assert_eq!(&bytes[8..], &(-3600i32).to_be_bytes());
        assert_eq!(TimeTz::from_binary(&bytes).unwrap(), value);
        assert_eq!(TimeTz::from_binary(&bytes[..11]).unwrap_err().sqlstate(), "22P03");
    }

    #[test]
    fn rounds_half_up() {
        assert_eq!(round_micros(46_638_123_456, 3), 46_638_123_000);
        assert_eq!(round_micros(46_638_123_500, 3), 46_638_124_000);
        assert_eq!(round_micros(46_638_500_000, 0), 46_639_000_000);
        assert_eq!(round_micros(46_638_123_456, 6), 46_638_123_456);
        assert_eq!(precision_of("time(3)"), Some(3));
        assert_eq!(precision_of("timetz(0)"), Some(0));
        assert_eq!(precision_of("timetz"), None);
    }
}
