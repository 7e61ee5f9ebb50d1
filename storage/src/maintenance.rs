//! Maintenance: OPTIMIZE (bin-packing small files and purging deletion vectors), REORG ... APPLY
//! (PURGE) and DROP FEATURE deletionVectors (handing a table to readers without them), VACUUM (deleting
//! files that the table's log gave up longer than the retention period ago) and RESTORE (making an
//! old version the newest).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use serde_json::Value;

use crate::actions::{now_ms, parse_commit, Action, Add, Remove};
use crate::commit::{CommitOutcome, Transaction};
use crate::error::{Error, Result};
use crate::log::{self, LogFile, LogFileKind};
use crate::protocol;
use crate::scan::RowMask;
use crate::snapshot::Snapshot;
use crate::store::{decode_path, is_absolute_uri, percent_decode, relative_inside_root, TableStore};
use crate::table::Table;

/// A partition's values, as a sortable key.
type PartitionKey = Vec<(String, Option<String>)>;

/// What OPTIMIZE did.
#[derive(Debug, Clone)]
pub struct OptimizeResult {
    pub outcome: Option<CommitOutcome>,
    pub files_removed: usize,
    pub files_added: usize,
}

/// What VACUUM did (or, dry, would do).
#[derive(Debug, Clone, Default)]
pub struct VacuumResult {
    pub files_deleted: Vec<String>,
}

impl Table {
    /// Rewrites, per partition, the files smaller than `min_file_size_bytes` (when there are two or
    /// more) and every file with a deletion vector, into files of the target size.
    pub async fn optimize(&self, min_file_size_bytes: Option<u64>) -> Result<OptimizeResult> {
        let snapshot = self.snapshot().await?;
        let target = self.write_options().target_file_size_bytes;
        let small = min_file_size_bytes.unwrap_or(target / 4);
        let mut by_partition: BTreeMap<PartitionKey, Vec<Arc<Add>>> = BTreeMap::new();
        for add in snapshot.files_sorted() {
            by_partition.entry(add.partition_values.clone().into_iter().collect()).or_default().push(add);
        }
        let mut chosen = Vec::new();
        for files in by_partition.into_values() {
            let small_files: Vec<_> =
                files.iter().filter(|f| (f.size as u64) < small && f.deletion_vector.is_none()).cloned().collect();
            if small_files.len() >= 2 {
                chosen.extend(small_files);
            }
            chosen.extend(files.iter().filter(|f| f.deletion_vector.is_some()).cloned());
        }
        let mut transaction = Transaction::new(Some(&snapshot), "OPTIMIZE");
        transaction.parameter("minFileSize", small);
        self.rewrite_files(&snapshot, chosen, transaction).await
    }

    /// Rewrites every file that has a deletion vector into files without one (Databricks'
    /// `REORG TABLE t APPLY (PURGE)`), so the deleted rows are gone from the data files too.
    pub async fn purge_deletion_vectors(&self) -> Result<OptimizeResult> {
        let snapshot = self.snapshot().await?;
        let chosen: Vec<Arc<Add>> =
            snapshot.files_sorted().into_iter().filter(|f| f.deletion_vector.is_some()).collect();
        let mut transaction = Transaction::new(Some(&snapshot), "REORG");
        transaction.parameter("applyPurge", true);
        self.rewrite_files(&snapshot, chosen, transaction).await
    }

