//! Changing a table's data: appends and overwrites, and mutations (deletes and updates) that mask
//! rows with deletion vectors instead of rewriting files.
//!
//! A mutation names the rows to delete by file and physical row index, plus the rows to insert.
//! With `delta.enableDeletionVectors` the deleted rows are merged into each file's deletion vector
//! (one DV file per commit; the first such commit also upgrades the protocol to declare the
//! `deletionVectors` feature, see [`crate::protocol::needed_features`]); without it, or when
//! every row of a file goes, the file is rewritten or removed. With `delta.enableChangeDataFeed`, the change rows a caller supplies are written as
//! `cdc` files under `_change_data/`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use futures::TryStreamExt;
use roaring::RoaringTreemap;
use serde_json::{Map, Value};

use crate::actions::{now_ms, Action, Add, Cdc, Stats, Txn};
use crate::commit::{CommitOutcome, Transaction};
use crate::deletion_vector::DvFileWriter;
use crate::error::{Error, Result};
use crate::parquet::{conform_batch, split_partitions, write_groups};
use crate::protocol::{ENABLE_CHANGE_DATA_FEED_KEY, ENABLE_DELETION_VECTORS_KEY};
use crate::scan::{read_file, FileToRead, RowMask, ScanOptions, TableLayout};
use crate::schema::{DataType, PrimitiveType, StructField, StructType};
use crate::snapshot::Snapshot;
use crate::table::Table;

/// The change-type column of change data.
pub const CHANGE_TYPE_COLUMN: &str = "_change_type";

/// Whether new data adds to or replaces the table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaveMode {
    #[default]
    Append,
    Overwrite,
}

/// Data to write.
#[derive(Debug, Clone, Default)]
pub struct WriteRequest {
    pub batches: Vec<RecordBatch>,
    pub mode: SaveMode,
    /// Streaming writers' progress (one per application id), committed atomically with the data.
    pub txns: Vec<Txn>,
    /// The operation recorded in history (default WRITE).
    pub operation: Option<String>,
    pub parameters: Map<String, Value>,
    /// A new schema committed with the rows (identity columns' high-water marks; for an
    /// overwrite, also new column types, which the files are written in).
    pub schema: Option<StructType>,
    /// The writer checked the rows against the table's (keys): a concurrent data commit
    /// conflicts instead of being rebased over.
    pub reads_data: bool,
}

/// Rows to delete and insert in one commit.
#[derive(Debug, Clone, Default)]
pub struct Mutation {
    /// Rows to delete: a live file and the physical row indexes to delete from it.
    pub deleted: Vec<(Arc<Add>, RoaringTreemap)>,
    /// New rows (table columns).
    pub inserted: Vec<RecordBatch>,
    /// Change rows (table columns plus `_change_type`), written when the change data feed is on.
    pub change_data: Vec<RecordBatch>,
    pub operation: String,
    pub parameters: Map<String, Value>,
    pub txn: Option<Txn>,
    /// A new schema committed with the rows (identity columns' high-water marks).
    pub schema: Option<StructType>,
    /// As [`WriteRequest::reads_data`].
    pub reads_data: bool,
}

/// The result of a predicate-driven mutation.
#[derive(Debug, Clone)]
pub struct MutationResult {
    pub outcome: CommitOutcome,
    pub rows_affected: u64,
}

impl Table {
    /// Appends rows.
    pub async fn append(&self, batches: Vec<RecordBatch>) -> Result<CommitOutcome> {
        self.write(WriteRequest { batches, ..Default::default() }).await
    }

    /// Replaces all rows.
    pub async fn overwrite(&self, batches: Vec<RecordBatch>) -> Result<CommitOutcome> {
        self.write(WriteRequest { batches, mode: SaveMode::Overwrite, ..Default::default() }).await
    }

    /// Writes on the latest snapshot.
    pub async fn write(&self, request: WriteRequest) -> Result<CommitOutcome> {
        let snapshot = self.snapshot().await?;
        self.write_on(&snapshot, request).await
    }

