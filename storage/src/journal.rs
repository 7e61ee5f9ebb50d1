//! The warehouse's journal: a commit on local disk is made durable by one sync of an append-only
//! file, shared by every commit made at that moment (group commit), instead of a sync of each
//! file the commit wrote and of the folder that names it.
//!
//! A [`crate::store::TableStore`] with a journal (the stores of a warehouse on local disk, see
//! `TableStore::with_journal`) writes files of up to [`JOURNAL_RECORD_BYTES_MAX`] without syncing
//! them, and appends to the journal:
//!
//! - for a put of a new file (a data file, a deletion vector, a transaction record): the file's
//!   bytes (`Put`);
//! - for a put-if-absent (a log entry, a catalog version: the commit points): its bytes as an
//!   `Intent`; the journal is synced (which makes every file recorded before it durable too)
//!   before the file is created, and a `Cancel` follows if another writer had created it;
//! - for a delete: the path (`Delete`).
//!
//! So once a commit returns, its log entry and every file that entry names are on disk or in the
//! synced part of the journal. Committers that wait at once share one `fdatasync`: the first
//! syncs what all of them appended. Two puts-if-absent of one path in this process are made one
//! after the other (the journal's path stripes), so the journal says which of them created it.
//!
//! When a warehouse opens, the journals of processes that are gone are replayed (a live process
//! holds an exclusive `flock` on its own): for each path, what was recorded last is made true on
//! disk and synced: a put's bytes are written where the file is missing or differs, a deleted
//! file is deleted, and an intent's bytes are written where the file is missing, is a prefix of
//! them, or is not complete JSON (a file the crash left partly written). Then the journal is
//! deleted. A crash of the process alone loses nothing either way (its writes are in the
//! operating system's cache); the replay is for a crash of the machine, after which files that
//! were not synced can be missing, empty or partly written.
//!
//! Bounded: past [`JOURNAL_BYTES_MAX`] the journal is checkpointed: with no write in flight, one
//! `syncfs` makes every file written so far durable, and the journal starts again empty.
//!
//! Not covered: another *process* writing the same warehouse. If a machine crash tears the log
//! entry that process won against this one, this process's intent for it is written in its
//! place by the replay when the torn file is not complete JSON, and the other's is kept when it
//! is; either way a table without the other process's commit. The commit protocol's own
//! exposure (a log entry torn by a machine crash before its sync) was there before the journal.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// The largest file whose bytes go to the journal; a larger one is synced by itself.
pub const JOURNAL_RECORD_BYTES_MAX: usize = 1 << 20;

/// How large the journal grows before it is checkpointed (see the module docs).
pub const JOURNAL_BYTES_MAX: u64 = 64 << 20;

/// The journal's folder, relative to the warehouse's.
pub const JOURNAL_FOLDER: &str = "_sluice/journal";

/// How many locks the paths of puts-if-absent are spread over.
const PATH_STRIPES: usize = 64;

/// The largest journal a replay reads (a journal is checkpointed at [`JOURNAL_BYTES_MAX`]; a
/// larger one is not this module's).
const REPLAY_BYTES_MAX: u64 = 1 << 30;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Put = 1,
    Intent = 2,
    Cancel = 3,
    Delete = 4,
}

impl Kind {
    fn of(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Kind::Put),
            2 => Some(Kind::Intent),
            3 => Some(Kind::Cancel),
            4 => Some(Kind::Delete),
            _ => None,
        }
    }
}

/// A record read back: its kind, the path (relative to the warehouse folder) and the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    kind: Kind,
    path: String,
    bytes: Vec<u8>,
}

