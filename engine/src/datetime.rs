//! PostgreSQL's date/time input: the texts `'2024-01-01 10:00'::timestamp`, `date
//! '1/8/1999'`, `'epoch'`, `'yesterday'` or `'2024-01-01T10:00:00+02'::timestamptz` stand for.
//!
//! Arrow's parser wants seconds and knows no special words, so a literal is read here and
//! handed on in the one form Arrow reads (`YYYY-MM-DD HH:MM:SS.ffffff[+HH:MM]`); the words that
//! depend on the clock (`now`, `today`, `tomorrow`, `yesterday`) become `now()` and
//! `current_date` expressions of the statement. Input follows the session's `DateStyle` order
//! ([`DateOrder`]): with MDY (PostgreSQL's default) `1/8/1999` is January 8, with DMY August 1,
//! and with YMD `99/1/8` is 1999-01-08.

use std::cell::Cell;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone};

use crate::error::{Error, Result};

/// How a session's `DateStyle` orders the fields of a date written `1/8/1999`: MDY (PostgreSQL's
/// default) reads January 8, DMY August 1, YMD (`99/1/8`) the year first. A session keeps it in
/// its DataFusion config options (an extension), so that the statement's rewrite (literals), the
/// column casts of writes and the casts a plan runs ([`crate::functions::date_casts`]) read
/// with the order the session has when they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DateOrder {
    #[default]
    MonthDayYear,
    DayMonthYear,
    YearMonthDay,
}

impl DateOrder {
    /// The order in `DateStyle`'s words (`MDY`, `DMY`, `YMD`).
    pub fn name(self) -> &'static str {
        match self {
            DateOrder::MonthDayYear => "MDY",
            DateOrder::DayMonthYear => "DMY",
            DateOrder::YearMonthDay => "YMD",
        }
    }

    /// The order a session's config options hold (MDY when none was set).
    pub fn of_config(options: &datafusion::common::config::ConfigOptions) -> DateOrder {
        options.extensions.get::<DateOrder>().copied().unwrap_or_default()
    }
}

impl datafusion::common::config::ExtensionOptions for DateOrder {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn datafusion::common::config::ExtensionOptions> {
        Box::new(*self)
    }

    fn set(&mut self, key: &str, value: &str) -> datafusion::error::Result<()> {
        let order = [DateOrder::MonthDayYear, DateOrder::DayMonthYear, DateOrder::YearMonthDay]
            .into_iter()
            .find(|o| key == "order" && o.name().eq_ignore_ascii_case(value));
        *self = order.ok_or_else(|| {
            datafusion::error::DataFusionError::Configuration(format!("no date order {key} = {value}"))
        })?;
        Ok(())
    }

    /// None: the order is `DateStyle`'s, which the server shows; DataFusion's settings list
    /// (`SHOW ALL`) does not repeat it.
    fn entries(&self) -> Vec<datafusion::common::config::ConfigEntry> {
        vec![]
    }
}

impl datafusion::common::config::ConfigExtension for DateOrder {
    const PREFIX: &'static str = "sluice_date_order";
}

thread_local! {
    /// The order the literals being read on this thread follow (see [`with_date_order`]).
    static ORDER: Cell<DateOrder> = const { Cell::new(DateOrder::MonthDayYear) };
}

/// Runs `read` (synchronous: no other statement's reading can interleave on the thread) with
/// dates read in `order`.
pub fn with_date_order<T>(order: DateOrder, read: impl FnOnce() -> T) -> T {
    let before = ORDER.with(|d| d.replace(order));
    let result = read();
    ORDER.with(|d| d.set(before));
    result
}

/// The kinds of date/time a text is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Date,
    Timestamp,
    TimestampTz,
    Time,
    TimeTz,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::Timestamp => "timestamp",
            Kind::TimestampTz => "timestamp with time zone",
            Kind::Time => "time",
            Kind::TimeTz => "time with time zone",
        }
    }

    /// Whether the kind is a time of day (no date of its own).
    fn is_time(self) -> bool {
        matches!(self, Kind::Time | Kind::TimeTz)
    }
}

/// What a date/time text reads as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A fixed value: the text Arrow reads (with its offset, for a timestamptz that named one).
    Value(String),
    /// `now`: the statement's time.
    Now,
    /// `today` (0), `tomorrow` (1), `yesterday` (-1): midnight of the session's day, plus days.
    Today(i32),
}

