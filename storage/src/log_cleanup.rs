//! Log retention: after a checkpoint, the log entries older than `delta.logRetentionDuration`
//! (default 30 days, as Delta) that no retained version needs are deleted, as Delta's metadata
//! cleanup does.
//!
//! What is kept: every version committed since the cutoff (now minus the retention), the version
//! that was the table's latest at the cutoff (time travel to a timestamp inside the retention
//! lands on it), and everything from the newest checkpoint at or below that version on, which is
//! what rebuilds them. Everything older (commits, checkpoints and `.crc` files) is deleted, oldest
//! first, so an interrupted cleanup leaves a log that still starts at a checkpoint. Commit times
//! are the commit files' modification times, made increasing as Delta's history makes them.
//! `delta.enableExpiredLogCleanup = false` turns cleanup off. A table handle cleans at most once
//! per [`LOG_CLEANUP_INTERVAL_MS`]. Data files are VACUUM's business.

use crate::error::Result;
use crate::log::{self, LogFileKind};
use crate::snapshot::{parse_interval_ms, Snapshot};
use crate::store::TableStore;

/// The table property that sets how long log entries are kept.
pub const LOG_RETENTION_KEY: &str = "delta.logRetentionDuration";
/// The table property that turns log cleanup off (`false`).
pub const ENABLE_EXPIRED_LOG_CLEANUP_KEY: &str = "delta.enableExpiredLogCleanup";
/// Delta's default log retention: 30 days.
pub const LOG_RETENTION_MS_DEFAULT: i64 = 30 * 86_400_000;
/// How often a table handle cleans its log at most: a cleanup lists the whole log, which for a
/// streaming table committing every second holds millions of entries. The first checkpoint after
/// a table is opened cleans at once.
pub const LOG_CLEANUP_INTERVAL_MS: i64 = 3_600_000;

/// `delta.logRetentionDuration` of a snapshot in milliseconds (default 30 days).
pub fn log_retention_ms(snapshot: &Snapshot) -> i64 {
    snapshot
        .configuration()
        .get(LOG_RETENTION_KEY)
        .and_then(|v| parse_interval_ms(v))
        .unwrap_or(LOG_RETENTION_MS_DEFAULT)
}

/// Deletes the expired log entries of the table whose latest version is `snapshot`, as of
/// `now_ms`, keeping the commits from `needed_from` on (a reader will read their changes);
/// returns the names of the files deleted.
pub async fn clean_expired_log(
    store: &TableStore,
    snapshot: &Snapshot,
    now_ms: i64,
    needed_from: u64,
) -> Result<Vec<String>> {
    let enabled =
        snapshot.configuration().get(ENABLE_EXPIRED_LOG_CLEANUP_KEY).is_none_or(|v| !v.eq_ignore_ascii_case("false"));
    if !enabled {
        return Ok(Vec::new());
    }
    let cutoff = now_ms.saturating_sub(log_retention_ms(snapshot));
    let files = log::list_log(store, None).await?;
    // The first version committed at or after the cutoff (commit times made increasing).
    let mut previous = i64::MIN;
    let mut first_retained = None;
    for commit in files.iter().filter(|f| f.kind == LogFileKind::Commit && f.version <= snapshot.version()) {
        let time = commit.modified_ms.max(previous.saturating_add(1));
        previous = time;
        if time >= cutoff {
            first_retained = Some(commit.version);
            break;
        }
    }
    let first_retained = first_retained.unwrap_or(snapshot.version()).min(snapshot.version());
    // The version that was the latest at the cutoff is needed too.
    // A change reader of `needed_from` reads the snapshot before it too.
    let keep_from = first_retained.saturating_sub(1).min(needed_from.saturating_sub(1));
    let Some(checkpoint) = log::newest_checkpoint(&files, keep_from) else { return Ok(Vec::new()) };
    let mut deleted = Vec::new();
    for file in files.iter().filter(|f| f.version < checkpoint.version) {
        match store.delete(&file.path).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        deleted.push(file.path.filename().unwrap_or_default().to_string());
    }
    if !deleted.is_empty() {
        tracing::debug!(table = store.location(), files = deleted.len(), before = checkpoint.version, "log cleaned");
    }
    Ok(deleted)
}
