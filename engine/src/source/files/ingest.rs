//! The ingest loop of a table that reads a file source: list the folder, take the files the table
//! does not hold yet (oldest first) in batches of `batch_files` / `batch_bytes`, read and decode
//! them (on blocking threads, as many at once as there are cores; the next batch while the
//! current one commits, so at most two batches are in memory), add the columns they bring, then
//! commit their dead letters and their rows, each commit carrying the batch's per-file txns.
//! When nothing is left, sleep `interval_ms` and list again.
//!
//! The files a table holds are read from its log when a session starts and kept in memory after
//! that; a replay (after a crash between the two commits, or another process ingesting the same
//! source) drops the files a table already holds before writing.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{Fields, SchemaRef};
use sluice_storage::actions::Txn;
use sluice_storage::write::SaveMode;

use super::{files_in, txn_app_id};
use crate::catalog::SourceEntry;
use crate::change::{ColumnMatch, WriteContext};
use crate::error::{Error, Result};
use crate::files::decode::FileRows;
use crate::files::listing::{Folder, FoundFile};
use crate::files::options::FileOptions;
use crate::files::rows;
use crate::privileges::Privileges;
use crate::source::{errors_table_name, table_entry, FileProgress, IngestState, SourceRuntime};
use crate::sql::context::QueryContext;
use crate::util::now_ms;
use crate::warehouse::Warehouse;

/// The files of `source` a table holds.
async fn done_files(db: &Arc<Warehouse>, table: &str, source: &str) -> Result<HashSet<String>> {
    let entry = table_entry(db, table)?;
    let snapshot = db.open_table(&entry).await?.snapshot().await?;
    Ok(files_in(snapshot.txns().keys(), source))
}

/// The next batch: files in order until `batch_files` or `batch_bytes` (at least one file).
fn next_batch(pending: &mut Vec<FoundFile>, options: &FileOptions) -> Vec<FoundFile> {
    let mut bytes = 0u64;
    let mut count = 0usize;
    for file in pending.iter() {
        if count > 0 && (count >= options.batch_files || bytes.saturating_add(file.size) > options.batch_bytes) {
            break;
        }
        bytes = bytes.saturating_add(file.size);
        count += 1;
    }
    pending.drain(..count).collect()
}

/// Lists and ingests until stopped; an error ends the session (the task restarts it).
pub(crate) async fn session(
    sources: &Weak<SourceRuntime>,
    table: &str,
    source: &SourceEntry,
    stop: &Arc<AtomicBool>,
) -> Result<()> {
    let options = FileOptions::parse(&source.options)?;
    let matches = options.matcher();
    let (folder, mut done) = {
        let strong = sources.upgrade().ok_or_else(|| Error::Internal("the database closed".into()))?;
        // The folder is checked again as the owner's (it was checked against its creator's rights
        // when the source was made): a link swapped since cannot lead outside the allowed folders.
        let folder = Folder::open(&strong.db, &options.path, Privileges::OWNER)?;
        let done = done_files(&strong.db, table, &source.name).await?;
        (folder, done)
    };
    let mut writer: Option<QueryContext> = None;
    let mut failed = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let listed = folder.list(&matches).await?;
        let mut pending: Vec<FoundFile> = listed.iter().filter(|f| !done.contains(&f.relative)).cloned().collect();
        {
            let Some(strong) = sources.upgrade() else { return Ok(()) };
            let progress = |pending: &[FoundFile], done: usize| FileProgress {
                seen: listed.len() as u64,
                done: done as u64,
                failed,
                pending: pending.len() as u64,
                last_file: None,
                oldest_pending_ms: pending.iter().map(|f| f.modified_ms).min(),
            };
            strong.update(table, |s| {
                let last = s.files.as_ref().and_then(|f| f.last_file.clone());
                s.files = Some(FileProgress { last_file: last, ..progress(&pending, done.len()) });
                if s.state == IngestState::Starting {
                    s.state = IngestState::Running;
                }
            });
        }
        if pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(options.interval_ms)).await;
            continue;
        }
        // The next batch is read and decoded while the current one is committed.
        let read = |batch: Vec<FoundFile>| {
            let (folder, options) = (folder.clone(), options.clone());
            AbortOnDrop(tokio::spawn(async move { crate::files::read_files(&folder, batch, &options).await }))
        };
        let mut next = Some(read(next_batch(&mut pending, &options)));
        while let Some(mut reading) = next.take() {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let decoded = (&mut reading.0)
                .await
                .map_err(|e| Error::Internal(format!("reading the source's files stopped: {e}")))?;
            if !pending.is_empty() {
                next = Some(read(next_batch(&mut pending, &options)));
            }
            let Some(strong) = sources.upgrade() else { return Ok(()) };
            let writer = writer.get_or_insert_with(|| QueryContext::new(strong.db.clone()));
            let whole_failures =
                decoded.iter().filter(|f| f.rows() == 0 && f.dead.iter().any(|d| d.line.is_none())).count();
            commit_files(&strong, writer, table, &source.name, &decoded).await?;
            failed += whole_failures as u64;
            done.extend(decoded.iter().map(|f| f.file.relative.clone()));
            let last = decoded.last().map(|f| f.file.location.clone());
            let remaining = pending.len() as u64;
            let oldest = pending.iter().map(|f| f.modified_ms).min();
            let done_count = done.len() as u64;
            strong.update(table, |s| {
                let files = s.files.get_or_insert_with(Default::default);
                files.done = done_count;
                files.failed = failed;
                files.pending = remaining;
                files.oldest_pending_ms = oldest;
                if last.is_some() {
                    files.last_file = last.clone();
                }
            });
        }
    }
}