    /// Drops a table feature (Databricks' `ALTER TABLE t DROP FEATURE deletionVectors`), so that
    /// readers without it read the table: commits the protocol without the feature (the lowest
    /// one the remaining features allow, legacy versions when they suffice) and checkpoints that
    /// version, so readers of the latest version need nothing from the commits before it. Only
    /// `deletionVectors` can be dropped, once `delta.enableDeletionVectors` is off and no live
    /// file has a deletion vector (see [`Table::purge_deletion_vectors`]). `None` when the table
    /// does not declare the feature.
    ///
    /// Versions before the drop keep their protocol: time travel to them still needs deletion
    /// vectors, and VACUUM keeps their files for its usual retention.
    pub async fn drop_feature(&self, feature: &str) -> Result<Option<CommitOutcome>> {
        if feature != "deletionVectors" {
            return Err(Error::InvalidArgument(format!(
                "table feature {feature} cannot be dropped (only deletionVectors can)"
            )));
        }
        let snapshot = self.snapshot().await?;
        if !protocol::has_reader_feature(snapshot.protocol(), feature)
            && !protocol::has_writer_feature(snapshot.protocol(), feature)
        {
            return Ok(None);
        }
        if snapshot.property_is_true(protocol::ENABLE_DELETION_VECTORS_KEY) {
            return Err(Error::InvalidArgument(format!(
                "{} is still true: turn it off first",
                protocol::ENABLE_DELETION_VECTORS_KEY
            )));
        }
        if snapshot.files().any(|f| f.deletion_vector.is_some()) {
            return Err(Error::InvalidArgument(
                "live files still have deletion vectors: purge them first (REORG TABLE ... APPLY (PURGE))".into(),
            ));
        }
        let lower = protocol::without_feature(snapshot.protocol(), snapshot.metadata(), snapshot.schema(), feature)?;
        let mut transaction = Transaction::new(Some(&snapshot), "DROP FEATURE");
        transaction.parameter("featureName", feature);
        transaction.add_action(Action::Protocol(lower));
        let outcome = self.commit(&snapshot, transaction).await?;
        if let CommitOutcome::Committed(committed) = &outcome {
            let dropped = self.snapshot().await?;
            if dropped.version() == committed.version {
                self.checkpoint(&dropped).await?;
            }
        }
        Ok(Some(outcome))
    }

    /// Rewrites `chosen` (live files of `snapshot`) without their deleted rows, in one commit
    /// that changes no data.
    async fn rewrite_files(
        &self,
        snapshot: &Snapshot,
        chosen: Vec<Arc<Add>>,
        mut transaction: Transaction,
    ) -> Result<OptimizeResult> {
        if chosen.is_empty() {
            return Ok(OptimizeResult { outcome: None, files_removed: 0, files_added: 0 });
        }
        let mut rows = Vec::new();
        for add in &chosen {
            let mask = match &add.deletion_vector {
                Some(dv) => RowMask::Without(Arc::new(crate::scan::read_dv(self.store(), dv, &add.path).await?)),
                None => RowMask::All,
            };
            rows.extend(self.read_rows(snapshot, add, mask).await?);
        }
        let adds = self.write_files(snapshot, &rows, false).await?;
        let now = now_ms();
        transaction.add_actions(chosen.iter().map(|a| Action::Remove(a.to_remove(now, false))));
        let files_added = adds.len();
        transaction.add_actions(adds.into_iter().map(Action::Add));
        let outcome = self.commit(snapshot, transaction).await?;
        Ok(OptimizeResult { outcome: Some(outcome), files_removed: chosen.len(), files_added })
    }

    /// Deletes the data, deletion-vector and change-data files that the table's own log gave up
    /// more than the retention ago (default `delta.deletedFileRetentionDuration`, one week) and
    /// that the current version does not use. A retention shorter than the table's is refused
    /// unless `enforce_retention` is false, because readers of older versions may still need
    /// those files.
    ///
    /// Only files the log names are candidates (as Delta's log-based VACUUM LITE): the paths of
    /// `remove` actions and their deletion vectors, and the `cdc` files of old commits. A file the
    /// log never named is never deleted, whoever put it in the folder, and so is a named path that
    /// does not lie strictly inside the table's folder (an absolute URI, `..`, a symbolic link out).
    pub async fn vacuum(
        &self,
        retention_ms: Option<i64>,
        dry_run: bool,
        enforce_retention: bool,
    ) -> Result<VacuumResult> {
        let snapshot = self.snapshot().await?;
        protocol::check_writable(snapshot.protocol(), self.location())?;
        let retention = vacuum_retention_ms(&snapshot, retention_ms, enforce_retention)?;
        let cutoff = now_ms() - retention;
        let candidates = self.vacuum_candidates(&snapshot, cutoff, self.changes_needed_from()).await?;
        let mut result = VacuumResult::default();
        for (relative, path) in self.deletable(candidates, cutoff).await? {
            if !dry_run {
                self.store().delete(&path).await?;
            }
            result.files_deleted.push(relative);
        }
        result.files_deleted.sort();
        if !dry_run {
            let mut transaction = Transaction::new(Some(&snapshot), "VACUUM END");
            transaction.parameter("numDeletedFiles", result.files_deleted.len());
            transaction.parameter("retentionHours", Value::from(retention / 3_600_000));
            let _ = self.commit(&snapshot, transaction).await?;
        }
        Ok(result)
    }