/// The journal of this process's writes to one warehouse folder.
pub struct Journal {
    /// The warehouse folder (canonical): paths in the journal are relative to it.
    root: PathBuf,
    /// The journal file.
    path: PathBuf,
    appender: Mutex<Appender>,
    /// The journal file, for syncing it outside the appender's lock.
    sync_file: Arc<File>,
    /// How many bytes this journal has appended in all (across checkpoints) that are synced.
    synced: AtomicU64,
    /// Held by the committer that syncs (the others wait for it, then find their bytes synced).
    syncing: tokio::sync::Mutex<()>,
    /// Held shared by every write in flight, exclusively by a checkpoint.
    quiet: tokio::sync::RwLock<()>,
    stripes: Vec<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

struct Appender {
    /// The journal file, opened for appending; holds the `flock` that marks it as live.
    file: File,
    /// Bytes appended in all (across checkpoints): the position a sync must reach.
    appended: u64,
    /// Bytes in the file now.
    in_file: u64,
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::Store {
        path: path.display().to_string(),
        source: object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(error) },
    }
}

fn blocking_error(path: &Path, error: tokio::task::JoinError) -> Error {
    Error::Store { path: path.display().to_string(), source: object_store::Error::JoinError { source: error } }
}

impl Journal {
    /// Replays the journals that processes now gone left in the warehouse folder `root`, then
    /// starts this process's journal there.
    pub async fn open(root: &Path) -> Result<Arc<Self>> {
        let root = root.to_path_buf();
        tokio::task::spawn_blocking(move || Self::open_blocking(&root))
            .await
            .map_err(|e| blocking_error(Path::new(JOURNAL_FOLDER), e))?
    }

