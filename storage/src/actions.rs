//! The actions of the Delta log (one JSON object per line of a commit file) and their JSON form.
//!
//! Readers ignore unknown actions and unknown fields, as the protocol requires. Writers emit the
//! fields in the protocol's spelling (camelCase) and leave out optional fields that are unset.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::schema::StructType;

/// A partition-value map: column (physical name) to value; `None` is the NULL partition.
pub type PartitionValues = BTreeMap<String, Option<String>>;

/// One action of a commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Action {
    #[serde(rename = "protocol")]
    Protocol(Protocol),
    #[serde(rename = "metaData")]
    Metadata(Metadata),
    #[serde(rename = "add")]
    Add(Add),
    #[serde(rename = "remove")]
    Remove(Remove),
    #[serde(rename = "txn")]
    Txn(Txn),
    #[serde(rename = "commitInfo")]
    CommitInfo(Map<String, Value>),
    #[serde(rename = "cdc")]
    Cdc(Cdc),
    #[serde(rename = "domainMetadata")]
    DomainMetadata(DomainMetadata),
    #[serde(rename = "checkpointMetadata")]
    CheckpointMetadata(CheckpointMetadata),
    #[serde(rename = "sidecar")]
    Sidecar(Sidecar),
}

/// The reader and writer versions (and features) a table needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// The table's identity, schema, partitioning and properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub format: Format,
    pub schema_string: String,
    #[serde(default)]
    pub partition_columns: Vec<String>,
    #[serde(default, deserialize_with = "string_map_without_nulls")]
    pub configuration: HashMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

/// The data file format (always Parquet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    pub provider: String,
    #[serde(default, deserialize_with = "string_map_without_nulls")]
    pub options: HashMap<String, String>,
}

impl Default for Format {
    fn default() -> Self {
        Self { provider: "parquet".into(), options: HashMap::new() }
    }
}

impl Metadata {
    /// Parses the schema string.
    pub fn schema(&self) -> Result<StructType> {
        StructType::parse(&self.schema_string)
    }
}

/// A data file joins the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    pub path: String,
    #[serde(default)]
    pub partition_values: PartitionValues,
    pub size: i64,
    pub modification_time: i64,
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering_provider: Option<String>,
}

/// A data file leaves the table (a tombstone until VACUUM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    #[serde(default)]
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_file_metadata: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<PartitionValues>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
}

/// A streaming writer's progress: the last version it committed for `app_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    pub app_id: String,
    pub version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// A change-data file (rows with `_change_type`) written by a DML commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cdc {
    pub path: String,
    #[serde(default)]
    pub partition_values: PartitionValues,
    pub size: i64,
    #[serde(default)]
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
}

/// Named configuration of a table feature or system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainMetadata {
    pub domain: String,
    pub configuration: String,
    #[serde(default)]
    pub removed: bool,
}

/// The header of a V2 checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointMetadata {
    pub version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
}

/// A V2 checkpoint's reference to a file of actions in `_delta_log/_sidecars/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    pub path: String,
    pub size_in_bytes: i64,
    pub modification_time: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, Option<String>>>,
}

/// Where a deletion vector lives and how many rows it deletes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionVectorDescriptor {
    /// `u` (relative path from a UUID), `i` (inline) or `p` (absolute path).
    pub storage_type: String,
    pub path_or_inline_dv: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i32>,
    pub size_in_bytes: i32,
    pub cardinality: i64,
}

impl DeletionVectorDescriptor {
    /// The identity of the deletion vector within the log (`storageType + pathOrInlineDv[@offset]`).
    pub fn unique_id(&self) -> String {
        match self.offset {
            Some(offset) => format!("{}{}@{}", self.storage_type, self.path_or_inline_dv, offset),
            None => format!("{}{}", self.storage_type, self.path_or_inline_dv),
        }
    }
}

impl Add {
    /// The key of the logical file: its path and its deletion vector.
    pub fn key(&self) -> FileKey {
        FileKey::new(&self.path, self.deletion_vector.as_ref())
    }

    /// Parses the stats, if present and well formed.
    pub fn parsed_stats(&self) -> Option<Stats> {
        self.stats.as_deref().and_then(|s| serde_json::from_str(s).ok())
    }

    /// The number of physical rows, from the stats.
    pub fn num_records(&self) -> Option<i64> {
        self.parsed_stats().and_then(|s| s.num_records)
    }

    /// A remove of this file, as written when a commit drops it.
    pub fn to_remove(&self, deletion_timestamp: i64, data_change: bool) -> Remove {
        Remove {
            path: self.path.clone(),
            deletion_timestamp: Some(deletion_timestamp),
            data_change,
            extended_file_metadata: Some(true),
            partition_values: Some(self.partition_values.clone()),
            size: Some(self.size),
            stats: None,
            tags: self.tags.clone(),
            deletion_vector: self.deletion_vector.clone(),
            base_row_id: self.base_row_id,
            default_row_commit_version: self.default_row_commit_version,
        }
    }
}

