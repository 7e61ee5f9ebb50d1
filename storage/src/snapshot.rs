//! Snapshots: the state of a table at one version, built by log replay.
//!
//! A [`Snapshot`] is immutable and cheap to share: its file maps are persistent maps (`imbl`), so
//! the snapshot after a commit shares all but the changed entries with the one before (a commit
//! costs the files it changes, not the files the table has, and [`FileSet::changes_since`] finds
//! what changed between two related snapshots without visiting what they share); the other maps
//! sit behind `Arc`s that [`Snapshot::advance`] copies only when new commits change them. Replay follows the protocol: the last protocol
//! and metadata win, the last `txn` per appId wins, the last domain metadata per domain wins, and a
//! logical file is keyed by `(path, deletion vector id)`; within one commit removes apply before
//! adds, so a commit that replaces a file's deletion vector leaves exactly the new one.
//!
//! Loading the latest version reads `_last_checkpoint`, the checkpoint it names, and then probes
//! for the commits after it by name (one GET each, in growing concurrent windows) instead of
//! listing the whole `_delta_log/`: on a long log this is the difference between reading a hundred
//! small files and listing ten thousand. Time travel lists the log to find the right checkpoint.
//!
//! Replay tolerates the two kinds of damage a reader can step around, as Delta readers do: a
//! checkpoint that cannot be read is replaced by the next older complete checkpoint (or by the
//! commits from version 0, when they are all still there), and a newest commit that cannot be
//! parsed is left out, so the table opens at the version before it (committing on top then fails
//! on the corrupt file). Both are logged as warnings naming the file. A corrupt commit with newer
//! commits after it, and no checkpoint past it, stays an error.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use crate::actions::{Action, Add, DomainMetadata, FileKey, Metadata, Protocol, Remove, Txn};
use crate::checkpoint::read_checkpoint;
use crate::error::{Error, Result};
use crate::log::{self, CheckpointFiles, LogFile, LogFileKind};
use crate::protocol::{self, IN_COMMIT_TIMESTAMPS_KEY};
use crate::schema::{ColumnMappingMode, StructType};
use crate::store::TableStore;

/// Versions between checkpoints when `delta.checkpointInterval` is not set: the least, and
/// the step (see [`Snapshot::checkpoint_due`]).
pub const CHECKPOINT_INTERVAL_DEFAULT: u64 = 100;

/// Without `delta.checkpointInterval`, a checkpoint waits until the versions since the last one
/// number at least its entries (live files and tombstones) divided by this: each commit then
/// pays for a bounded number of checkpoint entries, however large the table's state grows.
pub const CHECKPOINT_ENTRIES_PER_VERSION: u64 = 10;

/// Without `delta.checkpointInterval`, the most versions between checkpoints: what a reader
/// opening the table (Sluice, delta-rs, Spark) replays after the newest checkpoint at most.
pub const CHECKPOINT_SPACING_MAX: u64 = 1_000;

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
    files: FileSet,
    tombstones: imbl::OrdMap<FileKey, Arc<Remove>>,
    txns: Arc<HashMap<String, Txn>>,
    domains: Arc<HashMap<String, DomainMetadata>>,
    checkpoint_version: Option<u64>,
}

/// The live data files of a snapshot by their logical key, as a persistent map: cloning is O(1),
/// a commit's change O(log n), and the snapshots of one table's history share their structure.
#[derive(Debug, Clone, Default)]
pub struct FileSet {
    files: imbl::OrdMap<FileKey, Arc<Add>>,
    /// The key of the live file at each path (a path is live once, with one deletion vector).
    by_path: imbl::HashMap<String, FileKey>,
}

/// The files one [`FileSet`] has and another has not, both ways.
#[derive(Debug, Default)]
pub struct FileChanges<'a> {
    pub removed: Vec<&'a Arc<Add>>,
    pub added: Vec<&'a Arc<Add>>,
}