    fn open_blocking(root: &Path) -> Result<Arc<Self>> {
        let root = std::fs::canonicalize(root).map_err(|e| io_error(root, e))?;
        let folder = root.join(JOURNAL_FOLDER);
        std::fs::create_dir_all(&folder).map_err(|e| io_error(&folder, e))?;
        replay_gone(&root, &folder)?;
        // Made under another name and locked before it is named as a journal, so that another
        // process opening the warehouse never takes it for the journal of a process gone.
        let name = uuid::Uuid::new_v4();
        let making = folder.join(format!("{name}.new"));
        let path = folder.join(format!("{name}.journal"));
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&making)
            .map_err(|e| io_error(&making, e))?;
        file.try_lock().map_err(|e| io_error(&making, std::io::Error::other(e.to_string())))?;
        file.sync_all().map_err(|e| io_error(&making, e))?;
        std::fs::rename(&making, &path).map_err(|e| io_error(&path, e))?;
        sync_folders(&path, &root)?;
        let sync_file = Arc::new(file.try_clone().map_err(|e| io_error(&path, e))?);
        Ok(Arc::new(Self {
            root,
            path,
            appender: Mutex::new(Appender { file, appended: 0, in_file: 0 }),
            sync_file,
            synced: AtomicU64::new(0),
            syncing: Default::default(),
            quiet: Default::default(),
            stripes: (0..PATH_STRIPES).map(|_| Default::default()).collect(),
        }))
    }

    /// The path of `file` relative to the warehouse folder, if it is inside it.
    pub fn relative(&self, file: &Path) -> Option<String> {
        let relative = file.strip_prefix(&self.root).ok()?;
        let parts: Option<Vec<&str>> = relative.components().map(|c| c.as_os_str().to_str()).collect();
        let parts = parts?;
        (!parts.is_empty()).then(|| parts.join("/"))
    }

    /// Held while a write is in flight (a checkpoint waits for none to be).
    pub async fn enter(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.quiet.read().await
    }

    /// The lock under which puts-if-absent of `relative` are made one at a time.
    pub async fn path_lock(&self, relative: &str) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        relative.hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % PATH_STRIPES as u64).unwrap_or(0);
        match self.stripes.get(stripe) {
            Some(lock) => Some(lock.lock().await),
            None => None,
        }
    }

    /// Records that `relative` was written with `bytes` (not synced).
    pub fn record_put(&self, relative: &str, bytes: &[u8]) -> Result<u64> {
        self.append(Kind::Put, relative, bytes)
    }

    /// Records that `relative` is about to be created with `bytes`; sync before creating it.
    pub fn record_intent(&self, relative: &str, bytes: &[u8]) -> Result<u64> {
        self.append(Kind::Intent, relative, bytes)
    }

    /// Records that the intent for `relative` found the file already created by another writer.
    pub fn record_cancel(&self, relative: &str) -> Result<u64> {
        self.append(Kind::Cancel, relative, &[])
    }

    /// Records that `relative` was deleted.
    pub fn record_delete(&self, relative: &str) -> Result<u64> {
        self.append(Kind::Delete, relative, &[])
    }

    fn append(&self, kind: Kind, relative: &str, bytes: &[u8]) -> Result<u64> {
        let encoded = encode(kind, relative, bytes);
        let mut appender = self.appender.lock().unwrap_or_else(|p| p.into_inner());
        appender.file.write_all(&encoded).map_err(|e| io_error(&self.path, e))?;
        let length = encoded.len() as u64;
        appender.appended += length;
        appender.in_file += length;
        Ok(appender.appended)
    }

    /// Returns once the journal is synced up to `position` (a value [`Self::record_put`] and
    /// friends returned): one committer syncs for all that wait with it.
    pub async fn sync_to(&self, position: u64) -> Result<()> {
        if self.synced.load(Ordering::SeqCst) >= position {
            return Ok(());
        }
        let _syncing = self.syncing.lock().await;
        if self.synced.load(Ordering::SeqCst) >= position {
            return Ok(());
        }
        let reached = self.appender.lock().unwrap_or_else(|p| p.into_inner()).appended;
        let file = self.sync_file.clone();
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(|e| blocking_error(&self.path, e))?
            .map_err(|e| io_error(&self.path, e))?;
        self.synced.fetch_max(reached, Ordering::SeqCst);
        Ok(())
    }

    /// Syncs everything recorded so far.
    pub async fn sync_all(&self) -> Result<()> {
        let appended = self.appender.lock().unwrap_or_else(|p| p.into_inner()).appended;
        self.sync_to(appended).await
    }

    /// Checkpoints the journal when it has grown past [`JOURNAL_BYTES_MAX`] (call with no
    /// [`Self::enter`] guard held).
    pub async fn checkpoint_if_full(&self) -> Result<()> {
        if self.in_file() <= JOURNAL_BYTES_MAX {
            return Ok(());
        }
        let _quiet = self.quiet.write().await;
        if self.in_file() <= JOURNAL_BYTES_MAX {
            return Ok(());
        }
        self.checkpoint_quiet().await
    }

    fn in_file(&self) -> u64 {
        self.appender.lock().unwrap_or_else(|p| p.into_inner()).in_file
    }

    /// With no write in flight: every file written so far made durable (`syncfs`), then the
    /// journal emptied.
    async fn checkpoint_quiet(&self) -> Result<()> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || sync_filesystem(&root))
            .await
            .map_err(|e| blocking_error(&self.root, e))?
            .map_err(|e| io_error(&self.root, e))?;
        let mut appender = self.appender.lock().unwrap_or_else(|p| p.into_inner());
        appender.file.set_len(0).map_err(|e| io_error(&self.path, e))?;
        appender.file.sync_all().map_err(|e| io_error(&self.path, e))?;
        appender.in_file = 0;
        self.synced.fetch_max(appender.appended, Ordering::SeqCst);
        tracing::debug!(journal = %self.path.display(), "journal checkpointed");
        Ok(())
    }

    /// Makes every file written so far durable and empties the journal (before a clean exit:
    /// the next open then has nothing to replay).
    pub async fn checkpoint(&self) -> Result<()> {
        let _quiet = self.quiet.write().await;
        self.checkpoint_quiet().await
    }
}

/// Makes every write to the file system that holds `folder` durable (`syncfs`).
#[cfg(target_os = "linux")]
fn sync_filesystem(folder: &Path) -> std::io::Result<()> {
    rustix::fs::syncfs(File::open(folder)?).map_err(std::io::Error::from)
}

/// Elsewhere there is no journal (see `TableStore::with_journal`).
#[cfg(not(target_os = "linux"))]
fn sync_filesystem(_folder: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "the journal needs syncfs (Linux)"))
}