/// A task that stops when its handle is dropped (a session that ends leaves no reader behind).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Commits one batch of files: the columns they bring, their dead letters, then their rows
/// (which runs the table's flows).
async fn commit_files(
    sources: &SourceRuntime,
    writer: &QueryContext,
    table: &str,
    source: &str,
    files: &[FileRows],
) -> Result<()> {
    let db = &sources.db;
    let entry = table_entry(db, table)?;
    let name = crate::names::parse_table_name(table)?;
    let object = crate::names::object_name(&name.schema, &name.name);
    writer.clear_statement_state();
    let target = writer.target(&object).await;
    writer.clear_statement_state();
    let missing = rows::missing_fields(&target?.snapshot.arrow_schema(), files);
    if !missing.is_empty() {
        crate::sql::evolve::add_columns(writer, table, &Fields::from(missing)).await?;
    }
    let txns: Vec<Txn> = files
        .iter()
        .map(|f| Txn {
            app_id: txn_app_id(source, &f.file.relative),
            version: f.file.modified_ms.max(0),
            last_updated: Some(now_ms()),
        })
        .collect();
    let dead_letters: u64 = files.iter().map(|f| f.dead.len() as u64).sum();
    if dead_letters > 0 {
        let errors_key = crate::catalog::key(&entry.schema, &errors_table_name(&entry.name));
        write(writer, &errors_key, source, files, &txns, rows::dead_letter_rows).await?;
    }
    let written = write(writer, table, source, files, &txns, rows::table_rows).await?;
    let read: u64 = files.iter().map(|f| f.rows() as u64).sum();
    let bytes: u64 = files.iter().map(|f| f.file.size).sum();
    sources.update(table, |s| {
        s.state = IngestState::Running;
        s.error = None;
        s.failures = 0;
        s.messages += read;
        s.dead_letters += dead_letters;
        s.batches += 1;
        s.bytes += bytes;
        s.last_batch_ms = Some(now_ms());
    });
    db.events.record_source_event(
        source,
        table,
        "ingest",
        read,
        written,
        Some(format!(
            "{} files{}",
            files.len(),
            if dead_letters > 0 { format!(", {dead_letters} dead letters") } else { String::new() }
        )),
    );
    Ok(())
}

type RowsOf = fn(&SchemaRef, &[&FileRows]) -> Result<Vec<RecordBatch>>;

/// Appends the rows `rows_of` makes of the files `table` does not hold yet, with their txns;
/// commits the txns even when no row is left, so the files count as done.
async fn write(
    writer: &QueryContext,
    table: &str,
    source: &str,
    files: &[FileRows],
    txns: &[Txn],
    rows_of: RowsOf,
) -> Result<u64> {
    writer.clear_statement_state();
    let name = crate::names::parse_table_name(table)?;
    let target = writer.target(&crate::names::object_name(&name.schema, &name.name)).await?;
    let held = files_in(target.snapshot.txns().keys(), source);
    let fresh: Vec<&FileRows> = files.iter().filter(|f| !held.contains(&f.file.relative)).collect();
    if fresh.is_empty() {
        writer.clear_statement_state();
        return Ok(0);
    }
    let fresh_txns: Vec<Txn> = txns
        .iter()
        .filter(|t| fresh.iter().any(|f| t.app_id == txn_app_id(source, &f.file.relative)))
        .cloned()
        .collect();
    let rows = rows_of(&target.snapshot.arrow_schema(), &fresh)?;
    let context = WriteContext { txns: fresh_txns, source_version: None, commit_empty: true };
    let written = writer
        .write_rows_with(&target, rows.into_iter().collect(), ColumnMatch::ByName, SaveMode::Append, context)
        .await;
    writer.clear_statement_state();
    Ok(written?.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_close_at_their_limits() {
        let file = |size| FoundFile { relative: "f".into(), location: "f".into(), size, modified_ms: 0 };
        let map = [("path", "x"), ("format", "csv"), ("batch_files", "3"), ("batch_bytes", "100")];
        let options =
            FileOptions::parse(&map.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap();
        let mut pending = vec![file(10), file(10), file(10), file(10)];
        assert_eq!(next_batch(&mut pending, &options).len(), 3);
        let mut pending = vec![file(60), file(60)];
        assert_eq!(next_batch(&mut pending, &options).len(), 1);
        let mut pending = vec![file(500)];
        assert_eq!(next_batch(&mut pending, &options).len(), 1);
    }
}
