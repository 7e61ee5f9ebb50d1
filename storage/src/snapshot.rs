//! Snapshots: the state of a table at one version, built by log replay.
//!
//! A [`Snapshot`] is immutable and cheap to share: its maps sit behind `Arc`s and [`Snapshot::advance`]
//! copies them only when new commits change them. Replay follows the protocol: the last protocol
//! and metadata win, the last `txn` per appId wins, the last domain metadata per domain wins, and a
//! logical file is keyed by `(path, deletion vector id)`; within one commit removes apply before
//! adds, so a commit that replaces a file's deletion vector leaves exactly the new one.
//!
//! Loading the latest version reads `_last_checkpoint`, the checkpoint it names, and then probes
//! for the commits after it by name (one GET each, in growing concurrent windows) instead of
//! listing the whole `_delta_log/`: on a long log this is the difference between reading a hundred
//! small files and listing ten thousand. Time travel lists the log to find the right checkpoint.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use crate::actions::{Action, Add, DomainMetadata, FileKey, Metadata, Protocol, Remove, Txn};
use crate::checkpoint::read_checkpoint;
use crate::error::{Error, Result};
use crate::log::{self, CheckpointFiles, LogFile, LogFileKind, LogSegment};
use crate::protocol::{self, IN_COMMIT_TIMESTAMPS_KEY};
use crate::schema::{ColumnMappingMode, StructType};
use crate::store::TableStore;

/// Default retention of removed files (for VACUUM and for tombstones in checkpoints): one week.
pub const DELETED_FILE_RETENTION_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;

/// The state of a table at one version.
#[derive(Debug, Clone)]
pub struct Snapshot {
    store: TableStore,
    version: u64,
    timestamp_ms: i64,
    protocol: Arc<Protocol>,
    metadata: Arc<Metadata>,
    schema: Arc<StructType>,
    arrow_schema: SchemaRef,
    column_mapping: ColumnMappingMode,
    files: Arc<HashMap<FileKey, Arc<Add>>>,
    tombstones: Arc<HashMap<FileKey, Arc<Remove>>>,
    txns: Arc<HashMap<String, Txn>>,
    domains: Arc<HashMap<String, DomainMetadata>>,
    checkpoint_version: Option<u64>,
}

/// Log replay in progress.
#[derive(Default)]
struct Replay {
    protocol: Option<Arc<Protocol>>,
    metadata: Option<Arc<Metadata>>,
    files: Arc<HashMap<FileKey, Arc<Add>>>,
    tombstones: Arc<HashMap<FileKey, Arc<Remove>>>,
    txns: Arc<HashMap<String, Txn>>,
    domains: Arc<HashMap<String, DomainMetadata>>,
    version: Option<u64>,
    timestamp_ms: i64,
}

impl Replay {
    fn from_snapshot(snapshot: &Snapshot) -> Self {
        Self {
            protocol: Some(snapshot.protocol.clone()),
            metadata: Some(snapshot.metadata.clone()),
            files: snapshot.files.clone(),
            tombstones: snapshot.tombstones.clone(),
            txns: snapshot.txns.clone(),
            domains: snapshot.domains.clone(),
            version: Some(snapshot.version),
            timestamp_ms: snapshot.timestamp_ms,
        }
    }

    /// Applies one commit (or a checkpoint's actions) at `version`.
    fn apply(&mut self, actions: Vec<Action>, version: u64, file_modified_ms: i64, location: &str) -> Result<()> {
        if let Some(previous) = self.version {
            if version <= previous {
                return Err(Error::InvalidLog {
                    location: location.to_string(),
                    message: format!("version {version} follows version {previous}"),
                });
            }
        }
        let mut in_commit_timestamp = None;
        let mut adds = Vec::new();
        for action in actions {
            match action {
                Action::Add(add) => adds.push(add),
                Action::Remove(remove) => {
                    let key = remove.key();
                    Arc::make_mut(&mut self.files).remove(&key);
                    Arc::make_mut(&mut self.tombstones).insert(key, Arc::new(remove));
                }
                Action::Protocol(p) => self.protocol = Some(Arc::new(p)),
                Action::Metadata(m) => self.metadata = Some(Arc::new(m)),
                Action::Txn(t) => {
                    Arc::make_mut(&mut self.txns).insert(t.app_id.clone(), t);
                }
                Action::DomainMetadata(d) => {
                    let domains = Arc::make_mut(&mut self.domains);
                    if d.removed {
                        domains.remove(&d.domain);
                    } else {
                        domains.insert(d.domain.clone(), d);
                    }
                }
                Action::CommitInfo(info) => {
                    in_commit_timestamp = info.get("inCommitTimestamp").and_then(serde_json::Value::as_i64);
                }
                Action::Cdc(_) | Action::CheckpointMetadata(_) | Action::Sidecar(_) => {}
            }
        }
        for add in adds {
            let key = add.key();
            Arc::make_mut(&mut self.tombstones).remove(&key);
            Arc::make_mut(&mut self.files).insert(key, Arc::new(add));
        }
        let ict_enabled = self
            .metadata
            .as_ref()
            .is_some_and(|m| m.configuration.get(IN_COMMIT_TIMESTAMPS_KEY).is_some_and(|v| v == "true"));
        self.timestamp_ms = match (ict_enabled, in_commit_timestamp) {
            (true, Some(ts)) => ts,
            _ => file_modified_ms,
        };
        self.version = Some(version);
        Ok(())
    }

