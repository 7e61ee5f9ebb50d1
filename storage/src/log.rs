//! The log: naming of `_delta_log/` files, listing them, and choosing the segment (a checkpoint
//! plus the commits after it) that a snapshot is replayed from.
//!
//! `_last_checkpoint` is only a hint: when it is missing, empty or unreadable, or names a
//! checkpoint that is not there, the whole log is listed instead. Files whose names do not follow
//! the protocol (staging files of a crashed writer, `.crc` files, `_sidecars/`, compacted logs)
//! are ignored.

use bytes::Bytes;
use object_store::path::Path;
use serde::Deserialize;

use crate::actions::{parse_commit, Action};
use crate::error::{Error, Result};
use crate::store::TableStore;

/// The kind of a file in `_delta_log/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFileKind {
    Commit,
    ClassicCheckpoint,
    MultiPartCheckpoint {
        part: u32,
        parts: u32,
    },
    V2Checkpoint {
        parquet: bool,
    },
    /// A version checksum (`<version>.crc`, see [`crate::checksum`]).
    Checksum,
}

impl LogFileKind {
    /// Whether the file is (part of) a checkpoint.
    pub fn is_checkpoint(&self) -> bool {
        !matches!(self, LogFileKind::Commit | LogFileKind::Checksum)
    }
}

/// A file of the log, with what the listing said about it.
#[derive(Debug, Clone)]
pub struct LogFile {
    pub version: u64,
    pub kind: LogFileKind,
    pub path: Path,
    pub size: u64,
    /// Last-modified time in milliseconds since the epoch.
    pub modified_ms: i64,
}

/// Parses a file name inside `_delta_log/`.
pub fn parse_file_name(name: &str) -> Option<(u64, LogFileKind)> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version: u64 = digits.parse().ok()?;
    let kind = match rest {
        ".json" => LogFileKind::Commit,
        ".crc" => LogFileKind::Checksum,
        ".checkpoint.parquet" => LogFileKind::ClassicCheckpoint,
        _ => {
            let rest = rest.strip_prefix(".checkpoint.")?;
            let parts: Vec<&str> = rest.split('.').collect();
            match parts.as_slice() {
                [part, parts, "parquet"]
                    if part.len() == 10
                        && parts.len() == 10
                        && part.bytes().chain(parts.bytes()).all(|b| b.is_ascii_digit()) =>
                {
                    LogFileKind::MultiPartCheckpoint { part: part.parse().ok()?, parts: parts.parse().ok()? }
                }
                [uuid, ext @ ("json" | "parquet")] if uuid.len() == 36 => {
                    LogFileKind::V2Checkpoint { parquet: *ext == "parquet" }
                }
                _ => return None,
            }
        }
    };
    Some((version, kind))
}

/// The name of a commit file.
pub fn commit_file_name(version: u64) -> String {
    format!("{version:020}.json")
}

/// The name of a classic checkpoint file.
pub fn checkpoint_file_name(version: u64) -> String {
    format!("{version:020}.checkpoint.parquet")
}

/// The content of `_last_checkpoint`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastCheckpoint {
    pub version: u64,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub parts: Option<u32>,
}

/// Reads `_last_checkpoint`; `None` when it is missing, empty or broken (all tolerated).
pub async fn read_last_checkpoint(store: &TableStore) -> Result<Option<LastCheckpoint>> {
    let path = store.log_path("_last_checkpoint");
    let bytes = match store.get(&path).await {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<LastCheckpoint>(&bytes) {
        Ok(hint) => Ok(Some(hint)),
        Err(e) => {
            tracing::warn!(table = store.location(), "ignoring unreadable _last_checkpoint: {e}");
            Ok(None)
        }
    }
}

/// A checkpoint: one file, or all parts of a multi-part checkpoint.
#[derive(Debug, Clone)]
pub struct CheckpointFiles {
    pub version: u64,
    pub files: Vec<LogFile>,
}

/// What a snapshot is replayed from: an optional checkpoint and the commits after it, up to
/// `version`.
#[derive(Debug, Clone)]
pub struct LogSegment {
    pub version: u64,
    pub checkpoint: Option<CheckpointFiles>,
    /// Commits after the checkpoint (or from version 0), ascending and contiguous.
    pub commits: Vec<LogFile>,
}

/// Lists the files of `_delta_log/` (not its sub-folders), from `start` on when given.
pub async fn list_log(store: &TableStore, start: Option<u64>) -> Result<Vec<LogFile>> {
    let prefix = store.root().clone().join("_delta_log");
    // list_with_offset returns keys strictly after the offset; the offset below is a prefix of
    // every file of version `start`, so those are included.
    let offset = start.map(|v| prefix.clone().join(format!("{v:020}")));
    let listed = store.list(&prefix, offset.as_ref()).await?;
    let mut files: Vec<LogFile> = listed
        .into_iter()
        .filter_map(|meta| {
            let name = meta.location.prefix_match(&prefix)?.collect::<Vec<_>>();
            let [name] = name.as_slice() else { return None };
            let (version, kind) = parse_file_name(name.as_ref())?;
            Some(LogFile {
                version,
                kind,
                path: meta.location.clone(),
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
            })
        })
        .filter(|f| start.is_none_or(|s| f.version >= s))
        .collect();
    files.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.path.cmp(&b.path)));
    Ok(files)
}

