//! The one seam through which every byte of a table is read and written.
//!
//! [`TableStore`] is an `object_store` store plus the table's root. Production uses the local file
//! system or a cloud store; tests use the in-memory store or wrap either to inject faults. The
//! contracts the rest of the crate relies on:
//!
//! - [`TableStore::put_if_absent`] must be atomic: of two writers of the same path, exactly one
//!   succeeds and the other must see [`PutOutcome::AlreadyExists`]. The commit protocol rests on it.
//!   Local disk and the in-memory store do this natively; S3 needs conditional puts (on by default
//!   for AWS S3 since 2024), GCS and Azure have them natively.
//! - A put must never leave a partially written object visible under its final name.
//! - Listing must return every object whose put has returned.
//! - On local disk a put is durable when it returns, so a commit acknowledged before a power loss
//!   or an operating system crash is there after it (the data files a commit names are put before
//!   its log entry). In a warehouse, a store has the warehouse's [`Journal`]: files up to
//!   [`crate::journal::JOURNAL_RECORD_BYTES_MAX`] are written without a sync and their bytes
//!   appended to the journal, and a put-if-absent (a commit point) syncs the journal before it
//!   creates its file; commits made at once share that sync. Without a journal (a table opened
//!   on its own, or a larger file), the file and the folder entry that names it are synced
//!   (`fsync`); the folders above that folder are synced the first time a put goes through them
//!   (a put may have made them), so such a put costs two syncs. `SLUICE_FSYNC=off` in the
//!   environment turns all of this off, as PostgreSQL's `fsync = off` does: a crash of the
//!   process loses nothing either way, one of the machine can then lose commits.
//!
//! Paths given to this module are *relative to the table root* and already percent-decoded (the log
//! stores URI-encoded paths; [`decode_path`] turns them into store paths).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use url::Url;

use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::recent::{slice, RecentObjects};

/// What a put-if-absent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum PutOutcome {
    Created,
    AlreadyExists,
}

/// Whether puts to local disk are synced to it (`SLUICE_FSYNC=off` turns it off; read once).
fn fsync_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| !matches!(std::env::var("SLUICE_FSYNC").as_deref().map(str::trim), Ok("off" | "0" | "false")))
}

/// A table's store and root.
#[derive(Debug, Clone)]
pub struct TableStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
    location: String,
    /// The table's folder, for tables on local disk (where symbolic links can lead out of it).
    local_dir: Option<std::path::PathBuf>,
    /// The warehouse's journal, for a store of a warehouse on local disk (see the module docs).
    journal: Option<Arc<Journal>>,
    /// The bytes of objects it wrote last, for a warehouse's store (see [`RecentObjects`]).
    recent: Option<Arc<RecentObjects>>,
}

