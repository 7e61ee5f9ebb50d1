//! [`Table`]: a handle on one table, holding the latest snapshot it has seen.
//!
//! Everything that changes a table goes through [`Table::commit`], which commits a
//! [`Transaction`], advances the cached snapshot from the commit's own actions (no re-read), and
//! writes a checkpoint when one is due ([`Snapshot::checkpoint_due`]: every
//! `delta.checkpointInterval` versions, or spaced by the table's size). Several handles, in one process or
//! many, may write the same table: the log's put-if-absent and the conflict rules in
//! [`crate::commit`] keep them consistent.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use crate::actions::{now_ms, Action, Format, Metadata};
use crate::commit::{CommitOutcome, Transaction};
use crate::error::{Error, Result};
use crate::log::{self, LogFile, LogFileKind};
use crate::parquet::WriteOptions;
use crate::protocol;
use crate::schema::{ColumnMappingMode, StructType, COLUMN_MAPPING_MAX_ID_KEY};
use crate::snapshot::Snapshot;
use crate::store::TableStore;

/// What a new table looks like.
#[derive(Debug, Clone, Default)]
pub struct CreateTable {
    pub schema: StructType,
    pub partition_columns: Vec<String>,
    /// Table properties (`delta.*` and user properties).
    pub properties: HashMap<String, String>,
    pub name: Option<String>,
    pub description: Option<String>,
}

/// One entry of a table's history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    pub version: u64,
    pub timestamp_ms: i64,
    pub operation: Option<String>,
    pub operation_parameters: Option<Value>,
    pub commit_info: Map<String, Value>,
}

/// A table and the newest snapshot this handle knows.
#[derive(Debug)]
pub struct Table {
    store: TableStore,
    latest: RwLock<Latest>,
    write_options: WriteOptions,
    /// A staged handle's commits (see [`crate::stage`]); `None` for a handle that commits.
    stage: Option<std::sync::Mutex<crate::stage::Stage>>,
    /// When this handle last cleaned the log (ms since the epoch; 0: not yet), see
    /// [`crate::log_cleanup::LOG_CLEANUP_INTERVAL_MS`].
    log_cleaned_ms: std::sync::atomic::AtomicI64,
    /// The oldest version whose changes a reader still needs (u64::MAX: none); see
    /// [`Table::retain_changes_from`].
    changes_needed_from: std::sync::atomic::AtomicU64,
    /// The version of the newest checkpoint this handle wrote (0: none yet; its snapshots name
    /// the one they were loaded from), for [`Snapshot::checkpoint_due`].
    last_checkpoint: std::sync::atomic::AtomicU64,
}

/// A committed version due a checkpoint (see [`Table::commit_leaving_checkpoint`]).
#[derive(Debug)]
pub struct CheckpointDue {
    snapshot: Arc<Snapshot>,
    /// The `txnId` of the version's commitInfo, for its `.crc`.
    txn_id: Option<String>,
}

/// The process's commit clock: one tick per commit made through a [`Table`] handle, taken as
/// the commit's snapshot becomes the handle's latest (see [`Table::snapshot_as_of_clock`]).
static COMMIT_CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The commit clock's reading now: a snapshot "as of" it holds every commit this process made
/// before, and none it makes after.
pub fn commit_clock() -> u64 {
    COMMIT_CLOCK.load(std::sync::atomic::Ordering::SeqCst)
}

/// How many of its own commits' ticks a handle remembers.
const TICKS_KEPT: usize = 4096;

/// How many of the snapshots it replaced a handle keeps in memory, for
/// [`Table::snapshot_as_of_clock`]: a transaction block reads each table as of the block's
/// moment, usually a version or a few before the latest when others commit meanwhile. They
/// share their file sets with the latest (persistent maps), so each costs about what its
/// commits changed.
const RECENT_KEPT: usize = 256;

