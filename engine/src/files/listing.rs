//! The folder a file source reads: listed and read through one seam, a local folder (checked by
//! [`crate::paths`]) or an object-store URL (the warehouse owner's only).
//!
//! Listing walks the folder recursively and skips what Spark skips: files and folders whose name
//! starts with `_` or `.` (temporary and hidden files: land a file by writing it under such a
//! name and renaming it), and any folder holding a `_delta_log` (a table). Symbolic links are not
//! followed, so a link inside the folder cannot lead the server to a file outside it.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::{Error, Result};
use crate::paths::PathUse;
use crate::privileges::Privileges;
use crate::warehouse::Warehouse;

/// A file found in a source's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// Its path below the folder, with `/` separators (the key of its exactly-once record).
    pub relative: String,
    /// Its full path or URL (shown in `_metadata.file_path`).
    pub location: String,
    pub size: u64,
    pub modified_ms: i64,
}

impl FoundFile {
    pub fn name(&self) -> &str {
        self.relative.rsplit('/').next().unwrap_or(&self.relative)
    }

    /// The Hive-style partition values of the folders it lies in (`date=2026-12-01/`).
    pub fn partitions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut segments: Vec<&str> = self.relative.split('/').collect();
        segments.pop();
        for segment in segments {
            if let Some((key, value)) = segment.split_once('=') {
                if !key.is_empty() && !out.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
                    let value = percent_decode(value);
                    out.push((key.to_string(), value));
                }
            }
        }
        out
    }
}

