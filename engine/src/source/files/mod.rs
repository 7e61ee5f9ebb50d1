//! File sources (Databricks Auto Loader's `cloudFiles`): `CREATE SOURCE landing FROM FILES (path
//! 'landing/orders/', format 'csv', ...)`, ingested by `CREATE STREAMING TABLE bronze FROM SOURCE
//! landing` (reading and decoding is [`crate::files`]'s).
//!
//! Each file is ingested once: the table's log holds one `txn(appId = 'files:<source>:<path>',
//! version = the file's modification time in ms)` per file, committed with the file's rows (and,
//! first, with its dead letters in `<table>_errors`), so a crash at any point leaves every file
//! either wholly in the table or not at all, and a restart skips what is there. A file is known
//! by its path: one that changes after it was ingested is not ingested again.
//!
//! - [`ingest`]: the loop that lists, batches and commits.

pub(crate) mod ingest;

use std::collections::HashSet;

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