/// A handle's latest snapshot, the ones it replaced, and the ticks of the commits this process
/// made through it.
#[derive(Debug)]
struct Latest {
    snapshot: Arc<Snapshot>,
    /// `(tick, version)` of the last [`TICKS_KEPT`] commits through this handle, oldest first.
    ticks: std::collections::VecDeque<(u64, u64)>,
    /// The last [`RECENT_KEPT`] snapshots that were latest before `snapshot`, oldest first.
    recent: std::collections::VecDeque<Arc<Snapshot>>,
}

impl Latest {
    fn new(snapshot: Arc<Snapshot>) -> RwLock<Self> {
        RwLock::new(Self { snapshot, ticks: Default::default(), recent: Default::default() })
    }

    /// Makes `snapshot` the latest if it is newer, keeping the one it replaces among the recent.
    fn replace(&mut self, snapshot: Arc<Snapshot>) {
        if snapshot.version() <= self.snapshot.version() {
            return;
        }
        if self.recent.len() >= RECENT_KEPT {
            self.recent.pop_front();
        }
        let replaced = std::mem::replace(&mut self.snapshot, snapshot);
        self.recent.push_back(replaced);
    }

    /// The snapshot at `version`, if it is the latest or a recent one.
    fn at_version(&self, version: u64) -> Option<Arc<Snapshot>> {
        if self.snapshot.version() == version {
            return Some(self.snapshot.clone());
        }
        self.recent.iter().rev().find(|s| s.version() == version).cloned()
    }
}

impl Table {
    /// Opens an existing table.
    pub async fn open(store: TableStore) -> Result<Self> {
        let snapshot = Snapshot::load_latest(&store).await?;
        match crate::checksum::verify(&store, &snapshot).await {
            Ok(None) => {}
            Ok(Some(difference)) => tracing::warn!(
                table = store.location(),
                version = snapshot.version(),
                "the log replays to other contents than its .crc says: {difference}"
            ),
            Err(e) => tracing::warn!(table = store.location(), "the .crc could not be read: {e}"),
        }
        Ok(Self::with_snapshot(store, snapshot))
    }

    /// Opens a table at a local path or URL (see [`TableStore::from_uri`]).
    pub async fn open_uri(uri: &str) -> Result<Self> {
        Self::open(TableStore::from_uri(uri)?).await
    }

    fn with_snapshot(store: TableStore, snapshot: Snapshot) -> Self {
        Self {
            store,
            latest: Latest::new(Arc::new(snapshot)),
            write_options: WriteOptions::default(),
            stage: None,
            log_cleaned_ms: Default::default(),
            changes_needed_from: std::sync::atomic::AtomicU64::new(u64::MAX),
            last_checkpoint: Default::default(),
        }
    }

    /// A handle on the same table that stages its commits on `base` (see [`crate::stage`]).
    pub(crate) fn staged_handle(&self, base: Arc<Snapshot>) -> Self {
        Self {
            store: self.store.clone(),
            latest: Latest::new(base.clone()),
            write_options: self.write_options.clone(),
            stage: Some(crate::stage::Stage::new(base)),
            log_cleaned_ms: Default::default(),
            changes_needed_from: std::sync::atomic::AtomicU64::new(self.changes_needed_from()),
            last_checkpoint: Default::default(),
        }
    }

    /// Keeps what reading the table's changes from `version` on needs (None: nothing), for a
    /// reader that will come back for them (a durable subscription): VACUUM keeps the files that
    /// commits from `version` on removed or wrote as change data (whatever their age), and log
    /// cleanup keeps those commits. This handle's VACUUM and cleanup honour it; the owner of the
    /// need sets it on every handle it opens.
    pub fn retain_changes_from(&self, version: Option<u64>) {
        self.changes_needed_from.store(version.unwrap_or(u64::MAX), std::sync::atomic::Ordering::Relaxed);
    }