/// Hive's escaping of partition values (`%2F` for `/`, `__HIVE_DEFAULT_PARTITION__` for null is
/// kept as text).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            if let Some(hex) = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()) {
                if let Ok(value) = u8::from_str_radix(hex, 16) {
                    out.push(value);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A source's folder.
#[derive(Debug, Clone)]
pub enum Folder {
    Local(PathBuf),
    Store { store: Arc<dyn ObjectStore>, root: StorePath, url: String },
}

fn skipped(segment: &str) -> bool {
    segment.starts_with('_') || segment.starts_with('.')
}

impl Folder {
    /// The folder a client named, checked against its rights: a local folder as COPY's files
    /// are (inside the data folder or an allowed folder, not a table's or the server's own), a URL
    /// only for the warehouse owner. A folder that does not exist is an error (58P01).
    pub fn open(db: &Warehouse, text: &str, privileges: Privileges) -> Result<Self> {
        if text.contains("://") && !text.starts_with("file://") {
            if !privileges.owner {
                return Err(Error::PermissionDenied(format!(
                    "access to \"{text}\" is not allowed: only the warehouse owner may read files at a URL"
                )));
            }
            let url = url::Url::parse(text).map_err(|e| Error::data("22023", format!("bad URL '{text}': {e}")))?;
            let options: Vec<(String, String)> = std::env::vars()
                .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_"))
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect();
            let (store, root) = object_store::parse_url_opts(&url, options)
                .map_err(|e| Error::data("22023", format!("cannot open '{text}': {e}")))?;
            return Ok(Folder::Store { store: Arc::from(store), root, url: text.trim_end_matches('/').to_string() });
        }
        let path = db.client_file(text, privileges, PathUse::SourceFolder)?;
        if !path.is_dir() {
            return Err(Error::data("58P01", format!("folder \"{text}\" does not exist")));
        }
        Ok(Folder::Local(path))
    }

    /// A path a client named that is one local file (checked as COPY's files are): its folder and
    /// the file, for `read_files('data.csv')`. None when the path is not a file.
    pub fn single_file(db: &Warehouse, text: &str, privileges: Privileges) -> Result<Option<(Self, FoundFile)>> {
        if text.contains("://") && !text.starts_with("file://") {
            return Ok(None);
        }
        let path = db.client_file(text, privileges, PathUse::ReadFile)?;
        let Ok(metadata) = std::fs::metadata(&path) else { return Ok(None) };
        let (true, Some(parent), Some(name)) = (metadata.is_file(), path.parent(), path.file_name()) else {
            return Ok(None);
        };
        let modified_ms = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let file = FoundFile {
            relative: name.to_string_lossy().into_owned(),
            location: path.display().to_string(),
            size: metadata.len(),
            modified_ms,
        };
        Ok(Some((Folder::Local(parent.to_path_buf()), file)))
    }

    /// Every file below the folder that `matches` (by its relative path), hidden files, tables
    /// and symbolic links left out, oldest first (by modification time, then path): the order
    /// files are ingested and read in.
    pub async fn list(&self, matches: &(dyn Fn(&str) -> bool + Sync)) -> Result<Vec<FoundFile>> {
        let mut found = self.list_all(matches).await?;
        found.sort_by(|a, b| (a.modified_ms, &a.relative).cmp(&(b.modified_ms, &b.relative)));
        Ok(found)
    }

    async fn list_all(&self, matches: &(dyn Fn(&str) -> bool + Sync)) -> Result<Vec<FoundFile>> {
        match self {
            Folder::Local(root) => {
                let root = root.clone();
                let found = tokio::task::spawn_blocking(move || list_local(&root))
                    .await
                    .map_err(|e| Error::Internal(format!("the folder listing stopped: {e}")))??;
                Ok(found.into_iter().filter(|f| matches(&f.relative)).collect())
            }
            Folder::Store { store, root, url } => {
                let objects: Vec<object_store::ObjectMeta> = store
                    .list(Some(root))
                    .try_collect()
                    .await
                    .map_err(|e| Error::data("58030", format!("cannot list {url}: {e}")))?;
                let mut tables: Vec<String> = Vec::new();
                let mut files = Vec::new();
                for object in objects {
                    let Some(parts) = object.location.prefix_match(root) else { continue };
                    let parts: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
                    if let Some(log) = parts.iter().position(|p| p == "_delta_log") {
                        tables.push(parts.iter().take(log).cloned().collect::<Vec<_>>().join("/"));
                        continue;
                    }
                    if parts.iter().any(|p| skipped(p)) {
                        continue;
                    }
                    let relative = parts.join("/");
                    files.push(FoundFile {
                        location: format!("{url}/{relative}"),
                        relative,
                        size: object.size,
                        modified_ms: object.last_modified.timestamp_millis(),
                    });
                }
                files.retain(|f| {
                    !tables.iter().any(|t| t.is_empty() || f.relative.starts_with(&format!("{t}/")))
                        && matches(&f.relative)
                });
                Ok(files)
            }
        }
    }

    /// The bytes of a file found by [`Folder::list`]; none when it is gone since.
    pub async fn read(&self, file: &FoundFile) -> Result<Option<Bytes>> {
        match self {
            Folder::Local(root) => {
                let path = root.join(&file.relative);
                let read = tokio::task::spawn_blocking(move || std::fs::read(&path))
                    .await
                    .map_err(|e| Error::Internal(format!("the file read stopped: {e}")))?;
                match read {
                    Ok(bytes) => Ok(Some(Bytes::from(bytes))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(Error::data("58030", format!("cannot read {}: {e}", file.location))),
                }
            }
            Folder::Store { store, root, .. } => {
                let mut path = root.clone();
                for part in file.relative.split('/') {
                    path = path.join(part);
                }
                let unreadable =
                    |e: object_store::Error| Error::data("58030", format!("cannot read {}: {e}", file.location));
                match store.get(&path).await {
                    Ok(result) => Ok(Some(result.bytes().await.map_err(unreadable)?)),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(unreadable(e)),
                }
            }
        }
    }
}

fn list_local(root: &std::path::Path) -> Result<Vec<FoundFile>> {
    let mut files = Vec::new();
    let mut walker = walkdir::WalkDir::new(root).follow_links(false).sort_by_file_name().min_depth(1).into_iter();
    while let Some(entry) = walker.next() {
        let entry = match entry {
            Ok(entry) => entry,
            // A file removed while the folder is walked, or a folder without read permission.
            Err(e) if e.depth() > 0 => continue,
            Err(e) => return Err(Error::data("58030", format!("cannot list {}: {e}", root.display()))),
        };
        let name = entry.file_name().to_string_lossy();
        if skipped(&name) {
            if entry.file_type().is_dir() {
                walker.skip_current_dir();
            }
            continue;
        }
        if entry.file_type().is_dir() {
            if entry.path().join("_delta_log").is_dir() {
                walker.skip_current_dir();
            }
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(metadata) = entry.metadata() else { continue };
        let Ok(relative) = entry.path().strip_prefix(root) else { continue };
        let relative: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        let modified_ms = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        files.push(FoundFile {
            relative: relative.join("/"),
            location: entry.path().display().to_string(),
            size: metadata.len(),
            modified_ms,
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_partitions_come_from_folders() {
        let file = FoundFile {
            relative: "date=2026-12-01/region=eu%2Fwest/part-0.csv".into(),
            location: String::new(),
            size: 0,
            modified_ms: 0,
        };
        assert_eq!(
            file.partitions(),
            vec![("date".to_string(), "2026-12-01".to_string()), ("region".to_string(), "eu/west".to_string())]
        );
        assert_eq!(file.name(), "part-0.csv");
    }

    #[test]
    fn listing_skips_hidden_files_tables_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("t/_delta_log")).unwrap();
        std::fs::write(root.join("a/b/x.csv"), "1").unwrap();
        std::fs::write(root.join("a/.y.csv.tmp"), "1").unwrap();
        std::fs::write(root.join("_z.csv"), "1").unwrap();
        std::fs::write(root.join("t/part.parquet"), "1").unwrap();
        std::fs::write(root.join("top.csv"), "1").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", root.join("link.csv")).unwrap();
        let found: Vec<String> = list_local(root).unwrap().into_iter().map(|f| f.relative).collect();
        assert_eq!(found, vec!["a/b/x.csv".to_string(), "top.csv".to_string()]);
    }

    #[tokio::test]
    async fn a_file_gone_since_the_listing_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "1").unwrap();
        let folder = Folder::Local(dir.path().to_path_buf());
        let found = folder.list(&|_: &str| true).await.unwrap();
        assert_eq!(folder.read(&found[0]).await.unwrap().as_deref(), Some(b"1".as_slice()));
        std::fs::remove_file(dir.path().join("a.csv")).unwrap();
        assert!(folder.read(&found[0]).await.unwrap().is_none());
    }
}