    /// Writes on a given snapshot (the caller checked it, e.g. a streaming writer's txn version).
    pub async fn write_on(&self, snapshot: &Snapshot, request: WriteRequest) -> Result<CommitOutcome> {
        let adds = match (&request.schema, request.mode) {
            // An overwrite may change column types (ALTER COLUMN ... TYPE): files take the new schema.
            (Some(schema), SaveMode::Overwrite) => {
                self.write_files_as(snapshot, schema, &request.batches, true).await?
            }
            _ => self.write_files(snapshot, &request.batches, true).await?,
        };
        let operation = request.operation.unwrap_or_else(|| "WRITE".to_string());
        let mut transaction = Transaction::new(Some(snapshot), operation);
        transaction.parameter("mode", if request.mode == SaveMode::Overwrite { "Overwrite" } else { "Append" });
        for (key, value) in request.parameters {
            transaction.parameter(&key, value);
        }
        if request.mode == SaveMode::Overwrite {
            let now = now_ms();
            transaction.replaces_data();
            transaction.add_actions(snapshot.files_sorted().iter().map(|f| Action::Remove(f.to_remove(now, true))));
        }
        transaction.add_actions(adds.into_iter().map(Action::Add));
        transaction.add_actions(request.txns.into_iter().map(Action::Txn));
        if let Some(schema) = request.schema {
            transaction.add_action(Action::Metadata(with_schema(snapshot, &schema)));
        }
        if request.reads_data {
            transaction.reads_data();
        }
        self.commit(snapshot, transaction).await
    }

    /// Writes rows as new data files (not yet committed) and returns their `add` actions.
    pub async fn write_files(
        &self,
        snapshot: &Snapshot,
        batches: &[RecordBatch],
        data_change: bool,
    ) -> Result<Vec<Add>> {
        let layout = TableLayout::from_snapshot(snapshot);
        let conformed =
            batches.iter().map(|b| conform_batch(b, snapshot.schema(), self.location())).collect::<Result<Vec<_>>>()?;
        let groups = split_partitions(&conformed, &layout)?;
        write_groups(self.store(), &layout, groups, self.write_options(), data_change).await
    }

    /// Writes rows as new data files of `schema` (the table's columns, with other types).
    pub async fn write_files_as(
        &self,
        snapshot: &Snapshot,
        schema: &StructType,
        batches: &[RecordBatch],
        data_change: bool,
    ) -> Result<Vec<Add>> {
        let layout = TableLayout { schema: Arc::new(schema.clone()), ..TableLayout::from_snapshot(snapshot) };
        let conformed =
            batches.iter().map(|b| conform_batch(b, schema, self.location())).collect::<Result<Vec<_>>>()?;
        let groups = split_partitions(&conformed, &layout)?;
        write_groups(self.store(), &layout, groups, self.write_options(), data_change).await
    }

    /// Deletes and inserts rows in one commit.
    pub async fn mutate(&self, snapshot: &Snapshot, mutation: Mutation) -> Result<CommitOutcome> {
        let now = now_ms();
        let use_dvs = snapshot.property_is_true(ENABLE_DELETION_VECTORS_KEY);
        let mut actions = Vec::new();
        let mut dv_file = DvFileWriter::new();
        let mut rewrites = Vec::new();
        for (add, rows) in &mutation.deleted {
            if rows.is_empty() {
                continue;
            }
            let mut combined = match &add.deletion_vector {
                Some(dv) => crate::scan::read_dv(self.store(), dv, &add.path).await?,
                None => RoaringTreemap::new(),
            };
            combined |= rows;
            let physical_rows = match add.num_records() {
                Some(n) => n as u64,
                None => self.count_file_rows(add).await?,
            };
            actions.push(Action::Remove(add.to_remove(now, true)));
            if combined.len() >= physical_rows {
                continue;
            }
            if use_dvs {
                let descriptor = dv_file.add(&combined);
                let stats = add.parsed_stats().map(|s| Stats { tight_bounds: Some(false), ..s });
                actions.push(Action::Add(Add {
                    deletion_vector: Some(descriptor),
                    stats: stats.and_then(|s| serde_json::to_string(&s).ok()).or(add.stats.clone()),
                    modification_time: now,
                    data_change: true,
                    ..(**add).clone()
                }));
            } else {
                rewrites.push((add.clone(), combined));
            }
        }
        if !dv_file.is_empty() {
            // The first deletion vector: the protocol declares the feature in the same commit.
            let schema = mutation.schema.as_ref().unwrap_or(snapshot.schema());
            if let Some(upgraded) =
                crate::protocol::declaring_deletion_vectors(snapshot.protocol(), snapshot.metadata(), schema)?
            {
                actions.push(Action::Protocol(upgraded));
            }
            if let Some((path, bytes)) = dv_file.finish() {
                self.store().put(&self.store().path(&path), bytes).await?;
            }
        }
        let mut kept = Vec::new();
        for (add, deleted) in rewrites {
            kept.extend(self.read_rows(snapshot, &add, RowMask::Without(Arc::new(deleted))).await?);
        }
        let mut new_rows = kept;
        new_rows.extend(mutation.inserted.iter().cloned());
        actions.extend(self.write_files(snapshot, &new_rows, true).await?.into_iter().map(Action::Add));
        if snapshot.property_is_true(ENABLE_CHANGE_DATA_FEED_KEY) && !mutation.change_data.is_empty() {
            actions.extend(self.write_change_data(snapshot, &mutation.change_data).await?.into_iter().map(Action::Cdc));
        }
        if let Some(txn) = mutation.txn {
            actions.push(Action::Txn(txn));
        }
        if let Some(schema) = &mutation.schema {
            actions.push(Action::Metadata(with_schema(snapshot, schema)));
        }
        let mut transaction = Transaction::new(Some(snapshot), mutation.operation);
        if mutation.reads_data {
            transaction.reads_data();
        }
        for (key, value) in mutation.parameters {
            transaction.parameter(&key, value);
        }
        transaction.add_actions(actions);
        self.commit(snapshot, transaction).await
    }