/// Reads `text` as PostgreSQL reads input of type `kind`; 22007 for a text that is no
/// date/time, 22008 for a field out of range (`2024-02-30`), 0A000 for infinity. A `timetz`
/// reads as [`Kind::Time`] does (its offset is [`time_with_zone`]'s to read).
pub fn parse(text: &str, kind: Kind) -> Result<Input> {
    let lower = text.trim().to_ascii_lowercase();
    match lower.as_str() {
        "now" => return Ok(Input::Now),
        "today" if !kind.is_time() => return Ok(Input::Today(0)),
        "tomorrow" if !kind.is_time() => return Ok(Input::Today(1)),
        "yesterday" if !kind.is_time() => return Ok(Input::Today(-1)),
        "epoch" if !kind.is_time() => {
            return Ok(Input::Value(render(kind, epoch(), Some(0))));
        }
        "allballs" if kind.is_time() => return Ok(Input::Value("00:00:00".into())),
        "infinity" | "+infinity" | "-infinity" if !kind.is_time() => {
            return Err(Error::NotSupported(format!("the {} value {lower} (Arrow has no infinite dates)", kind.name())))
        }
        _ => {}
    }
    let fields = Fields::read(text, kind)?;
    let date = match (fields.date, kind.is_time()) {
        (Some(d), _) => d,
        (None, true) => epoch().date(),
        (None, false) => return Err(fields.syntax()),
    };
    if kind.is_time() {
        let time = fields.time.ok_or_else(|| fields.syntax())?;
        return Ok(Input::Value(time.format("%H:%M:%S%.f").to_string()));
    }
    let at = date.and_time(fields.time.unwrap_or(NaiveTime::MIN));
    let offset = fields.offset_at(at)?;
    Ok(Input::Value(render(kind, at, offset)))
}

/// A `timetz` text as PostgreSQL reads it: the time of day and, when the text names one, its
/// zone's offset in seconds east of UTC (a zone name's offset on the text's date, or on `today`
/// when it has none). `allballs` is midnight UTC; `now` is for the caller to read.
pub fn time_with_zone(text: &str, today: NaiveDate) -> Result<(NaiveTime, Option<i32>)> {
    if text.trim().eq_ignore_ascii_case("allballs") {
        return Ok((NaiveTime::MIN, Some(0)));
    }
    let fields = Fields::read(text, Kind::TimeTz)?;
    let time = fields.time.ok_or_else(|| fields.syntax())?;
    let offset = fields.offset_at(fields.date.unwrap_or(today).and_time(time))?;
    Ok((time, offset))
}

/// The parts of a date/time text.
struct Fields {
    text: String,
    kind: Kind,
    date: Option<NaiveDate>,
    time: Option<NaiveTime>,
    /// Seconds east of UTC, written as a number (`+02`, `Z`).
    offset: Option<i32>,
    /// A zone named by its IANA name (`America/New_York`).
    zone_name: Option<String>,
}

impl Fields {
    fn syntax(&self) -> Error {
        Error::data("22007", format!("invalid input syntax for type {}: \"{}\"", self.kind.name(), self.text))
    }

    fn range(&self) -> Error {
        Error::data("22008", format!("date/time field value out of range: \"{}\"", self.text))
    }

    fn read(text: &str, kind: Kind) -> Result<Self> {
        let lower = text.trim().to_ascii_lowercase();
        let mut fields = Fields { text: text.to_string(), kind, date: None, time: None, offset: None, zone_name: None };
        if lower.is_empty() {
            return Err(fields.syntax());
        }
        let mut words = Words::new(&lower);
        while let Some(word) = words.next() {
            if fields.date.is_none() && fields.time.is_none() {
                let date =
                    read_date(&word, &mut words).map_err(|bad| if bad { fields.range() } else { fields.syntax() });
                if let Some(d) = date? {
                    fields.date = Some(d);
                    continue;
                }
            }
            if fields.time.is_none() && word.starts_with(|c: char| c.is_ascii_digit()) && word.contains(':') {
                // A time out of range (`25:00`, `25:00+02`) is 22008; other text after it, 22007.
                let end = word.find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.')).unwrap_or(word.len());
                let numeric = word.get(end..).is_none_or(|rest| rest.is_empty() || read_offset(rest).is_some());
                let (t, rest) =
                    read_time(&word).ok_or_else(|| if numeric { fields.range() } else { fields.syntax() })?;
                let t = match words.peek().as_deref() {
                    Some("am" | "pm") => {
                        let pm = words.next().as_deref() == Some("pm");
                        am_pm(t, pm).ok_or_else(|| fields.range())?
                    }
                    _ => t,
                };
                fields.time = Some(t);
                if !rest.is_empty() {
                    fields.offset = Some(read_offset(rest).ok_or_else(|| fields.syntax())?);
                }
                continue;
            }
            if fields.time.is_some() && fields.offset.is_none() && fields.zone_name.is_none() {
                if let Some(o) = read_offset(&word) {
                    fields.offset = Some(o);
                    continue;
                }
                // A zone name keeps its original spelling (`America/New_York`).
                let original = original_word(text, &word);
                if original.parse::<arrow::array::timezone::Tz>().is_ok() {
                    fields.zone_name = Some(original);
                    continue;
                }
                if word.contains('/') {
                    return Err(Error::data("22023", format!("time zone \"{word}\" not recognized")));
                }
            }
            return Err(fields.syntax());
        }
        Ok(fields)
    }