    /// The version set by [`Self::retain_changes_from`].
    pub fn changes_needed_from(&self) -> u64 {
        self.changes_needed_from.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn stage(&self) -> Option<&std::sync::Mutex<crate::stage::Stage>> {
        self.stage.as_ref()
    }

    /// Sets the handle's snapshot, older or not (a staged handle rolled back).
    pub(crate) fn replace_snapshot(&self, snapshot: Arc<Snapshot>) {
        let mut guard = self.latest.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A staged handle's later commits reuse the versions it rolled back.
        guard.recent.retain(|s| s.version() < snapshot.version());
        guard.snapshot = snapshot;
    }

    /// Sets the options of this handle's writers.
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.write_options = options;
        self
    }

    pub fn write_options(&self) -> &WriteOptions {
        &self.write_options
    }

    /// Creates a table (version 0) with the lowest protocol its schema and properties need.
    pub async fn create(store: TableStore, create: CreateTable) -> Result<Self> {
        let mut schema = create.schema;
        schema.check_names()?;
        for column in &create.partition_columns {
            let field = schema
                .field(column)
                .ok_or_else(|| Error::Schema(format!("partition column '{column}' is not in the schema")))?;
            if !field.data_type.is_primitive() {
                return Err(Error::Schema(format!("partition column '{column}' must have a primitive type")));
            }
        }
        if !create.partition_columns.is_empty() && create.partition_columns.len() >= schema.fields.len() {
            return Err(Error::Schema(
                "cannot use all columns as partition columns: a table needs a data column".into(),
            ));
        }
        let mut configuration = create.properties;
        if ColumnMappingMode::from_configuration(&configuration)? != ColumnMappingMode::None {
            let max_id = schema.assign_column_mapping(0);
            configuration.insert(COLUMN_MAPPING_MAX_ID_KEY.into(), max_id.to_string());
        }
        let metadata = Metadata {
            id: uuid::Uuid::new_v4().to_string(),
            name: create.name,
            description: create.description,
            format: Format::default(),
            schema_string: schema.to_schema_string(),
            partition_columns: create.partition_columns,
            configuration,
            created_time: Some(now_ms()),
        };
        let protocol = protocol::required_protocol(None, &metadata, &schema)?;
        protocol::check_writable(&protocol, store.location())?;
        let mut transaction = Transaction::new(None, "CREATE TABLE");
        transaction.add_action(Action::Protocol(protocol)).add_action(Action::Metadata(metadata));
        let txn_id = match transaction.commit(&store, None).await? {
            CommitOutcome::Committed(committed) => {
                committed.commits.last().and_then(|(_, _, actions)| crate::checksum::txn_id(actions))
            }
            CommitOutcome::Conflict(_) => return Err(Error::TableExists { location: store.location().to_string() }),
        };
        let snapshot = Snapshot::load_latest(&store).await?;
        if let Err(e) = crate::checksum::write(&store, &snapshot, txn_id).await {
            tracing::warn!(table = store.location(), "no .crc written for version 0 (the table stands): {e}");
        }
        Ok(Self::with_snapshot(store, snapshot))
    }

    /// Whether a Delta table exists at the store's root.
    pub async fn exists(store: &TableStore) -> Result<bool> {
        let files = log::list_log(store, None).await?;
        Ok(!files.is_empty())
    }

    pub fn store(&self) -> &TableStore {
        &self.store
    }

    pub fn location(&self) -> &str {
        self.store.location()
    }

    /// The newest snapshot this handle has seen, without touching storage.
    pub fn cached_snapshot(&self) -> Arc<Snapshot> {
        self.latest.read().map(|s| s.snapshot.clone()).unwrap_or_else(|poisoned| poisoned.into_inner().snapshot.clone())
    }

    fn store_snapshot(&self, snapshot: Arc<Snapshot>) {
        self.latest.write().unwrap_or_else(|poisoned| poisoned.into_inner()).replace(snapshot);
    }