    async fn count_file_rows(&self, add: &Add) -> Result<u64> {
        let relative = crate::store::decode_path(self.store(), &add.path);
        let reader = crate::store::ParquetFile::new(self.store(), self.store().path(&relative), None);
        let builder = parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| Error::CorruptFile { path: relative.clone(), version: None, message: e.to_string() })?;
        Ok(builder.metadata().file_metadata().num_rows().max(0) as u64)
    }

    /// Reads the rows of one file that a mask selects, with the table's logical columns.
    pub async fn read_rows(&self, snapshot: &Snapshot, add: &Add, mask: RowMask) -> Result<Vec<RecordBatch>> {
        let layout = TableLayout::from_snapshot(snapshot);
        let file = FileToRead {
            path: add.path.clone(),
            size: u64::try_from(add.size).ok().filter(|s| *s > 0),
            partition_values: add.partition_values.clone(),
            mask,
        };
        read_file(self.store(), &layout, &layout.schema.fields, &file, &ScanOptions::default())
            .await?
            .try_collect()
            .await
    }

    async fn write_change_data(&self, snapshot: &Snapshot, batches: &[RecordBatch]) -> Result<Vec<Cdc>> {
        let mut schema = snapshot.schema().clone();
        schema.fields.push(StructField::new(CHANGE_TYPE_COLUMN, DataType::Primitive(PrimitiveType::String), false));
        let layout = TableLayout { schema: Arc::new(schema.clone()), ..TableLayout::from_snapshot(snapshot) };
        let conformed =
            batches.iter().map(|b| conform_batch(b, &schema, self.location())).collect::<Result<Vec<_>>>()?;
        let groups = split_partitions(&conformed, &layout)?;
        let change_store = self.store().child("_change_data");
        let adds = write_groups(&change_store, &layout, groups, self.write_options(), false).await?;
        Ok(adds
            .into_iter()
            .map(|a| Cdc {
                path: format!("_change_data/{}", a.path),
                partition_values: a.partition_values,
                size: a.size,
                data_change: false,
                tags: None,
            })
            .collect())
    }

    /// Deletes the rows for which `predicate` is true (NULL counts as false).
    pub async fn delete_where(
        &self,
        file_filter: impl Fn(&Add) -> bool,
        predicate: impl Fn(&RecordBatch) -> Result<BooleanArray>,
    ) -> Result<MutationResult> {
        let snapshot = self.snapshot().await?;
        let cdf = snapshot.property_is_true(ENABLE_CHANGE_DATA_FEED_KEY);
        let mut mutation = Mutation { operation: "DELETE".into(), ..Default::default() };
        let mut rows_affected = 0;
        for add in snapshot.files_sorted().into_iter().filter(|a| file_filter(a)) {
            let (rows, matched) = self.matching_rows(&snapshot, &add, &predicate).await?;
            if rows.is_empty() {
                continue;
            }
            rows_affected += rows.len();
            if cdf {
                mutation
                    .change_data
                    .extend(matched.iter().map(|b| with_change_type(b, "delete")).collect::<Result<Vec<_>>>()?);
            }
            mutation.deleted.push((add, rows));
        }
        mutation.parameters.insert("numDeletedRows".into(), Value::from(rows_affected));
        let outcome = self.mutate(&snapshot, mutation).await?;
        Ok(MutationResult { outcome, rows_affected })
    }

    /// Replaces the rows for which `predicate` is true with `update(rows)`.
    pub async fn update_where(
        &self,
        file_filter: impl Fn(&Add) -> bool,
        predicate: impl Fn(&RecordBatch) -> Result<BooleanArray>,
        update: impl Fn(&RecordBatch) -> Result<RecordBatch>,
    ) -> Result<MutationResult> {
        let snapshot = self.snapshot().await?;
        let cdf = snapshot.property_is_true(ENABLE_CHANGE_DATA_FEED_KEY);
        let mut mutation = Mutation { operation: "UPDATE".into(), ..Default::default() };
        let mut rows_affected = 0;
        for add in snapshot.files_sorted().into_iter().filter(|a| file_filter(a)) {
            let (rows, matched) = self.matching_rows(&snapshot, &add, &predicate).await?;
            if rows.is_empty() {
                continue;
            }
            rows_affected += rows.len();
            for batch in &matched {
                let updated = update(batch)?;
                if cdf {
                    mutation.change_data.push(with_change_type(batch, "update_preimage")?);
                    mutation.change_data.push(with_change_type(&updated, "update_postimage")?);
                }
                mutation.inserted.push(updated);
            }
            mutation.deleted.push((add, rows));
        }
        mutation.parameters.insert("numUpdatedRows".into(), Value::from(rows_affected));
        let outcome = self.mutate(&snapshot, mutation).await?;
        Ok(MutationResult { outcome, rows_affected })
    }

    /// The row indexes of a file where `predicate` holds, and those rows (table columns).
    async fn matching_rows(
        &self,
        snapshot: &Snapshot,
        add: &Add,
        predicate: &impl Fn(&RecordBatch) -> Result<BooleanArray>,
    ) -> Result<(RoaringTreemap, Vec<RecordBatch>)> {
        let layout = TableLayout::from_snapshot(snapshot);
        let file = FileToRead::from_add(self.store(), add).await?;
        let options = ScanOptions { row_index: true, ..Default::default() };
        let mut stream = read_file(self.store(), &layout, &layout.schema.fields, &file, &options).await?;
        let mut rows = RoaringTreemap::new();
        let mut matched = Vec::new();
        while let Some(batch) = stream.try_next().await? {
            let data = batch.project(&(0..batch.num_columns() - 1).collect::<Vec<_>>())?;
            let mask = predicate(&data)?;
            let mask = if mask.null_count() > 0 { arrow::compute::prep_null_mask_filter(&mask) } else { mask };
            if mask.true_count() == 0 {
                continue;
            }
            let indexes = batch.column(batch.num_columns() - 1).as_primitive::<arrow::datatypes::UInt64Type>();
            rows.extend(
                indexes.iter().zip(mask.iter()).filter_map(|(i, keep)| if keep == Some(true) { i } else { None }),
            );
            matched.push(filter_record_batch(&data, &mask)?);
        }
        Ok((rows, matched))
    }
}

/// Adds a `_change_type` column with one value.
pub fn with_change_type(batch: &RecordBatch, change_type: &str) -> Result<RecordBatch> {
    let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(CHANGE_TYPE_COLUMN, ArrowType::Utf8, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![change_type; batch.num_rows()])));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// The table schema plus the change-data columns (`_change_type`, `_commit_version`,
/// `_commit_timestamp`).
pub fn change_data_schema(schema: &StructType) -> StructType {
    let mut schema = schema.clone();
    schema.fields.push(StructField::new(CHANGE_TYPE_COLUMN, DataType::Primitive(PrimitiveType::String), false));
    schema.fields.push(StructField::new("_commit_version", DataType::Primitive(PrimitiveType::Long), false));
    schema.fields.push(StructField::new("_commit_timestamp", DataType::Primitive(PrimitiveType::Timestamp), false));
    schema
}

/// The snapshot's metadata with another schema (same columns, new field metadata).
pub fn with_schema(snapshot: &Snapshot, schema: &StructType) -> crate::actions::Metadata {
    let mut metadata = snapshot.metadata().clone();
    metadata.schema_string = schema.to_schema_string();
    metadata
}