    /// The offset the text gives for the local time `at`: written, or its zone's at that time.
    fn offset_at(&self, at: NaiveDateTime) -> Result<Option<i32>> {
        Ok(match (self.offset, &self.zone_name) {
            (Some(o), _) => Some(o),
            (None, Some(zone)) => {
                let tz: arrow::array::timezone::Tz = zone.parse().map_err(|_| self.syntax())?;
                let local = tz.from_local_datetime(&at).earliest().ok_or_else(|| self.range())?;
                Some(local.offset().fix().local_minus_utc())
            }
            (None, None) => None,
        })
    }
}

fn epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default().and_time(NaiveTime::MIN)
}

/// The text Arrow reads for `at` (seconds east of UTC in `offset`, kept for timestamptz only).
fn render(kind: Kind, at: NaiveDateTime, offset: Option<i32>) -> String {
    match kind {
        Kind::Date => at.format("%Y-%m-%d").to_string(),
        Kind::Time | Kind::TimeTz => at.format("%H:%M:%S%.f").to_string(),
        Kind::Timestamp => at.format("%Y-%m-%d %H:%M:%S%.f").to_string(),
        Kind::TimestampTz => {
            let base = at.format("%Y-%m-%dT%H:%M:%S%.f").to_string();
            match offset {
                Some(seconds) => {
                    let sign = if seconds < 0 { '-' } else { '+' };
                    let seconds = seconds.abs();
                    format!("{base}{sign}{:02}:{:02}", seconds / 3600, seconds % 3600 / 60)
                }
                None => base,
            }
        }
    }
}

/// The text's words: split at blanks and at a `T` between a date and a time.
struct Words {
    words: std::collections::VecDeque<String>,
}

impl Words {
    fn new(text: &str) -> Self {
        let mut words = std::collections::VecDeque::new();
        for word in text.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty()) {
            // `2024-01-01t10:00:00`: ISO 8601's T joins the date and the time.
            match word.find('t') {
                Some(at)
                    if at > 0
                        && word[..at].chars().all(|c| c.is_ascii_digit() || c == '-')
                        && word[at + 1..].starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    words.push_back(word[..at].to_string());
                    words.push_back(word[at + 1..].to_string());
                }
                _ => words.push_back(word.to_string()),
            }
        }
        Self { words }
    }

    fn peek(&self) -> Option<String> {
        self.words.front().cloned()
    }

    fn next(&mut self) -> Option<String> {
        self.words.pop_front()
    }
}

