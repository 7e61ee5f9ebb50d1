//! The sequence catalogs, PostgreSQL 15's columns: `pg_sequence` (one row per sequence, by its
//! `pg_class` OID) and the `pg_sequences` view, over the sequences the engine lists (standalone
//! ones and the SERIAL and identity columns'; see `sluice::sql::sequences::sequences_in`).
//! `information_schema.sequences` is a query over `pg_sequences` (compat.rs). The sequences'
//! `pg_class` rows and OIDs are relations.rs's.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::Result as DfResult;
use sluice::catalog::SequenceType;
use sluice::sequence::SequenceInfo;

/// A sequence with the OIDs of its `pg_class` row and schema.
#[derive(Debug, Clone)]
pub(super) struct Listed {
    pub oid: i32,
    pub namespace: i32,
    pub info: SequenceInfo,
}

/// The OID of a sequence type in `pg_type`.
fn type_oid(data_type: SequenceType) -> i32 {
    match data_type {
        SequenceType::Smallint => 21,
        SequenceType::Integer => 23,
        SequenceType::Bigint => 20,
    }
}

fn required(name: &str, data_type: DataType) -> Field {
    Field::new(name, data_type, false)
}

pub(super) fn pg_sequence_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        required("seqrelid", DataType::Int32),
        required("seqtypid", DataType::Int32),
        required("seqstart", DataType::Int64),
        required("seqincrement", DataType::Int64),
        required("seqmax", DataType::Int64),
        required("seqmin", DataType::Int64),
        required("seqcache", DataType::Int64),
        required("seqcycle", DataType::Boolean),
    ]))
}

pub(super) fn pg_sequences_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        required("schemaname", DataType::Utf8),
        required("sequencename", DataType::Utf8),
        required("sequenceowner", DataType::Utf8),
        required("data_type", DataType::Utf8),
        required("start_value", DataType::Int64),
        required("min_value", DataType::Int64),
        required("max_value", DataType::Int64),
        required("increment_by", DataType::Int64),
        required("cycle", DataType::Boolean),
        required("cache_size", DataType::Int64),
        Field::new("last_value", DataType::Int64, true),
    ]))
}

fn numbers(listed: &[Listed], value: fn(&SequenceInfo) -> i64) -> ArrayRef {
    Arc::new(listed.iter().map(|s| Some(value(&s.info))).collect::<Int64Array>())
}

/// `pg_sequence`'s rows.
pub(super) fn pg_sequence_rows(schema: &SchemaRef, listed: &[Listed]) -> DfResult<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(listed.iter().map(|s| Some(s.oid)).collect::<Int32Array>()),
        Arc::new(listed.iter().map(|s| Some(type_oid(s.info.data_type))).collect::<Int32Array>()),
        numbers(listed, |s| s.start),
        numbers(listed, |s| s.increment),
        numbers(listed, |s| s.max_value),
        numbers(listed, |s| s.min_value),
        numbers(listed, |s| s.cache),
        Arc::new(listed.iter().map(|s| Some(s.info.cycle)).collect::<BooleanArray>()),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// `pg_sequences`' rows, ordered by schema and name. `owner` is the name of the role that owns
/// every relation (the warehouse's).
pub(super) fn pg_sequences_rows(schema: &SchemaRef, listed: &[Listed], owner: &str) -> DfResult<RecordBatch> {
    let mut listed = listed.to_vec();
    listed.sort_by(|a, b| (&a.info.schema, &a.info.name).cmp(&(&b.info.schema, &b.info.name)));
    let texts = |value: fn(&SequenceInfo) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(listed.iter().map(|s| value(&s.info))))
    };
    let columns: Vec<ArrayRef> = vec![
        texts(|s| s.schema.clone()),
        texts(|s| s.name.clone()),
        Arc::new(StringArray::from_iter_values(listed.iter().map(|_| owner))),
        texts(|s| s.data_type.name().to_string()),
        numbers(&listed, |s| s.start),
        numbers(&listed, |s| s.min_value),
        numbers(&listed, |s| s.max_value),
        numbers(&listed, |s| s.increment),
        Arc::new(listed.iter().map(|s| Some(s.info.cycle)).collect::<BooleanArray>()),
        numbers(&listed, |s| s.cache),
        Arc::new(listed.iter().map(|s| s.info.last_value).collect::<Int64Array>()),
    ];
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