impl TableStore {
    /// A table at `root` inside `store`; `location` is how errors and users name it.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path, location: impl Into<String>) -> Self {
        Self { store, root, location: location.into(), local_dir: None, journal: None, recent: None }
    }

    /// A table in a local folder (created on first write).
    pub fn local(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::InvalidArgument(format!("cannot create {}: {e}", dir.display())))?;
        let absolute = std::fs::canonicalize(dir)
            .map_err(|e| Error::InvalidArgument(format!("cannot resolve {}: {e}", dir.display())))?;
        let root = Path::from_absolute_path(&absolute).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let location = absolute.display().to_string();
        Ok(Self { local_dir: Some(absolute), ..Self::new(Arc::new(LocalFileSystem::new()), root, location) })
    }

    /// A table in a fresh in-memory store (for tests).
    pub fn memory() -> Self {
        Self::new(Arc::new(InMemory::new()), Path::from("table"), "memory://table")
    }

    /// Opens a location given as a local path, `file://` URL, or any URL that `object_store`
    /// understands (`s3://`, `gs://`, `az://`, `memory://`), configured from the environment.
    pub fn from_uri(uri: &str) -> Result<Self> {
        if !uri.contains("://") {
            return Self::local(uri);
        }
        let url = Url::parse(uri).map_err(|e| Error::InvalidArgument(format!("bad table location '{uri}': {e}")))?;
        if url.scheme() == "file" {
            let path = url.to_file_path().map_err(|_| Error::InvalidArgument(format!("bad file URL '{uri}'")))?;
            return Self::local(path);
        }
        let options: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_"))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let (store, root) = object_store::parse_url_opts(&url, options)
            .map_err(|e| Error::InvalidArgument(format!("cannot open '{uri}': {e}")))?;
        Ok(Self::new(Arc::from(store), root, uri.trim_end_matches('/')))
    }

    /// The same store, rooted at a sub-folder (used for tables inside a warehouse).
    pub fn child(&self, relative: &str) -> Self {
        let root = join(&self.root, relative);
        let local_dir = self.local_dir.as_ref().map(|dir| dir.join(relative.trim_matches('/')));
        let location = format!("{}/{}", self.location, relative.trim_matches('/'));
        Self {
            local_dir,
            journal: self.journal.clone(),
            recent: self.recent.clone(),
            ..Self::new(self.store.clone(), root, location)
        }
    }

    /// This store with a journal in its folder (replaying those of processes gone), when it is
    /// on local disk and syncs are on; the stores of its sub-folders ([`Self::child`]) share it.
    /// For a warehouse's root store. Linux only (its checkpoint needs `syncfs`): elsewhere each
    /// put syncs itself.
    pub async fn with_journal(self) -> Result<Self> {
        let (Some(dir), true, true) = (&self.local_dir, fsync_on(), cfg!(target_os = "linux")) else {
            return Ok(self);
        };
        let journal = Journal::open(dir).await?;
        Ok(Self { journal: Some(journal), ..self })
    }

    /// This store keeping the bytes of the objects it writes last (see [`RecentObjects`]); the
    /// stores of its sub-folders share them. For a warehouse's root store on local disk.
    pub fn with_recent_objects(self) -> Self {
        if self.local_dir.is_none() {
            return self;
        }
        Self { recent: Some(Arc::default()), ..self }
    }

    /// Makes every file put so far durable and empties the journal (before a clean exit).
    pub async fn checkpoint_journal(&self) -> Result<()> {
        match &self.journal {
            Some(journal) => journal.checkpoint().await,
            None => Ok(()),
        }
    }

    /// The journal and the path in it of a file of `size` bytes at `path`, if the put goes
    /// through the journal.
    fn journaled(&self, path: &Path, size: usize) -> Option<(&Arc<Journal>, String)> {
        let journal = self.journal.as_ref()?;
        if size > crate::journal::JOURNAL_RECORD_BYTES_MAX || !fsync_on() {
            return None;
        }
        let file = self.local_dir.as_ref()?.join(self.relative(path)?);
        Some((journal, journal.relative(&file)?))
    }

    /// How errors and users name the table.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The underlying object store.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The table's root inside the object store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store path of a file, given relative to the table root (decoded).
    pub fn path(&self, relative: &str) -> Path {
        join(&self.root, relative)
    }

    /// The store path of a file in `_delta_log/`.
    pub fn log_path(&self, name: &str) -> Path {
        self.root.clone().join("_delta_log").join(name)
    }

    /// The path relative to the table root of a store path under it (its real, decoded name: the
    /// raw form of a store path is the file's name, see `join`).
    pub fn relative(&self, path: &Path) -> Option<String> {
        path.prefix_match(&self.root).map(|parts| parts.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/"))
    }

    /// The file that holds `path`, for a store on local disk.
    fn local_file(&self, path: &Path) -> Option<std::path::PathBuf> {
        self.local_dir.as_ref().zip(self.relative(path)).map(|(dir, relative)| dir.join(relative))
    }

    /// Whether the folder that holds `relative` (a path checked by [`relative_inside_root`]) is
    /// inside the table's folder once symbolic links are resolved. Object stores have no links, so
    /// this is always true for them; on local disk a link to another folder fails the check, and
    /// so does a folder that does not exist.
    pub async fn resolves_inside_root(&self, relative: &str) -> bool {
        let Some(dir) = &self.local_dir else { return true };
        let file = dir.join(relative);
        let Some(parent) = file.parent() else { return false };
        match (tokio::fs::canonicalize(dir).await, tokio::fs::canonicalize(parent).await) {
            (Ok(root), Ok(parent)) => parent.starts_with(root),
            _ => false,
        }
    }

    /// Reads a whole object.
    pub async fn get(&self, path: &Path) -> Result<Bytes> {
        if let Some(bytes) = self.kept(path) {
            return Ok(bytes);
        }
        if let Some(read) = self.read_small_local(path) {
            return read.map(|(bytes, _)| bytes);
        }
        let result = self.store.get(path).await.map_err(|e| Error::store(path, e))?;
        result.bytes().await.map_err(|e| Error::store(path, e))
    }

    /// Reads a whole object with its metadata (size, modification time).
    pub async fn get_with_meta(&self, path: &Path) -> Result<(Bytes, ObjectMeta)> {
        if let Some(read) = self.read_small_local(path) {
            return read;
        }
        let result = self.store.get(path).await.map_err(|e| Error::store(path, e))?;
        let meta = result.meta.clone();
        let bytes = result.bytes().await.map_err(|e| Error::store(path, e))?;
        Ok((bytes, meta))
    }

    /// Reads a small file of a store on local disk on the calling thread (a log version, or the
    /// probe for the next one, which is usually missing): the blocking pool's two thread
    /// switches cost more than the read. `None`: not a local store, or a file larger than
    /// [`SMALL_WRITE_BYTES_MAX`] (read through the store, off this thread).
    fn read_small_local(&self, path: &Path) -> Option<Result<(Bytes, ObjectMeta)>> {
        use std::io::Read;
        let file = self.local_file(path)?;
        let mut opened = match std::fs::File::open(&file) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let missing = object_store::Error::NotFound { path: path.to_string(), source: Box::new(e) };
                return Some(Err(Error::store(path, missing)));
            }
            Err(e) => return Some(Err(Error::store(path, local_error(e)))),
        };
        let metadata = match opened.metadata() {
            Ok(metadata) if metadata.is_file() && metadata.len() <= SMALL_WRITE_BYTES_MAX as u64 => metadata,
            Ok(_) => return None,
            Err(e) => return Some(Err(Error::store(path, local_error(e)))),
        };
        let mut bytes = Vec::with_capacity(metadata.len() as usize);
        if let Err(e) = opened.read_to_end(&mut bytes) {
            return Some(Err(Error::store(path, local_error(e))));
        }
        let last_modified = metadata.modified().map(chrono::DateTime::<chrono::Utc>::from).unwrap_or_default();
        let meta =
            ObjectMeta { location: path.clone(), last_modified, size: bytes.len() as u64, e_tag: None, version: None };
        Some(Ok((Bytes::from(bytes), meta)))
    }

    /// Reads a byte range of an object.
    pub async fn get_range(&self, path: &Path, range: Range<u64>) -> Result<Bytes> {
        if let Some(bytes) = self.kept(path).and_then(|b| slice(&b, &range)) {
            return Ok(bytes);
        }
        self.store.get_range(path, range).await.map_err(|e| Error::store(path, e))
    }

    /// The size and modification time of an object.
    pub async fn head(&self, path: &Path) -> Result<ObjectMeta> {
        self.store.head(path).await.map_err(|e| Error::store(path, e))
    }

    /// Writes an object under a name never used before (a data file, a deletion vector): through
    /// the journal when the store has one (see the module docs).
    pub async fn put(&self, path: &Path, bytes: Bytes) -> Result<()> {
        let Some((journal, relative)) = self.journaled(path, bytes.len()) else {
            let kept = bytes.clone();
            self.put_synced(path, bytes).await?;
            self.remember(path, &kept);
            return Ok(());
        };
        {
            let _writing = journal.enter().await;
            match self.local_file(path).filter(|_| bytes.len() <= SMALL_WRITE_BYTES_MAX) {
                // Small: written here, without a trip through the blocking pool (two thread
                // switches, more than the write costs). The name is new, so no reader sees the
                // file before it is whole; the journal makes it whole after a crash.
                Some(file) => write_new_file(&file, &bytes).map_err(|e| Error::store(path, local_error(e)))?,
                None => {
                    self.store.put(path, PutPayload::from(bytes.clone())).await.map_err(|e| Error::store(path, e))?;
                }
            }
            journal.record_put(&relative, &bytes)?;
        }
        self.remember(path, &bytes);
        journal.checkpoint_if_full().await
    }

    /// The bytes of an object this store wrote lately, if it kept them.
    fn kept(&self, path: &Path) -> Option<Bytes> {
        self.recent.as_ref()?.get(path)
    }

    /// Keeps the bytes of an object just written under a name never used before.
    fn remember(&self, path: &Path, bytes: &Bytes) {
        if let Some(recent) = &self.recent {
            recent.remember(path, bytes);
        }
    }

    /// Keeps the rows a data file this store just wrote was written from, in the file's own
    /// schema (see [`crate::recent`]): a scan of the file then uses them as they are.
    pub fn keep_rows(&self, path: &Path, rows: arrow::array::RecordBatch) {
        if let Some(recent) = &self.recent {
            recent.remember_rows(path, rows);
        }
    }

    /// The rows a data file this store wrote lately was written from, if kept.
    pub fn kept_rows(&self, path: &Path) -> Option<arrow::array::RecordBatch> {
        self.recent.as_ref()?.rows(path)
    }

    /// Forgets the kept bytes of an object about to be replaced or deleted.
    fn forget(&self, path: &Path) {
        if let Some(recent) = &self.recent {
            recent.forget(path);
        }
    }

    /// Writes an object, replacing any previous one, synced to local disk by itself (not through
    /// the journal, whose replay could not tell an older version of the file from a torn one).
    pub async fn put_synced(&self, path: &Path, bytes: Bytes) -> Result<()> {
        self.forget(path);
        self.store.put(path, PutPayload::from(bytes)).await.map_err(|e| Error::store(path, e))?;
        self.synced(path).await
    }

    /// [`Self::put`] without syncing it to disk: for files no commit depends on (a version's
    /// `.crc`, which readers check when it is there).
    pub async fn put_unsynced(&self, path: &Path, bytes: Bytes) -> Result<()> {
        self.forget(path);
        self.store.put(path, PutPayload::from(bytes)).await.map_err(|e| Error::store(path, e))?;
        Ok(())
    }

    /// Whether [`Self::put_in_place`] rewrites files in place (a store with a journal).
    pub fn rewrites_in_place(&self) -> bool {
        self.journal.is_some() && fsync_on()
    }

    /// Writes a small object over what its file held, keeping the file (and its inode): for an
    /// object rewritten often that only a warehouse's open reads (the record of a transaction
    /// committing several tables, in a file reused by the next one). The journal holds the
    /// bytes, and its replay after a machine crash makes a torn file whole: the last bytes
    /// recorded for a path win. In place only where [`Self::rewrites_in_place`]; elsewhere this
    /// is [`Self::put_synced`].
    pub async fn put_in_place(&self, path: &Path, bytes: Bytes) -> Result<()> {
        let (Some((journal, relative)), Some(file)) = (self.journaled(path, bytes.len()), self.local_file(path)) else {
            return self.put_synced(path, bytes).await;
        };
        self.forget(path);
        {
            let _writing = journal.enter().await;
            let written = bytes.clone();
            let outcome = local_io(bytes.len(), move || write_in_place(&file, &written))
                .await
                .map_err(|e| Error::store(path, object_store::Error::JoinError { source: e }))?;
            outcome.map_err(|e| Error::store(path, local_error(e)))?;
            journal.record_put(&relative, &bytes)?;
        }
        journal.checkpoint_if_full().await
    }

    /// Creates an object only if none exists at `path` (atomically: see the module docs).
    /// With a journal, the file's bytes are recorded and the journal synced first (with every
    /// file recorded before: those a commit names), then the file is created without a sync.
    pub async fn put_if_absent(&self, path: &Path, bytes: Bytes) -> Result<PutOutcome> {
        if let Some((journal, relative)) = self.journaled(path, bytes.len()) {
            let outcome = {
                let _one_at_a_time = journal.path_lock(&relative).await;
                let _writing = journal.enter().await;
                let position = journal.record_intent(&relative, &bytes)?;
                journal.sync_to(position).await?;
                match self.create(path, bytes.clone()).await {
                    Ok(()) => {
                        self.remember(path, &bytes);
                        Ok(PutOutcome::Created)
                    }
                    Err(object_store::Error::AlreadyExists { .. }) => {
                        journal.record_cancel(&relative)?;
                        Ok(PutOutcome::AlreadyExists)
                    }
                    Err(e) => {
                        journal.record_cancel(&relative)?;
                        Err(Error::store(path, e))
                    }
                }
            };
            journal.checkpoint_if_full().await?;
            return outcome;
        }
        // Synced by itself: the files the journal holds must be durable before it.
        if let Some(journal) = &self.journal {
            journal.sync_all().await?;
        }
        match self.create(path, bytes.clone()).await {
            Ok(()) => {
                self.synced(path).await?;
                self.remember(path, &bytes);
                Ok(PutOutcome::Created)
            }
            Err(object_store::Error::AlreadyExists { .. }) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(Error::store(path, e)),
        }
    }

    /// Creates the object at `path` unless one exists, atomically (the put-if-absent itself): on
    /// local disk by [`create_local_file`], elsewhere by the store's conditional put.
    async fn create(&self, path: &Path, bytes: Bytes) -> std::result::Result<(), object_store::Error> {
        let Some(file) = self.local_file(path) else {
            let options = PutOptions { mode: PutMode::Create, ..Default::default() };
            return self.store.put_opts(path, PutPayload::from(bytes), options).await.map(|_| ());
        };
        let created = local_io(bytes.len(), move || create_local_file(&file, &bytes))
            .await
            .map_err(|e| object_store::Error::JoinError { source: e })?;
        match created {
            Ok(true) => Ok(()),
            Ok(false) => {
                Err(object_store::Error::AlreadyExists { path: path.to_string(), source: "the file exists".into() })
            }
            Err(e) => Err(local_error(e)),
        }
    }

    /// Syncs a file just put on local disk, and the folder that names it, to the disk (see the
    /// module docs); nothing for other stores (their put is durable when it returns).
    async fn synced(&self, path: &Path) -> Result<()> {
        let (Some(dir), true) = (&self.local_dir, fsync_on()) else { return Ok(()) };
        let Some(relative) = self.relative(path) else { return Ok(()) };
        let file = dir.join(relative);
        let top = dir.parent().unwrap_or(dir).to_path_buf();
        let synced = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::File::open(&file)?.sync_all()?;
            // The folder that names it, and the folders above that name those, up to the one
            // that names the table's folder (a put may have made them). A folder whose own name
            // was synced before (the same folder: same inode and birth) needs no sync above it.
            let Some(mut folder) = file.parent() else { return Ok(()) };
            std::fs::File::open(folder)?.sync_all()?;
            // Remembered once the whole chain above is synced.
            let mut synced_names = Vec::new();
            while folder != top {
                let Some(above) = folder.parent().filter(|p| p.starts_with(&top)) else { break };
                let identity = folder_identity(folder)?;
                if durable_folders::known(folder, identity) {
                    break;
                }
                std::fs::File::open(above)?.sync_all()?;
                synced_names.push((folder.to_path_buf(), identity));
                folder = above;
            }
            for (folder, identity) in synced_names {
                durable_folders::remember(&folder, identity);
            }
            Ok(())
        })
        .await;
        match synced {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::store(path, local_error(e))),
            Err(e) => Err(Error::store(path, object_store::Error::JoinError { source: e })),
        }
    }

    /// Lists the objects under `prefix` (recursively), optionally only those after `offset`.
    pub async fn list(&self, prefix: &Path, offset: Option<&Path>) -> Result<Vec<ObjectMeta>> {
        let stream = match offset {
            Some(offset) => self.store.list_with_offset(Some(prefix), offset),
            None => self.store.list(Some(prefix)),
        };
        stream.try_collect().await.map_err(|e| Error::store(prefix, e))
    }

    /// Deletes an object; a missing object is not an error. With a journal the deletion is
    /// recorded, so that a replay does not bring the file back.
    pub async fn delete(&self, path: &Path) -> Result<()> {
        self.forget(path);
        let journaled = self.journaled(path, 0);
        let _writing = match &journaled {
            Some((journal, _)) => Some(journal.enter().await),
            None => None,
        };
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(Error::store(path, e)),
        }
        if let Some((journal, relative)) = &journaled {
            journal.record_delete(relative)?;
        }
        Ok(())
    }
}