/// The word as the text spelled it (case kept).
fn original_word(text: &str, lower: &str) -> String {
    let start = text.to_ascii_lowercase().find(lower).unwrap_or(0);
    text.get(start..start + lower.len()).unwrap_or(lower).to_string()
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

fn month_of(word: &str) -> Option<u32> {
    if word.len() < 3 {
        return None;
    }
    let position = MONTHS.iter().position(|m| word.starts_with(m))?;
    const FULL: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let full = FULL.get(position)?;
    (full.starts_with(word) || word == "sept").then_some(position as u32 + 1)
}

/// A date at `word` (taking the words after it for `January 8 1999` and `8 January 1999`);
/// `Ok(None)` when `word` starts no date, `Err(true)` for a date out of range, `Err(false)` for a
/// malformed one.
fn read_date(word: &str, words: &mut Words) -> std::result::Result<Option<NaiveDate>, bool> {
    let make = |y: i32, m: u32, d: u32| NaiveDate::from_ymd_opt(y, m, d).ok_or(true).map(Some);
    let number = |s: &str| s.parse::<u32>().map_err(|_| false);
    if let Some(month) = month_of(word) {
        // `January 8, 1999`
        let day = words.next().ok_or(false)?;
        let year = words.next().ok_or(false)?;
        return make(year_of(&year)?, month, number(&day)?);
    }
    let parts: Vec<&str> = word.split(['-', '/', '.']).collect();
    // `jan-05-24` starts with its month's name.
    let named_first = parts.len() > 1 && parts.first().copied().and_then(month_of).is_some();
    if !(word.starts_with(|c: char| c.is_ascii_digit()) || named_first) || word.contains(':') {
        return Ok(None);
    }
    match parts.as_slice() {
        [whole] if whole.len() == 8 && whole.chars().all(|c| c.is_ascii_digit()) => {
            make(year_of(&whole[..4])?, number(&whole[4..6])?, number(&whole[6..])?)
        }
        [day] if day.chars().all(|c| c.is_ascii_digit()) && words.peek().as_deref().and_then(month_of).is_some() => {
            // `8 January 1999`
            let month = words.next().as_deref().and_then(month_of).ok_or(false)?;
            let year = words.next().ok_or(false)?;
            make(year_of(&year)?, month, number(day)?)
        }
        [year, month, day] if year.len() >= 3 && year.chars().all(|c| c.is_ascii_digit()) => {
            let month = match month_of(month) {
                Some(m) => m,
                None => number(month)?,
            };
            make(year_of(year)?, month, number(day)?)
        }
        // `1/8/1999`: month first with DateStyle MDY, day first with DMY, `99/1/8` with YMD (a
        // month's name is a month wherever it stands).
        [first, second, third] => {
            let order = ORDER.with(Cell::get);
            let (year, month, day) = match (month_of(first), month_of(second), order) {
                (Some(m), _, _) => year_and_day(second, third, order, Month::Named(m)),
                (None, Some(m), _) => year_and_day(first, third, order, Month::Named(m)),
                (None, None, DateOrder::MonthDayYear) => (*third, Month::Number(first), *second),
                (None, None, DateOrder::DayMonthYear) => (*third, Month::Number(second), *first),
                (None, None, DateOrder::YearMonthDay) => (*first, Month::Number(second), *third),
            };
            let month = match month {
                Month::Named(m) => m,
                Month::Number(text) => number(text)?,
            };
            make(year_of(year)?, month, number(day)?)
        }
        _ => Err(false),
    }
}

/// A date's month: named (`jan`) or a number still to read.
enum Month<'a> {
    Named(u32),
    Number(&'a str),
}

/// The year, month and day of a date written with a month's name and two numbers, `a` before
/// `b`, as PostgreSQL's `DecodeNumber` places them: a number of three digits or more is the
/// year; else the first number is the year with YMD (unless the second is longer: then that is
/// the year and the first the day) and the day with MDY and DMY.
fn year_and_day<'a>(a: &'a str, b: &'a str, order: DateOrder, month: Month<'a>) -> (&'a str, Month<'a>, &'a str) {
    let year_first = a.len() >= 3 || (order == DateOrder::YearMonthDay && b.len() < 3);
    if year_first {
        (a, month, b)
    } else {
        (b, month, a)
    }
}

fn year_of(text: &str) -> std::result::Result<i32, bool> {
    let year: i32 = text.parse().map_err(|_| false)?;
    // Two-digit years as PostgreSQL reads them: 70..99 are 1970..1999, 0..69 are 2000..2069.
    Ok(match (text.len(), year) {
        (1 | 2, 0..=69) => 2000 + year,
        (1 | 2, _) => 1900 + year,
        _ => year,
    })
}

/// `10:00`, `10:00:05`, `10:00:05.123456`, with what follows the time in the word (an
/// offset: `10:00+02`).
fn read_time(word: &str) -> Option<(NaiveTime, &str)> {
    let end = word.find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.')).unwrap_or(word.len());
    let (time, rest) = word.split_at(end);
    let mut fields = time.split(':');
    let hour: u32 = fields.next()?.parse().ok()?;
    let minute: u32 = fields.next()?.parse().ok()?;
    let (second, micro) = match fields.next() {
        Some(s) => {
            let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
            let whole: u32 = whole.parse().ok()?;
            let digits: String = fraction.chars().chain(std::iter::repeat('0')).take(6).collect();
            let micro: u32 = if fraction.is_empty() { 0 } else { digits.parse().ok()? };
            (whole, micro)
        }
        None => (0, 0),
    };
    if fields.next().is_some() {
        return None;
    }
    // 24:00:00 is midnight at the end of the day in PostgreSQL; Arrow has no such time.
    let time = NaiveTime::from_hms_micro_opt(hour, minute, second, micro)?;
    Some((time, rest))
}

fn am_pm(time: NaiveTime, pm: bool) -> Option<NaiveTime> {
    use chrono::Timelike;
    let hour = time.hour();
    if hour == 0 || hour > 12 {
        return None;
    }
    let hour = match (hour, pm) {
        (12, false) => 0,
        (12, true) => 12,
        (h, true) => h + 12,
        (h, false) => h,
    };
    time.with_hour(hour)
}