/// The newest complete checkpoint in `files` at or below `max_version`.
pub(crate) fn newest_checkpoint(files: &[LogFile], max_version: u64) -> Option<CheckpointFiles> {
    let mut best: Option<CheckpointFiles> = None;
    let mut by_version: std::collections::BTreeMap<u64, Vec<&LogFile>> = Default::default();
    for file in files.iter().filter(|f| f.kind.is_checkpoint() && f.version <= max_version) {
        by_version.entry(file.version).or_default().push(file);
    }
    for (version, candidates) in by_version.into_iter().rev() {
        // Prefer a single-file checkpoint (V2 or classic); fall back to a complete multi-part set.
        if let Some(file) = candidates.iter().find(|f| matches!(f.kind, LogFileKind::V2Checkpoint { .. })) {
            best = Some(CheckpointFiles { version, files: vec![(*file).clone()] });
        } else if let Some(file) = candidates.iter().find(|f| f.kind == LogFileKind::ClassicCheckpoint) {
            best = Some(CheckpointFiles { version, files: vec![(*file).clone()] });
        } else {
            best = complete_multi_part(version, &candidates);
        }
        if best.is_some() {
            break;
        }
    }
    best
}

fn complete_multi_part(version: u64, candidates: &[&LogFile]) -> Option<CheckpointFiles> {
    let mut sets: std::collections::BTreeMap<u32, Vec<&LogFile>> = Default::default();
    for file in candidates {
        if let LogFileKind::MultiPartCheckpoint { parts, .. } = file.kind {
            sets.entry(parts).or_default().push(file);
        }
    }
    for (parts, mut files) in sets.into_iter().rev() {
        files.sort_by_key(|f| match f.kind {
            LogFileKind::MultiPartCheckpoint { part, .. } => part,
            _ => 0,
        });
        files.dedup_by_key(|f| match f.kind {
            LogFileKind::MultiPartCheckpoint { part, .. } => part,
            _ => 0,
        });
        if files.len() == parts as usize {
            return Some(CheckpointFiles { version, files: files.into_iter().cloned().collect() });
        }
    }
    None
}

/// Builds the segment for the latest version, or for `at_version` (time travel).
pub async fn build_segment(store: &TableStore, at_version: Option<u64>) -> Result<LogSegment> {
    let hint = match at_version {
        None => read_last_checkpoint(store).await?.map(|h| h.version),
        Some(_) => None,
    };
    if let Some(hint) = hint {
        let files = list_log(store, Some(hint)).await?;
        let latest = files.iter().filter(|f| f.kind == LogFileKind::Commit).map(|f| f.version).max();
        if let Some(latest) = latest.or_else(|| newest_checkpoint(&files, u64::MAX).map(|c| c.version)) {
            if let Some(checkpoint) = newest_checkpoint(&files, latest) {
                return segment_from(store, &files, Some(checkpoint), latest);
            }
        }
        tracing::warn!(table = store.location(), hint, "_last_checkpoint names a missing checkpoint; listing the log");
    }
    let files = list_log(store, None).await?;
    segment_for(store, &files, at_version)
}

/// Builds the segment like [`build_segment`] from a listing of the whole log, ignoring the
/// checkpoints of version `unreadable_from` and later: one of them could not be read, so the
/// segment starts at an older checkpoint or at version 0.
pub async fn build_segment_before(
    store: &TableStore,
    at_version: Option<u64>,
    unreadable_from: u64,
) -> Result<LogSegment> {
    let files: Vec<LogFile> = list_log(store, None)
        .await?
        .into_iter()
        .filter(|f| f.kind == LogFileKind::Commit || f.version < unreadable_from)
        .collect();
    segment_for(store, &files, at_version)
}

