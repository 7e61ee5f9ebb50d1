//! A table's history (DESCRIBE HISTORY and the `table_history` function) as rows.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, TimeUnit};
use serde_json::Value;

use crate::error::Result;

/// The columns of DESCRIBE HISTORY and `table_history`.
pub fn history_schema() -> arrow::datatypes::SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("version", ArrowType::Int64, false),
        Field::new("timestamp", ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        Field::new("operation", ArrowType::Utf8, true),
        Field::new("operation_parameters", ArrowType::Utf8, true),
        Field::new("read_version", ArrowType::Int64, true),
        Field::new("is_blind_append", ArrowType::Boolean, true),
        Field::new("engine_info", ArrowType::Utf8, true),
    ]))
}

/// A table's history as rows (newest first).
pub fn history_batch(history: &[sluice_storage::table::HistoryEntry]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(history.iter().map(|h| h.version as i64).collect::<Vec<_>>())),
        Arc::new(
            TimestampMicrosecondArray::from(history.iter().map(|h| h.timestamp_ms * 1000).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from(history.iter().map(|h| h.operation.clone()).collect::<Vec<_>>())),
        Arc::new(StringArray::from(
            history.iter().map(|h| h.operation_parameters.as_ref().map(|p| p.to_string())).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            history.iter().map(|h| h.commit_info.get("readVersion").and_then(Value::as_i64)).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            history.iter().map(|h| h.commit_info.get("isBlindAppend").and_then(Value::as_bool)).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            history
                .iter()
                .map(|h| h.commit_info.get("engineInfo").and_then(Value::as_str).map(str::to_string))
                .collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(history_schema(), columns)?)
}
