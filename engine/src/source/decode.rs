//! Kafka records to Arrow: the rows of an ingesting (bronze) table and of its dead-letter table.
//!
//! A bronze row is `topic, partition, offset, timestamp, key, value, headers`; `key` and `value`
//! are text for the `json` and `text` formats (checked: valid JSON, valid UTF-8) and bytes for
//! `bytes`. Headers are a JSON object text (`{"name": "value"}`; a value that is not UTF-8 is
//! written as Postgres' `\x` hex text, a repeated name keeps every value in an array).
//! A record that fails its check becomes a dead-letter row instead: `topic, partition, offset,
//! timestamp, key, value` as raw bytes, and the error.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::options::PayloadFormat;
use crate::error::Result;

/// The columns of an ingesting table, as SQL (its CREATE TABLE body).
pub fn bronze_columns_sql(format: PayloadFormat) -> String {
    let payload = if format == PayloadFormat::Bytes { "bytea" } else { "text" };
    let debezium = if format == PayloadFormat::Debezium { ", op text, ts_ms bigint, image text" } else { "" };
    format!(
        "topic text NOT NULL, partition integer NOT NULL, \"offset\" bigint NOT NULL, \
         \"timestamp\" timestamptz, key {payload}, value {payload}, headers text{debezium}"
    )
}

/// The columns of a dead-letter table, as SQL.
pub const ERRORS_COLUMNS_SQL: &str = "topic text NOT NULL, partition integer NOT NULL, \"offset\" bigint NOT NULL, \
     \"timestamp\" timestamptz, key bytea, value bytea, error text NOT NULL";