/// `z`, `utc`, `gmt`, `+02`, `-0530`, `+05:30`: seconds east of UTC.
fn read_offset(word: &str) -> Option<i32> {
    if matches!(word, "z" | "utc" | "gmt" | "zulu") {
        return Some(0);
    }
    let sign = match word.chars().next()? {
        '+' => 1,
        '-' => -1,
        _ => return None,
    };
    let digits = &word[1..];
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits.len() == 4 => (&digits[..2], &digits[2..]),
        None => (digits, "0"),
    };
    if hours.is_empty() || hours.len() > 2 || !hours.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let hours: i32 = hours.parse().ok()?;
    let minutes: i32 = minutes.parse().ok()?;
    (hours <= 15 && minutes < 60).then_some(sign * (hours * 3600 + minutes * 60))
}

/// PostgreSQL's interval text (`1 year 2 mons 3 days 04:05:06`, `-1:30`, `@ 2 hours`, `1 day
/// ago`, `3 mins`, ISO 8601's `P1Y2M3DT4H5M6S`) as the units-and-numbers text Arrow reads
/// (`1 years 2 months 3 days 4 hours 5 minutes 6 seconds`); 22007 for what is none of these.
pub fn interval_text(text: &str) -> Result<String> {
    let syntax = || Error::data("22007", format!("invalid input syntax for type interval: \"{text}\""));
    let lower = text.trim().to_ascii_lowercase();
    let lower = lower.strip_prefix('@').unwrap_or(&lower).trim().to_string();
    if let Some(iso) = lower.strip_prefix('p') {
        return iso_interval(iso).ok_or_else(syntax);
    }
    let mut parts: Vec<(String, &str)> = vec![];
    let words: Vec<&str> = lower.split_whitespace().collect();
    let mut ago = false;
    let mut i = 0;
    while let Some(word) = words.get(i) {
        i += 1;
        if *word == "ago" && i == words.len() {
            ago = true;
            continue;
        }
        if word.contains(':') {
            // [-]H:MM[:SS[.ffffff]]
            let (sign, clock) = match word.strip_prefix('-') {
                Some(rest) => ("-", rest),
                None => ("", word.strip_prefix('+').unwrap_or(word)),
            };
            let fields: Vec<&str> = clock.split(':').collect();
            let number = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit() || c == '.');
            if fields.len() > 3 || !fields.iter().all(|f| number(f)) {
                return Err(syntax());
            }
            for (field, unit) in fields.iter().zip(["hours", "minutes", "seconds"]) {
                parts.push((format!("{sign}{field}"), unit));
            }
            continue;
        }
        // A number, with its unit joined (`3d`) or as the next word (`3 days`).
        let digits_end =
            word.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(word.len());
        let (number, unit) = word.split_at(digits_end);
        if number.is_empty() || number.parse::<f64>().is_err() {
            return Err(syntax());
        }
        let unit = if unit.is_empty() {
            match words.get(i) {
                Some(next) if next.chars().all(|c| c.is_ascii_alphabetic()) => {
                    i += 1;
                    *next
                }
                // A bare number is seconds.
                _ => "seconds",
            }
        } else {
            unit
        };
        let unit = match unit {
            "millennium" | "millennia" | "millenniums" => "millennium",
            "century" | "centuries" | "c" => "century",
            "decade" | "decades" | "dec" | "decs" => "decade",
            "y" | "yr" | "yrs" | "year" | "years" => "years",
            "mon" | "mons" | "month" | "months" => "months",
            "w" | "week" | "weeks" => "weeks",
            "d" | "day" | "days" => "days",
            "h" | "hr" | "hrs" | "hour" | "hours" => "hours",
            "m" | "min" | "mins" | "minute" | "minutes" => "minutes",
            "s" | "sec" | "secs" | "second" | "seconds" => "seconds",
            "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => "milliseconds",
            "us" | "usec" | "usecs" | "microsecond" | "microseconds" => "microseconds",
            _ => return Err(syntax()),
        };
        parts.push((number.to_string(), unit));
    }
    if parts.is_empty() {
        return Err(syntax());
    }
    Ok(parts
        .into_iter()
        .map(|(number, unit)| {
            let number = match (ago, number.strip_prefix('-')) {
                (false, _) => number,
                (true, Some(positive)) => positive.to_string(),
                (true, None) => format!("-{}", number.trim_start_matches('+')),
            };
            format!("{number} {unit}")
        })
        .collect::<Vec<_>>()
        .join(" "))
}

