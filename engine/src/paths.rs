//! Server-side paths that clients name: every one is resolved and checked here, in one place.
//!
//! A client names server paths in `CREATE TABLE ... LOCATION`, in `COPY ... FROM/TO 'file'`, and in
//! the options of a source (a FILES source's folder, `read_files`, a Kafka client's certificate files). Each is resolved the same
//! way: relative paths are taken from the data folder, `file://` URLs become paths, and symbolic
//! links are followed (for a path that does not exist yet, in its longest existing ancestor; a
//! `..` after that, or a dangling link, is refused). The resolved path must then lie in an
//! allowed folder: the warehouse's data folder or a folder the operator allowed
//! (`--allow-path`). Inside them, two kinds of folder stay off limits to every client:
//!
//! - the server's own folder `_sluice/` (catalog versions, view state, TLS keys);
//! - tables' folders, for file reads and writes (a COPY into `_delta_log/` would forge a commit).
//!
//! A table location must not overlap a managed table's folder or contain the data folder, for
//! anyone. The warehouse owner may attach a table anywhere else (any local folder or
//! object-store URL); other roles only inside the allowed folders.
//!
//! Managed tables' folders are made here too ([`managed_location`]), from names reduced to safe
//! path segments, so no schema or table name can place them outside the data folder.

use std::path::{Path, PathBuf};

use crate::catalog::{Catalog, TableEntry};
use crate::error::{Error, Result};
use crate::privileges::Privileges;

/// The folder of the server's own state inside the data folder.
pub const INTERNAL_FOLDER: &str = "_sluice";

/// What a client wants to do at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    /// Read a file (`COPY ... FROM 'file'`).
    ReadFile,
    /// Write a file (`COPY ... TO 'file'`).
    WriteFile,
    /// A file the server reads on the client's behalf later (a Kafka client's certificate).
    SourceFile,
    /// A folder whose files the server reads (a FILES source, `read_files`): as for COPY FROM,
    /// and it must not hold the data folder (the server's own files and every table's).
    SourceFolder,
}

fn denied(path: &str, why: &str) -> Error {
    Error::PermissionDenied(format!("access to \"{path}\" is not allowed: {why}"))
}

/// Resolves `path` (absolute) following symbolic links; for a path that does not exist, its
/// longest existing ancestor is resolved and the rest appended.
pub fn resolve(path: &Path) -> std::result::Result<PathBuf, String> {
    let mut rest = Vec::new();
    let mut current = path.to_path_buf();
    loop {
        match std::fs::canonicalize(&current) {
            Ok(mut found) => {
                for part in rest.iter().rev() {
                    found.push(part);
                }
                return Ok(found);
            }
            Err(_) => {
                if std::fs::symlink_metadata(&current).is_ok() {
                    return Err("it is a symbolic link to nothing".into());
                }
                match (current.file_name(), current.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name.to_os_string());
                        current = parent.to_path_buf();
                    }
                    _ => return Err("it cannot be resolved (a '..' after a folder that does not exist?)".into()),
                }
            }
        }
    }
}

/// A name reduced to one safe path segment: letters, digits, `_` and `-` (others become `_`).
fn segment(name: &str) -> String {
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    let safe = safe.trim_start_matches('_').to_string();
    if safe.is_empty() {
        "x".into()
    } else {
        safe
    }
}

/// The folder of a new managed table, relative to the data folder.
pub fn managed_location(schema: &str, name: &str, id: &str) -> String {
    let short = id.get(..8).unwrap_or(id);
    format!("{}/{}-{short}", segment(schema), segment(name))
}

/// Where clients may name server paths: the warehouse's data folder (when it is on local disk)
/// and the operator's `--allow-path` folders. Held by the database; it reads the catalog for the
/// tables' folders.
#[derive(Debug, Default)]
pub struct PathPolicy {
    /// The warehouse's location (a folder or a URL).
    location: String,
    allowed_paths: std::sync::RwLock<Vec<PathBuf>>,
}

impl PathPolicy {
    pub fn new(location: &str) -> Self {
        Self { location: location.to_string(), allowed_paths: Default::default() }
    }

    /// The data folder, when the warehouse is on local disk (resolved).
    pub fn data_folder(&self) -> Option<PathBuf> {
        let location = self.location.as_str();
        let path = if let Some(rest) = location.strip_prefix("file://") {
            PathBuf::from(rest)
        } else if location.contains("://") {
            return None;
        } else {
            PathBuf::from(location)
        };
        resolve(&path).ok()
    }

    /// Adds folders (besides the data folder) where clients may name server files and locations.
    pub fn allow_paths(&self, folders: &[PathBuf]) {
        let resolved: Vec<PathBuf> = folders.iter().filter_map(|f| resolve(f).ok()).collect();
        self.allowed_paths.write().unwrap_or_else(|p| p.into_inner()).extend(resolved);
    }

