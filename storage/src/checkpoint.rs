//! Checkpoints: reading every kind (classic, multi-part, V2 in JSON or Parquet with sidecars) into
//! actions, and writing Parquet checkpoints (classic, or V2 for tables that declare
//! `v2Checkpoint`) with `_last_checkpoint`.
//!
//! Rows of a Parquet checkpoint are turned into actions through a small Arrow-to-JSON walk and
//! serde, so that one definition of each action serves commits and checkpoints alike. The derived
//! columns `stats_parsed` and `partitionValues_parsed` are skipped: Sluice keeps stats as JSON.
//! Checkpoints are written by encoding the actions as JSON lines and decoding them with the
//! checkpoint schema, which gives the struct and map columns other readers expect.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use serde_json::{Map, Value};

use crate::actions::{parse_commit, Action};
use crate::error::{Error, Result};
use crate::log::{CheckpointFiles, LogFile, LogFileKind};
use crate::store::TableStore;

/// Columns of a checkpoint row that are derived copies and never needed for replay.
const SKIPPED_CHILDREN: &[&str] = &["stats_parsed", "partitionValues_parsed"];

/// Reads all actions of a checkpoint (every part, and the sidecars of a V2 checkpoint).
pub async fn read_checkpoint(store: &TableStore, checkpoint: &CheckpointFiles) -> Result<Vec<Action>> {
    let mut actions = Vec::new();
    for file in &checkpoint.files {
        let bytes = store.get(&file.path).await.map_err(|e| e.at_version(checkpoint.version))?;
        let mut part = match file.kind {
            LogFileKind::V2Checkpoint { parquet: false } => {
                parse_commit(&bytes, file.path.as_ref(), checkpoint.version)
                    .map_err(|e| corrupt(file, checkpoint.version, e.to_string()))?
            }
            _ => parquet_actions(bytes, file, checkpoint.version)?,
        };
        let sidecars: Vec<_> = part
            .iter()
            .filter_map(|a| match a {
                Action::Sidecar(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        for sidecar in sidecars {
            let relative = crate::store::percent_decode(&sidecar.path);
            let path = store.root().clone().join("_delta_log").join("_sidecars");
            let path = relative.split('/').fold(path, |p, segment| p.join(segment));
            let bytes = store.get(&path).await.map_err(|e| e.at_version(checkpoint.version))?;
            let meta = LogFile {
                version: checkpoint.version,
                kind: LogFileKind::ClassicCheckpoint,
                path,
                size: 0,
                modified_ms: 0,
            };
            part.extend(parquet_actions(bytes, &meta, checkpoint.version)?);
        }
        actions.append(&mut part);
    }
    Ok(actions)
}

fn corrupt(file: &LogFile, version: u64, message: String) -> Error {
    Error::CorruptCheckpoint { path: file.path.to_string(), version, message }
}

fn parquet_actions(bytes: Bytes, file: &LogFile, version: u64) -> Result<Vec<Action>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| corrupt(file, version, e.to_string()))?;
    let mut actions = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| corrupt(file, version, e.to_string()))?;
        batch_actions(&batch, &mut actions).map_err(|message| corrupt(file, version, message))?;
    }
    Ok(actions)
}

/// Turns the rows of a checkpoint batch into actions.
fn batch_actions(batch: &RecordBatch, out: &mut Vec<Action>) -> std::result::Result<(), String> {
    let schema = batch.schema();
    let columns: Vec<(&str, &StructArray)> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(f, _)| f.name() != "commitInfo")
        .filter_map(|(f, c)| c.as_struct_opt().map(|s| (f.name().as_str(), s)))
        .collect();
    for row in 0..batch.num_rows() {
        for (name, column) in &columns {
            if column.is_null(row) {
                continue;
            }
            let mut object = Map::new();
            object.insert((*name).to_string(), struct_value(column, row));
            let line = Value::Object(object).to_string();
            match crate::actions::parse_action(&line) {
                Ok(Some(action)) => out.push(action),
                Ok(None) => {}
                Err(e) => return Err(format!("row {row}, column {name}: {e}")),
            }
        }
    }
    Ok(())
}

fn struct_value(array: &StructArray, row: usize) -> Value {
    let mut object = Map::new();
    for (field, child) in array.fields().iter().zip(array.columns()) {
        if SKIPPED_CHILDREN.contains(&field.name().as_str()) || child.is_null(row) {
            continue;
        }
        object.insert(field.name().clone(), array_value(child, row));
    }
    Value::Object(object)
}

