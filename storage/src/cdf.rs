//! The change data feed: the rows inserted, deleted and updated between two versions.
//!
//! Per version, following the protocol: if the commit has `cdc` actions, its change rows are read
//! from those files only; otherwise commits whose file actions are all `dataChange = false`
//! (OPTIMIZE, checkpoint-like rewrites) are skipped, and the changes are derived from the file
//! actions: an added file's live rows are inserts, a removed file's live rows are deletes, and a
//! file re-added with a new deletion vector contributes the difference of the two vectors (rows
//! newly masked are deletes, rows unmasked again are inserts).
//!
//! Every row carries `_change_type`, `_commit_version` and `_commit_timestamp` (the in-commit
//! timestamp if the table has them, else the commit file's time). Rows are read with the schema of
//! the last version in the range.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, TimestampMicrosecondArray};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

use crate::actions::{Action, Add, DeletionVectorDescriptor, PartitionValues};
use crate::error::{Error, Result};
use crate::log::{self, LogFile, LogFileKind};
use crate::scan::{read_dv, read_file, FileToRead, RowMask, ScanOptions, TableLayout};
use crate::schema::StructField;
use crate::store::TableStore;
use crate::table::Table;
use crate::write::{change_data_schema, CHANGE_TYPE_COLUMN};

/// One version's changes, as read.
#[derive(Debug, Clone)]
pub struct ChangeBatch {
    pub version: u64,
    pub timestamp_ms: i64,
    /// Rows with the table's columns plus `_change_type`, `_commit_version`, `_commit_timestamp`.
    pub batches: Vec<RecordBatch>,
}

impl Table {
    /// The changes of versions `start..=end` (`end` defaults to the latest), one entry per version
    /// that changed data.
    pub async fn changes(&self, start: u64, end: Option<u64>) -> Result<Vec<ChangeBatch>> {
        let latest = self.snapshot().await?;
        let end = end.unwrap_or(latest.version());
        if start > end {
            return Err(Error::InvalidArgument(format!("change feed start {start} is after end {end}")));
        }
        if end > latest.version() {
            return Err(Error::VersionNotFound {
                location: self.location().into(),
                version: end,
                earliest: 0,
                latest: latest.version(),
            });
        }
        let end_snapshot = self.snapshot_at_version(end).await?;
        let layout = TableLayout::from_snapshot(&end_snapshot);
        // The live files before `start`, to find the deletion vectors that removes leave out.
        let mut live: HashMap<String, Arc<Add>> = if start == 0 {
            HashMap::new()
        } else {
            let before = self.snapshot_at_version(start - 1).await?;
            before.files().map(|a| (a.path.clone(), a.clone())).collect()
        };
        let ict = end_snapshot.property_is_true(crate::protocol::IN_COMMIT_TIMESTAMPS_KEY);
        let files: Vec<LogFile> = (start..=end)
            .map(|v| LogFile {
                version: v,
                kind: LogFileKind::Commit,
                path: self.store().log_path(&log::commit_file_name(v)),
                size: 0,
                modified_ms: 0,
            })
            .collect();
        let mut out = Vec::new();
        for file in files {
            let (bytes, meta) = self.store().get_with_meta(&file.path).await.map_err(|e| e.at_version(file.version))?;
            let actions = crate::actions::parse_commit(&bytes, file.path.as_ref(), file.version)?;
            let timestamp_ms = commit_timestamp(&actions, ict).unwrap_or(meta.last_modified.timestamp_millis());
            let batches = version_changes(self.store(), &layout, &actions, &live)
                .await
                .map_err(|e| e.at_version(file.version))?;
            apply_to_live(&mut live, &actions);
            if batches.is_empty() {
                continue;
            }
            let batches =
                batches.into_iter().map(|b| stamp(b, file.version, timestamp_ms)).collect::<Result<Vec<_>>>()?;
            out.push(ChangeBatch { version: file.version, timestamp_ms, batches });
        }
        Ok(out)
    }
}

fn commit_timestamp(actions: &[Action], ict: bool) -> Option<i64> {
    if !ict {
        return None;
    }
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(info) => info.get("inCommitTimestamp").and_then(serde_json::Value::as_i64),
        _ => None,
    })
}

fn apply_to_live(live: &mut HashMap<String, Arc<Add>>, actions: &[Action]) {
    for action in actions {
        if let Action::Remove(r) = action {
            live.remove(&r.path);
        }
    }
    for action in actions {
        if let Action::Add(a) = action {
            live.insert(a.path.clone(), Arc::new(a.clone()));
        }
    }
}