    fn allowed_folders(&self) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = self.data_folder().into_iter().collect();
        folders.extend(self.allowed_paths.read().unwrap_or_else(|p| p.into_inner()).iter().cloned());
        folders
    }

    /// A path a client named, resolved: relative to the data folder, symbolic links followed.
    fn resolve_client_path(&self, text: &str) -> Result<PathBuf> {
        let raw = match text.strip_prefix("file://") {
            Some(rest) => PathBuf::from(rest),
            None => PathBuf::from(text),
        };
        let absolute = if raw.is_absolute() {
            raw
        } else {
            match self.data_folder() {
                Some(data) => data.join(raw),
                None => return Err(denied(text, "a relative path needs a warehouse on local disk")),
            }
        };
        resolve(&absolute).map_err(|why| denied(text, &why))
    }

    /// The local folders of the catalog's tables (resolved).
    fn table_folders(&self, catalog: &Catalog) -> Vec<(PathBuf, bool)> {
        let data = self.data_folder();
        let state = catalog.current();
        state
            .tables
            .values()
            .filter_map(|entry| {
                let folder = if entry.managed {
                    data.as_ref().map(|d| d.join(entry.location.trim_start_matches('/')))
                } else if entry.location.contains("://") && !entry.location.starts_with("file://") {
                    None
                } else {
                    Some(PathBuf::from(entry.location.trim_start_matches("file://")))
                };
                folder.map(|f| (resolve(&f).unwrap_or(f), entry.managed))
            })
            .collect()
    }

    fn check_not_internal(&self, text: &str, path: &Path) -> Result<()> {
        if let Some(data) = self.data_folder() {
            if path.starts_with(data.join(INTERNAL_FOLDER)) {
                return Err(denied(text, "the server's own folder is off limits"));
            }
        }
        Ok(())
    }

    /// Checks a server-side file a client names (COPY, a source's files) and returns it resolved.
    pub fn client_file(
        &self,
        catalog: &Catalog,
        text: &str,
        privileges: Privileges,
        purpose: PathUse,
    ) -> Result<PathBuf> {
        if purpose == PathUse::SourceFile && !privileges.owner {
            return Err(denied(text, "only the warehouse owner may name files for a source to read"));
        }
        // PostgreSQL's pg_read_all_data does not include pg_read_server_files.
        if privileges.read_only {
            return Err(denied(text, "a read-only role reads and writes no server files"));
        }
        let path = self.resolve_client_path(text)?;
        if !self.allowed_folders().iter().any(|folder| path.starts_with(folder)) {
            return Err(denied(
                text,
                "server-side files must be inside the data folder or a folder given with --allow-path",
            ));
        }
        self.check_not_internal(text, &path)?;
        if purpose == PathUse::SourceFolder && self.data_folder().is_some_and(|data| data.starts_with(&path)) {
            return Err(denied(text, "a source folder cannot hold the data folder (name a folder inside it)"));
        }
        if self.table_folders(catalog).iter().any(|(folder, _)| path.starts_with(folder)) {
            return Err(denied(text, "it is inside a table's folder (use SQL to read and write tables)"));
        }
        Ok(path)
    }

    /// Checks the LOCATION of a table a client creates or attaches; returns the location to
    /// record (a resolved local path, or the URL as given).
    pub fn table_location(&self, catalog: &Catalog, text: &str, privileges: Privileges) -> Result<String> {
        let is_url = text.contains("://") && !text.starts_with("file://");
        if is_url {
            return if privileges.owner {
                Ok(text.to_string())
            } else {
                Err(denied(text, "only the warehouse owner may attach a table at a URL"))
            };
        }
        let path = self.resolve_client_path(text)?;
        let inside_allowed = self.allowed_folders().iter().any(|folder| path.starts_with(folder));
        if !privileges.owner && !inside_allowed {
            return Err(denied(
                text,
                "only the warehouse owner may place tables outside the data folder and the folders given with --allow-path",
            ));
        }
        self.check_not_internal(text, &path)?;
        if let Some(data) = self.data_folder() {
            if data.starts_with(&path) {
                return Err(denied(text, "a table location cannot hold the data folder"));
            }
        }
        for (folder, managed) in self.table_folders(catalog) {
            if managed && (path.starts_with(&folder) || folder.starts_with(&path)) {
                return Err(denied(text, "it overlaps the folder of a table the warehouse manages"));
            }
        }
        Ok(path.display().to_string())
    }

    /// The local folder of a managed table, checked to lie inside the data folder.
    pub fn managed_folder(&self, entry: &TableEntry) -> Option<PathBuf> {
        if !entry.managed {
            return None;
        }
        let data = self.data_folder()?;
        let relative = Path::new(entry.location.trim_start_matches('/'));
        if relative.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
            return None;
        }
        let folder = resolve(&data.join(relative)).ok()?;
        (folder.starts_with(&data) && folder != data).then_some(folder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_locations_stay_inside() {
        assert_eq!(managed_location("public", "t", "0123456789"), "public/t-01234567");
        assert_eq!(managed_location("/etc", "../x", "ab"), "etc/x-ab");
        assert_eq!(managed_location("..", "a b", "ab"), "x/a_b-ab");
    }

    #[test]
    fn resolution_follows_links_and_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let data = resolve(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), data.join("link")).unwrap();
        let through = resolve(&data.join("link/new.csv")).unwrap();
        assert!(!through.starts_with(&data), "{through:?}");
        assert!(resolve(&data.join("missing/../x")).is_err());
        std::os::unix::fs::symlink(data.join("nothing"), data.join("dangling")).unwrap();
        assert!(resolve(&data.join("dangling")).is_err());
    }
}
