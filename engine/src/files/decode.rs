//! One file's bytes to rows: CSV and JSON lines become text columns (typed later, against the
//! table, see [`super::rows`]), Parquet keeps its own types. What cannot be read becomes a dead
//! letter with the file, the line and the error: a CSV record with the wrong number of fields or
//! invalid UTF-8, a JSON line that is not a JSON object, a Parquet file that cannot be opened
//! (truncated, say: the whole file is one dead letter).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayBuilder, ArrayRef, RecordBatch, RecordBatchReader, StringBuilder};
use bytes::Bytes;
use serde_json::Value;

use super::listing::FoundFile;
use super::options::{FileFormat, FileOptions, Sniffed};
use super::sniff::{self, TypeGuess};

/// How much of a bad record's text a dead letter keeps.
const RAW_TEXT_MAX: usize = 4096;

/// A record or file that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The line (1-based) of a bad record; none when the whole file failed.
    pub line: Option<i64>,
    pub raw: Option<String>,
    pub error: String,
}

/// One column of a file.
#[derive(Debug, Clone)]
pub struct FileColumn {
    pub name: String,
    /// Text for CSV and JSON; Parquet's own type.
    pub values: ArrayRef,
    /// Which type the values would have as a new column.
    pub guess: TypeGuess,
}

/// A file's rows (before they meet a table) and its dead letters.
#[derive(Debug, Clone)]
pub struct FileRows {
    pub file: FoundFile,
    pub columns: Vec<FileColumn>,
    /// The line (CSV, JSON) or position (Parquet), 1-based, of each row.
    pub lines: Vec<i64>,
    pub dead: Vec<DeadLetter>,
}

impl FileRows {
    fn empty(file: FoundFile) -> Self {
        Self { file, columns: vec![], lines: vec![], dead: vec![] }
    }

    pub fn failed(file: FoundFile, error: String) -> Self {
        Self { dead: vec![DeadLetter { line: None, raw: None, error }], ..Self::empty(file) }
    }

    pub fn rows(&self) -> usize {
        self.lines.len()
    }
}

fn raw_text(bytes: &[u8]) -> String {
    let end = bytes.len().min(RAW_TEXT_MAX);
    String::from_utf8_lossy(bytes.get(..end).unwrap_or(bytes)).trim_end_matches(['\r', '\n']).to_string()
}

/// Reads one file.
pub fn decode(file: FoundFile, bytes: Bytes, options: &FileOptions) -> FileRows {
    match options.format {
        FileFormat::Csv => decode_csv(file, &bytes, options),
        FileFormat::Json => decode_json(file, &bytes, options),
        FileFormat::Parquet => decode_parquet(file, bytes),
    }
}

/// Column names made unique (a repeated name gets `_2`, `_3`, ...), empty ones `_c<i>` as Spark.
fn unique_names(names: Vec<String>) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let name = if name.is_empty() { format!("_c{i}") } else { name };
            let count = seen.entry(name.to_lowercase()).or_insert(0);
            *count += 1;
            if *count == 1 {
                name
            } else {
                format!("{name}_{count}")
            }
        })
        .collect()
}