/// A text column read as intervals (`data_type`, Arrow's `Interval`), each value as
/// [`interval_text`] reads PostgreSQL's forms; 22007 for one that is none of them.
pub fn interval_column_from_text(
    column: &arrow::array::ArrayRef,
    data_type: &arrow::datatypes::DataType,
) -> Result<arrow::array::ArrayRef> {
    use arrow::array::{AsArray, StringArray};
    let text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)?;
    let units: StringArray =
        text.as_string::<i32>().iter().map(|v| v.map(interval_text).transpose()).collect::<Result<_>>()?;
    let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
    arrow::compute::cast_with_options(&units, data_type, &options)
        .map_err(|e| Error::data("22015", format!("interval out of range: {e}")))
}

/// ISO 8601's duration after its `P`: `1Y2M3DT4H5M6S`, `T1H30M`, `2W`.
fn iso_interval(iso: &str) -> Option<String> {
    let mut parts = vec![];
    let mut number = String::new();
    let mut in_time = false;
    for c in iso.chars() {
        match c {
            't' => in_time = true,
            '0'..='9' | '.' | '-' => number.push(c),
            unit => {
                let unit = match (unit, in_time) {
                    ('y', false) => "years",
                    ('m', false) => "months",
                    ('w', false) => "weeks",
                    ('d', false) => "days",
                    ('h', true) => "hours",
                    ('m', true) => "minutes",
                    ('s', true) => "seconds",
                    _ => return None,
                };
                if number.is_empty() {
                    return None;
                }
                parts.push(format!("{} {unit}", std::mem::take(&mut number)));
            }
        }
    }
    (number.is_empty() && !parts.is_empty()).then(|| parts.join(" "))
}

/// A text column read as date/time `data_type` as a session's input functions read it: dates
/// in its `DateStyle` `order`, and a `timestamptz` without an offset in its time zone `zone`
/// (the instants are then labelled with `data_type`'s zone). Writes and casts read with it.
pub fn column_from_session_text(
    column: &arrow::array::ArrayRef,
    data_type: &arrow::datatypes::DataType,
    order: DateOrder,
    zone: &str,
) -> Result<arrow::array::ArrayRef> {
    use arrow::datatypes::DataType as T;
    // `now` and `today` are the session's local time and day.
    let utc = chrono::Utc::now();
    let now = match zone.parse::<arrow::array::timezone::Tz>() {
        Ok(tz) => {
            use chrono::Offset;
            let local = utc.with_timezone(&tz);
            (local.naive_local(), local.offset().fix().local_minus_utc())
        }
        Err(_) => (utc.naive_utc(), 0),
    };
    with_date_order(order, || match data_type {
        T::Timestamp(unit, Some(_)) => {
            let local = T::Timestamp(*unit, Some(zone.into()));
            Ok(arrow::compute::cast(&column_from_text_at(column, &local, now)?, data_type)?)
        }
        _ => column_from_text_at(column, data_type, now),
    })
}

/// A text column read as date/time `data_type` (Date32, Timestamp, Time64), each value as
/// [`parse`] reads it; `now`, `today` and the like are read at the clock's time (UTC).
pub fn column_from_text(
    column: &arrow::array::ArrayRef,
    data_type: &arrow::datatypes::DataType,
) -> Result<arrow::array::ArrayRef> {
    column_from_text_at(column, data_type, (chrono::Utc::now().naive_utc(), 0))
}

/// [`column_from_text`] with `now` (a local time and its offset from UTC in seconds) for
/// `now`, `today` and the like.
fn column_from_text_at(
    column: &arrow::array::ArrayRef,
    data_type: &arrow::datatypes::DataType,
    (now, offset): (chrono::NaiveDateTime, i32),
) -> Result<arrow::array::ArrayRef> {
    use arrow::array::{Array, AsArray, StringBuilder};
    use arrow::datatypes::DataType as T;
    let kind = match data_type {
        T::Date32 | T::Date64 => Kind::Date,
        T::Timestamp(_, Some(_)) => Kind::TimestampTz,
        T::Timestamp(_, None) => Kind::Timestamp,
        T::Time32(_) | T::Time64(_) => Kind::Time,
        _ => return Err(Error::Internal(format!("no date/time type: {data_type}"))),
    };
    let text = arrow::compute::cast(column, &T::Utf8)?;
    let text = text.as_string::<i32>();
    let mut values = StringBuilder::with_capacity(text.len(), text.value_data().len() + 8 * text.len());
    for value in text.iter() {
        match value {
            None => values.append_null(),
            Some(value) => match parse(value, kind)? {
                Input::Value(v) => values.append_value(v),
                Input::Now => values.append_value(render(kind, now, Some(offset))),
                Input::Today(days) => {
                    let day = now.date() + chrono::Duration::days(i64::from(days));
                    values.append_value(render(kind, day.and_time(NaiveTime::MIN), Some(offset)))
                }
            },
        }
    }
    let values: arrow::array::ArrayRef = std::sync::Arc::new(values.finish());
    debug_assert_eq!(values.len(), column.len());
    Ok(arrow::compute::cast(&values, data_type)?)
}