impl FileSet {
    /// What changed from `older` to this set: files `older` had and this has not, and the other
    /// way round. Visits only what the two do not share, so comparing a snapshot with the one it
    /// was advanced from costs the commits in between, not the table's size.
    pub fn changes_since<'a>(&'a self, older: &'a FileSet) -> FileChanges<'a> {
        let mut changes = FileChanges::default();
        for item in older.files.diff(&self.files) {
            match item {
                imbl::ordmap::DiffItem::Add(_, add) => changes.added.push(add),
                imbl::ordmap::DiffItem::Remove(_, add) => changes.removed.push(add),
                // The same key is the same file (path and deletion vector).
                imbl::ordmap::DiffItem::Update { .. } => {}
            }
        }
        changes
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn get(&self, key: &FileKey) -> Option<&Arc<Add>> {
        self.files.get(key)
    }

    /// The live file at `path`, if any.
    pub fn get_path(&self, path: &str) -> Option<&Arc<Add>> {
        self.by_path.get(path).and_then(|key| self.files.get(key))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Add>> + '_ {
        self.files.values()
    }

    fn insert(&mut self, key: FileKey, add: Arc<Add>) {
        self.by_path.insert(key.path.clone(), key.clone());
        self.files.insert(key, add);
    }

    fn remove(&mut self, key: &FileKey) {
        if self.files.remove(key).is_some() && self.by_path.get(&key.path) == Some(key) {
            self.by_path.remove(&key.path);
        }
    }
}

/// Log replay in progress.
#[derive(Default)]
struct Replay {
    protocol: Option<Arc<Protocol>>,
    metadata: Option<Arc<Metadata>>,
    files: FileSet,
    tombstones: imbl::OrdMap<FileKey, Arc<Remove>>,
    txns: Arc<HashMap<String, Txn>>,
    domains: Arc<HashMap<String, DomainMetadata>>,
    version: Option<u64>,
    timestamp_ms: i64,
    /// The schema as the snapshot replay started from parsed it (with its Arrow form and column
    /// mapping), until a metaData action replaces it: a writer's commit then builds its snapshot
    /// without parsing the schema string again.
    parsed_schema: Option<(Arc<StructType>, SchemaRef, ColumnMappingMode)>,
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
            parsed_schema: Some((snapshot.schema.clone(), snapshot.arrow_schema.clone(), snapshot.column_mapping)),
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
                    self.files.remove(&key);
                    self.tombstones.insert(key, Arc::new(remove));
                }
                Action::Protocol(p) => self.protocol = Some(Arc::new(p)),
                Action::Metadata(m) => {
                    self.metadata = Some(Arc::new(m));
                    self.parsed_schema = None;
                }
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
            self.tombstones.remove(&key);
            self.files.insert(key, Arc::new(add));
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
        let (schema, arrow_schema, column_mapping) = match self.parsed_schema {
            Some(parsed) => parsed,
            None => {
                let schema = metadata.schema()?;
                let column_mapping = ColumnMappingMode::from_configuration(&metadata.configuration)?;
                let arrow_schema = Arc::new(schema.to_arrow());
                (Arc::new(schema), arrow_schema, column_mapping)
            }
        };
        Ok(Snapshot {
            store: store.clone(),
            version,
            timestamp_ms: self.timestamp_ms,
            protocol,
            metadata,
            schema,
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
///
/// A commit that cannot be parsed ends the probe, with a warning, when it is the newest one (the
/// next version does not exist): the table is read as of the version before it, and a commit on
/// top fails when it meets the corrupt file (see [`crate::commit`]). A corrupt commit with a newer
/// one after it is an error.
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
            match read {
                Ok(Some(commit)) => found.push(commit),
                Ok(None) => return Ok(found),
                Err(e @ Error::CorruptCommit { version, .. }) => {
                    return if is_newest_commit(store, version).await? {
                        warn_corrupt_newest_commit(store, &e);
                        Ok(found)
                    } else {
                        Err(e)
                    };
                }
                Err(e) => return Err(e),
            }
        }
        next += window;
        window = (window * 4).min(PROBE_WINDOW_MAX);
    }
}

/// Whether no commit follows `version`.
async fn is_newest_commit(store: &TableStore, version: u64) -> Result<bool> {
    let next = store.log_path(&log::commit_file_name(version.saturating_add(1)));
    match store.head(&next).await {
        Ok(_) => Ok(false),
        Err(e) if e.is_not_found() => Ok(true),
        Err(e) => Err(e),
    }
}

fn warn_corrupt_newest_commit(store: &TableStore, error: &Error) {
    tracing::warn!(
        table = store.location(),
        "the newest commit cannot be read; the table is read as of the version before it, and commits fail until \
         the file is repaired: {error}"
    );
}