    /// [`Self::store_snapshot`] of a commit this handle made, with the commit clock's next tick
    /// (taken under the same lock, so a reader sees the tick exactly when it sees the snapshot).
    fn store_committed(&self, snapshot: Arc<Snapshot>) {
        let mut guard = self.latest.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let tick = COMMIT_CLOCK.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if guard.ticks.len() >= TICKS_KEPT {
            guard.ticks.pop_front();
        }
        guard.ticks.push_back((tick, snapshot.version()));
        guard.replace(snapshot);
    }

    /// The table as this process had it when the commit clock read `clock`
    /// ([`commit_clock`]): the latest snapshot without the commits this process made through
    /// this handle since (commits of other processes are in it as they are found, since their
    /// order with this process's is not known). `None` when this handle no longer remembers
    /// its first commit after `clock` (more than 4,096 commits ago).
    pub async fn snapshot_as_of_clock(&self, clock: u64) -> Result<Option<Arc<Snapshot>>> {
        let latest = self.snapshot().await?;
        let (first_after, remembered, kept) = {
            let guard = self.latest.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            // The newest commit's tick is the last: search from there (a block is usually
            // behind by a few commits).
            let after = guard.ticks.iter().rev().take_while(|(tick, _)| *tick > clock).last();
            let first_after = after.map(|(_, version)| *version);
            let remembered =
                guard.ticks.len() < TICKS_KEPT || guard.ticks.front().is_some_and(|(tick, _)| *tick <= clock);
            let kept = first_after.and_then(|v| guard.at_version(v.saturating_sub(1)));
            (first_after, remembered, kept)
        };
        match first_after {
            None => Ok(Some(latest)),
            Some(_) if !remembered => Ok(None),
            Some(_) if kept.is_some() => Ok(kept),
            Some(version) => {
                let before = version.saturating_sub(1);
                if before == latest.version() {
                    return Ok(Some(latest));
                }
                self.snapshot_at_version(before).await.map(Some)
            }
        }
    }

    /// The latest snapshot, after reading any commits other writers made (a staged handle's:
    /// its base and its staged commits, whatever others committed since).
    pub async fn snapshot(&self) -> Result<Arc<Snapshot>> {
        let cached = self.cached_snapshot();
        if self.stage.is_some() {
            return Ok(cached);
        }
        match cached.advance().await? {
            Some(newer) => {
                let newer = Arc::new(newer);
                self.store_snapshot(newer.clone());
                Ok(self.cached_snapshot())
            }
            None => Ok(cached),
        }
    }

    /// The table as of a version.
    pub async fn snapshot_at_version(&self, version: u64) -> Result<Arc<Snapshot>> {
        let cached = self.cached_snapshot();
        if cached.version() == version {
            return Ok(cached);
        }
        if self.stage.is_some() && version > cached.version() {
            return Err(Error::InvalidArgument(format!(
                "version {version} of {} is not there (the latest is {})",
                self.location(),
                cached.version()
            )));
        }
        Ok(Arc::new(Snapshot::load_version(&self.store, version).await?))
    }

    /// The table as of a time: the last version committed at or before `timestamp_ms`.
    pub async fn snapshot_at_timestamp(&self, timestamp_ms: i64) -> Result<Arc<Snapshot>> {
        let version = self.version_at_timestamp(timestamp_ms).await?;
        self.snapshot_at_version(version).await
    }

    /// The last version committed at or before `timestamp_ms`.
    pub async fn version_at_timestamp(&self, timestamp_ms: i64) -> Result<u64> {
        let timestamps = self.commit_timestamps().await?;
        let found = timestamps.iter().rev().find(|(_, ts)| *ts <= timestamp_ms).map(|(v, _)| *v);
        match found {
            Some(version) => Ok(version),
            None => {
                let earliest = timestamps.first().map(|(_, ts)| *ts).unwrap_or(0);
                Err(Error::TimestampTooEarly {
                    location: self.location().to_string(),
                    timestamp: format_ms(timestamp_ms),
                    earliest: format_ms(earliest),
                })
            }
        }
    }