/// One record, as the client hands it over.
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The arrow schema of the rows the builder makes (cast to the table's types when written).
fn bronze_schema(format: PayloadFormat) -> SchemaRef {
    let payload = if format == PayloadFormat::Bytes { DataType::Binary } else { DataType::Utf8 };
    let mut fields = vec![
        Field::new("topic", DataType::Utf8, false),
        Field::new("partition", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", timestamp_type(), true),
        Field::new("key", payload.clone(), true),
        Field::new("value", payload, true),
        Field::new("headers", DataType::Utf8, true),
    ];
    if format == PayloadFormat::Debezium {
        fields.push(Field::new("op", DataType::Utf8, true));
        fields.push(Field::new("ts_ms", DataType::Int64, true));
        fields.push(Field::new("image", DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

fn errors_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, false),
        Field::new("partition", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", timestamp_type(), true),
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("error", DataType::Utf8, false),
    ]))
}

/// The key or value column, text or bytes.
enum Payload {
    Text(StringBuilder),
    Bytes(BinaryBuilder),
}

impl Payload {
    fn new(format: PayloadFormat) -> Self {
        match format {
            PayloadFormat::Bytes => Payload::Bytes(BinaryBuilder::new()),
            _ => Payload::Text(StringBuilder::new()),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Payload::Text(b) => Arc::new(b.finish()),
            Payload::Bytes(b) => Arc::new(b.finish()),
        }
    }
}

/// A micro-batch: what the client delivered since the last one.
#[derive(Debug)]
pub struct DecodedBatch {
    pub rows: RecordBatch,
    pub errors: RecordBatch,
    /// The first and last offsets delivered per (topic, partition), good or bad.
    pub offsets: BTreeMap<(String, i32), OffsetRange>,
    /// Records delivered (rows + dead letters).
    pub messages: u64,
    pub bytes: u64,
}

/// The offsets a batch holds of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetRange {
    pub first: i64,
    pub last: i64,
}

/// Builds the rows of one micro-batch.
pub struct BatchBuilder {
    format: PayloadFormat,
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    key: Payload,
    value: Payload,
    headers: StringBuilder,
    /// `format 'debezium'`: each event's operation, time and row image.
    op: StringBuilder,
    ts_ms: Int64Builder,
    image: StringBuilder,
    bad: ErrorBuilder,
    /// Per partition seen: (topic, partition, offsets); a batch spans few partitions, so a scan
    /// (starting at the last one hit) finds a record's without allocating a key per record.
    ranges: Vec<(String, i32, OffsetRange)>,
    last_range: usize,
    messages: u64,
    bytes: u64,
}

#[derive(Default)]
struct ErrorBuilder {
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    key: BinaryBuilder,
    value: BinaryBuilder,
    error: StringBuilder,
    rows: usize,
}

impl BatchBuilder {
    pub fn new(format: PayloadFormat) -> Self {
        Self {
            format,
            topic: StringBuilder::new(),
            partition: Int32Builder::new(),
            offset: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new(),
            key: Payload::new(format),
            value: Payload::new(format),
            headers: StringBuilder::new(),
            op: StringBuilder::new(),
            ts_ms: Int64Builder::new(),
            image: StringBuilder::new(),
            bad: ErrorBuilder::default(),
            ranges: Vec::new(),
            last_range: 0,
            messages: 0,
            bytes: 0,
        }
    }

    /// Records delivered so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Key and value bytes delivered so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds a record; `headers` are its headers as (name, value) pairs.
    pub fn push<'h>(&mut self, record: RawRecord<'_>, headers: impl Iterator<Item = (&'h str, Option<&'h [u8]>)>) {
        self.messages += 1;
        self.bytes += (record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len)) as u64;
        self.note_offset(&record);
        if let Err(error) = self.check(&record) {
            self.bad.push(&record, &error);
            return;
        }
        if self.format == PayloadFormat::Debezium {
            match super::debezium::decode(record.key, record.value) {
                Ok(super::debezium::Event::Tombstone) => return,
                Ok(super::debezium::Event::Change { op, ts_ms, image }) => {
                    self.op.append_value(op);
                    self.ts_ms.append_option(ts_ms);
                    self.image.append_option(image);
                }
                Err(error) => {
                    self.bad.push(&record, &error);
                    return;
                }
            }
        }
        self.topic.append_value(record.topic);
        self.partition.append_value(record.partition);
        self.offset.append_value(record.offset);
        self.timestamp.append_option(record.timestamp_ms.map(|ms| ms.saturating_mul(1000)));
        for (column, bytes) in [(&mut self.key, record.key), (&mut self.value, record.value)] {
            match (column, bytes) {
                (Payload::Bytes(b), v) => b.append_option(v),
                // Checked as UTF-8 above.
                (Payload::Text(b), Some(v)) => b.append_option(std::str::from_utf8(v).ok()),
                (Payload::Text(b), None) => b.append_null(),
            }
        }
        let mut object: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        let mut any = false;
        for (name, value) in headers {
            any = true;
            let value = match value {
                None => serde_json::Value::Null,
                Some(v) => match std::str::from_utf8(v) {
                    Ok(text) => serde_json::Value::String(text.to_string()),
                    Err(_) => serde_json::Value::String(hex_text(v)),
                },
            };
            match object.get_mut(name) {
                Some(serde_json::Value::Array(values)) => values.push(value),
                Some(previous) => *previous = serde_json::Value::Array(vec![previous.take(), value]),
                None => {
                    object.insert(name.to_string(), value);
                }
            }
        }
        if any {
            self.headers.append_value(serde_json::to_string(&object).unwrap_or_default());
        } else {
            self.headers.append_null();
        }
    }

    fn note_offset(&mut self, record: &RawRecord<'_>) {
        let hit = |r: &(String, i32, OffsetRange)| r.1 == record.partition && r.0 == record.topic;
        let index = match self.ranges.get(self.last_range) {
            Some(r) if hit(r) => Some(self.last_range),
            _ => self.ranges.iter().position(hit),
        };
        match index {
            Some(i) => {
                if let Some((_, _, range)) = self.ranges.get_mut(i) {
                    range.first = range.first.min(record.offset);
                    range.last = range.last.max(record.offset);
                }
                self.last_range = i;
            }
            None => {
                let range = OffsetRange { first: record.offset, last: record.offset };
                self.ranges.push((record.topic.to_string(), record.partition, range));
                self.last_range = self.ranges.len() - 1;
            }
        }
    }

    /// Why a record cannot be a row, if it cannot.
    fn check(&self, record: &RawRecord<'_>) -> std::result::Result<(), String> {
        if self.format == PayloadFormat::Bytes {
            return Ok(());
        }
        if let Some(key) = record.key {
            std::str::from_utf8(key).map_err(|e| format!("the key is not valid UTF-8: {e}"))?;
        }
        let Some(value) = record.value else { return Ok(()) };
        match self.format {
            PayloadFormat::Json => serde_json::from_slice::<serde::de::IgnoredAny>(value)
                .map(|_| ())
                .map_err(|e| format!("the value is not valid JSON: {e}")),
            _ => std::str::from_utf8(value).map(|_| ()).map_err(|e| format!("the value is not valid UTF-8: {e}")),
        }
    }

    /// Ends the micro-batch.
    pub fn finish(&mut self) -> Result<DecodedBatch> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.topic.finish()),
            Arc::new(self.partition.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.timestamp.finish().with_timezone("UTC")),
            self.key.finish(),
            self.value.finish(),
            Arc::new(self.headers.finish()),
        ];
        if self.format == PayloadFormat::Debezium {
            columns.push(Arc::new(self.op.finish()));
            columns.push(Arc::new(self.ts_ms.finish()));
            columns.push(Arc::new(self.image.finish()));
        }
        let rows = RecordBatch::try_new(bronze_schema(self.format), columns)?;
        let errors = self.bad.finish()?;
        let batch = DecodedBatch {
            rows,
            errors,
            offsets: self.ranges.drain(..).map(|(topic, partition, range)| ((topic, partition), range)).collect(),
            messages: self.messages,
            bytes: self.bytes,
        };
        self.messages = 0;
        self.bytes = 0;
        self.last_range = 0;
        Ok(batch)
    }
}