/// A record: length of the body (u32), CRC-32 of the body (u32), then the body: kind (u8),
/// length of the path (u32), the path, the bytes.
fn encode(kind: Kind, relative: &str, bytes: &[u8]) -> Vec<u8> {
    let body_length = 5 + relative.len() + bytes.len();
    let mut record = Vec::with_capacity(8 + body_length);
    record.extend_from_slice(&(body_length as u32).to_le_bytes());
    record.extend_from_slice(&[0; 4]);
    record.push(kind as u8);
    record.extend_from_slice(&(relative.len() as u32).to_le_bytes());
    record.extend_from_slice(relative.as_bytes());
    record.extend_from_slice(bytes);
    let crc = crc32fast::hash(record.get(8..).unwrap_or_default());
    if let Some(slot) = record.get_mut(4..8) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
    record
}

/// The records of a journal, up to the first one that is incomplete or fails its checksum (the
/// tail a crash cut: it was never synced, so nothing waited for it).
fn decode(journal: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut rest = journal;
    while let Some((length, crc, after)) = header(rest) {
        let Some(body) = after.get(..length) else { break };
        if crc32fast::hash(body) != crc {
            break;
        }
        rest = after.get(length..).unwrap_or_default();
        let Some(record) = body_of(body) else { break };
        records.push(record);
    }
    records
}

fn header(bytes: &[u8]) -> Option<(usize, u32, &[u8])> {
    let length = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let crc = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    Some((usize::try_from(length).ok()?, crc, bytes.get(8..)?))
}

fn body_of(body: &[u8]) -> Option<Record> {
    let kind = Kind::of(*body.first()?)?;
    let path_length = usize::try_from(u32::from_le_bytes(body.get(1..5)?.try_into().ok()?)).ok()?;
    let path = std::str::from_utf8(body.get(5..5 + path_length)?).ok()?.to_string();
    let bytes = body.get(5 + path_length..)?.to_vec();
    Some(Record { kind, path, bytes })
}

/// What the replay makes true of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Written(Vec<u8>),
    Intended(Vec<u8>),
    Deleted,
}

/// The last thing each path's records say, in the journal's order (an intent followed by its
/// cancel says nothing).
fn outcomes(records: Vec<Record>) -> std::collections::BTreeMap<String, Outcome> {
    let mut last = std::collections::BTreeMap::new();
    let mut before_intent: std::collections::HashMap<String, Option<Outcome>> = Default::default();
    for record in records {
        match record.kind {
            Kind::Put => {
                last.insert(record.path, Outcome::Written(record.bytes));
            }
            Kind::Intent => {
                let previous = last.insert(record.path.clone(), Outcome::Intended(record.bytes));
                before_intent.insert(record.path, previous);
            }
            Kind::Cancel => {
                if matches!(last.get(&record.path), Some(Outcome::Intended(_))) {
                    match before_intent.remove(&record.path).flatten() {
                        Some(previous) => last.insert(record.path, previous),
                        None => last.remove(&record.path),
                    };
                }
            }
            Kind::Delete => {
                last.insert(record.path, Outcome::Deleted);
            }
        }
    }
    last
}

/// Whether `existing` (the file an intent found, different from the intent's bytes) was left
/// partly written by a crash: a prefix of the intent's bytes, or not complete JSON.
fn torn(existing: &[u8], intended: &[u8]) -> bool {
    if intended.starts_with(existing) {
        return true;
    }
    let values = serde_json::Deserializer::from_slice(existing).into_iter::<serde::de::IgnoredAny>();
    let mut any = false;
    for value in values {
        if value.is_err() {
            return true;
        }
        any = true;
    }
    !any
}

/// A relative path from a journal, if it names a file strictly inside the warehouse folder.
fn inside(root: &Path, relative: &str) -> Option<PathBuf> {
    crate::store::relative_inside_root(relative).map(|relative| root.join(relative))
}

/// Replays and deletes the journals in `folder` that no live process holds.
fn replay_gone(root: &Path, folder: &Path) -> Result<()> {
    let entries = std::fs::read_dir(folder).map_err(|e| io_error(folder, e))?;
    let mut replayed = false;
    for entry in entries {
        let path = entry.map_err(|e| io_error(folder, e))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("journal") {
            continue;
        }
        let file = match File::options().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&path, e)),
        };
        // A live process holds its journal locked.
        if file.try_lock().is_err() {
            continue;
        }
        replay(root, &path, &file)?;
        match std::fs::remove_file(&path) {
            // Another process opening the warehouse replayed it too.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(&path, e)),
            _ => {}
        }
        replayed = true;
    }
    if replayed {
        File::open(folder).and_then(|f| f.sync_all()).map_err(|e| io_error(folder, e))?;
    }
    Ok(())
}

