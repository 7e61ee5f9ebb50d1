//! COPY FROM: parsing the rows a client sends with `COPY ... FROM STDIN` or a server-side file, in
//! the text and CSV formats (binary is in [`super::copy_binary`]); the options of every COPY.
//!
//! Incoming data is parsed as it arrives, a chunk at a time, into text columns; complete batches
//! are cast to the table's types, so memory holds one batch of text plus the typed rows. The rows
//! are written in one commit when the client finishes: a COPY is atomic.
//!
//! Text format: rows end at `\n`, fields are separated by the delimiter (tab), `\N` is NULL, and
//! backslash escapes (`\t`, `\n`, `\\`, ...) are decoded. CSV: RFC 4180 quoting, an unquoted
//! empty field is NULL (as in Postgres), and an optional header line is skipped.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// Rows per batch parsed from COPY data.
pub const COPY_BATCH_ROWS: usize = 65_536;
/// Longest line accepted (a guard against unbounded buffering).
pub const COPY_LINE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// The data format of a COPY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    Binary,
}

/// The options of a COPY.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: u8,
    pub header: bool,
    pub null: String,
    pub quote: u8,
    pub escape: u8,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            format: CopyFormat::Text,
            delimiter: b'\t',
            header: false,
            null: "\\N".into(),
            quote: b'"',
            escape: b'"',
        }
    }
}

impl CopyOptions {
    /// Switches to CSV, with CSV's defaults unless set explicitly later.
    pub fn csv(&mut self) {
        self.format = CopyFormat::Csv;
        if self.delimiter == b'\t' {
            self.delimiter = b',';
        }
        if self.null == "\\N" {
            self.null = String::new();
        }
    }
}

/// The parser of a COPY FROM: text and CSV become text columns (cast to the table's types when
/// the COPY ends), binary becomes typed columns directly.
pub enum CopyDecoder {
    Text(CopyParser),
    Binary(super::copy_binary::BinaryCopyParser),
}

impl CopyDecoder {
    /// A parser for `options.format` into the columns of `target`.
    pub fn new(target: &SchemaRef, options: CopyOptions) -> Result<Self, String> {
        Ok(match options.format {
            CopyFormat::Binary => CopyDecoder::Binary(super::copy_binary::BinaryCopyParser::new(target.clone())?),
            _ => {
                let names: Vec<String> = target.fields().iter().map(|f| f.name().clone()).collect();
                CopyDecoder::Text(CopyParser::new(&names, options))
            }
        })
    }

    pub fn push(&mut self, data: &[u8]) -> Result<Vec<RecordBatch>, String> {
        match self {
            CopyDecoder::Text(parser) => parser.push(data),
            CopyDecoder::Binary(parser) => parser.push(data),
        }
    }

    pub fn finish(&mut self) -> Result<Vec<RecordBatch>, String> {
        match self {
            CopyDecoder::Text(parser) => parser.finish(),
            CopyDecoder::Binary(parser) => parser.finish(),
        }
    }

    /// Whether the batches still need a cast from text.
    pub fn yields_text(&self) -> bool {
        matches!(self, CopyDecoder::Text(_))
    }
}

/// Parses COPY data into batches of text columns.
pub struct CopyParser {
    options: CopyOptions,
    columns: usize,
    pending: Vec<u8>,
    builders: Vec<StringBuilder>,
    rows: usize,
    header_skipped: bool,
    schema: SchemaRef,
    /// Rows parsed so far (for error messages).
    pub line: usize,
}

impl CopyParser {
    pub fn new(names: &[String], options: CopyOptions) -> Self {
        let schema =
            Arc::new(Schema::new(names.iter().map(|n| Field::new(n, DataType::Utf8, true)).collect::<Vec<_>>()));
        Self {
            columns: names.len(),
            builders: (0..names.len()).map(|_| StringBuilder::new()).collect(),
            header_skipped: !options.header,
            options,
            pending: Vec::new(),
            rows: 0,
            schema,
            line: 0,
        }
    }

    /// Takes a chunk of data; returns the batches completed by it.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<RecordBatch>, String> {
        self.pending.extend_from_slice(data);
        let mut batches = Vec::new();
        let mut start = 0;
        while let Some(end) = self.record_end(start) {
            let record = self.pending.get(start..end).unwrap_or_default().to_vec();
            start = end + 1;
            self.record(&record)?;
            if self.rows >= COPY_BATCH_ROWS {
                batches.push(self.take_batch()?);
            }
        }
        self.pending.drain(..start);
        if self.pending.len() > COPY_LINE_BYTES_MAX {
            return Err(format!("a COPY line is longer than {COPY_LINE_BYTES_MAX} bytes"));
        }
        Ok(batches)
    }

    /// Ends the data; returns the last batch.
    pub fn finish(&mut self) -> Result<Vec<RecordBatch>, String> {
        let mut rest = std::mem::take(&mut self.pending);
        while rest.last() == Some(&b'\r') {
            rest.pop();
        }
        // `\.` alone marks the end of data in the text format.
        if !rest.is_empty() && rest != b"\\." {
            self.record(&rest)?;
        }
        if self.rows == 0 {
            return Ok(vec![]);
        }
        Ok(vec![self.take_batch()?])
    }

    /// The end of the next complete record at or after `start`, if the buffer holds one.
    fn record_end(&self, start: usize) -> Option<usize> {
        match self.options.format {
            CopyFormat::Csv => {
                let mut quoted = false;
                for (i, &b) in self.pending.get(start..).unwrap_or_default().iter().enumerate() {
                    if b == self.options.quote {
                        quoted = !quoted;
                    } else if b == b'\n' && !quoted {
                        return Some(start + i);
                    }
                }
                None
            }
            _ => self.pending.get(start..).unwrap_or_default().iter().position(|&b| b == b'\n').map(|i| start + i),
        }
    }

    fn record(&mut self, record: &[u8]) -> Result<(), String> {
        self.line += 1;
        let record = record.strip_suffix(b"\r").unwrap_or(record);
        if !self.header_skipped {
            self.header_skipped = true;
            return Ok(());
        }
        if record == b"\\." {
            return Ok(());
        }
        let fields = match self.options.format {
            CopyFormat::Csv => split_csv(record, &self.options),
            _ => split_text(record, &self.options),
        }
        .map_err(|e| format!("line {}: {e}", self.line))?;
        if fields.len() != self.columns {
            return Err(format!("line {}: expected {} columns, found {}", self.line, self.columns, fields.len()));
        }
        for (builder, field) in self.builders.iter_mut().zip(fields) {
            match field {
                Some(text) => builder.append_value(text),
                None => builder.append_null(),
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn take_batch(&mut self) -> Result<RecordBatch, String> {
        let columns: Vec<ArrayRef> = self.builders.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef).collect();
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| e.to_string())
    }
}