    fn finish(self, store: &TableStore, checkpoint_version: Option<u64>) -> Result<Snapshot> {
        let location = store.location();
        let version = self
            .version
            .ok_or_else(|| Error::NotATable { location: location.into(), reason: "the log is empty".into() })?;
        let protocol = self.protocol.ok_or_else(|| Error::InvalidLog {
            location: location.into(),
            message: format!("no protocol action up to version {version}"),
        })?;
        let metadata = self.metadata.ok_or_else(|| Error::InvalidLog {
            location: location.into(),
            message: format!("no metaData action up to version {version}"),
        })?;
        protocol::check_readable(&protocol, location)?;
        let schema = metadata.schema()?;
        let column_mapping = ColumnMappingMode::from_configuration(&metadata.configuration)?;
        let arrow_schema = Arc::new(schema.to_arrow());
        Ok(Snapshot {
            store: store.clone(),
            version,
            timestamp_ms: self.timestamp_ms,
            protocol,
            metadata,
            schema: Arc::new(schema),
            arrow_schema,
            column_mapping,
            files: self.files,
            tombstones: self.tombstones,
            txns: self.txns,
            domains: self.domains,
            checkpoint_version,
        })
    }
}

/// The first version probed in each window grows: 1, 4, 16, 32, 32, ...
const PROBE_WINDOW_MAX: u64 = 32;

/// Reads the commits from `start` on, by name, until one is missing.
async fn probe_commits(store: &TableStore, start: u64) -> Result<Vec<(LogFile, Vec<Action>)>> {
    use futures::StreamExt;
    let mut found = Vec::new();
    let mut next = start;
    let mut window = 1u64;
    loop {
        let reads = futures::stream::iter(next..next + window)
            .map(|version| async move {
                let path = store.log_path(&log::commit_file_name(version));
                match store.get_with_meta(&path).await {
                    Ok((bytes, meta)) => {
                        let actions = crate::actions::parse_commit(&bytes, path.as_ref(), version)?;
                        let file = LogFile {
                            version,
                            kind: LogFileKind::Commit,
                            path,
                            size: meta.size,
                            modified_ms: meta.last_modified.timestamp_millis(),
                        };
                        Ok(Some((file, actions)))
                    }
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e.at_version(version)),
                }
            })
            .buffered(window as usize)
            .collect::<Vec<Result<_>>>()
            .await;
        for read in reads {
            match read? {
                Some(commit) => found.push(commit),
                None => return Ok(found),
            }
        }
        next += window;
        window = (window * 4).min(PROBE_WINDOW_MAX);
    }
}