/// Intervals as PostgreSQL prints them (IntervalStyle `postgres`): `1 year 2 mons 3 days
/// 04:05:06.5`, `-1 days`, `00:00:00`.
/// Clients get them so, and so does a cast of an interval to text.
pub fn interval_column_text(column: &arrow::array::ArrayRef) -> Result<arrow::array::ArrayRef> {
    use arrow::array::AsArray;
    let unit = arrow::datatypes::IntervalUnit::MonthDayNano;
    let values = arrow::compute::cast(column, &arrow::datatypes::DataType::Interval(unit))?;
    let values = values.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
    Ok(std::sync::Arc::new(
        values
            .iter()
            .map(|v| v.map(|v| interval_output(v.months, v.days, v.nanoseconds)))
            .collect::<arrow::array::StringArray>(),
    ))
}

/// One interval's text.
pub fn interval_output(months: i32, days: i32, nanos: i64) -> String {
    let mut parts = vec![];
    // After a negative field, a positive one shows its sign (`-1 mons +01:30:00`).
    let mut after_negative = false;
    let mut unit = |n: i64, one: &str, many: &str| {
        if n != 0 {
            let sign = if after_negative && n > 0 { "+" } else { "" };
            parts.push(format!("{sign}{n} {}", if n == 1 { one } else { many }));
            after_negative = n < 0;
        }
    };
    unit(i64::from(months / 12), "year", "years");
    unit(i64::from(months % 12), "mon", "mons");
    unit(i64::from(days), "day", "days");
    if nanos != 0 || parts.is_empty() {
        let sign = if nanos < 0 {
            "-"
        } else if after_negative {
            "+"
        } else {
            ""
        };
        let micros = nanos.unsigned_abs() / 1_000;
        let (seconds, fraction) = (micros / 1_000_000, micros % 1_000_000);
        let mut clock = format!("{sign}{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
        if fraction != 0 {
            clock.push_str(format!(".{fraction:06}").trim_end_matches('0'));
        }
        parts.push(clock);
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_print_as_postgresql_prints_them() {
        let hour: i64 = 3_600_000_000_000;
        assert_eq!(interval_output(14, 3, 4 * hour + 306_000_000_000), "1 year 2 mons 3 days 04:05:06");
        assert_eq!(interval_output(0, -1, 0), "-1 days");
        assert_eq!(interval_output(0, 0, 0), "00:00:00");
        assert_eq!(interval_output(0, 0, -hour - hour / 2), "-01:30:00");
        assert_eq!(interval_output(0, 0, hour + 15_500_000_000), "01:00:15.5");
        assert_eq!(interval_output(0, 1, 27 * hour), "1 day 27:00:00");
        assert_eq!(interval_output(-12, 0, 0), "-1 years");
        assert_eq!(interval_output(-1, 0, hour + hour / 2), "-1 mons +01:30:00");
        assert_eq!(interval_output(-12, 5, -hour), "-1 years +5 days -01:00:00");
        assert_eq!(interval_output(2, -3, hour), "2 mons -3 days +01:00:00");
    }

    fn value(text: &str, kind: Kind) -> String {
        match parse(text, kind) {
            Ok(Input::Value(v)) => v,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn reads_what_postgresql_reads() {
        assert_eq!(value("2024-01-01 10:00", Kind::Timestamp), "2024-01-01 10:00:00");
        assert_eq!(value("2024-01-01T10:00:05.5", Kind::Timestamp), "2024-01-01 10:00:05.500");
        assert_eq!(value("20240102", Kind::Date), "2024-01-02");
        assert_eq!(value("1/8/1999", Kind::Date), "1999-01-08");
        assert_eq!(value("January 8, 1999", Kind::Date), "1999-01-08");
        assert_eq!(value("8 Jan 1999", Kind::Date), "1999-01-08");
        assert_eq!(value("2024-01-01 10:00:00+02", Kind::TimestampTz), "2024-01-01T10:00:00+02:00");
        assert_eq!(value("2024-01-01 10:00:00 -05:30", Kind::TimestampTz), "2024-01-01T10:00:00-05:30");
        assert_eq!(value("2024-01-01 10:00 UTC", Kind::TimestampTz), "2024-01-01T10:00:00+00:00");
        assert_eq!(value("2024-07-01 10:00 Europe/Paris", Kind::TimestampTz), "2024-07-01T10:00:00+02:00");
        assert_eq!(value("2024-01-01 10:00:00+02", Kind::Timestamp), "2024-01-01 10:00:00");
        assert_eq!(value("2024-01-01 10:00", Kind::TimestampTz), "2024-01-01T10:00:00");
        assert_eq!(value("epoch", Kind::Timestamp), "1970-01-01 00:00:00");
        assert_eq!(value("epoch", Kind::TimestampTz), "1970-01-01T00:00:00+00:00");
        assert_eq!(value("10:30", Kind::Time), "10:30:00");
        assert_eq!(value("2024-01-01 10:30:01", Kind::Time), "10:30:01");
        assert_eq!(value("2024-01-01 10:30", Kind::Date), "2024-01-01");
        assert_eq!(value("1:05 pm", Kind::Time), "13:05:00");
        assert_eq!(parse("Yesterday", Kind::Date).ok(), Some(Input::Today(-1)));
        assert_eq!(parse("now", Kind::TimestampTz).ok(), Some(Input::Now));
    }

    #[test]
    fn reads_dates_in_the_date_style_order() {
        let read = |order, text: &str| with_date_order(order, || parse(text, Kind::Date).map(|i| format!("{i:?}")));
        let value = |order, text: &str| read(order, text).unwrap();
        let state = |order, text: &str| read(order, text).unwrap_err().sqlstate().to_string();
        let (mdy, dmy, ymd) = (DateOrder::MonthDayYear, DateOrder::DayMonthYear, DateOrder::YearMonthDay);
        // As PostgreSQL 15 reads them.
        assert_eq!(value(mdy, "05/01/2024"), r#"Value("2024-05-01")"#);
        assert_eq!(value(dmy, "05/01/2024"), r#"Value("2024-01-05")"#);
        assert_eq!(state(ymd, "05/01/2024"), "22008");
        assert_eq!(value(ymd, "24/01/05"), r#"Value("2024-01-05")"#);
        assert_eq!(value(ymd, "2024/01/05"), r#"Value("2024-01-05")"#);
        assert_eq!(value(mdy, "jan-05-24"), r#"Value("2024-01-05")"#);
        assert_eq!(value(ymd, "jan-05-24"), r#"Value("2005-01-24")"#);
        assert_eq!(value(dmy, "24-jan-05"), r#"Value("2005-01-24")"#);
        assert_eq!(value(ymd, "24-jan-05"), r#"Value("2024-01-05")"#);
        assert_eq!(value(ymd, "05/jan/2024"), r#"Value("2024-01-05")"#);
        assert_eq!(state(mdy, "13/01/2024"), "22008");
        assert_eq!(state(dmy, "01/13/2024"), "22008");
    }

    #[test]
    fn reads_intervals_as_postgresql_does() {
        let read = |text: &str| interval_text(text).unwrap();
        assert_eq!(read("1 year 2 months 3 days 04:05:06"), "1 years 2 months 3 days 04 hours 05 minutes 06 seconds");
        assert_eq!(read("-1:30"), "-1 hours -30 minutes");
        assert_eq!(read("@ 2 hours"), "2 hours");
        assert_eq!(read("1 day ago"), "-1 days");
        assert_eq!(read("3 mins"), "3 minutes");
        assert_eq!(read("1 week 2 d"), "1 weeks 2 days");
        assert_eq!(read("1.5 hours"), "1.5 hours");
        assert_eq!(read("PT1H30M"), "1 hours 30 minutes");
        assert_eq!(read("P1Y2M3DT4H5M6S"), "1 years 2 months 3 days 4 hours 5 minutes 6 seconds");
        assert_eq!(read("10"), "10 seconds");
        assert_eq!(interval_text("banana").unwrap_err().sqlstate(), "22007");
        assert_eq!(interval_text("P1X").unwrap_err().sqlstate(), "22007");
    }

    #[test]
    fn refuses_what_postgresql_refuses() {
        let state = |text: &str, kind| parse(text, kind).err().map(|e| e.sqlstate().to_string());
        assert_eq!(state("2024-02-30", Kind::Date).as_deref(), Some("22008"));
        assert_eq!(state("2024-13-01", Kind::Date).as_deref(), Some("22008"));
        assert_eq!(state("banana", Kind::Date).as_deref(), Some("22007"));
        assert_eq!(state("2024-01-01 25:00", Kind::Timestamp).as_deref(), Some("22008"));
        assert_eq!(state("2024-01-01 10:00 Mars/Olympus", Kind::TimestampTz).as_deref(), Some("22023"));
        assert_eq!(state("infinity", Kind::Timestamp).as_deref(), Some("0A000"));
        assert_eq!(state("", Kind::Date).as_deref(), Some("22007"));
    }
}