    /// The files (relative to the root) that the log gave up no later than `cutoff` and that
    /// nothing uses: the current version's files and deletion vectors, and files added by commits
    /// newer than the snapshot, are in use; a file whose newest tombstone is younger than the
    /// cutoff is kept. Tombstones come from every commit still in the log and from the snapshot,
    /// which carries those of its checkpoint (older commits may be gone, and a checkpoint drops
    /// expired tombstones, so neither source alone has them all).
    ///
    /// What a commit from `needed_from` on gave up is kept whatever its age (a reader of those
    /// versions' changes reads it: see [`Table::retain_changes_from`]); when the log no longer
    /// holds the commit at `needed_from`, every tombstone of the snapshot is kept, since their
    /// versions are unknown.
    async fn vacuum_candidates(&self, snapshot: &Snapshot, cutoff: i64, needed_from: u64) -> Result<Vec<String>> {
        let store = self.store();
        let mut in_use: HashSet<String> = HashSet::new();
        for add in snapshot.files() {
            note_in_use(store, &mut in_use, add)?;
        }
        let commits = self.logged_commits(snapshot.version()).await?;
        let oldest_logged = commits.iter().map(|(file, _)| file.version).min().unwrap_or(u64::MAX);
        let keep_tombstones = needed_from < oldest_logged;
        let mut given_up = GivenUp::default();
        for remove in snapshot.tombstones() {
            // A checkpoint's tombstone without a time is kept: its age is unknown.
            let given_up_ms = if keep_tombstones { i64::MAX } else { remove.deletion_timestamp.unwrap_or(i64::MAX) };
            given_up.removed(store, remove, given_up_ms);
        }
        for (file, actions) in commits {
            let needed = file.version >= needed_from;
            for action in actions {
                match action {
                    Action::Remove(remove) => {
                        let given_up_ms =
                            if needed { i64::MAX } else { remove.deletion_timestamp.unwrap_or(file.modified_ms) };
                        given_up.removed(store, &remove, given_up_ms)
                    }
                    Action::Cdc(cdc) => {
                        given_up.logged(store, &cdc.path, if needed { i64::MAX } else { file.modified_ms })
                    }
                    Action::Add(add) if file.version > snapshot.version() => note_in_use(store, &mut in_use, &add)?,
                    _ => {}
                }
            }
        }
        let mut candidates: Vec<String> = given_up
            .files
            .into_iter()
            .filter(|(path, file)| file.deletable && file.given_up_ms <= cutoff && !in_use.contains(path))
            .filter(|(path, _)| !is_hidden(path))
            .map(|(path, _)| path)
            .collect();
        candidates.sort();
        Ok(candidates)
    }

