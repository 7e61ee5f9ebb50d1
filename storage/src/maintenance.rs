//! Maintenance: OPTIMIZE (bin-packing small files and purging deletion vectors), VACUUM (deleting
//! files no version within the retention period needs) and RESTORE (making an old version the
//! newest).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::actions::{now_ms, Action, Add};
use crate::commit::{CommitOutcome, Transaction};
use crate::error::{Error, Result};
use crate::protocol;
use crate::scan::RowMask;
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
        if chosen.is_empty() {
            return Ok(OptimizeResult { outcome: None, files_removed: 0, files_added: 0 });
        }
        let mut rows = Vec::new();
        for add in &chosen {
            let mask = match &add.deletion_vector {
                Some(dv) => RowMask::Without(Arc::new(crate::scan::read_dv(self.store(), dv, &add.path).await?)),
                None => RowMask::All,
            };
            rows.extend(self.read_rows(&snapshot, add, mask).await?);
        }
        let adds = self.write_files(&snapshot, &rows, false).await?;
        let now = now_ms();
        let mut transaction = Transaction::new(Some(&snapshot), "OPTIMIZE");
        transaction.parameter("minFileSize", small);
        transaction.add_actions(chosen.iter().map(|a| Action::Remove(a.to_remove(now, false))));
        let files_added = adds.len();
        transaction.add_actions(adds.into_iter().map(Action::Add));
        let outcome = self.commit(&snapshot, transaction).await?;
        Ok(OptimizeResult { outcome: Some(outcome), files_removed: chosen.len(), files_added })
    }

    /// Deletes data, deletion-vector and change-data files that the current version does not use
    /// and that are older than the retention (default `delta.deletedFileRetentionDuration`, one
    /// week). A retention shorter than the table's is refused unless `enforce_retention` is false,
    /// because readers of older versions may still need those files.
    pub async fn vacuum(
        &self,
        retention_ms: Option<i64>,
        dry_run: bool,
        enforce_retention: bool,
    ) -> Result<VacuumResult> {
        let snapshot = self.snapshot().await?;
        protocol::check_writable(snapshot.protocol(), self.location())?;
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
        let cutoff = now_ms() - retention;
        let mut in_use: HashSet<String> = HashSet::new();
        for add in snapshot.files() {
            in_use.insert(crate::store::decode_path(self.store(), &add.path));
            if let Some(dv) = &add.deletion_vector {
                if dv.storage_type != "i" {
                    in_use.insert(crate::deletion_vector::file_path(dv)?);
                }
            }
        }
        // A tombstone younger than the retention protects its file even if the file looks old.
        for remove in snapshot.tombstones() {
            if remove.deletion_timestamp.unwrap_or(i64::MAX) > cutoff {
                in_use.insert(crate::store::decode_path(self.store(), &remove.path));
                if let Some(dv) = &remove.deletion_vector {
                    if dv.storage_type != "i" {
                        in_use.insert(crate::deletion_vector::file_path(dv)?);
                    }
                }
            }
        }
        let listed = self.store().list(self.store().root(), None).await?;
        let mut result = VacuumResult::default();
        for meta in listed {
            let Some(relative) = self.store().relative(&meta.location) else { continue };
            if is_hidden(&relative) || in_use.contains(&relative) || meta.last_modified.timestamp_millis() > cutoff {
                continue;
            }
            if !dry_run {
                self.store().delete(&meta.location).await?;
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
            let path = self.store().path(&crate::store::decode_path(self.store(), &add.path));
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