    /// `(version, timestamp)` of every commit still in the log, made monotonic as Delta does
    /// (a commit never appears older than the one before it).
    async fn commit_timestamps(&self) -> Result<Vec<(u64, i64)>> {
        let files = log::list_log(&self.store, None).await?;
        let commits: Vec<LogFile> = files.into_iter().filter(|f| f.kind == LogFileKind::Commit).collect();
        let ict = self.cached_snapshot().property_is_true(protocol::IN_COMMIT_TIMESTAMPS_KEY);
        let mut out = Vec::with_capacity(commits.len());
        let mut previous = i64::MIN;
        if ict {
            for (file, actions) in log::read_commits(&self.store, &commits).await? {
                let ts = commit_info(&actions)
                    .and_then(|i| i.get("inCommitTimestamp").and_then(Value::as_i64))
                    .unwrap_or(file.modified_ms);
                previous = ts.max(previous.saturating_add(1));
                out.push((file.version, previous));
            }
        } else {
            for file in commits {
                previous = file.modified_ms.max(previous.saturating_add(1));
                out.push((file.version, previous));
            }
        }
        Ok(out)
    }

    /// The commits of the table, newest first, at most `limit` of them.
    pub async fn history(&self, limit: Option<usize>) -> Result<Vec<HistoryEntry>> {
        let timestamps = self.commit_timestamps().await?;
        let take = limit.unwrap_or(usize::MAX).min(timestamps.len());
        let newest = timestamps.get(timestamps.len() - take..).unwrap_or_default();
        let files: Vec<LogFile> = newest
            .iter()
            .map(|(v, _)| LogFile {
                version: *v,
                kind: LogFileKind::Commit,
                path: self.store.log_path(&log::commit_file_name(*v)),
                size: 0,
                modified_ms: 0,
            })
            .collect();
        let mut entries = Vec::with_capacity(files.len());
        for ((file, actions), (_, ts)) in log::read_commits(&self.store, &files).await?.into_iter().zip(newest) {
            let info = commit_info(&actions).cloned().unwrap_or_default();
            entries.push(HistoryEntry {
                version: file.version,
                timestamp_ms: *ts,
                operation: info.get("operation").and_then(Value::as_str).map(str::to_string),
                operation_parameters: info.get("operationParameters").cloned(),
                commit_info: info,
            });
        }
        entries.reverse();
        Ok(entries)
    }

    /// Commits a transaction built on `snapshot`, then advances the cache and checkpoints when due.
    pub async fn commit(&self, snapshot: &Snapshot, transaction: Transaction) -> Result<CommitOutcome> {
        let (outcome, due) = self.commit_leaving_checkpoint(snapshot, transaction).await?;
        if let Some(due) = due {
            self.checkpoint_committed(due).await;
        }
        Ok(outcome)
    }

    /// [`Table::commit`], leaving the checkpoint to the caller: the version to checkpoint (with
    /// [`Table::checkpoint_committed`]) when one is due. A caller that holds locks others wait
    /// for (a transaction's key locks) checkpoints after it lets them go.
    pub async fn commit_leaving_checkpoint(
        &self,
        snapshot: &Snapshot,
        transaction: Transaction,
    ) -> Result<(CommitOutcome, Option<CheckpointDue>)> {
        if let Some(stage) = &self.stage {
            return Ok((self.commit_to_stage(stage, snapshot, transaction)?, None));
        }
        // The versions this handle has seen exist: checked as winners, not tried.
        let known = self.cached_snapshot().version();
        let outcome = transaction.commit_after(&self.store, Some(snapshot), Some(known)).await?;
        if let CommitOutcome::Committed(committed) = &outcome {
            let commits = committed
                .commits
                .iter()
                .map(|(version, modified, actions)| {
                    let file = LogFile {
                        version: *version,
                        kind: LogFileKind::Commit,
                        path: self.store.log_path(&log::commit_file_name(*version)),
                        size: 0,
                        modified_ms: *modified,
                    };
                    (file, actions.clone())
                })
                .collect();
            let next = Arc::new(snapshot.apply_commits(commits)?);
            self.store_committed(next.clone());
            let written = self.last_checkpoint.load(std::sync::atomic::Ordering::Relaxed);
            if next.checkpoint_due(next.checkpoint_version().unwrap_or(0).max(written)) {
                let txn_id = committed.commits.last().and_then(|(_, _, actions)| crate::checksum::txn_id(actions));
                return Ok((outcome, Some(CheckpointDue { snapshot: next, txn_id })));
            }
        }
        Ok((outcome, None))
    }