impl Remove {
    /// The key of the logical file this remove ends.
    pub fn key(&self) -> FileKey {
        FileKey::new(&self.path, self.deletion_vector.as_ref())
    }
}

/// The primary key of a logical file in log replay: path and deletion-vector id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub path: String,
    pub deletion_vector: Option<String>,
}

impl FileKey {
    fn new(path: &str, dv: Option<&DeletionVectorDescriptor>) -> Self {
        Self { path: path.to_string(), deletion_vector: dv.map(DeletionVectorDescriptor::unique_id) }
    }
}

/// The statistics of a data file (`add.stats`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records: Option<i64>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub min_values: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub max_values: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub null_count: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tight_bounds: Option<bool>,
}

/// All actions of one line, as read: exactly one field is set on valid lines.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActionLine {
    add: Option<Add>,
    remove: Option<Remove>,
    #[serde(rename = "metaData")]
    metadata: Option<Metadata>,
    protocol: Option<Protocol>,
    txn: Option<Txn>,
    commit_info: Option<Map<String, Value>>,
    cdc: Option<Cdc>,
    domain_metadata: Option<DomainMetadata>,
    checkpoint_metadata: Option<CheckpointMetadata>,
    sidecar: Option<Sidecar>,
}

impl ActionLine {
    fn into_action(self) -> Option<Action> {
        // Checked in order of frequency: adds dominate real logs.
        self.add
            .map(Action::Add)
            .or(self.remove.map(Action::Remove))
            .or(self.txn.map(Action::Txn))
            .or(self.commit_info.map(Action::CommitInfo))
            .or(self.metadata.map(Action::Metadata))
            .or(self.protocol.map(Action::Protocol))
            .or(self.cdc.map(Action::Cdc))
            .or(self.domain_metadata.map(Action::DomainMetadata))
            .or(self.checkpoint_metadata.map(Action::CheckpointMetadata))
            .or(self.sidecar.map(Action::Sidecar))
    }
}

/// Parses one line of a commit; `Ok(None)` for an unknown action (which readers must ignore).
pub fn parse_action(line: &str) -> std::result::Result<Option<Action>, serde_json::Error> {
    let parsed: ActionLine = serde_json::from_str(line)?;
    Ok(parsed.into_action())
}

/// Parses a whole commit file (newline-delimited JSON), naming the line of the first error.
pub fn parse_commit(bytes: &[u8], path: &str, version: u64) -> Result<Vec<Action>> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::CorruptCommit {
        path: path.to_string(),
        version,
        line: None,
        message: format!("not UTF-8: {e}"),
    })?;
    let mut actions = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_action(line) {
            Ok(Some(action)) => actions.push(action),
            Ok(None) => {}
            Err(e) => {
                return Err(Error::CorruptCommit {
                    path: path.to_string(),
                    version,
                    line: Some(index + 1),
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(actions)
}

/// Serializes actions as a commit file.
pub fn serialize_commit(actions: &[Action]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(actions.len() * 256);
    for action in actions {
        serde_json::to_writer(&mut out, action)
            .map_err(|e| Error::Internal(format!("cannot serialize an action: {e}")))?;
        out.push(b'\n');
    }
    Ok(out)
}

fn string_map_without_nulls<'de, D: Deserializer<'de>>(deserializer: D) -> Result<HashMap<String, String>, D::Error> {
    let map: Option<HashMap<String, Option<String>>> = Option::deserialize(deserializer)?;
    Ok(map.unwrap_or_default().into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect())
}

/// The milliseconds since the epoch now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_actions() {
        let commit = br#"{"commitInfo":{"timestamp":1,"operation":"WRITE"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":[],"configuration":{"a":"1","b":null}}}
{"add":{"path":"p.parquet","partitionValues":{"k":null},"size":1,"modificationTime":2,"dataChange":true,"deletionVector":{"storageType":"i","pathOrInlineDv":"abc","offset":null,"sizeInBytes":3,"cardinality":1}}}
{"someFutureAction":{"x":1}}
{"txn":{"appId":"a","version":3}}
"#;
        let actions = parse_commit(commit, "0.json", 0).unwrap();
        assert_eq!(actions.len(), 5);
        let Action::Metadata(m) = &actions[2] else { panic!("not metadata") };
        assert_eq!(m.configuration.len(), 1);
        let Action::Add(add) = &actions[3] else { panic!("not add") };
        assert_eq!(add.partition_values.get("k"), Some(&None));
        assert_eq!(add.key().deletion_vector.as_deref(), Some("iabc"));
        let written = serialize_commit(&actions).unwrap();
        assert_eq!(parse_commit(&written, "0.json", 0).unwrap(), actions);
    }

    #[test]
    fn names_the_line_of_a_corrupt_commit() {
        let err = parse_commit(b"{\"txn\":{\"appId\":\"a\",\"version\":1}}\n{not json\n", "00.json", 7).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("00.json") && text.contains("version 7") && text.contains("line 2"), "{text}");
    }
}