/// The segment for `at_version` (the newest version when `None`) in a listing of the log.
fn segment_for(store: &TableStore, files: &[LogFile], at_version: Option<u64>) -> Result<LogSegment> {
    let latest_commit = files.iter().filter(|f| f.kind == LogFileKind::Commit).map(|f| f.version).max();
    let latest_checkpoint = newest_checkpoint(files, u64::MAX).map(|c| c.version);
    let Some(latest) = latest_commit.max(latest_checkpoint) else {
        return Err(Error::NotATable {
            location: store.location().to_string(),
            reason: "_delta_log/ holds no commits".into(),
        });
    };
    let target = match at_version {
        Some(v) if v > latest => {
            let earliest = earliest_version(files).unwrap_or(0);
            return Err(Error::VersionNotFound {
                location: store.location().to_string(),
                version: v,
                earliest,
                latest,
            });
        }
        Some(v) => v,
        None => latest,
    };
    let checkpoint = newest_checkpoint(files, target);
    segment_from(store, files, checkpoint, target)
}

/// The oldest version a snapshot can be built for: the oldest checkpoint, or version 0.
pub fn earliest_version(files: &[LogFile]) -> Option<u64> {
    let has_zero = files.iter().any(|f| f.kind == LogFileKind::Commit && f.version == 0);
    if has_zero {
        return Some(0);
    }
    files.iter().filter(|f| f.kind.is_checkpoint()).map(|f| f.version).min()
}

fn segment_from(
    store: &TableStore,
    files: &[LogFile],
    checkpoint: Option<CheckpointFiles>,
    target: u64,
) -> Result<LogSegment> {
    let start = checkpoint.as_ref().map_or(0, |c| c.version + 1);
    let mut commits: Vec<LogFile> = files
        .iter()
        .filter(|f| f.kind == LogFileKind::Commit && f.version >= start && f.version <= target)
        .cloned()
        .collect();
    commits.dedup_by_key(|f| f.version);
    let expected_first = start;
    for (index, commit) in commits.iter().enumerate() {
        if commit.version != expected_first + index as u64 {
            return Err(if checkpoint.is_none() && index == 0 {
                Error::VersionNotFound {
                    location: store.location().to_string(),
                    version: target,
                    earliest: earliest_version(files).unwrap_or(commit.version),
                    latest: files.iter().map(|f| f.version).max().unwrap_or(target),
                }
            } else {
                Error::InvalidLog {
                    location: store.location().to_string(),
                    message: format!(
                        "commit {} is missing (found {} after it)",
                        expected_first + index as u64,
                        commit.version
                    ),
                }
            });
        }
    }
    let reached = commits.last().map(|c| c.version).or(checkpoint.as_ref().map(|c| c.version));
    if reached != Some(target) {
        let earliest = earliest_version(files).unwrap_or(0);
        let latest = files.iter().map(|f| f.version).max().unwrap_or(0);
        return Err(Error::VersionNotFound {
            location: store.location().to_string(),
            version: target,
            earliest,
            latest,
        });
    }
    Ok(LogSegment { version: target, checkpoint, commits })
}

/// Reads and parses one commit.
pub async fn read_commit(store: &TableStore, version: u64) -> Result<Vec<Action>> {
    let path = store.log_path(&commit_file_name(version));
    let bytes = store.get(&path).await.map_err(|e| e.at_version(version))?;
    parse_commit(&bytes, path.as_ref(), version)
}

/// Reads and parses commits concurrently, returning them in order.
pub async fn read_commits(store: &TableStore, commits: &[LogFile]) -> Result<Vec<(LogFile, Vec<Action>)>> {
    use futures::{StreamExt, TryStreamExt};
    /// Commit files read at once.
    const COMMIT_READS_CONCURRENT_MAX: usize = 32;
    futures::stream::iter(commits.iter().cloned())
        .map(|file| async move {
            let bytes: Bytes = store.get(&file.path).await.map_err(|e| e.at_version(file.version))?;
            let actions = parse_commit(&bytes, file.path.as_ref(), file.version)?;
            Ok::<_, Error>((file, actions))
        })
        .buffered(COMMIT_READS_CONCURRENT_MAX)
        .try_collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_log_file_names() {
        assert_eq!(parse_file_name("00000000000000000010.json"), Some((10, LogFileKind::Commit)));
        assert_eq!(
            parse_file_name("00000000000000000010.checkpoint.parquet"),
            Some((10, LogFileKind::ClassicCheckpoint))
        );
        assert_eq!(
            parse_file_name("00000000000000000001.checkpoint.0000000001.0000000002.parquet"),
            Some((1, LogFileKind::MultiPartCheckpoint { part: 1, parts: 2 }))
        );
        assert_eq!(
            parse_file_name("00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"),
            Some((2, LogFileKind::V2Checkpoint { parquet: false }))
        );
        assert_eq!(parse_file_name("00000000000000000010.crc"), Some((10, LogFileKind::Checksum)));
        assert_eq!(parse_file_name("00000000000000000010.json#1"), None);
        assert_eq!(parse_file_name("_last_checkpoint"), None);
        assert_eq!(parse_file_name("00000000000000000000.00000000000000000005.compacted.json"), None);
    }
}