/// Creates `file` holding `bytes` unless a file has its name, atomically; false when one has.
/// The bytes go to a temporary file beside it (named `<name>#<n>`, which listings skip, as
/// `object_store`'s own), which then takes the name only if no file has it (`renameat2` with
/// `RENAME_NOREPLACE`). So a created file leaves nothing to delete. `object_store`'s local
/// put-if-absent links the temporary file to the name, then deletes it: an inode freed per
/// commit, and on ext4 without a journal (this project's machines) every create then scans past
/// the inodes freed in the last minute. Where the file system cannot rename without replacing,
/// the link and delete it is.
fn create_local_file(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    let mut suffix = 1u32;
    let (mut temporary, temporary_path) = loop {
        let mut name = file.as_os_str().to_owned();
        name.push(format!("#{suffix}"));
        let candidate = std::path::PathBuf::from(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&candidate) {
            Ok(opened) => break (opened, candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && suffix < 1_000 => suffix += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && suffix == 1 => {
                let Some(folder) = file.parent() else { return Err(e) };
                std::fs::create_dir_all(folder)?;
                suffix += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let renamed = temporary.write_all(bytes).and_then(|()| rename_if_absent(&temporary_path, file));
    drop(temporary);
    match renamed {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary_path);
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// The largest file a local store writes ([`TableStore::put`], [`TableStore::put_in_place`]),
/// creates (a put-if-absent) or reads ([`TableStore::get`]) on the calling thread: for such a
/// file the blocking pool's two thread switches cost more than the work.
const SMALL_WRITE_BYTES_MAX: usize = 64 * 1024;

/// Runs `work`, local file I/O of `bytes` bytes, on the calling thread when the file is small
/// (a log version, a transaction's record: the blocking pool's two thread switches cost more than
/// the work), else on the blocking pool.
async fn local_io<T: Send + 'static>(
    bytes: usize,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::result::Result<std::io::Result<T>, tokio::task::JoinError> {
    if bytes <= SMALL_WRITE_BYTES_MAX {
        Ok(work())
    } else {
        tokio::task::spawn_blocking(work).await
    }
}

/// A local file system's error, as the object store's.
fn local_error(e: std::io::Error) -> object_store::Error {
    object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(e) }
}

/// Creates a file that must not exist yet (and its folder, if missing) with `bytes`.
fn write_new_file(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    open_creating_folder(file, std::fs::OpenOptions::new().write(true).create_new(true))?.write_all(bytes)
}

/// Writes `bytes` over the file's content (making the file, and its folder, when missing).
fn write_in_place(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opened = open_creating_folder(file, std::fs::OpenOptions::new().write(true).create(true).truncate(false))?;
    opened.write_all(bytes)?;
    opened.set_len(bytes.len() as u64)
}

/// Opens `file` with `options`, creating its folder first when it is missing.
fn open_creating_folder(file: &std::path::Path, options: &std::fs::OpenOptions) -> std::io::Result<std::fs::File> {
    match options.open(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(folder) = file.parent() else { return Err(e) };
            std::fs::create_dir_all(folder)?;
            options.open(file)
        }
        other => other,
    }
}

/// Gives `from` the name `to` only if no file has it (`AlreadyExists` otherwise).
#[cfg(target_os = "linux")]
fn rename_if_absent(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // A file system that cannot (EINVAL): link, then delete the temporary name.
        Err(rustix::io::Errno::INVAL) => link_if_absent(from, to),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn rename_if_absent(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    link_if_absent(from, to)
}

/// [`rename_if_absent`] by a hard link, which fails when the name exists.
fn link_if_absent(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::hard_link(from, to)?;
    // Created: a temporary name left behind is skipped by listings.
    let _ = std::fs::remove_file(from);
    Ok(())
}

/// What tells one folder from another that later took its name: its inode and its birth time.
fn folder_identity(folder: &std::path::Path) -> std::io::Result<(u64, Option<std::time::SystemTime>)> {
    let meta = std::fs::metadata(folder)?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Ok((inode, meta.created().ok()))
}

/// The folders whose own names this process has synced to disk in the folder above them: a put
/// into one of them syncs the file and the folder, not the folders above (whose entries do not
/// change). Keyed by path, with the folder's identity, so that a folder removed and made again
/// under the same name is synced anew. Bounded: past [`durable_folders::MAX`] folders it starts
/// over (a forgotten folder costs one sync more).
mod durable_folders {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, OnceLock};
    use std::time::SystemTime;

    pub(super) const MAX: usize = 65_536;

    type Identity = (u64, Option<SystemTime>);

    fn folders() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Identity>> {
        static FOLDERS: OnceLock<Mutex<HashMap<PathBuf, Identity>>> = OnceLock::new();
        FOLDERS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn known(folder: &Path, identity: Identity) -> bool {
        folders().get(folder) == Some(&identity)
    }

    pub(super) fn remember(folder: &Path, identity: Identity) {
        let mut folders = folders();
        if folders.len() >= MAX {
            folders.clear();
        }
        folders.insert(folder.to_path_buf(), identity);
    }
}

/// A Parquet file read through the store (byte ranges and footer), for the Parquet async reader.
pub struct ParquetFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: Option<u64>,
    /// The file's bytes, when the store kept them (see [`RecentObjects`]).
    kept: Option<Bytes>,
}

/// Bytes read from the end of a file in the first request, to get the footer in one trip.
const PARQUET_FOOTER_PREFETCH_BYTES: usize = 64 * 1024;

impl ParquetFile {
    /// The file at `path`; `size` (if known from the log) saves a request.
    pub fn new(store: &TableStore, path: Path, size: Option<u64>) -> Self {
        let kept = store.kept(&path);
        Self { store: store.object_store(), path, size, kept }
    }
}

impl parquet::arrow::async_reader::AsyncFileReader for ParquetFile {
    fn get_bytes(&mut self, range: Range<u64>) -> futures::future::BoxFuture<'_, parquet::errors::Result<Bytes>> {
        Box::pin(async move {
            if let Some(bytes) = self.kept.as_ref().and_then(|b| slice(b, &range)) {
                return Ok(bytes);
            }
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        Box::pin(async move {
            if let Some(kept) = &self.kept {
                if let Some(slices) = ranges.iter().map(|r| slice(kept, r)).collect::<Option<Vec<_>>>() {
                    return Ok(slices);
                }
            }
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a parquet::arrow::arrow_reader::ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<'a, parquet::errors::Result<Arc<parquet::file::metadata::ParquetMetaData>>> {
        Box::pin(async move {
            // The page index only when the reader asks for it (a read of a few rows).
            let skip = parquet::file::metadata::PageIndexPolicy::Skip;
            let reader = parquet::file::metadata::ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_column_index_policy(options.map_or(skip, |o| o.column_index_policy()))
                .with_offset_index_policy(options.map_or(skip, |o| o.offset_index_policy()))
                .with_prefetch_hint(Some(PARQUET_FOOTER_PREFETCH_BYTES));
            let kept = self.kept.as_ref().and_then(|b| u64::try_from(b.len()).ok());
            let size = match self.size.or(kept) {
                Some(size) => size,
                None => {
                    self.store
                        .head(&self.path)
                        .await
                        .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?
                        .size
                }
            };
            let metadata = reader.load_and_finish(self, size).await?;
            Ok(Arc::new(metadata))
        })
    }
}

/// Joins a decoded relative path to the root. The result's raw form is the file's real name, so
/// local files and object keys are named exactly as the log's decoded paths say (`%`, spaces and
/// all); only names the store cannot hold verbatim (control characters, `.`/`..`) are encoded.
fn join(root: &Path, relative: &str) -> Path {
    let relative = relative.trim_matches('/');
    let joined = if root.as_ref().is_empty() { relative.to_string() } else { format!("{}/{relative}", root.as_ref()) };
    Path::parse(&joined).unwrap_or_else(|_| {
        let mut path = root.clone();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            path = path.join(part);
        }
        path
    })
}

/// Percent-decodes a path from the log (`add.path`, `remove.path`, ...). `+` stays `+`: these are
/// URI paths, not form data.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(byte) = hex {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(byte);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Percent-encodes a relative file path for the log: `%`, space, control characters and the
/// characters that URIs reserve are encoded; `/` separates segments; non-ASCII stays as it is
/// (as Spark writes it).
pub fn percent_encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        let encode = c.is_ascii_control()
            || matches!(c, '%' | ' ' | '#' | '?' | '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}' | '[' | ']');
        if encode {
            let mut buffer = [0u8; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Turns a path from the log into a relative, decoded path (absolute URIs under the root are made
/// relative; other absolute URIs are returned whole, decoded).
pub fn decode_path(store: &TableStore, logged: &str) -> String {
    if let Ok(url) = Url::parse(logged) {
        if url.scheme().len() > 1 {
            let decoded = percent_decode(url.path());
            let root = format!("/{}", store.root().as_ref());
            return decoded.strip_prefix(&root).map(|r| r.trim_start_matches('/').to_string()).unwrap_or(decoded);
        }
    }
    percent_decode(logged)
}

/// Whether a path from the log is an absolute URI (`file:///...`, `s3://...`) rather than a path
/// relative to the table root.
pub fn is_absolute_uri(logged: &str) -> bool {
    Url::parse(logged).is_ok_and(|url| url.scheme().len() > 1)
}

/// `decoded` (a percent-decoded path relative to the root) if it names a file strictly inside the
/// table's root: not empty, not starting with `/`, and without empty, `.` or `..` segments.
/// Percent-encoded dots (`%2E%2E`) are refused too, in case a store or tool decodes names once
/// more (URL parsers resolve them). Used before deleting a file the log names.
pub fn relative_inside_root(decoded: &str) -> Option<&str> {
    let is_dots = |segment: &str| {
        let folded = segment.to_ascii_lowercase().replace("%2e", ".");
        folded == "." || folded == ".."
    };
    let bad = decoded.is_empty()
        || decoded.starts_with('/')
        || decoded.split('/').any(|segment| segment.is_empty() || is_dots(segment))
        || decoded.chars().any(|c| c.is_control());
    (!bad).then_some(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_strictly_inside_the_root_are_inside() {
        assert_eq!(relative_inside_root("a=1/part-0.parquet"), Some("a=1/part-0.parquet"));
        assert_eq!(relative_inside_root("x%2521/%2E%2Ex.parquet"), Some("x%2521/%2E%2Ex.parquet"));
        for outside in
            ["", "/etc/passwd", "../other/x.parquet", "a/../../x", "./x", "a//x", "%2E%2E/x", "%2e./x", "a/%2e"]
        {
            assert_eq!(relative_inside_root(outside), None, "{outside}");
        }
        assert!(is_absolute_uri("file:///tmp/x.parquet") && is_absolute_uri("s3://bucket/x"));
        assert!(!is_absolute_uri("a=1/x.parquet") && !is_absolute_uri("part-0.parquet"));
    }

    #[test]
    fn percent_coding_round_trips() {
        assert_eq!(percent_decode("_2=bar+%252521/x"), "_2=bar+%2521/x");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("😈/%20"), "😈/ ");
        let raw = "k=a b%/😈#";
        assert_eq!(percent_decode(&percent_encode(raw)), raw);
    }

    #[tokio::test]
    async fn put_if_absent_refuses_the_second_writer() {
        let store = TableStore::memory();
        let path = store.log_path("00000000000000000000.json");
        assert_eq!(store.put_if_absent(&path, Bytes::from_static(b"a")).await.unwrap(), PutOutcome::Created);
        assert_eq!(store.put_if_absent(&path, Bytes::from_static(b"b")).await.unwrap(), PutOutcome::AlreadyExists);
        assert_eq!(store.get(&path).await.unwrap(), Bytes::from_static(b"a"));
        assert!(store.get(&store.log_path("nope")).await.unwrap_err().is_not_found());
    }

    #[tokio::test]
    async fn a_local_put_if_absent_creates_once_and_leaves_no_other_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::local(dir.path().join("t")).unwrap();
        // The log folder does not exist yet: the first create makes it.
        let path = store.log_path("00000000000000000000.json");
        assert_eq!(store.put_if_absent(&path, Bytes::from_static(b"a")).await.unwrap(), PutOutcome::Created);
        assert_eq!(store.put_if_absent(&path, Bytes::from_static(b"b")).await.unwrap(), PutOutcome::AlreadyExists);
        assert_eq!(store.get(&path).await.unwrap(), Bytes::from_static(b"a"));
        // Of writers racing for one name, exactly one creates it.
        let racing = store.log_path("00000000000000000001.json");
        let outcomes =
            futures::future::join_all((0..8u8).map(|i| store.put_if_absent(&racing, Bytes::from(vec![i; 3])))).await;
        let created = outcomes.iter().filter(|o| matches!(o, Ok(PutOutcome::Created))).count();
        assert_eq!(created, 1, "{outcomes:?}");
        assert!(outcomes.iter().all(|o| o.is_ok()));
        let names: Vec<String> = std::fs::read_dir(dir.path().join("t/_delta_log"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file stays: {names:?}");
    }

    #[tokio::test]
    async fn local_puts_remember_the_folders_they_synced() {
        let dir = tempfile::tempdir().unwrap();
        let table = TableStore::local(dir.path().join("warehouse/t")).unwrap();
        let log = dir.path().join("warehouse/t/_delta_log").canonicalize().ok();
        assert!(log.is_none(), "no log folder before the first put");
        table.put(&table.log_path("00000000000000000000.json"), Bytes::from_static(b"{}")).await.unwrap();
        let log = dir.path().join("warehouse/t/_delta_log").canonicalize().unwrap();
        let table_dir = log.parent().unwrap().to_path_buf();
        // The put made `_delta_log` and synced its name in the table's folder, and the table's
        // folder's name in the warehouse's (when syncs are on, as in this test's environment).
        if fsync_on() {
            assert!(durable_folders::known(&log, folder_identity(&log).unwrap()));
            assert!(durable_folders::known(&table_dir, folder_identity(&table_dir).unwrap()));
        }
        // A folder removed and made again under the same name is not taken for the old one.
        let other = dir.path().join("again");
        std::fs::create_dir(&other).unwrap();
        let before = folder_identity(&other).unwrap();
        durable_folders::remember(&other, before);
        std::fs::remove_dir(&other).unwrap();
        std::fs::create_dir(&other).unwrap();
        let after = folder_identity(&other).unwrap();
        if before.1.is_some() {
            // With birth times (ext4, xfs, btrfs, tmpfs), even a reused inode is told apart.
            assert_ne!(before, after);
            assert!(!durable_folders::known(&other, after));
        }
    }
}
