//! File sources (Databricks Auto Loader's `cloudFiles`): `CREATE SOURCE landing FROM FILES (path
//! 'landing/orders/', format 'csv', ...)`, ingested by `CREATE STREAMING TABLE bronze FROM SOURCE
//! landing`, and the one-off `read_files('landing/orders/*.csv', format => 'csv')`.
//!
//! Each file is ingested once: the table's log holds one `txn(appId = 'files:<source>:<path>',
//! version = the file's modification time in ms)` per file, committed with the file's rows (and,
//! first, with its dead letters in `<table>_errors`), so a crash at any point leaves every file
//! either wholly in the table or not at all, and a restart skips what is there. A file is known
//! by its path: one that changes after it was ingested is not ingested again.
//!
//! - [`options`]: what the source may say;
//! - [`listing`]: the folder (local, checked by [`crate::paths`], or an object-store URL), its
//!   files and their Hive-style partition folders;
//! - [`sniff`]: CSV dialects and column types from text;
//! - [`decode`]: a file's bytes to rows and dead letters;
//! - [`rows`]: rows meet the table (schema evolution, `_rescued_data`, `_metadata`);
//! - [`ingest`]: the loop that lists, batches and commits;
//! - [`read`]: the `read_files` table function.

pub mod decode;
pub(crate) mod ingest;
pub mod listing;
pub mod options;
pub(crate) mod read;
pub mod rows;
pub mod sniff;

use std::collections::HashSet;

use futures::StreamExt;

use self::decode::FileRows;
use self::listing::{Folder, FoundFile};
use self::options::FileOptions;

/// The prefix of the txn application ids a table keeps per file of a source.
pub fn txn_prefix(source: &str) -> String {
    format!("files:{source}:")
}

/// The txn application id of one file of a source.
pub fn txn_app_id(source: &str, relative: &str) -> String {
    format!("files:{source}:{relative}")
}

/// The files (paths below the folder) whose txns a table's log holds.
pub fn files_in<'a>(app_ids: impl Iterator<Item = &'a String>, source: &str) -> HashSet<String> {
    let prefix = txn_prefix(source);
    app_ids.filter_map(|id| id.strip_prefix(&prefix)).map(str::to_string).collect()
}

/// Reads and decodes files, as many at once as there are cores; a file larger than
/// `max_file_bytes` is not read but becomes a dead letter, a file that cannot be read is a dead
/// letter, and a file that is gone since it was listed is left out.
pub async fn read_files(folder: &Folder, files: Vec<FoundFile>, options: &FileOptions) -> Vec<FileRows> {
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    futures::stream::iter(files)
        .map(|file| async move {
            if file.size > options.max_file_bytes {
                let error = format!(
                    "the file has {} bytes, more than the source's max_file_bytes ({})",
                    file.size, options.max_file_bytes
                );
                return Some(FileRows::failed(file, error));
            }
            let bytes = match folder.read(&file).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return None,
                Err(e) => return Some(FileRows::failed(file, e.to_string())),
            };
            let decode_options = options.clone();
            let kept = file.clone();
            Some(match tokio::task::spawn_blocking(move || decode::decode(file, bytes, &decode_options)).await {
                Ok(rows) => rows,
                Err(e) => FileRows::failed(kept, format!("decoding stopped: {e}")),
            })
        })
        .buffered(parallel)
        .filter_map(|rows| async move { rows })
        .collect()
        .await
}