    /// Every commit still in the log, parsed. A commit the snapshot already covers that cannot be
    /// parsed is skipped with a warning (its tombstones are then not candidates, which only keeps
    /// files); a newer one is an error, since it may use files that look unused.
    async fn logged_commits(&self, snapshot_version: u64) -> Result<Vec<(LogFile, Vec<Action>)>> {
        let store = self.store();
        let commits: Vec<LogFile> =
            log::list_log(store, None).await?.into_iter().filter(|f| f.kind == LogFileKind::Commit).collect();
        futures::stream::iter(commits)
            .map(|file| async move {
                let bytes = match store.get(&file.path).await {
                    Ok(bytes) => bytes,
                    // Cleaned up since the listing.
                    Err(e) if e.is_not_found() => return Ok(None),
                    Err(e) => return Err(e.at_version(file.version)),
                };
                match parse_commit(&bytes, file.path.as_ref(), file.version) {
                    Ok(actions) => Ok(Some((file, actions))),
                    Err(e) if file.version <= snapshot_version => {
                        tracing::warn!(table = store.location(), "VACUUM skips an unreadable old commit: {e}");
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            })
            .buffered(VACUUM_IO_CONCURRENT_MAX)
            .try_filter_map(|read| async move { Ok(read) })
            .try_collect()
            .await
    }

    /// The candidates that exist, were last modified no later than `cutoff`, and lie inside the
    /// table's folder once symbolic links are resolved, with their store paths.
    async fn deletable(&self, candidates: Vec<String>, cutoff: i64) -> Result<Vec<(String, Path)>> {
        let store = self.store();
        futures::stream::iter(candidates)
            .map(|relative| async move {
                let path = store.path(&relative);
                // The store path must name exactly this file under the root.
                if store.relative(&path).as_deref() != Some(relative.as_str()) {
                    return Ok(None);
                }
                let meta = match store.head(&path).await {
                    Ok(meta) => meta,
                    Err(e) if e.is_not_found() => return Ok(None),
                    Err(e) => return Err(e),
                };
                if meta.last_modified.timestamp_millis() > cutoff {
                    return Ok(None);
                }
                if !store.resolves_inside_root(&relative).await {
                    tracing::warn!(table = store.location(), "VACUUM skips {relative}: it resolves outside the table");
                    return Ok(None);
                }
                Ok(Some((relative, path)))
            })
            .buffered(VACUUM_IO_CONCURRENT_MAX)
            .try_filter_map(|found| async move { Ok(found) })
            .try_collect()
            .await
    }

    /// Makes the content of `version` the newest version again.
    pub async fn restore(&self, version: u64) -> Result<CommitOutcome> {
        let snapshot = self.snapshot().await?;
        let old = self.snapshot_at_version(version).await?;
        let current: HashSet<_> = snapshot.files().map(|a| a.key()).collect();
        let wanted: HashSet<_> = old.files().map(|a| a.key()).collect();
        let now = now_ms();
        let mut transaction = Transaction::new(Some(&snapshot), "RESTORE");
        transaction.parameter("version", version).replaces_data();
        for add in snapshot.files().filter(|a| !wanted.contains(&a.key())) {
            transaction.add_action(Action::Remove(add.to_remove(now, true)));
        }
        for add in old.files().filter(|a| !current.contains(&a.key())) {
            let path = self.store().path(&decode_path(self.store(), &add.path));
            self.store().head(&path).await.map_err(|e| match e {
                Error::MissingFile { path, .. } => Error::MissingFile {
                    path: format!("{path} (vacuumed; version {version} cannot be restored)"),
                    version: Some(version),
                },
                other => other,
            })?;
            transaction.add_action(Action::Add(Add { data_change: true, modification_time: now, ..(**add).clone() }));
        }
        if old.metadata() != snapshot.metadata() {
            transaction.add_action(Action::Metadata(old.metadata().clone()));
        }
        self.commit(&snapshot, transaction).await
    }
}

/// Commit files VACUUM reads at once, and candidate files it looks up at once.
const VACUUM_IO_CONCURRENT_MAX: usize = 32;

/// The retention VACUUM uses: `retention_ms`, else the table's; a shorter one than the table's
/// only when `enforce_retention` is false.
fn vacuum_retention_ms(snapshot: &Snapshot, retention_ms: Option<i64>, enforce_retention: bool) -> Result<i64> {
    let table_retention = snapshot.deleted_file_retention_ms();
    let retention = retention_ms.unwrap_or(table_retention);
    if retention < 0 {
        return Err(Error::InvalidArgument("the retention must not be negative".into()));
    }
    if enforce_retention && retention < table_retention {
        return Err(Error::InvalidArgument(format!(
            "a retention of {} hours is shorter than the table's {} hours; readers of older versions could fail",
            retention / 3_600_000,
            table_retention / 3_600_000
        )));
    }
    Ok(retention)
}

/// Marks a live file and its deletion-vector file as in use.
fn note_in_use(store: &TableStore, in_use: &mut HashSet<String>, add: &Add) -> Result<()> {
    in_use.insert(decode_path(store, &add.path));
    if let Some(dv) = &add.deletion_vector {
        if dv.storage_type != "i" {
            in_use.insert(crate::deletion_vector::file_path(dv)?);
        }
    }
    Ok(())
}

/// A file the log gave up.
struct GivenUpFile {
    /// When the log last gave it up (the newest tombstone wins: the file may have been re-added).
    given_up_ms: i64,
    /// Whether the log names it by a path strictly inside the table's folder, every time.
    deletable: bool,
}

/// The files the log gave up, by decoded path relative to the root.
#[derive(Default)]
struct GivenUp {
    files: HashMap<String, GivenUpFile>,
}

impl GivenUp {
    /// Notes a removed file and its deletion-vector file.
    fn removed(&mut self, store: &TableStore, remove: &Remove, given_up_ms: i64) {
        self.logged(store, &remove.path, given_up_ms);
        if let Some(dv) = remove.deletion_vector.as_ref().filter(|dv| dv.storage_type != "i") {
            match crate::deletion_vector::file_path(dv) {
                Ok(path) if is_absolute_uri(&path) => self.note(decode_path(store, &path), given_up_ms, false),
                Ok(path) => self.decoded(path, given_up_ms),
                Err(e) => tracing::warn!(table = store.location(), "VACUUM skips a deletion vector: {e}"),
            }
        }
    }

    /// Notes a path as the log writes it (`remove.path`, `cdc.path`). An absolute URI is never
    /// deleted, but it still protects the file it names under the root while its tombstone is
    /// young.
    fn logged(&mut self, store: &TableStore, logged: &str, given_up_ms: i64) {
        if is_absolute_uri(logged) {
            self.note(decode_path(store, logged), given_up_ms, false);
        } else {
            self.decoded(percent_decode(logged), given_up_ms);
        }
    }

    fn decoded(&mut self, decoded: String, given_up_ms: i64) {
        let inside = relative_inside_root(&decoded).is_some();
        if !inside {
            tracing::warn!("VACUUM skips {decoded:?}: the log names it outside the table's folder");
        }
        self.note(decoded, given_up_ms, inside);
    }

    fn note(&mut self, path: String, given_up_ms: i64, deletable: bool) {
        let file = self.files.entry(path).or_insert(GivenUpFile { given_up_ms, deletable });
        file.given_up_ms = file.given_up_ms.max(given_up_ms);
        file.deletable &= deletable;
    }
}

/// Files VACUUM never touches: the log, and hidden files and folders (names starting with `_` or
/// `.`) other than partition folders (`_col=value`) and `_change_data`.
fn is_hidden(relative: &str) -> bool {
    relative
        .split('/')
        .any(|part| (part.starts_with('_') || part.starts_with('.')) && !part.contains('=') && part != "_change_data")
        || relative.starts_with("_delta_log")
}

#[cfg(test)]
mod tests {
    #[test]
    fn hidden_files_are_spared() {
        assert!(super::is_hidden("_delta_log/00000000000000000000.json"));
        assert!(super::is_hidden(".hidden/x.parquet"));
        assert!(!super::is_hidden("_2=a/part-0.parquet"));
        assert!(!super::is_hidden("_change_data/cdc-0.parquet"));
        assert!(!super::is_hidden("deletion_vector_x.bin"));
    }
}