/// How many unreadable checkpoints (and corrupt newest commits) one load steps back over before
/// giving up.
const LOAD_FALLBACKS_MAX: usize = 8;

/// What reading the checkpoint named in `_last_checkpoint` gave.
enum FromHint {
    Loaded(Snapshot),
    /// The checkpoint is not there (a stale hint, or a V2 checkpoint): list the log.
    NotThere,
    /// The checkpoint is there but cannot be read: list the log and use an older one.
    Unreadable(Error),
}

/// Whether an error reading a checkpoint means the checkpoint itself is broken (so that an older
/// one, or the commits, can stand in for it), rather than the store failing.
fn is_unreadable_checkpoint(error: &Error) -> bool {
    matches!(
        error,
        Error::CorruptCheckpoint { .. }
            | Error::CorruptCommit { .. }
            | Error::CorruptFile { .. }
            | Error::MissingFile { .. }
    )
}

fn warn_unreadable_checkpoint(store: &TableStore, checkpoint: &CheckpointFiles, error: &Error) {
    let files: Vec<String> = checkpoint.files.iter().map(|f| f.path.to_string()).collect();
    tracing::warn!(
        table = store.location(),
        version = checkpoint.version,
        files = files.join(", "),
        "cannot read the checkpoint; falling back to an older checkpoint or to the commits: {error}"
    );
}

/// Reads a checkpoint into a fresh replay. A checkpoint must hold the protocol and metadata; one
/// without them is as unreadable as a truncated one.
async fn replay_checkpoint(store: &TableStore, checkpoint: &CheckpointFiles) -> Result<Replay> {
    let actions = read_checkpoint(store, checkpoint).await?;
    let mut replay = Replay::default();
    let timestamp = commit_timestamp(store, checkpoint.version).await;
    replay.apply(actions, checkpoint.version, timestamp, store.location())?;
    if replay.protocol.is_none() || replay.metadata.is_none() {
        return Err(Error::CorruptCheckpoint {
            path: checkpoint.files.first().map(|f| f.path.to_string()).unwrap_or_default(),
            version: checkpoint.version,
            message: "it holds no protocol or no metaData action".into(),
        });
    }
    Ok(replay)
}

impl Snapshot {
    /// Loads the latest version of the table.
    pub async fn load_latest(store: &TableStore) -> Result<Self> {
        let mut unreadable = None;
        if let Some(hint) = log::read_last_checkpoint(store).await? {
            match Self::load_from_hint(store, &hint).await? {
                FromHint::Loaded(snapshot) => return Ok(snapshot),
                FromHint::NotThere => {}
                FromHint::Unreadable(error) => unreadable = Some((hint.version, error)),
            }
        }
        Self::load_listed(store, None, unreadable).await
    }

    /// Loads the table at a given version (time travel).
    pub async fn load_version(store: &TableStore, version: u64) -> Result<Self> {
        Self::load_listed(store, Some(version), None).await
    }

    /// Replays from the checkpoint named in `_last_checkpoint`.
    async fn load_from_hint(store: &TableStore, hint: &log::LastCheckpoint) -> Result<FromHint> {
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
        let mut replay = match replay_checkpoint(store, &checkpoint).await {
            Ok(replay) => replay,
            // A V2 checkpoint (UUID name) or a stale hint: fall back to listing.
            Err(e) if e.is_not_found() => return Ok(FromHint::NotThere),
            Err(e) if is_unreadable_checkpoint(&e) => {
                warn_unreadable_checkpoint(store, &checkpoint, &e);
                return Ok(FromHint::Unreadable(e));
            }
            Err(e) => return Err(e),
        };
        for (file, actions) in probe_commits(store, version + 1).await? {
            replay.apply(actions, file.version, file.modified_ms, store.location())?;
        }
        replay.finish(store, Some(version)).map(FromHint::Loaded)
    }