fn array_value(array: &ArrayRef, row: usize) -> Value {
    use arrow::datatypes::*;
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        ArrowType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_string()),
        ArrowType::LargeUtf8 => Value::String(array.as_string::<i64>().value(row).to_string()),
        ArrowType::Utf8View => Value::String(array.as_string_view().value(row).to_string()),
        ArrowType::Boolean => Value::Bool(array.as_boolean().value(row)),
        ArrowType::Int8 => Value::from(array.as_primitive::<Int8Type>().value(row)),
        ArrowType::Int16 => Value::from(array.as_primitive::<Int16Type>().value(row)),
        ArrowType::Int32 => Value::from(array.as_primitive::<Int32Type>().value(row)),
        ArrowType::Int64 => Value::from(array.as_primitive::<Int64Type>().value(row)),
        ArrowType::UInt32 => Value::from(array.as_primitive::<UInt32Type>().value(row)),
        ArrowType::UInt64 => Value::from(array.as_primitive::<UInt64Type>().value(row)),
        ArrowType::Float64 => Value::from(array.as_primitive::<Float64Type>().value(row)),
        ArrowType::Struct(_) => struct_value(array.as_struct(), row),
        ArrowType::List(_) => {
            let list = array.as_list::<i32>().value(row);
            Value::Array((0..list.len()).map(|i| array_value(&list, i)).collect())
        }
        ArrowType::LargeList(_) => {
            let list = array.as_list::<i64>().value(row);
            Value::Array((0..list.len()).map(|i| array_value(&list, i)).collect())
        }
        ArrowType::Map(_, _) => {
            let map = array.as_map();
            let entries = map.value(row);
            let keys = entries.column(0);
            let values = entries.column(1);
            let mut object = Map::new();
            for i in 0..entries.len() {
                if let Value::String(key) = array_value(keys, i) {
                    object.insert(key, array_value(values, i));
                }
            }
            Value::Object(object)
        }
        _ => Value::Null,
    }
}

fn string_map(name: &str) -> Field {
    let entries =
        Fields::from(vec![Field::new("key", ArrowType::Utf8, false), Field::new("value", ArrowType::Utf8, true)]);
    Field::new(name, ArrowType::Map(Arc::new(Field::new("key_value", ArrowType::Struct(entries), false)), false), true)
}

fn deletion_vector_field() -> Field {
    Field::new(
        "deletionVector",
        ArrowType::Struct(Fields::from(vec![
            Field::new("storageType", ArrowType::Utf8, true),
            Field::new("pathOrInlineDv", ArrowType::Utf8, true),
            Field::new("offset", ArrowType::Int32, true),
            Field::new("sizeInBytes", ArrowType::Int32, true),
            Field::new("cardinality", ArrowType::Int64, true),
        ])),
        true,
    )
}

fn strings(name: &str) -> Field {
    Field::new(name, ArrowType::List(Arc::new(Field::new("element", ArrowType::Utf8, true))), true)
}

/// The schema of the classic checkpoints Sluice writes.
pub fn checkpoint_schema() -> SchemaRef {
    let s = |name: &str| Field::new(name, ArrowType::Utf8, true);
    let l = |name: &str| Field::new(name, ArrowType::Int64, true);
    let b = |name: &str| Field::new(name, ArrowType::Boolean, true);
    let i = |name: &str| Field::new(name, ArrowType::Int32, true);
    let st = |name: &str, fields: Vec<Field>| Field::new(name, ArrowType::Struct(Fields::from(fields)), true);
    Arc::new(Schema::new(vec![
        st("txn", vec![s("appId"), l("version"), l("lastUpdated")]),
        st(
            "add",
            vec![
                s("path"),
                string_map("partitionValues"),
                l("size"),
                l("modificationTime"),
                b("dataChange"),
                s("stats"),
                string_map("tags"),
                deletion_vector_field(),
                l("baseRowId"),
                l("defaultRowCommitVersion"),
                s("clusteringProvider"),
            ],
        ),
        st(
            "remove",
            vec![
                s("path"),
                l("deletionTimestamp"),
                b("dataChange"),
                b("extendedFileMetadata"),
                string_map("partitionValues"),
                l("size"),
                string_map("tags"),
                deletion_vector_field(),
                l("baseRowId"),
                l("defaultRowCommitVersion"),
            ],
        ),
        st(
            "metaData",
            vec![
                s("id"),
                s("name"),
                s("description"),
                st("format", vec![s("provider"), string_map("options")]),
                s("schemaString"),
                strings("partitionColumns"),
                string_map("configuration"),
                l("createdTime"),
            ],
        ),
        st(
            "protocol",
            vec![i("minReaderVersion"), i("minWriterVersion"), strings("readerFeatures"), strings("writerFeatures")],
        ),
        st("domainMetadata", vec![s("domain"), s("configuration"), b("removed")]),
        st("checkpointMetadata", vec![l("version"), string_map("tags")]),
    ]))
}