    /// What follows a commit whose version is due a checkpoint (see
    /// [`Table::commit_leaving_checkpoint`]): its `.crc`, the checkpoint, and the log's cleanup
    /// when due. Failures are logged: the commit stands without them.
    pub async fn checkpoint_committed(&self, due: CheckpointDue) {
        let CheckpointDue { snapshot: next, txn_id } = due;
        // A `.crc` with each checkpoint, not each commit: the file is optional, and a file
        // created per commit and table is a cost of every short transaction.
        if let Err(e) = crate::checksum::write(&self.store, &next, txn_id).await {
            tracing::warn!(
                table = self.location(),
                version = next.version(),
                "no .crc written (the commit stands): {e}"
            );
        }
        match self.checkpoint(&next).await {
            Ok(()) => self.clean_log_when_due(&next).await,
            Err(e) => tracing::warn!(
                table = self.location(),
                version = next.version(),
                "checkpoint failed (the commit stands): {e}"
            ),
        }
    }

    /// Cleans the log after a checkpoint of `snapshot`, when this handle has not done so for
    /// [`crate::log_cleanup::LOG_CLEANUP_INTERVAL_MS`] (it lists the whole log).
    async fn clean_log_when_due(&self, snapshot: &Snapshot) {
        use std::sync::atomic::Ordering;
        let now = now_ms();
        let last = self.log_cleaned_ms.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < crate::log_cleanup::LOG_CLEANUP_INTERVAL_MS {
            return;
        }
        if self.log_cleaned_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return; // another commit of this handle is cleaning
        }
        if let Err(e) =
            crate::log_cleanup::clean_expired_log(&self.store, snapshot, now, self.changes_needed_from()).await
        {
            tracing::warn!(table = self.location(), "log cleanup failed (it runs again after a later checkpoint): {e}");
        }
    }

    /// Writes a checkpoint of a snapshot.
    pub async fn checkpoint(&self, snapshot: &Snapshot) -> Result<()> {
        let kind = if protocol::has_writer_feature(snapshot.protocol(), "v2Checkpoint") {
            crate::checkpoint::CheckpointKind::V2
        } else {
            crate::checkpoint::CheckpointKind::Classic
        };
        crate::checkpoint::write_checkpoint(
            &self.store,
            snapshot.version(),
            &snapshot.checkpoint_actions(now_ms()),
            kind,
        )
        .await?;
        self.last_checkpoint.fetch_max(snapshot.version(), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Changes table properties (and upgrades the protocol if they need it). Setting
    /// `delta.columnMapping.mode` assigns ids and physical names to the existing columns.
    pub async fn set_properties(&self, properties: HashMap<String, String>, unset: &[String]) -> Result<CommitOutcome> {
        let snapshot = self.snapshot().await?;
        let mut metadata = snapshot.metadata().clone();
        let mut schema = snapshot.schema().clone();
        let before = snapshot.column_mapping_mode();
        for key in unset {
            metadata.configuration.remove(key);
        }
        metadata.configuration.extend(properties);
        let after = ColumnMappingMode::from_configuration(&metadata.configuration)?;
        if before == ColumnMappingMode::None && after != ColumnMappingMode::None {
            // Existing files carry logical names: give the columns their names as physical names.
            for field in &mut schema.fields {
                field
                    .metadata
                    .entry(crate::schema::PHYSICAL_NAME_KEY.to_string())
                    .or_insert_with(|| Value::String(field.name.clone()));
            }
            let max_id = schema.assign_column_mapping(schema.max_column_id());
            metadata.configuration.insert(COLUMN_MAPPING_MAX_ID_KEY.into(), max_id.to_string());
            metadata.schema_string = schema.to_schema_string();
        } else if before != after && before != ColumnMappingMode::None {
            return Err(Error::InvalidArgument(format!("column mapping cannot change from {before:?} to {after:?}")));
        }
        self.commit_metadata(&snapshot, metadata, &schema, "SET TBLPROPERTIES").await
    }

    /// Sets the table's description (`metaData.description`, the table comment Spark and
    /// delta-rs show), or removes it with None, on `snapshot`.
    pub async fn set_description(&self, snapshot: &Snapshot, description: Option<String>) -> Result<CommitOutcome> {
        let mut metadata = snapshot.metadata().clone();
        metadata.description = description;
        self.commit_metadata(snapshot, metadata, snapshot.schema(), "SET TBLPROPERTIES").await
    }

    /// Replaces the schema (for added or renamed columns); `schema` must keep every existing
    /// column's physical name and id.
    pub async fn set_schema(&self, snapshot: &Snapshot, schema: StructType, operation: &str) -> Result<CommitOutcome> {
        let partitions = snapshot.partition_columns().to_vec();
        self.update_metadata(snapshot, schema, partitions, snapshot.configuration().clone(), operation).await
    }

    /// Replaces schema, partition columns and properties in one commit (upgrading the protocol
    /// if needed). Under column mapping, new fields get ids and physical names.
    pub async fn update_metadata(
        &self,
        snapshot: &Snapshot,
        mut schema: StructType,
        partition_columns: Vec<String>,
        configuration: HashMap<String, String>,
        operation: &str,
    ) -> Result<CommitOutcome> {
        schema.check_names()?;
        for column in &partition_columns {
            if schema.field(column).is_none() {
                return Err(Error::Schema(format!("partition column '{column}' is not in the schema")));
            }
        }
        let mut metadata = snapshot.metadata().clone();
        metadata.configuration = configuration;
        metadata.partition_columns = partition_columns;
        if ColumnMappingMode::from_configuration(&metadata.configuration)? != ColumnMappingMode::None {
            let known = metadata.configuration.get(COLUMN_MAPPING_MAX_ID_KEY).and_then(|v| v.parse().ok()).unwrap_or(0);
            let max_id = schema.assign_column_mapping(known.max(schema.max_column_id()));
            metadata.configuration.insert(COLUMN_MAPPING_MAX_ID_KEY.into(), max_id.to_string());
        }
        metadata.schema_string = schema.to_schema_string();
        self.commit_metadata(snapshot, metadata, &schema, operation).await
    }

    async fn commit_metadata(
        &self,
        snapshot: &Snapshot,
        metadata: Metadata,
        schema: &StructType,
        operation: &str,
    ) -> Result<CommitOutcome> {
        let protocol = protocol::required_protocol(Some(snapshot.protocol()), &metadata, schema)?;
        let mut transaction = Transaction::new(Some(snapshot), operation);
        if &protocol != snapshot.protocol() {
            transaction.add_action(Action::Protocol(protocol));
        }
        transaction.add_action(Action::Metadata(metadata));
        self.commit(snapshot, transaction).await
    }
}

fn commit_info(actions: &[Action]) -> Option<&Map<String, Value>> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(info) => Some(info),
        _ => None,
    })
}

fn format_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339()).unwrap_or_else(|| ms.to_string())
}