/// The change rows of one commit (without the commit columns).
async fn version_changes(
    store: &TableStore,
    layout: &TableLayout,
    actions: &[Action],
    live: &HashMap<String, Arc<Add>>,
) -> Result<Vec<RecordBatch>> {
    let cdc: Vec<_> = actions.iter().filter_map(|a| if let Action::Cdc(c) = a { Some(c) } else { None }).collect();
    if !cdc.is_empty() {
        let mut fields = layout.schema.fields.clone();
        fields.push(StructField::new(
            CHANGE_TYPE_COLUMN,
            crate::schema::DataType::Primitive(crate::schema::PrimitiveType::String),
            true,
        ));
        let mut out = Vec::new();
        for c in cdc {
            let file = FileToRead {
                path: c.path.clone(),
                size: u64::try_from(c.size).ok().filter(|s| *s > 0),
                partition_values: c.partition_values.clone(),
                mask: RowMask::All,
            };
            out.extend(read_all(store, layout, &fields, &file).await?);
        }
        return Ok(out);
    }
    // Changes derived from file actions, grouped by path: (old DV if removed, new add if added).
    let mut by_path: BTreeMap<&str, PathChange> = BTreeMap::new();
    for action in actions {
        match action {
            Action::Remove(r) if r.data_change => {
                let old_dv =
                    r.deletion_vector.as_ref().or_else(|| live.get(&r.path).and_then(|a| a.deletion_vector.as_ref()));
                let values =
                    r.partition_values.clone().or_else(|| live.get(&r.path).map(|a| a.partition_values.clone()));
                let entry = by_path.entry(r.path.as_str()).or_default();
                entry.removed = Some(old_dv);
                entry.partition_values = entry.partition_values.take().or(values);
            }
            Action::Add(a) if a.data_change => {
                let entry = by_path.entry(a.path.as_str()).or_default();
                entry.added = Some(a);
                entry.partition_values = Some(a.partition_values.clone());
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (path, PathChange { removed, added, partition_values }) in by_path {
        let partition_values = partition_values.unwrap_or_default();
        let new_dv = match added {
            Some(add) => Some(dv_rows(store, add.deletion_vector.as_ref(), path).await?),
            None => None,
        };
        let old_dv = match removed {
            Some(dv) => Some(dv_rows(store, dv, path).await?),
            None => None,
        };
        let size = added.and_then(|a| u64::try_from(a.size).ok()).filter(|s| *s > 0);
        let file = |mask| FileToRead { path: path.to_string(), size, partition_values: partition_values.clone(), mask };
        let (deleted_mask, inserted_mask) = match (old_dv, new_dv) {
            (Some(old), Some(new)) => {
                let deleted = &new - &old;
                let restored = &old - &new;
                (
                    non_empty(deleted).map(|d| RowMask::Only(Arc::new(d))),
                    non_empty(restored).map(|r| RowMask::Only(Arc::new(r))),
                )
            }
            (Some(old), None) => (Some(RowMask::Without(Arc::new(old))), None),
            (None, Some(new)) => (None, Some(RowMask::Without(Arc::new(new)))),
            (None, None) => (None, None),
        };
        if let Some(mask) = deleted_mask {
            out.extend(labelled(read_all(store, layout, &layout.schema.fields, &file(mask)).await?, "delete")?);
        }
        if let Some(mask) = inserted_mask {
            out.extend(labelled(read_all(store, layout, &layout.schema.fields, &file(mask)).await?, "insert")?);
        }
    }
    Ok(out)
}

/// What one commit did to one path: removed it (with its deletion vector then), added it, or both.
#[derive(Default)]
struct PathChange<'a> {
    removed: Option<Option<&'a DeletionVectorDescriptor>>,
    added: Option<&'a Add>,
    partition_values: Option<PartitionValues>,
}

fn non_empty(rows: RoaringTreemap) -> Option<RoaringTreemap> {
    (!rows.is_empty()).then_some(rows)
}

async fn dv_rows(store: &TableStore, dv: Option<&DeletionVectorDescriptor>, path: &str) -> Result<RoaringTreemap> {
    match dv {
        Some(dv) => read_dv(store, dv, path).await,
        None => Ok(RoaringTreemap::new()),
    }
}

async fn read_all(
    store: &TableStore,
    layout: &TableLayout,
    fields: &[StructField],
    file: &FileToRead,
) -> Result<Vec<RecordBatch>> {
    read_file(store, layout, fields, file, &ScanOptions::default()).await?.try_collect().await
}

fn labelled(batches: Vec<RecordBatch>, change_type: &str) -> Result<Vec<RecordBatch>> {
    batches.iter().map(|b| crate::write::with_change_type(b, change_type)).collect()
}

impl Table {
    /// The live rows of `version` as change rows (`insert`, stamped with that version and its
    /// commit time), streamed a few files at a time: what a reader that starts from a snapshot
    /// reads before the changes after it.
    pub async fn rows_as_changes(&self, version: u64) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let snapshot = self.snapshot_at_version(version).await?;
        let timestamp_ms = snapshot.timestamp_ms();
        let rows = crate::scan::scan_stream(&snapshot, &ScanOptions::default())?;
        Ok(rows
            .and_then(move |batch| async move {
                stamp(crate::write::with_change_type(&batch, "insert")?, version, timestamp_ms)
            })
            .boxed())
    }
}

/// Adds `_commit_version` and `_commit_timestamp`, and gives the batch the change-data schema.
fn stamp(batch: RecordBatch, version: u64, timestamp_ms: i64) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    // A cdc file may hold `_change_type` as a nullable column: normalise it to non-null text.
    if let Some(last) = columns.last_mut() {
        let text = arrow::compute::cast(last, &arrow::datatypes::DataType::Utf8)?;
        *last = text;
    }
    columns.push(Arc::new(Int64Array::from(vec![version as i64; rows])));
    columns.push(Arc::new(TimestampMicrosecondArray::from(vec![timestamp_ms * 1000; rows]).with_timezone("UTC")));
    let table_fields = batch.schema().fields().len() - 1;
    let schema = change_data_schema(&crate::schema::StructType::new(
        batch
            .schema()
            .fields()
            .iter()
            .take(table_fields)
            .map(|f| {
                crate::schema::StructField::from_arrow(f).unwrap_or_else(|_| {
                    crate::schema::StructField::new(
                        f.name().clone(),
                        crate::schema::DataType::Primitive(crate::schema::PrimitiveType::Void),
                        f.is_nullable(),
                    )
                })
            })
            .collect(),
    ));
    let arrow_schema = Arc::new(schema.to_arrow());
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(arrow_schema, columns, &options)?)
}

/// All changes of a snapshot range flattened into batches (a convenience for tests and tools).
pub fn flatten(changes: Vec<ChangeBatch>) -> Vec<RecordBatch> {
    changes.into_iter().flat_map(|c| c.batches).collect()
}