fn decode_csv(file: FoundFile, bytes: &[u8], options: &FileOptions) -> FileRows {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return FileRows::empty(file);
    }
    let delimiter = match options.delimiter {
        Sniffed::Given(d) => d,
        Sniffed::Auto => sniff::delimiter(bytes, options.quote, options.escape),
    };
    let header = match options.header {
        Sniffed::Given(h) => h,
        Sniffed::Auto => sniff::has_header(bytes, delimiter, options.quote, options.escape),
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .quote(options.quote)
        .escape(options.escape)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    let mut out = FileRows::empty(file);
    let mut names: Option<Vec<String>> = None;
    let mut builders: Vec<StringBuilder> = Vec::new();
    let mut guesses: Vec<TypeGuess> = Vec::new();
    let mut start = 0usize;
    // The lines before `start` (the csv reader's own count leaves out blank lines).
    let mut lines_before = 0i64;
    loop {
        let line = lines_before + 1;
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let raw = bytes.get(start..).map(raw_text);
                out.dead.push(DeadLetter { line: Some(line), raw, error: format!("unreadable CSV: {e}") });
                break;
            }
        }
        let end = usize::try_from(reader.position().byte()).unwrap_or(bytes.len());
        let region = bytes.get(start..end).unwrap_or_default();
        // The record starts after the blank lines the reader skipped.
        let leading = region.iter().take_while(|b| matches!(b, b'\n' | b'\r')).count();
        let raw = region.get(leading..).unwrap_or_default();
        let record_line = lines_before + 1 + region.iter().take(leading).filter(|b| **b == b'\n').count() as i64;
        lines_before += region.iter().filter(|b| **b == b'\n').count() as i64;
        start = end;
        // A blank line.
        if record.len() == 1 && record.get(0).is_some_and(|f| f.iter().all(u8::is_ascii_whitespace)) {
            continue;
        }
        let width = match &names {
            Some(n) => n.len(),
            None => {
                let first: Vec<String> = if header {
                    record.iter().map(|f| String::from_utf8_lossy(f).trim().to_string()).collect()
                } else {
                    (0..record.len()).map(|i| format!("_c{i}")).collect()
                };
                let first = unique_names(first);
                builders = first.iter().map(|_| StringBuilder::with_capacity(1024, 16 * 1024)).collect();
                guesses = vec![if options.infer_types { TypeGuess::default() } else { TypeGuess::text() }; first.len()];
                let width = first.len();
                names = Some(first);
                if header {
                    continue;
                }
                width
            }
        };
        if record.len() != width {
            out.dead.push(DeadLetter {
                line: Some(record_line),
                raw: Some(raw_text(raw)),
                error: format!("expected {width} fields, found {}", record.len()),
            });
            continue;
        }
        let mut fields = Vec::with_capacity(width);
        for field in record.iter() {
            match std::str::from_utf8(field) {
                Ok(text) => fields.push(text),
                Err(_) => break,
            }
        }
        if fields.len() != width {
            out.dead.push(DeadLetter {
                line: Some(record_line),
                raw: Some(raw_text(raw)),
                error: "the record is not valid UTF-8".into(),
            });
            continue;
        }
        for ((builder, guess), text) in builders.iter_mut().zip(guesses.iter_mut()).zip(fields) {
            if text.is_empty() {
                builder.append_null();
            } else {
                if !guess.full() {
                    guess.add(text);
                }
                builder.append_value(text);
            }
        }
        out.lines.push(record_line);
    }
    out.columns = finish_columns(names.unwrap_or_default(), builders, guesses);
    out
}

fn finish_columns(names: Vec<String>, builders: Vec<StringBuilder>, guesses: Vec<TypeGuess>) -> Vec<FileColumn> {
    names
        .into_iter()
        .zip(builders)
        .zip(guesses)
        .map(|((name, mut builder), guess)| FileColumn { name, values: Arc::new(builder.finish()), guess })
        .collect()
}

/// A JSON value as the text of a text column: strings as they are, objects and arrays as JSON.
fn json_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(_) | Value::Object(_) => Some(value.to_string()),
    }
}

fn decode_json(file: FoundFile, bytes: &[u8], options: &FileOptions) -> FileRows {
    let mut out = FileRows::empty(file);
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut builders: Vec<StringBuilder> = Vec::new();
    let mut guesses: Vec<TypeGuess> = Vec::new();
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(bytes);
    for (number, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line_number = number as i64 + 1;
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let object = match serde_json::from_slice::<Value>(trimmed) {
            Ok(Value::Object(object)) => object,
            Ok(_) => {
                out.dead.push(DeadLetter {
                    line: Some(line_number),
                    raw: Some(raw_text(trimmed)),
                    error: "the line is JSON but not an object".into(),
                });
                continue;
            }
            Err(e) => {
                out.dead.push(DeadLetter {
                    line: Some(line_number),
                    raw: Some(raw_text(trimmed)),
                    error: format!("invalid JSON: {e}"),
                });
                continue;
            }
        };
        let row = out.lines.len();
        for (key, value) in &object {
            let column = match index.get(key) {
                Some(&c) => c,
                None => {
                    let mut builder = StringBuilder::new();
                    builder.append_nulls(row);
                    index.insert(key.clone(), names.len());
                    names.push(key.clone());
                    builders.push(builder);
                    guesses.push(if options.infer_types { TypeGuess::default() } else { TypeGuess::text() });
                    names.len() - 1
                }
            };
            let (Some(builder), Some(guess)) = (builders.get_mut(column), guesses.get_mut(column)) else { continue };
            // A key given twice in one object keeps its last value.
            if builder.len() > row {
                continue;
            }
            match json_text(value) {
                None => builder.append_null(),
                Some(text) => {
                    match value {
                        Value::String(_) if !guess.full() => {
                            let mut strings = TypeGuess::strings_only();
                            strings.add(&text);
                            // A string column never becomes a number or a boolean.
                            *guess = narrower_of_strings(*guess, strings);
                        }
                        Value::Array(_) | Value::Object(_) => *guess = TypeGuess::text(),
                        _ => guess.add(&text),
                    }
                    builder.append_value(text);
                }
            }
        }
        out.lines.push(line_number);
        for builder in &mut builders {
            if builder.len() <= row {
                builder.append_null();
            }
        }
    }
    out.columns = finish_columns(names, builders, guesses);
    out
}

/// A guess after a JSON string: what both the guess so far and the string allow.
fn narrower_of_strings(so_far: TypeGuess, string: TypeGuess) -> TypeGuess {
    so_far.intersect(&string)
}

