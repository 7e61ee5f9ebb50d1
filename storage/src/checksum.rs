//! Version checksum files (`_delta_log/<version>.crc`): what a version of the table holds (size,
//! file count, metadata, protocol), written beside a commit so that readers can check what they
//! replayed, as Spark writes and reads them.
//!
//! The protocol makes them optional: a missing or unreadable `.crc` is never an error. Sluice
//! writes one for a table's first version and for each version it checkpoints ([`write()`], best
//! effort: the commit stands without it), not for every commit: one more file per table and
//! commit was a measurable share of a short transaction's cost. It checks a snapshot it replayed
//! from the log against the `.crc` of its version when there is one ([`verify`]), whoever wrote
//! it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::actions::{Metadata, Protocol};
use crate::error::Result;
use crate::snapshot::Snapshot;
use crate::store::TableStore;

/// The name of a version's checksum file.
pub fn checksum_file_name(version: u64) -> String {
    format!("{version:020}.crc")
}

/// The content of a `.crc` file (the fields the protocol requires, and the optional ones Sluice
/// knows; others are ignored when read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionChecksum {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_id: Option<String>,
    pub table_size_bytes: i64,
    pub num_files: i64,
    pub num_metadata: i64,
    pub num_protocol: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_commit_timestamp_opt: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_deleted_records_opt: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_deletion_vectors_opt: Option<i64>,
    pub metadata: Metadata,
    pub protocol: Protocol,
}

impl VersionChecksum {
    /// The checksum of a snapshot; `txn_id` is the commitInfo's, when known.
    pub fn of(snapshot: &Snapshot, txn_id: Option<String>) -> Self {
        let mut size = 0i64;
        let mut deleted = 0i64;
        let mut vectors = 0i64;
        for file in snapshot.files() {
            size = size.saturating_add(file.size.max(0));
            if let Some(dv) = &file.deletion_vector {
                vectors += 1;
                deleted = deleted.saturating_add(dv.cardinality.max(0));
            }
        }
        let ict = snapshot.property_is_true(crate::protocol::IN_COMMIT_TIMESTAMPS_KEY);
        VersionChecksum {
            txn_id,
            table_size_bytes: size,
            num_files: snapshot.file_count() as i64,
            num_metadata: 1,
            num_protocol: 1,
            in_commit_timestamp_opt: ict.then(|| snapshot.timestamp_ms()),
            num_deleted_records_opt: Some(deleted),
            num_deletion_vectors_opt: Some(vectors),
            metadata: snapshot.metadata().clone(),
            protocol: snapshot.protocol().clone(),
        }
    }

    /// How `snapshot` differs from this checksum, if it does.
    pub fn difference(&self, snapshot: &Snapshot) -> Option<String> {
        let ours = VersionChecksum::of(snapshot, None);
        let mut differences = Vec::new();
        if ours.num_files != self.num_files {
            differences.push(format!("{} files, the checksum says {}", ours.num_files, self.num_files));
        }
        if ours.table_size_bytes != self.table_size_bytes {
            differences.push(format!("{} bytes, the checksum says {}", ours.table_size_bytes, self.table_size_bytes));
        }
        if ours.metadata.id != self.metadata.id {
            differences.push(format!("table id {}, the checksum says {}", ours.metadata.id, self.metadata.id));
        }
        if ours.protocol != self.protocol {
            differences.push(format!("protocol {:?}, the checksum says {:?}", ours.protocol, self.protocol));
        }
        if let (Some(theirs), Some(mine)) = (self.num_deletion_vectors_opt, ours.num_deletion_vectors_opt) {
            if theirs != mine {
                differences.push(format!("{mine} deletion vectors, the checksum says {theirs}"));
            }
        }
        (!differences.is_empty()).then(|| differences.join("; "))
    }
}

/// Writes the checksum of `snapshot` (a version this writer just committed) as its `.crc`.
pub async fn write(store: &TableStore, snapshot: &Snapshot, txn_id: Option<String>) -> Result<()> {
    let checksum = VersionChecksum::of(snapshot, txn_id);
    let bytes = serde_json::to_vec(&checksum).map_err(|e| crate::error::Error::Internal(format!(".crc: {e}")))?;
    // A hint, not part of the commit (a missing or older one is said in the log): not synced.
    store.put_unsynced(&store.log_path(&checksum_file_name(snapshot.version())), bytes.into()).await
}

/// Reads the `.crc` of a version; `None` when there is none or it cannot be parsed (both
/// tolerated: the file is optional).
pub async fn read(store: &TableStore, version: u64) -> Result<Option<VersionChecksum>> {
    let path = store.log_path(&checksum_file_name(version));
    let bytes = match store.get(&path).await {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<VersionChecksum>(&bytes) {
        Ok(checksum) => Ok(Some(checksum)),
        Err(e) => {
            tracing::warn!(table = store.location(), version, "ignoring an unreadable .crc: {e}");
            Ok(None)
        }
    }
}

/// Checks a replayed snapshot against its version's `.crc`: `Some(difference)` when they
/// disagree, `None` when they agree or there is no checksum.
pub async fn verify(store: &TableStore, snapshot: &Snapshot) -> Result<Option<String>> {
    Ok(read(store, snapshot.version()).await?.and_then(|c| c.difference(snapshot)))
}

/// The `txnId` of a commit's commitInfo, if it has one.
pub fn txn_id(actions: &[crate::actions::Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        crate::actions::Action::CommitInfo(info) => info.get("txnId").and_then(Value::as_str).map(str::to_string),
        _ => None,
    })
}