    /// Loads `at_version` (the newest version when `None`) from a listing of the log.
    ///
    /// A checkpoint that cannot be read is skipped for the next older complete one, or for the
    /// commits from version 0 when they are all there; if neither can stand in, the checkpoint's
    /// error is returned. For the newest version only, a newest commit that cannot be parsed is
    /// skipped as in [`probe_commits`]. `unreadable` is a checkpoint already found broken.
    async fn load_listed(
        store: &TableStore,
        at_version: Option<u64>,
        unreadable: Option<(u64, Error)>,
    ) -> Result<Self> {
        let mut target = at_version;
        let (mut unreadable_from, mut checkpoint_error) = match unreadable {
            Some((version, error)) => (Some(version), Some(error)),
            None => (None, None),
        };
        for _attempt in 0..LOAD_FALLBACKS_MAX {
            let segment = match unreadable_from {
                None => log::build_segment(store, target).await?,
                Some(from) => match log::build_segment_before(store, target, from).await {
                    Ok(segment) => segment,
                    Err(e) => {
                        tracing::warn!(table = store.location(), "no older checkpoint or full log to replay: {e}");
                        return Err(checkpoint_error.unwrap_or(e));
                    }
                },
            };
            let checkpoint_version = segment.checkpoint.as_ref().map(|c| c.version);
            let mut replay = Replay::default();
            if let Some(checkpoint) = &segment.checkpoint {
                match replay_checkpoint(store, checkpoint).await {
                    Ok(read) => replay = read,
                    Err(e) if is_unreadable_checkpoint(&e) => {
                        warn_unreadable_checkpoint(store, checkpoint, &e);
                        unreadable_from = Some(checkpoint.version);
                        checkpoint_error.get_or_insert(e);
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            match log::read_commits(store, &segment.commits).await {
                Ok(commits) => {
                    for (file, actions) in commits {
                        replay.apply(actions, file.version, file.modified_ms, store.location())?;
                    }
                    return replay.finish(store, checkpoint_version);
                }
                Err(e @ Error::CorruptCommit { version, .. })
                    if target.is_none() && version == segment.version && version > 0 =>
                {
                    warn_corrupt_newest_commit(store, &e);
                    target = Some(version - 1);
                }
                Err(e) => return Err(e),
            }
        }
        Err(checkpoint_error.unwrap_or_else(|| Error::InvalidLog {
            location: store.location().to_string(),
            message: format!("gave up after stepping back over {LOAD_FALLBACKS_MAX} unreadable log files"),
        }))
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
        self.files.iter()
    }

    /// The live data files as a set (see [`FileSet::changes_since`]).
    pub fn file_set(&self) -> &FileSet {
        &self.files
    }

    /// The live data files sorted by path (for deterministic output).
    pub fn files_sorted(&self) -> Vec<Arc<Add>> {
        let mut files: Vec<_> = self.files.iter().cloned().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The live file with this path, if any.
    pub fn file_by_path(&self, path: &str) -> Option<&Arc<Add>> {
        self.files.get_path(path)
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

    /// `delta.checkpointInterval`, when the table sets it.
    fn configured_checkpoint_interval(&self) -> Option<u64> {
        self.metadata
            .configuration
            .get("delta.checkpointInterval")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
    }

    /// Whether this version is due a checkpoint, the newest one being at `last` (as far as the
    /// caller knows; 0 when there is none).
    ///
    /// With `delta.checkpointInterval` set, every multiple of it is. Without, a multiple of
    /// [`CHECKPOINT_INTERVAL_DEFAULT`] is once the versions since `last` number at least the
    /// checkpoint's entries divided by [`CHECKPOINT_ENTRIES_PER_VERSION`] (at most
    /// [`CHECKPOINT_SPACING_MAX`]). A checkpoint holds every live file and unexpired tombstone:
    /// on a table that takes many one-row commits (an OLTP workload keeps a week of tombstones)
    /// a checkpoint every hundred versions grew to cost more than the commits between them.
    pub fn checkpoint_due(&self, last: u64) -> bool {
        if let Some(interval) = self.configured_checkpoint_interval() {
            return self.version.is_multiple_of(interval);
        }
        if !self.version.is_multiple_of(CHECKPOINT_INTERVAL_DEFAULT) {
            return false;
        }
        let entries = (self.files.len() + self.tombstones.len()) as u64;
        let spacing =
            (entries / CHECKPOINT_ENTRIES_PER_VERSION).clamp(CHECKPOINT_INTERVAL_DEFAULT, CHECKPOINT_SPACING_MAX);
        self.version.saturating_sub(last) >= spacing
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