impl ErrorBuilder {
    fn push(&mut self, record: &RawRecord<'_>, error: &str) {
        self.topic.append_value(record.topic);
        self.partition.append_value(record.partition);
        self.offset.append_value(record.offset);
        self.timestamp.append_option(record.timestamp_ms.map(|ms| ms.saturating_mul(1000)));
        self.key.append_option(record.key);
        self.value.append_option(record.value);
        self.error.append_value(error);
        self.rows += 1;
    }

    fn finish(&mut self) -> Result<RecordBatch> {
        self.rows = 0;
        Ok(RecordBatch::try_new(
            errors_schema(),
            vec![
                Arc::new(self.topic.finish()),
                Arc::new(self.partition.finish()),
                Arc::new(self.offset.finish()),
                Arc::new(self.timestamp.finish().with_timezone("UTC")),
                Arc::new(self.key.finish()),
                Arc::new(self.value.finish()),
                Arc::new(self.error.finish()),
            ],
        )?)
    }
}

/// Postgres' hex text of bytes: `\x0aff`.
fn hex_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("\\x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};

    use super::*;

    fn record<'a>(offset: i64, value: Option<&'a [u8]>) -> RawRecord<'a> {
        RawRecord { topic: "t", partition: 1, offset, timestamp_ms: Some(1_000), key: Some(b"k"), value }
    }

    #[test]
    fn good_records_become_rows_and_bad_ones_dead_letters() {
        let mut builder = BatchBuilder::new(PayloadFormat::Json);
        builder.push(record(5, Some(br#"{"a": 1}"#)), [("h", Some(&b"v"[..])), ("h", Some(&[0xff][..]))].into_iter());
        builder.push(record(6, Some(b"{not json")), std::iter::empty());
        builder.push(record(7, None), std::iter::empty());
        let batch = builder.finish().unwrap();
        assert_eq!(batch.messages, 3);
        assert_eq!(batch.rows.num_rows(), 2);
        assert_eq!(batch.errors.num_rows(), 1);
        assert_eq!(batch.offsets.get(&("t".to_string(), 1)), Some(&OffsetRange { first: 5, last: 7 }));
        let offsets = batch.rows.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(offsets.values(), &[5, 7]);
        assert_eq!(batch.rows.column(6).as_string::<i32>().value(0), r#"{"h":["v","\\xff"]}"#);
        assert!(batch.rows.column(6).is_null(1));
        assert_eq!(batch.errors.column(5).as_binary::<i32>().value(0), b"{not json");
        assert!(batch.errors.column(6).as_string::<i32>().value(0).contains("not valid JSON"));
        // The builder starts over.
        assert_eq!(builder.finish().unwrap().messages, 0);
    }

    #[test]
    fn text_checks_utf8_and_bytes_take_anything() {
        let mut text = BatchBuilder::new(PayloadFormat::Text);
        text.push(record(1, Some(&[0xc3, 0x28])), std::iter::empty());
        text.push(record(2, Some(b"plain")), std::iter::empty());
        let batch = text.finish().unwrap();
        assert_eq!((batch.rows.num_rows(), batch.errors.num_rows()), (1, 1));
        let mut bytes = BatchBuilder::new(PayloadFormat::Bytes);
        bytes.push(record(1, Some(&[0xc3, 0x28])), std::iter::empty());
        let batch = bytes.finish().unwrap();
        assert_eq!((batch.rows.num_rows(), batch.errors.num_rows()), (1, 0));
        assert_eq!(batch.rows.column(5).as_binary::<i32>().value(0), &[0xc3, 0x28]);
    }
}