impl Snapshot {
    /// Loads the latest version of the table.
    pub async fn load_latest(store: &TableStore) -> Result<Self> {
        if let Some(hint) = log::read_last_checkpoint(store).await? {
            match Self::load_from_hint(store, &hint).await {
                Ok(Some(snapshot)) => return Ok(snapshot),
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        }
        let segment = log::build_segment(store, None).await?;
        Self::from_segment(store, segment).await
    }

    /// Loads the table at a given version (time travel).
    pub async fn load_version(store: &TableStore, version: u64) -> Result<Self> {
        let segment = log::build_segment(store, Some(version)).await?;
        Self::from_segment(store, segment).await
    }

    /// Replays from the checkpoint named in `_last_checkpoint`; `None` if it is not there.
    async fn load_from_hint(store: &TableStore, hint: &log::LastCheckpoint) -> Result<Option<Self>> {
        let version = hint.version;
        let names: Vec<(String, LogFileKind)> = match hint.parts {
            Some(parts) if parts > 1 => (1..=parts)
                .map(|part| {
                    (
                        format!("{version:020}.checkpoint.{part:010}.{parts:010}.parquet"),
                        LogFileKind::MultiPartCheckpoint { part, parts },
                    )
                })
                .collect(),
            _ => vec![(log::checkpoint_file_name(version), LogFileKind::ClassicCheckpoint)],
        };
        let files = names
            .into_iter()
            .map(|(name, kind)| LogFile { version, kind, path: store.log_path(&name), size: 0, modified_ms: 0 })
            .collect();
        let checkpoint = CheckpointFiles { version, files };
        let actions = match read_checkpoint(store, &checkpoint).await {
            Ok(actions) => actions,
            // A V2 checkpoint (UUID name) or a stale hint: fall back to listing.
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut replay = Replay::default();
        let timestamp = commit_timestamp(store, version).await;
        replay.apply(actions, version, timestamp, store.location())?;
        for (file, actions) in probe_commits(store, version + 1).await? {
            replay.apply(actions, file.version, file.modified_ms, store.location())?;
        }
        replay.finish(store, Some(version)).map(Some)
    }

    async fn from_segment(store: &TableStore, segment: LogSegment) -> Result<Self> {
        let mut replay = Replay::default();
        let checkpoint_version = segment.checkpoint.as_ref().map(|c| c.version);
        if let Some(checkpoint) = &segment.checkpoint {
            let actions = read_checkpoint(store, checkpoint).await?;
            let timestamp = commit_timestamp(store, checkpoint.version).await;
            replay.apply(actions, checkpoint.version, timestamp, store.location())?;
        }
        for (file, actions) in log::read_commits(store, &segment.commits).await? {
            replay.apply(actions, file.version, file.modified_ms, store.location())?;
        }
        replay.finish(store, checkpoint_version)
    }

    /// The snapshot after the commits that followed this one, or `None` if there are none.
    pub async fn advance(&self) -> Result<Option<Self>> {
        let commits = probe_commits(&self.store, self.version + 1).await?;
        if commits.is_empty() {
            return Ok(None);
        }
        self.apply_commits(commits).map(Some)
    }

    /// The snapshot after applying commits that follow this one directly (used by writers that
    /// just made them).
    pub fn apply_commits(&self, commits: Vec<(LogFile, Vec<Action>)>) -> Result<Self> {
        let mut replay = Replay::from_snapshot(self);
        for (file, actions) in commits {
            replay.apply(actions, file.version, file.modified_ms, self.store.location())?;
        }
        replay.finish(&self.store, self.checkpoint_version)
    }

    /// The store the table lives in.
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// The version of this snapshot.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// When this version was committed (in-commit timestamp, else the commit file's time), in ms.
    pub fn timestamp_ms(&self) -> i64 {
        self.timestamp_ms
    }

    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The table schema (partition columns included).
    pub fn schema(&self) -> &StructType {
        &self.schema
    }

    /// The table schema in Arrow, with logical names.
    pub fn arrow_schema(&self) -> SchemaRef {
        self.arrow_schema.clone()
    }

    pub fn partition_columns(&self) -> &[String] {
        &self.metadata.partition_columns
    }

    pub fn configuration(&self) -> &HashMap<String, String> {
        &self.metadata.configuration
    }

    /// A boolean table property (`"true"`, ignoring case).
    pub fn property_is_true(&self, key: &str) -> bool {
        self.metadata.configuration.get(key).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn column_mapping_mode(&self) -> ColumnMappingMode {
        self.column_mapping
    }

    /// The live data files, in no particular order.
    pub fn files(&self) -> impl Iterator<Item = &Arc<Add>> + '_ {
        self.files.values()
    }

    /// The live data files sorted by path (for deterministic output).
    pub fn files_sorted(&self) -> Vec<Arc<Add>> {
        let mut files: Vec<_> = self.files.values().cloned().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The live file with this path, if any.
    pub fn file_by_path(&self, path: &str) -> Option<&Arc<Add>> {
        self.files.values().find(|a| a.path == path)
    }

    /// Removed files that VACUUM has not yet deleted.
    pub fn tombstones(&self) -> impl Iterator<Item = &Arc<Remove>> + '_ {
        self.tombstones.values()
    }

    /// The last version committed by a streaming writer.
    pub fn txn_version(&self, app_id: &str) -> Option<i64> {
        self.txns.get(app_id).map(|t| t.version)
    }

    pub fn txns(&self) -> &HashMap<String, Txn> {
        &self.txns
    }

    pub fn domain(&self, domain: &str) -> Option<&DomainMetadata> {
        self.domains.get(domain)
    }

    pub fn domains(&self) -> &HashMap<String, DomainMetadata> {
        &self.domains
    }

    /// The version of the checkpoint this snapshot was (last) built from.
    pub fn checkpoint_version(&self) -> Option<u64> {
        self.checkpoint_version
    }

    /// The CHECK constraints (`delta.constraints.<name>`) and column invariants, as
    /// `(name, SQL expression)`; the engine enforces them on write.
    pub fn constraints(&self) -> Vec<(String, String)> {
        let mut constraints: Vec<(String, String)> = self
            .metadata
            .configuration
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("delta.constraints.").map(|name| (name.to_string(), v.clone())))
            .collect();
        for field in &self.schema.fields {
            let invariant = field
                .metadata
                .get("delta.invariants")
                .and_then(|v| match v {
                    serde_json::Value::String(s) => serde_json::from_str::<serde_json::Value>(s).ok(),
                    other => Some(other.clone()),
                })
                .and_then(|v| v.pointer("/expression/expression").and_then(|e| e.as_str()).map(str::to_string));
            if let Some(expression) = invariant {
                constraints.push((format!("invariant_{}", field.name), expression));
            }
        }
        constraints.sort();
        constraints
    }

    /// The actions of a checkpoint of this snapshot: protocol, metadata, txns, domains, live
    /// files and the tombstones still within retention.
    pub fn checkpoint_actions(&self, now_ms: i64) -> Vec<Action> {
        let retention_ms = self.deleted_file_retention_ms();
        let mut actions = vec![Action::Protocol((*self.protocol).clone()), Action::Metadata((*self.metadata).clone())];
        if protocol::has_writer_feature(&self.protocol, "v2Checkpoint") {
            actions.push(Action::CheckpointMetadata(crate::actions::CheckpointMetadata {
                version: self.version as i64,
                tags: None,
            }));
        }
        let mut txns: Vec<_> = self.txns.values().cloned().collect();
        txns.sort_by(|a, b| a.app_id.cmp(&b.app_id));
        actions.extend(txns.into_iter().map(Action::Txn));
        let mut domains: Vec<_> = self.domains.values().cloned().collect();
        domains.sort_by(|a, b| a.domain.cmp(&b.domain));
        actions.extend(domains.into_iter().map(Action::DomainMetadata));
        actions
            .extend(self.files_sorted().into_iter().map(|a| Action::Add(Add { data_change: false, ..(*a).clone() })));
        let mut tombstones: Vec<_> = self
            .tombstones
            .values()
            .filter(|r| r.deletion_timestamp.unwrap_or(0) > now_ms - retention_ms)
            .map(|r| Remove { stats: None, data_change: false, ..(**r).clone() })
            .collect();
        tombstones.sort_by(|a, b| a.path.cmp(&b.path));
        actions.extend(tombstones.into_iter().map(Action::Remove));
        actions
    }

    /// `delta.deletedFileRetentionDuration` in milliseconds (default one week).
    pub fn deleted_file_retention_ms(&self) -> i64 {
        self.metadata
            .configuration
            .get("delta.deletedFileRetentionDuration")
            .and_then(|v| parse_interval_ms(v))
            .unwrap_or(DELETED_FILE_RETENTION_MS_DEFAULT)
    }

    /// `delta.checkpointInterval` (default 10, as Spark).
    pub fn checkpoint_interval(&self) -> u64 {
        self.metadata
            .configuration
            .get("delta.checkpointInterval")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(10)
    }
}

/// The time of a commit from its file (used where only a checkpoint was read).
async fn commit_timestamp(store: &TableStore, version: u64) -> i64 {
    let path = store.log_path(&log::commit_file_name(version));
    match store.head(&path).await {
        Ok(meta) => meta.last_modified.timestamp_millis(),
        Err(_) => {
            let checkpoint = store.log_path(&log::checkpoint_file_name(version));
            store.head(&checkpoint).await.map(|m| m.last_modified.timestamp_millis()).unwrap_or(0)
        }
    }
}

/// Parses Delta's interval syntax (`interval 7 days`, `168 hours`, ...) into milliseconds.
pub fn parse_interval_ms(text: &str) -> Option<i64> {
    let lower = text.trim().to_ascii_lowercase();
    let body = lower.strip_prefix("interval").unwrap_or(&lower).trim();
    let mut words = body.split_whitespace();
    let amount: f64 = words.next()?.parse().ok()?;
    let unit = words.next().unwrap_or("milliseconds");
    let unit_ms: f64 = match unit.trim_end_matches('s') {
        "millisecond" | "m" => 1.0,
        "second" => 1_000.0,
        "minute" => 60_000.0,
        "hour" => 3_600_000.0,
        "day" => 86_400_000.0,
        "week" => 7.0 * 86_400_000.0,
        _ => return None,
    };
    Some((amount * unit_ms) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_intervals() {
        assert_eq!(parse_interval_ms("interval 7 days"), Some(7 * 86_400_000));
        assert_eq!(parse_interval_ms("interval 1 hour"), Some(3_600_000));
        assert_eq!(parse_interval_ms("nonsense"), None);
    }
}
