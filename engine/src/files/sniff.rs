//! Sniffing: a CSV file's delimiter and header, and the type of a column from its text values
//! (what DuckDB's `read_csv_auto` and Auto Loader's `inferColumnTypes` do).
//!
//! Types are tried narrowest first: boolean (`true`/`false`), bigint, double precision, date
//! (`YYYY-MM-DD`), timestamp (`YYYY-MM-DD[ T]HH:MM:SS[.f]`), timestamp with time zone (the same
//! with `Z` or an offset); a column whose values fit none is text. Each test matches what Arrow's
//! cast from text accepts, so a value the sniffer called a number is read as one.

use std::sync::LazyLock;

use arrow::datatypes::{DataType, TimeUnit};
use chrono::format::{Item, Parsed, StrftimeItems};
use chrono::{DateTime, NaiveDate};

/// The timestamp layouts tried, parsed once (parsing a layout per value was most of the cost).
static TIMESTAMP_LAYOUTS: LazyLock<Vec<Vec<Item<'static>>>> = LazyLock::new(|| {
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"]
        .iter()
        .filter_map(|layout| StrftimeItems::new(layout).parse().ok())
        .collect()
});
static ZONED_LAYOUT: LazyLock<Vec<Item<'static>>> =
    LazyLock::new(|| StrftimeItems::new("%Y-%m-%d %H:%M:%S%.f%#z").parse().unwrap_or_default());

fn naive_timestamp(value: &str) -> bool {
    TIMESTAMP_LAYOUTS.iter().any(|items| {
        let mut parsed = Parsed::new();
        chrono::format::parse(&mut parsed, value, items.iter()).is_ok()
            && parsed.to_naive_datetime_with_offset(0).is_ok()
    })
}

fn zoned_timestamp(value: &str) -> bool {
    if DateTime::parse_from_rfc3339(value).is_ok() {
        return true;
    }
    let mut parsed = Parsed::new();
    chrono::format::parse(&mut parsed, value, ZONED_LAYOUT.iter()).is_ok() && parsed.to_datetime().is_ok()
}

/// `YYYY-MM-DD` at the start of a value.
fn date_prefix(value: &[u8]) -> bool {
    matches!(value.get(..10), Some([a, b, c, d, b'-', e, f, b'-', g, h])
        if [a, b, c, d, e, f, g, h].iter().all(|x| x.is_ascii_digit()))
}

/// How many values of a column (per file) the type is inferred from.
pub const SAMPLE_VALUES_MAX: usize = 1_000;
/// How many records the CSV dialect is sniffed from.
const SAMPLE_RECORDS_MAX: usize = 50;
/// The delimiters tried, in order of preference on a tie.
const DELIMITERS: [u8; 4] = [b',', b'\t', b';', b'|'];

pub fn timestamp_type(zoned: bool) -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, zoned.then(|| "UTC".into()))
}

/// Which types a column's values so far all fit.
#[derive(Debug, Clone, Copy)]
pub struct TypeGuess {
    boolean: bool,
    integer: bool,
    number: bool,
    date: bool,
    timestamp: bool,
    zoned: bool,
    seen: usize,
}

impl Default for TypeGuess {
    fn default() -> Self {
        Self { boolean: true, integer: true, number: true, date: true, timestamp: true, zoned: true, seen: 0 }
    }
}

fn is_numeric_text(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
}

impl TypeGuess {
    /// A guess for values that were JSON strings: only dates and timestamps are read out of them.
    pub fn strings_only() -> Self {
        Self { boolean: false, integer: false, number: false, ..Self::default() }
    }

    /// A guess that ends at text.
    pub fn text() -> Self {
        Self { boolean: false, integer: false, number: false, date: false, timestamp: false, zoned: false, seen: 0 }
    }

    /// What both guesses allow (values of one column from two places).
    pub fn intersect(&self, other: &TypeGuess) -> TypeGuess {
        TypeGuess {
            boolean: self.boolean && other.boolean,
            integer: self.integer && other.integer,
            number: self.number && other.number,
            date: self.date && other.date,
            timestamp: self.timestamp && other.timestamp,
            zoned: self.zoned && other.zoned,
            seen: self.seen.saturating_add(other.seen),
        }
    }

    pub fn full(&self) -> bool {
        self.seen >= SAMPLE_VALUES_MAX
    }

    pub fn add(&mut self, value: &str) {
        if value.is_empty() || self.full() {
            return;
        }
        self.seen += 1;
        if self.boolean {
            self.boolean = value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false");
        }
        if self.integer {
            self.integer = value.parse::<i64>().is_ok();
        }
        if self.number {
            self.number = is_numeric_text(value) && value.parse::<f64>().is_ok();
        }
        let date_like = date_prefix(value.as_bytes());
        if self.date {
            self.date = date_like && value.len() == 10 && NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok();
        }
        if self.timestamp {
            self.timestamp = date_like && value.len() > 10 && naive_timestamp(value);
        }
        if self.zoned {
            self.zoned = date_like && value.len() > 10 && zoned_timestamp(value);
        }
    }

    /// The type of the values seen (text when none was).
    pub fn data_type(&self) -> DataType {
        if self.seen == 0 {
            return DataType::Utf8;
        }
        if self.boolean {
            DataType::Boolean
        } else if self.integer {
            DataType::Int64
        } else if self.number {
            DataType::Float64
        } else if self.date {
            DataType::Date32
        } else if self.timestamp {
            timestamp_type(false)
        } else if self.zoned {
            timestamp_type(true)
        } else {
            DataType::Utf8
        }
    }
}