fn decode_parquet(file: FoundFile, bytes: Bytes) -> FileRows {
    if bytes.is_empty() {
        return FileRows::empty(file);
    }
    let reader = match parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|builder| builder.with_batch_size(64 * 1024).build())
    {
        Ok(reader) => reader,
        Err(e) => return FileRows::failed(file, format!("cannot read the Parquet file: {e}")),
    };
    let schema = reader.schema();
    let mut batches: Vec<RecordBatch> = Vec::new();
    for batch in reader {
        match batch {
            Ok(batch) => batches.push(batch),
            Err(e) => return FileRows::failed(file, format!("cannot read the Parquet file: {e}")),
        }
    }
    let rows = match arrow::compute::concat_batches(&schema, &batches) {
        Ok(rows) => rows,
        Err(e) => return FileRows::failed(file, format!("cannot read the Parquet file: {e}")),
    };
    let count = rows.num_rows() as i64;
    let mut out = FileRows::empty(file);
    out.lines = (1..=count).collect();
    let names = unique_names(schema.fields().iter().map(|f| f.name().clone()).collect());
    out.columns = names
        .into_iter()
        .zip(rows.columns().iter())
        .map(|(name, values)| FileColumn { name, values: values.clone(), guess: TypeGuess::text() })
        .collect();
    out
}

impl FileColumn {
    /// The type this column gets as a new column of a table.
    pub fn new_column_type(&self) -> arrow::datatypes::DataType {
        use arrow::datatypes::DataType;
        match self.values.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => self.guess.data_type(),
            DataType::Null => DataType::Utf8,
            other => {
                if sluice_storage::schema::DataType::from_arrow(other).is_ok() {
                    other.clone()
                } else {
                    DataType::Utf8
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    fn file() -> FoundFile {
        FoundFile { relative: "a.csv".into(), location: "/x/a.csv".into(), size: 0, modified_ms: 0 }
    }

    fn options(format: &str) -> FileOptions {
        let map = [("path".to_string(), "x".to_string()), ("format".to_string(), format.to_string())];
        FileOptions::parse(&map.into_iter().collect()).unwrap()
    }

    #[test]
    fn csv_rows_and_dead_letters() {
        let text = b"id,name,amount\n1,ann,2.5\n2,bob\n\n3,\"c,d\",4\n4,\xff,1\n";
        let rows = decode(file(), Bytes::from_static(text), &options("csv"));
        assert_eq!(rows.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["id", "name", "amount"]);
        assert_eq!(rows.lines, vec![2, 5]);
        assert_eq!(rows.dead.len(), 2);
        assert_eq!(rows.dead[0].line, Some(3));
        assert!(rows.dead[0].error.contains("expected 3 fields, found 2"), "{:?}", rows.dead);
        assert_eq!(rows.dead[0].raw.as_deref(), Some("2,bob"));
        assert_eq!(rows.dead[1].line, Some(6));
        assert_eq!(rows.columns[1].values.as_string::<i32>().value(1), "c,d");
        assert_eq!(rows.columns[0].new_column_type(), arrow::datatypes::DataType::Int64);
        assert_eq!(rows.columns[2].new_column_type(), arrow::datatypes::DataType::Float64);
        let empty = decode(file(), Bytes::from_static(b""), &options("csv"));
        assert_eq!((empty.rows(), empty.dead.len(), empty.columns.len()), (0, 0, 0));
    }

    #[test]
    fn json_lines_and_dead_letters() {
        let text =
            b"{\"a\": 1, \"b\": \"x\"}\n{\"a\": 2.5, \"c\": {\"d\": 1}}\nnot json\n[1]\n{\"b\": \"2026-12-01\"}\n";
        let rows = decode(file(), Bytes::from_static(text), &options("json"));
        let names: Vec<&str> = rows.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(rows.lines, vec![1, 2, 5]);
        assert_eq!(rows.dead.iter().map(|d| d.line).collect::<Vec<_>>(), vec![Some(3), Some(4)]);
        assert_eq!(rows.columns[0].new_column_type(), arrow::datatypes::DataType::Float64);
        assert_eq!(rows.columns[1].new_column_type(), arrow::datatypes::DataType::Utf8);
        assert_eq!(rows.columns[2].values.as_string::<i32>().value(1), "{\"d\":1}");
        assert!(rows.columns[2].values.is_null(0));
    }

    #[test]
    fn a_truncated_parquet_file_is_one_dead_letter() {
        let rows = decode(file(), Bytes::from_static(b"PAR1\x00\x00garbage"), &options("parquet"));
        assert_eq!(rows.dead.len(), 1);
        assert!(rows.dead[0].line.is_none());
        assert!(rows.dead[0].error.contains("Parquet"), "{:?}", rows.dead);
    }
}
