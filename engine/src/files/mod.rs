//! Files as rows: CSV, JSON lines and Parquet read the way Databricks Auto Loader and
//! `read_files` read them. Used by file sources ([`crate::source::files`]: exactly-once ingestion
//! into a streaming table) and by the `read_files(...)` relation; it knows nothing of SQL
//! sessions, flows or sources.
//!
//! - [`options`]: what a source or `read_files` may say;
//! - [`listing`]: the folder (local, checked by [`crate::paths`], or an object-store URL), its
//!   files and their Hive-style partition folders;
//! - [`sniff`]: CSV dialects and column types from text;
//! - [`decode`]: a file's bytes to rows and dead letters;
//! - [`rows`]: rows meet a table's schema (new columns, `_rescued_data`, `_metadata`);
//! - [`read`]: the `read_files` relation.

pub mod decode;
pub mod listing;
pub mod options;
pub mod read;
pub mod rows;
pub mod sniff;

use futures::StreamExt;

use self::decode::FileRows;
use self::listing::{Folder, FoundFile};
use self::options::FileOptions;

/// Reads and decodes files, as many at once as there are cores; a file larger than
/// `max_file_bytes` is not read but becomes a dead letter, a file that cannot be read is a dead
/// letter, and a file that is gone since it was listed is left out.
pub async fn read_files(folder: &Folder, files: Vec<FoundFile>, options: &FileOptions) -> Vec<FileRows> {
    let parallel = sluice_storage::cores().max(2);
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