/// Makes what one journal recorded true on disk (see the module docs).
fn replay(root: &Path, path: &Path, file: &File) -> Result<()> {
    let size = file.metadata().map_err(|e| io_error(path, e))?.len();
    if size > REPLAY_BYTES_MAX {
        return Err(Error::InvalidLog {
            location: path.display().to_string(),
            message: format!("a journal of {size} bytes is larger than any Sluice writes; it is left as it is"),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let mut repaired = 0usize;
    for (relative, outcome) in outcomes(decode(&bytes)) {
        let Some(target) = inside(root, &relative) else {
            tracing::warn!(journal = %path.display(), path = %relative, "a journal names a path outside the warehouse; skipped");
            continue;
        };
        let existing = match std::fs::read(&target) {
            Ok(existing) => Some(existing),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&target, e)),
        };
        let write = match (&outcome, &existing) {
            (Outcome::Deleted, None) => None,
            (Outcome::Deleted, Some(_)) => {
                std::fs::remove_file(&target).map_err(|e| io_error(&target, e))?;
                sync_folders(&target, root)?;
                repaired += 1;
                None
            }
            (Outcome::Written(bytes) | Outcome::Intended(bytes), None) => Some(bytes),
            (Outcome::Written(bytes), Some(existing)) => (existing != bytes).then_some(bytes),
            (Outcome::Intended(bytes), Some(existing)) => (existing != bytes && torn(existing, bytes)).then_some(bytes),
        };
        if let Some(bytes) = write {
            write_synced(&target, root, bytes)?;
            repaired += 1;
        }
    }
    if repaired > 0 {
        tracing::warn!(journal = %path.display(), files = repaired, "replayed the journal of a process that stopped");
    }
    Ok(())
}

/// Writes `bytes` to `target` (making its folders), syncs it and the folders up to `root`.
fn write_synced(target: &Path, root: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    let mut file = File::create(target).map_err(|e| io_error(target, e))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| io_error(target, e))?;
    sync_folders(target, root)
}