fn split_text(record: &[u8], options: &CopyOptions) -> Result<Vec<Option<String>>, String> {
    let mut fields = Vec::new();
    for raw in record.split(|&b| b == options.delimiter) {
        if raw == options.null.as_bytes() {
            fields.push(None);
            continue;
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut bytes = raw.iter().copied();
        while let Some(byte) = bytes.next() {
            if byte != b'\\' {
                out.push(byte);
                continue;
            }
            match bytes.next() {
                // A backslash at the end stays.
                None => out.push(byte),
                Some(next) => out.push(match next {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'b' => 8,
                    b'f' => 12,
                    b'v' => 11,
                    b'\\' => b'\\',
                    other => other,
                }),
            }
        }
        fields.push(Some(String::from_utf8(out).map_err(|_| "invalid UTF-8".to_string())?));
    }
    Ok(fields)
}

fn split_csv(record: &[u8], options: &CopyOptions) -> Result<Vec<Option<String>>, String> {
    let mut fields = Vec::new();
    let mut field = Vec::new();
    let mut quoted_field = false;
    let mut in_quotes = false;
    let mut i = 0;
    while let Some(&b) = record.get(i) {
        let next = record.get(i + 1).copied();
        if in_quotes {
            if b == options.escape && next == Some(options.quote) && options.escape != options.quote {
                field.push(options.quote);
                i += 2;
                continue;
            }
            if b == options.quote {
                if next == Some(options.quote) && options.escape == options.quote {
                    field.push(options.quote);
                    i += 2;
                    continue;
                }
                in_quotes = false;
            } else {
                field.push(b);
            }
        } else if b == options.quote {
            in_quotes = true;
            quoted_field = true;
        } else if b == options.delimiter {
            fields.push(finish_csv_field(&mut field, quoted_field, options)?);
            quoted_field = false;
        } else {
            field.push(b);
        }
        i += 1;
    }
    if in_quotes {
        return Err("unterminated quoted field".into());
    }
    fields.push(finish_csv_field(&mut field, quoted_field, options)?);
    Ok(fields)
}

fn finish_csv_field(field: &mut Vec<u8>, quoted: bool, options: &CopyOptions) -> Result<Option<String>, String> {
    let bytes = std::mem::take(field);
    if !quoted && bytes == options.null.as_bytes() {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|_| "invalid UTF-8".to_string())
}

/// Postgres text forms that Arrow's casts do not accept, made acceptable: booleans `t`/`f`,
/// `bytea` hex (`\x...`), zones written `+hh` without minutes, and PostgreSQL's intervals.
pub fn normalize_text(value: &str, target: &DataType) -> String {
    match target {
        DataType::Boolean => match value.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" | "y" => "true".into(),
            "f" | "false" | "no" | "off" | "0" | "n" => "false".into(),
            other => other.to_string(),
        },
        DataType::Timestamp(_, Some(_)) => {
            let zone_hours = match value.as_bytes() {
                [_, .., sign, tens, ones] => {
                    (*sign == b'+' || *sign == b'-') && tens.is_ascii_digit() && ones.is_ascii_digit()
                }
                _ => false,
            };
            if zone_hours {
                format!("{value}:00")
            } else {
                value.to_string()
            }
        }
        // `1 day 02:00`, `3 mons`, `P1D` as the units Arrow reads (an error stays Arrow's).
        DataType::Interval(_) => sluice::datetime::interval_text(value).unwrap_or_else(|_| value.to_string()),
        _ => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn parses_text_across_chunks() {
        let mut parser = CopyParser::new(&names(3), CopyOptions::default());
        assert!(parser.push(b"1\ta\\tb\t\\N\n2\tx").unwrap().is_empty());
        let batches = parser.push(b"y\tz\n").unwrap();
        assert!(batches.is_empty());
        let batches = parser.finish().unwrap();
        let batch = &batches[0];
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "a\tb");
        assert!(batch.column(2).is_null(0));
        assert_eq!(batch.column(1).as_string::<i32>().value(1), "xy");
    }

    #[test]
    fn parses_csv_with_quotes_and_header() {
        let mut options = CopyOptions::default();
        options.csv();
        options.header = true;
        let mut parser = CopyParser::new(&names(2), options);
        parser.push(b"a,b\n1,\"x,\"\"y\"\"\nz\"\n2,\n3,\"\"\n").unwrap();
        let batch = parser.finish().unwrap().remove(0);
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "x,\"y\"\nz");
        assert!(batch.column(1).is_null(1));
        assert_eq!(batch.column(1).as_string::<i32>().value(2), "");
        let mut bad = CopyParser::new(&names(2), CopyOptions::default());
        assert!(bad.push(b"1\t2\t3\n").is_err());
    }
}