/// Encodes actions as a classic checkpoint Parquet file.
pub fn encode_checkpoint(actions: &[Action]) -> Result<Bytes> {
    let schema = checkpoint_schema();
    let json = crate::actions::serialize_commit(actions)?;
    let mut decoder =
        arrow::json::ReaderBuilder::new(schema.clone()).with_batch_size(actions.len().max(1)).build_decoder()?;
    decoder.decode(&json)?;
    let batch = decoder.flush()?.unwrap_or_else(|| RecordBatch::new_empty(schema.clone()));
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, None)?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(Bytes::from(out))
}

/// How a checkpoint is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointKind {
    /// `<version>.checkpoint.parquet`.
    Classic,
    /// `<version>.checkpoint.<uuid>.parquet` with a `checkpointMetadata` action (which the actions
    /// must hold), for tables that declare `v2Checkpoint` (all actions in the one file: no
    /// sidecars). The UUID name keeps two writers' checkpoints of one version apart.
    V2,
}

/// Writes the checkpoint of `version` and then `_last_checkpoint`.
pub async fn write_checkpoint(
    store: &TableStore,
    version: u64,
    actions: &[Action],
    kind: CheckpointKind,
) -> Result<()> {
    let (name, bytes) = match kind {
        CheckpointKind::Classic => (crate::log::checkpoint_file_name(version), encode_checkpoint(actions)?),
        CheckpointKind::V2 => {
            // The snapshot's checkpoint actions of such a table carry the header already.
            if !actions.iter().any(|a| matches!(a, Action::CheckpointMetadata(_))) {
                return Err(Error::Internal(format!("V2 checkpoint of version {version} without checkpointMetadata")));
            }
            (format!("{version:020}.checkpoint.{}.parquet", uuid::Uuid::new_v4()), encode_checkpoint(actions)?)
        }
    };
    let size_in_bytes = bytes.len();
    let path = store.log_path(&name);
    store.put_synced(&path, bytes).await?;
    let adds = actions.iter().filter(|a| matches!(a, Action::Add(_))).count();
    let hint: HashMap<&str, Value> = HashMap::from([
        ("version", Value::from(version)),
        ("size", Value::from(actions.len())),
        ("sizeInBytes", Value::from(size_in_bytes)),
        ("numOfAddFiles", Value::from(adds)),
    ]);
    let text = serde_json::to_vec(&hint).map_err(|e| Error::Internal(e.to_string()))?;
    store.put_synced(&store.log_path("_last_checkpoint"), Bytes::from(text)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{Add, DeletionVectorDescriptor, Protocol, Txn};

    #[test]
    fn checkpoint_round_trips_actions() {
        let add = Add {
            path: "a=1/f.parquet".into(),
            partition_values: [("a".to_string(), Some("1".to_string())), ("b".to_string(), None)].into(),
            size: 10,
            modification_time: 5,
            data_change: false,
            stats: Some("{\"numRecords\":3}".into()),
            tags: None,
            deletion_vector: Some(DeletionVectorDescriptor {
                storage_type: "u".into(),
                path_or_inline_dv: "x".into(),
                offset: Some(1),
                size_in_bytes: 3,
                cardinality: 2,
            }),
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        };
        let actions = vec![
            Action::Protocol(Protocol {
                min_reader_version: 1,
                min_writer_version: 2,
                reader_features: None,
                writer_features: None,
            }),
            Action::Txn(Txn { app_id: "app".into(), version: 7, last_updated: None }),
            Action::Add(add),
        ];
        let bytes = encode_checkpoint(&actions).unwrap();
        let file =
            LogFile { version: 3, kind: LogFileKind::ClassicCheckpoint, path: "x".into(), size: 0, modified_ms: 0 };
        let back = parquet_actions(bytes, &file, 3).unwrap();
        assert_eq!(back, actions);
    }

    #[test]
    fn truncated_checkpoint_names_file_and_version() {
        let bytes =
            encode_checkpoint(&[Action::Txn(Txn { app_id: "a".into(), version: 1, last_updated: None })]).unwrap();
        let file = LogFile {
            version: 9,
            kind: LogFileKind::ClassicCheckpoint,
            path: "cp.parquet".into(),
            size: 0,
            modified_ms: 0,
        };
        let err = parquet_actions(bytes.slice(..bytes.len() / 2), &file, 9).unwrap_err().to_string();
        assert!(err.contains("cp.parquet") && err.contains("version 9"), "{err}");
    }
}