/// Syncs the folder that holds `path` and each folder above it up to `root`.
fn sync_folders(path: &Path, root: &Path) -> Result<()> {
    let mut folder = path.parent();
    while let Some(current) = folder {
        File::open(current).and_then(|f| f.sync_all()).map_err(|e| io_error(current, e))?;
        if current == root || !current.starts_with(root) {
            break;
        }
        folder = current.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_dropped() {
        let mut journal = encode(Kind::Put, "t/a.parquet", b"abc");
        journal.extend(encode(Kind::Intent, "t/_delta_log/0.json", b"{}\n"));
        let whole = decode(&journal);
        assert_eq!(whole.len(), 2);
        assert_eq!(
            whole[1],
            Record { kind: Kind::Intent, path: "t/_delta_log/0.json".into(), bytes: b"{}\n".to_vec() }
        );
        // A tail cut anywhere, or a flipped byte, ends the journal there.
        let mut cut = journal.clone();
        cut.truncate(journal.len() - 2);
        assert_eq!(decode(&cut).len(), 1);
        let mut flipped = journal.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(decode(&flipped).len(), 1);
        assert!(decode(&[0u8; 64]).is_empty());
    }

    #[test]
    fn the_last_record_of_a_path_decides_and_a_cancel_undoes_its_intent() {
        let record = |kind, path: &str, bytes: &[u8]| Record { kind, path: path.into(), bytes: bytes.to_vec() };
        let outcomes = outcomes(vec![
            record(Kind::Put, "a", b"1"),
            record(Kind::Delete, "a", b""),
            record(Kind::Put, "b", b"2"),
            record(Kind::Intent, "c", b"3"),
            record(Kind::Cancel, "c", b""),
            record(Kind::Intent, "d", b"4"),
            record(Kind::Put, "e", b"5"),
            record(Kind::Intent, "e", b"6"),
            record(Kind::Cancel, "e", b""),
        ]);
        assert_eq!(outcomes.get("a"), Some(&Outcome::Deleted));
        assert_eq!(outcomes.get("b"), Some(&Outcome::Written(b"2".to_vec())));
        assert_eq!(outcomes.get("c"), None);
        assert_eq!(outcomes.get("d"), Some(&Outcome::Intended(b"4".to_vec())));
        assert_eq!(outcomes.get("e"), Some(&Outcome::Written(b"5".to_vec())));
    }

    #[test]
    fn a_torn_file_is_a_prefix_or_not_complete_json() {
        let ours = b"{\"commitInfo\":{}}\n{\"add\":{}}\n";
        assert!(torn(b"", ours));
        assert!(torn(b"{\"commitInfo\":{}}\n", ours));
        assert!(torn(&[0u8; 16], ours));
        assert!(torn(b"{\"commitInfo\":{}}\n{\"ad", ours));
        // Another writer's complete entry stays.
        assert!(!torn(b"{\"commitInfo\":{\"other\":1}}\n", ours));
    }

    #[tokio::test]
    async fn a_gone_process_journal_is_replayed_and_a_live_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let journal = Journal::open(&root).await.unwrap();
        let data = root.join("t/part-0.parquet");
        let entry = root.join("t/_delta_log/00000000000000000000.json");
        let gone = root.join("t/gone.parquet");
        std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
        let record = |path: &Path| journal.relative(path).unwrap();
        std::fs::write(&data, b"parquet bytes").unwrap();
        journal.record_put(&record(&data), b"parquet bytes").unwrap();
        std::fs::write(&gone, b"x").unwrap();
        journal.record_put(&record(&gone), b"x").unwrap();
        std::fs::remove_file(&gone).unwrap();
        journal.record_delete(&record(&gone)).unwrap();
        let position = journal.record_intent(&record(&entry), b"{\"add\":{}}\n").unwrap();
        journal.sync_to(position).await.unwrap();
        std::fs::write(&entry, b"{\"add\":{}}\n").unwrap();
        // The machine crashed: the data file is lost, the log entry is empty, the deleted file
        // came back.
        std::fs::remove_file(&data).unwrap();
        std::fs::write(&entry, b"").unwrap();
        std::fs::write(&gone, b"x").unwrap();
        // While the process lives, its journal is its own.
        let other = Journal::open(&root).await.unwrap();
        assert!(!data.exists());
        drop(other);
        drop(journal);
        let reopened = Journal::open(&root).await.unwrap();
        assert_eq!(std::fs::read(&data).unwrap(), b"parquet bytes");
        assert_eq!(std::fs::read(&entry).unwrap(), b"{\"add\":{}}\n");
        assert!(!gone.exists());
        // Only the new journal is left (the two gone ones were replayed and deleted).
        assert_eq!(std::fs::read_dir(root.join(JOURNAL_FOLDER)).unwrap().count(), 1);
        reopened.record_put("t/x", b"x").unwrap();
        reopened.checkpoint().await.unwrap();
        assert_eq!(std::fs::metadata(&reopened.path).unwrap().len(), 0);
    }

    #[tokio::test]
    async fn committers_share_syncs_and_a_full_journal_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).await.unwrap();
        let positions: Vec<u64> = (0..8).map(|i| journal.record_put(&format!("f{i}"), b"bytes").unwrap()).collect();
        let syncs = positions.iter().map(|p| journal.sync_to(*p));
        futures::future::try_join_all(syncs).await.unwrap();
        assert!(journal.synced.load(Ordering::SeqCst) >= *positions.last().unwrap());
        let big = vec![7u8; JOURNAL_RECORD_BYTES_MAX];
        while journal.in_file() <= JOURNAL_BYTES_MAX {
            journal.record_put("big", &big).unwrap();
        }
        journal.checkpoint_if_full().await.unwrap();
        assert_eq!(journal.in_file(), 0);
        assert_eq!(std::fs::metadata(&journal.path).unwrap().len(), 0);
    }
}