/// The type two files' guesses of one column agree on.
pub fn merge_types(a: &DataType, b: &DataType) -> DataType {
    match (a, b) {
        _ if a == b => a.clone(),
        (DataType::Int64, DataType::Float64) | (DataType::Float64, DataType::Int64) => DataType::Float64,
        (DataType::Date32, DataType::Timestamp(_, None)) | (DataType::Timestamp(_, None), DataType::Date32) => {
            timestamp_type(false)
        }
        _ => DataType::Utf8,
    }
}

fn records(sample: &[u8], delimiter: u8, quote: u8, escape: Option<u8>) -> Vec<csv::ByteRecord> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .quote(quote)
        .escape(escape)
        .from_reader(sample);
    let mut out = Vec::new();
    for record in reader.byte_records().take(SAMPLE_RECORDS_MAX) {
        match record {
            Ok(r) => out.push(r),
            Err(_) => break,
        }
    }
    out
}

/// The start of a file, cut at its last whole line (a sample for sniffing).
fn sample(bytes: &[u8]) -> &[u8] {
    const SAMPLE_BYTES: usize = 64 * 1024;
    if bytes.len() <= SAMPLE_BYTES {
        return bytes;
    }
    let head = bytes.get(..SAMPLE_BYTES).unwrap_or(bytes);
    match head.iter().rposition(|b| *b == b'\n') {
        Some(end) => head.get(..end).unwrap_or(head),
        None => head,
    }
}

/// The delimiter that splits the sample's records into the same number (more than one) of
/// fields most often; `,` when none does.
pub fn delimiter(bytes: &[u8], quote: u8, escape: Option<u8>) -> u8 {
    let sample = sample(bytes);
    let mut best = (b',', 0usize, 0usize);
    for candidate in DELIMITERS {
        let rows = records(sample, candidate, quote, escape);
        let Some(first) = rows.first().map(|r| r.len()) else { continue };
        if first < 2 {
            continue;
        }
        let agreeing = rows.iter().filter(|r| r.len() == first).count();
        // More agreeing records wins, then more fields.
        if (agreeing, first) > (best.1, best.2) {
            best = (candidate, agreeing, first);
        }
    }
    best.0
}

/// Whether the sample's first record is a header: some column's later values have a type its
/// first value does not fit, or (every column being text) its values are distinct names that do
/// not recur below them.
pub fn has_header(bytes: &[u8], delimiter: u8, quote: u8, escape: Option<u8>) -> bool {
    let rows = records(sample(bytes), delimiter, quote, escape);
    let Some(first) = rows.first() else { return false };
    let names: Vec<String> = first.iter().map(|f| String::from_utf8_lossy(f).trim().to_string()).collect();
    if names.iter().any(String::is_empty) {
        return false;
    }
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != names.len() {
        return false;
    }
    let rest: Vec<&csv::ByteRecord> = rows.iter().skip(1).filter(|r| r.len() == first.len()).collect();
    if rest.is_empty() {
        // One line: a header when no value of it is a number, a boolean or a date.
        return names.iter().all(|n| {
            let mut guess = TypeGuess::default();
            guess.add(n);
            guess.data_type() == DataType::Utf8
        });
    }
    let mut all_text = true;
    for (column, name) in names.iter().enumerate() {
        let mut guess = TypeGuess::default();
        for row in &rest {
            if let Some(value) = row.get(column) {
                guess.add(String::from_utf8_lossy(value).trim());
            }
        }
        let below = guess.data_type();
        if below != DataType::Utf8 {
            all_text = false;
            let mut own = guess;
            own.add(name);
            if own.data_type() != below {
                return true;
            }
        } else if rest.iter().any(|r| r.get(column).is_some_and(|v| String::from_utf8_lossy(v).trim() == name)) {
            return false;
        }
    }
    all_text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guess(values: &[&str]) -> DataType {
        let mut g = TypeGuess::default();
        for v in values {
            g.add(v);
        }
        g.data_type()
    }

    #[test]
    fn infers_types_narrowest_first() {
        assert_eq!(guess(&["1", "-2"]), DataType::Int64);
        assert_eq!(guess(&["1", "2.5", "1e3"]), DataType::Float64);
        assert_eq!(guess(&["true", "FALSE"]), DataType::Boolean);
        assert_eq!(guess(&["2026-12-01", "2026-01-31"]), DataType::Date32);
        assert_eq!(guess(&["2026-12-01 10:00:00", "2026-12-01T10:00:00.5"]), timestamp_type(false));
        assert_eq!(guess(&["2026-12-01T10:00:00Z", "2026-12-01 10:00:00+02:00"]), timestamp_type(true));
        assert_eq!(guess(&["1", "x"]), DataType::Utf8);
        assert_eq!(guess(&["inf"]), DataType::Utf8);
        assert_eq!(guess(&[]), DataType::Utf8);
        assert_eq!(merge_types(&DataType::Int64, &DataType::Float64), DataType::Float64);
        assert_eq!(merge_types(&DataType::Int64, &DataType::Date32), DataType::Utf8);
    }

    #[test]
    fn sniffs_delimiters_and_headers() {
        assert_eq!(delimiter(b"a;b;c\n1;2;3\n", b'"', None), b';');
        assert_eq!(delimiter(b"a\tb\n1\t2\n", b'"', None), b'\t');
        assert_eq!(delimiter(b"a,b\n\"x;y\",2\n", b'"', None), b',');
        assert!(has_header(b"id,name\n1,ann\n2,bob\n", b',', b'"', None));
        assert!(!has_header(b"1,ann\n2,bob\n", b',', b'"', None));
        assert!(has_header(b"name,city\nann,oslo\nbob,rome\n", b',', b'"', None));
        assert!(!has_header(b"ann,oslo\nann,rome\n", b',', b'"', None));
        assert!(has_header(b"id,name\n", b',', b'"', None));
        assert!(!has_header(b"1,2\n", b',', b'"', None));
    }
}
