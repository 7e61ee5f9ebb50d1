//! Reading data files into batches of the table's logical schema.
//!
//! For each file: the Parquet columns are matched to the table's columns by logical name, by
//! physical name (column mapping `name`) or by Parquet field id (`id`), nested fields included;
//! columns missing from the file read as NULL; types are brought to the table's Arrow types (INT96
//! and nanosecond timestamps to microseconds, widened integers, string views); partition columns
//! are filled from the log's partition values; and deletion-vector rows are skipped with a Parquet
//! row selection, so deleted rows are never decoded.
//!
//! This is the reader of the storage layer (tests, the change data feed, OPTIMIZE, the fixtures).
//! The engine plans its own parallel scans over the same pieces.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType as ArrowType, Field, FieldRef, Fields, Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelector};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;
use roaring::RoaringTreemap;

use crate::actions::{Add, DeletionVectorDescriptor, Metadata, PartitionValues};
use crate::error::{Error, Result};
use crate::partition::{partition_column, PartitionReadOptions};
use crate::schema::{ColumnMappingMode, DataType, StructField, StructType, PARQUET_FIELD_ID_KEY};
use crate::snapshot::Snapshot;
use crate::store::{decode_path, TableStore};

/// Rows per batch read from Parquet.
pub const BATCH_ROWS_DEFAULT: usize = 8192;
/// Files read at once by [`scan`].
const FILE_READS_CONCURRENT_MAX: usize = 4;

/// What and how to read.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Columns to read, by logical name, in this order; `None` reads all.
    pub columns: Option<Vec<String>>,
    /// How zone-less partition values are read.
    pub partition: PartitionReadOptions,
    /// Rows per batch (0 means the default).
    pub batch_rows: usize,
    /// Append a `_row_index` column (UInt64): each row's 0-based position in its file, as a
    /// deletion vector counts it.
    pub row_index: bool,
}

/// The name of the row-index column added by [`ScanOptions::row_index`].
pub const ROW_INDEX_COLUMN: &str = "_row_index";

/// How a table's files are laid out: what a reader needs besides the file itself.
#[derive(Debug, Clone)]
pub struct TableLayout {
    pub schema: Arc<StructType>,
    pub partition_columns: Vec<String>,
    pub column_mapping: ColumnMappingMode,
}

impl TableLayout {
    pub fn from_snapshot(snapshot: &Snapshot) -> Self {
        Self {
            schema: Arc::new(snapshot.schema().clone()),
            partition_columns: snapshot.partition_columns().to_vec(),
            column_mapping: snapshot.column_mapping_mode(),
        }
    }

    pub fn from_metadata(metadata: &Metadata) -> Result<Self> {
        Ok(Self {
            schema: Arc::new(metadata.schema()?),
            partition_columns: metadata.partition_columns.clone(),
            column_mapping: ColumnMappingMode::from_configuration(&metadata.configuration)?,
        })
    }

    /// The fields to read, in order.
    pub fn projected_fields(&self, columns: Option<&[String]>) -> Result<Vec<StructField>> {
        match columns {
            None => Ok(self.schema.fields.clone()),
            Some(names) => names
                .iter()
                .map(|name| {
                    self.schema
                        .field(name)
                        .cloned()
                        .ok_or_else(|| Error::InvalidArgument(format!("no column '{name}' in the table")))
                })
                .collect(),
        }
    }

    fn is_partition_column(&self, name: &str) -> bool {
        self.partition_columns.iter().any(|p| p.eq_ignore_ascii_case(name))
    }
}

/// Which rows of a file to return.
#[derive(Debug, Clone, Default)]
pub enum RowMask {
    /// Every row.
    #[default]
    All,
    /// Every row but these (a deletion vector).
    Without(Arc<RoaringTreemap>),
    /// Only these rows.
    Only(Arc<RoaringTreemap>),
}

/// One file to read.
#[derive(Debug, Clone)]
pub struct FileToRead {
    /// The path as logged (URI-encoded).
    pub path: String,
    pub size: Option<u64>,
    pub partition_values: PartitionValues,
    pub mask: RowMask,
}

impl FileToRead {
    /// A live file of a snapshot, with its deletion vector read.
    pub async fn from_add(store: &TableStore, add: &Add) -> Result<Self> {
        let mask = match &add.deletion_vector {
            Some(dv) => RowMask::Without(Arc::new(read_dv(store, dv, &add.path).await?)),
            None => RowMask::All,
        };
        Ok(Self {
            path: add.path.clone(),
            size: u64::try_from(add.size).ok().filter(|s| *s > 0),
            partition_values: add.partition_values.clone(),
            mask,
        })
    }
}

/// Reads a deletion vector, naming the data file it belongs to in errors.
pub async fn read_dv(store: &TableStore, dv: &DeletionVectorDescriptor, data_path: &str) -> Result<RoaringTreemap> {
    crate::deletion_vector::read(store, dv).await.map_err(|e| match e {
        Error::CorruptFile { path, version, message } => {
            Error::CorruptFile { path, version, message: format!("{message} (deletion vector of {data_path})") }
        }
        other => other,
    })
}

/// Reads all live rows of a snapshot.
pub async fn scan(snapshot: &Snapshot, options: &ScanOptions) -> Result<Vec<RecordBatch>> {
    scan_stream(snapshot, options)?.try_collect().await
}

/// Streams all live rows of a snapshot, a few files at a time.
pub fn scan_stream(snapshot: &Snapshot, options: &ScanOptions) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let layout = Arc::new(TableLayout::from_snapshot(snapshot));
    let fields = Arc::new(layout.projected_fields(options.columns.as_deref())?);
    let store = snapshot.store().clone();
    let options = Arc::new(options.clone());
    let version = snapshot.version();
    let files = snapshot.files_sorted();
    let stream = futures::stream::iter(files)
        .map(move |add| {
            let (store, layout, fields, options) = (store.clone(), layout.clone(), fields.clone(), options.clone());
            async move {
                let read = async {
                    let file = FileToRead::from_add(&store, &add).await?;
                    read_file(&store, &layout, &fields, &file, &options).await?.try_collect::<Vec<RecordBatch>>().await
                };
                let batches = read.await.map_err(|e| e.at_version(version))?;
                Ok::<_, Error>(futures::stream::iter(batches.into_iter().map(Ok)))
            }
        })
        .buffered(FILE_READS_CONCURRENT_MAX)
        .try_flatten();
    Ok(stream.boxed())
}

/// The Arrow schema of the batches read for `fields`.
pub fn output_schema(fields: &[StructField]) -> SchemaRef {
    Arc::new(Schema::new(fields.iter().map(logical_field).collect::<Vec<_>>()))
}

fn logical_field(field: &StructField) -> Field {
    Field::new(field.name.clone(), field.arrow_type(), field.nullable)
}

/// Reads one file as batches of `fields` (logical names and types).
pub async fn read_file(
    store: &TableStore,
    layout: &TableLayout,
    fields: &[StructField],
    file: &FileToRead,
    options: &ScanOptions,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let relative = decode_path(store, &file.path);
    let location = store.path(&relative);
    let corrupt = {
        let relative = relative.clone();
        move |e: parquet::errors::ParquetError| corrupt_or_missing(&relative, e)
    };
    if let Some(kept) = store.kept_rows(&location) {
        return read_kept(kept, layout, fields, file, options, relative);
    }
    let reader = crate::store::ParquetFile::new(store, location, file.size);
    // A few rows of a file (found by a key index): the offset index leads to their pages alone.
    let offset_index = match file.mask {
        RowMask::Only(_) => PageIndexPolicy::Optional,
        _ => PageIndexPolicy::Skip,
    };
    let reader_options = ArrowReaderOptions::new().with_offset_index_policy(offset_index);
    let builder = ParquetRecordBatchStreamBuilder::new_with_options(reader, reader_options).await.map_err(&corrupt)?;
    let file_schema = builder.schema().clone();
    let total_rows = builder.metadata().file_metadata().num_rows().max(0) as u64;

    let (roots, sources) = file_columns(layout, fields, &file_schema);
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let batch_rows = if options.batch_rows == 0 { BATCH_ROWS_DEFAULT } else { options.batch_rows };
    let mut builder = builder.with_projection(mask).with_batch_size(batch_rows);
    if let Some(selection) = row_selection(&file.mask, total_rows) {
        builder = builder.with_row_selection(selection);
    }
    let stream = builder.build().map_err(&corrupt)?;
    let mut cursor = options.row_index.then(|| RowCursor::new(&file.mask, total_rows));
    let plan = Arc::new(BatchPlan::new(layout, fields, file, options, &file_schema, &roots, &sources, relative));
    Ok(stream
        .map(move |batch| {
            let batch = batch.map_err(|e| corrupt_or_missing(&plan.path, e))?;
            let adapted = plan.adapt(&batch)?;
            match cursor.as_mut() {
                None => Ok(adapted),
                Some(cursor) => with_row_index(adapted, cursor.take(batch.num_rows())),
            }
        })
        .boxed())
}

/// The top-level columns of a file a read takes (`roots`, ascending), and for each wanted field
/// the file column it comes from (None: a partition column, or one the file lacks).
fn file_columns(
    layout: &TableLayout,
    fields: &[StructField],
    file_schema: &SchemaRef,
) -> (Vec<usize>, Vec<Option<usize>>) {
    let mut roots = Vec::new();
    let mut sources: Vec<Option<usize>> = Vec::with_capacity(fields.len());
    for field in fields {
        if layout.is_partition_column(&field.name) {
            sources.push(None);
            continue;
        }
        let found = find_column(file_schema.fields(), field, layout.column_mapping);
        if let Some(index) = found {
            if !roots.contains(&index) {
                roots.push(index);
            }
        }
        sources.push(found);
    }
    roots.sort_unstable();
    (roots, sources)
}

/// [`read_file`] of a file whose rows the store kept as it wrote them ([`TableStore::kept_rows`]):
/// the same columns, rows and row indexes as decoding the file would give.
fn read_kept(
    kept: RecordBatch,
    layout: &TableLayout,
    fields: &[StructField],
    file: &FileToRead,
    options: &ScanOptions,
    relative: String,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let file_schema = kept.schema();
    let total_rows = kept.num_rows() as u64;
    let (roots, sources) = file_columns(layout, fields, &file_schema);
    let projected = kept.project(&roots)?;
    let selected = match &file.mask {
        RowMask::All => projected,
        RowMask::Only(rows) => {
            let keep: arrow::array::BooleanArray = (0..total_rows).map(|r| Some(rows.contains(r))).collect();
            arrow::compute::filter_record_batch(&projected, &keep)?
        }
        RowMask::Without(rows) => {
            let keep: arrow::array::BooleanArray = (0..total_rows).map(|r| Some(!rows.contains(r))).collect();
            arrow::compute::filter_record_batch(&projected, &keep)?
        }
    };
    let plan = BatchPlan::new(layout, fields, file, options, &file_schema, &roots, &sources, relative);
    let mut cursor = options.row_index.then(|| RowCursor::new(&file.mask, total_rows));
    let batch_rows = if options.batch_rows == 0 { BATCH_ROWS_DEFAULT } else { options.batch_rows };
    let mut batches = Vec::new();
    let mut offset = 0;
    while offset < selected.num_rows() {
        let length = batch_rows.min(selected.num_rows() - offset);
        let adapted = plan.adapt(&selected.slice(offset, length))?;
        batches.push(match cursor.as_mut() {
            None => Ok(adapted),
            Some(cursor) => with_row_index(adapted, cursor.take(length)),
        });
        offset += length;
    }
    Ok(futures::stream::iter(batches).boxed())
}

fn with_row_index(batch: RecordBatch, indexes: ArrayRef) -> Result<RecordBatch> {
    let mut fields: Vec<FieldRef> = batch.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(ROW_INDEX_COLUMN, ArrowType::UInt64, false)));
    let mut columns = batch.columns().to_vec();
    columns.push(indexes);
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)?)
}

/// Walks the physical row indexes of the rows a mask selects, a batch at a time.
struct RowCursor {
    ranges: Vec<std::ops::Range<u64>>,
    range: usize,
    next: u64,
}

impl RowCursor {
    fn new(mask: &RowMask, total_rows: u64) -> Self {
        let mut ranges = Vec::new();
        match mask {
            RowMask::All => ranges.push(0..total_rows),
            RowMask::Only(rows) => {
                for row in rows.iter().filter(|r| *r < total_rows) {
                    match ranges.last_mut() {
                        Some(last) if last.end == row => last.end = row + 1,
                        _ => ranges.push(row..row + 1),
                    }
                }
            }
            RowMask::Without(rows) => {
                let mut start = 0;
                for row in rows.iter().filter(|r| *r < total_rows) {
                    if row > start {
                        ranges.push(start..row);
                    }
                    start = row + 1;
                }
                if start < total_rows {
                    ranges.push(start..total_rows);
                }
            }
        }
        let next = ranges.first().map_or(0, |r| r.start);
        Self { ranges, range: 0, next }
    }

    fn take(&mut self, count: usize) -> ArrayRef {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let Some(range) = self.ranges.get(self.range) else { break };
            let available = (range.end - self.next) as usize;
            let wanted = (count - out.len()).min(available);
            out.extend(self.next..self.next + wanted as u64);
            self.next += wanted as u64;
            if self.next >= range.end {
                self.range += 1;
                self.next = self.ranges.get(self.range).map_or(0, |r| r.start);
            }
        }
        Arc::new(arrow::array::UInt64Array::from(out))
    }
}

fn corrupt_or_missing(path: &str, e: parquet::errors::ParquetError) -> Error {
    let text = e.to_string();
    if text.contains("not found") || text.contains("NotFound") || text.contains("No such file") {
        Error::MissingFile { path: path.to_string(), version: None }
    } else {
        Error::CorruptFile { path: path.to_string(), version: None, message: text }
    }
}

/// Finds the file column for a table column under the table's column-mapping mode.
fn find_column(file_fields: &Fields, field: &StructField, mode: ColumnMappingMode) -> Option<usize> {
    match mode {
        ColumnMappingMode::None => file_fields
            .iter()
            .position(|f| f.name() == &field.name)
            .or_else(|| file_fields.iter().position(|f| f.name().eq_ignore_ascii_case(&field.name))),
        ColumnMappingMode::Name => file_fields.iter().position(|f| f.name() == field.physical_name()),
        ColumnMappingMode::Id => {
            let id = field.column_id()?.to_string();
            file_fields.iter().position(|f| f.metadata().get(PARQUET_FIELD_ID_KEY) == Some(&id))
        }
    }
}

/// The Parquet row selection for a mask over a file of `total_rows` rows.
fn row_selection(mask: &RowMask, total_rows: u64) -> Option<RowSelection> {
    let (rows, keep) = match mask {
        RowMask::All => return None,
        RowMask::Without(rows) => (rows, false),
        RowMask::Only(rows) => (rows, true),
    };
    let mut selectors = Vec::new();
    let mut next = 0u64;
    for row in rows.iter().filter(|r| *r < total_rows) {
        if row > next {
            selectors.push(if keep {
                RowSelector::skip((row - next) as usize)
            } else {
                RowSelector::select((row - next) as usize)
            });
        }
        selectors.push(if keep { RowSelector::select(1) } else { RowSelector::skip(1) });
        next = row + 1;
    }
    if next < total_rows {
        let rest = (total_rows - next) as usize;
        selectors.push(if keep { RowSelector::skip(rest) } else { RowSelector::select(rest) });
    }
    Some(RowSelection::from(selectors))
}

/// How the columns of one file become the output batch.
struct BatchPlan {
    fields: Vec<StructField>,
    /// For each output field, the index of its column in the read batch (None: partition or missing).
    sources: Vec<Option<usize>>,
    source_fields: Vec<FieldRef>,
    partition_values: PartitionValues,
    layout: TableLayout,
    partition_options: PartitionReadOptions,
    output: SchemaRef,
    path: String,
}

impl BatchPlan {
    /// The plan for a file of `file_schema` whose columns `roots` are read (see [`file_columns`]).
    #[allow(clippy::too_many_arguments)]
    fn new(
        layout: &TableLayout,
        fields: &[StructField],
        file: &FileToRead,
        options: &ScanOptions,
        file_schema: &SchemaRef,
        roots: &[usize],
        sources: &[Option<usize>],
        path: String,
    ) -> Self {
        BatchPlan {
            fields: fields.to_vec(),
            sources: sources
                .iter()
                .map(|s| s.map(|index| roots.iter().position(|r| *r == index).unwrap_or(0)))
                .collect(),
            // The roots are positions in the file's schema.
            source_fields: roots.iter().filter_map(|&i| file_schema.fields().get(i).cloned()).collect(),
            partition_values: file.partition_values.clone(),
            layout: layout.clone(),
            partition_options: options.partition.clone(),
            output: output_schema(fields),
            path,
        }
    }

    fn adapt(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let mut columns = Vec::with_capacity(self.fields.len());
        for (field, source) in self.fields.iter().zip(&self.sources) {
            let target_type = field.arrow_type();
            let column = if self.layout.is_partition_column(&field.name) {
                let key = field.physical_name();
                let value = self
                    .partition_values
                    .get(key)
                    .or_else(|| self.partition_values.get(&field.name))
                    .cloned()
                    .flatten();
                partition_column(value.as_deref(), &target_type, rows, &self.partition_options).map_err(
                    |e| match e {
                        Error::InvalidData { message, .. } => {
                            Error::CorruptFile { path: self.path.clone(), version: None, message }
                        }
                        other => other,
                    },
                )?
            } else {
                match source {
                    Some(index) => {
                        adapt_field(batch.column(*index), field, self.layout.column_mapping).map_err(|e| {
                            Error::CorruptFile {
                                path: self.path.clone(),
                                version: None,
                                message: format!(
                                    "column '{}' ({}): {e}",
                                    field.name,
                                    self.source_fields
                                        .get(*index)
                                        .map(|f| f.data_type().to_string())
                                        .unwrap_or_default()
                                ),
                            }
                        })?
                    }
                    None => new_null_array(&target_type, rows),
                }
            };
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.output.clone(), columns, &options).map_err(|e| Error::CorruptFile {
            path: self.path.clone(),
            version: None,
            message: e.to_string(),
        })
    }
}

/// Brings a column read from a file to the type readers see for `field` (a time of day's
/// microseconds as `Time64`), as [`adapt_array`] does.
pub fn adapt_field(
    array: &ArrayRef,
    field: &StructField,
    mode: ColumnMappingMode,
) -> std::result::Result<ArrayRef, arrow::error::ArrowError> {
    let stored = adapt_array(array, &field.data_type, mode)?;
    let target_type = field.arrow_type();
    if stored.data_type() == &target_type {
        return Ok(stored);
    }
    cast_with_options(&stored, &target_type, &CastOptions { safe: false, ..Default::default() })
}

/// Brings an array read from a file to the table's type for it, matching nested fields by the
/// column-mapping mode and filling nested fields the file lacks with NULLs.
pub fn adapt_array(
    array: &ArrayRef,
    target: &DataType,
    mode: ColumnMappingMode,
) -> std::result::Result<ArrayRef, arrow::error::ArrowError> {
    let target_type = target.to_arrow();
    if array.data_type() == &target_type {
        return Ok(array.clone());
    }
    match (target, array.data_type()) {
        (DataType::Struct(target_struct), ArrowType::Struct(source_fields)) => {
            let source = array.as_struct();
            let ArrowType::Struct(target_fields) = &target_type else { unreachable_type()? };
            let mut children = Vec::with_capacity(target_struct.fields.len());
            for field in &target_struct.fields {
                let child = match find_column(source_fields, field, mode) {
                    Some(index) => adapt_field(source.column(index), field, mode)?,
                    None => new_null_array(&field.arrow_type(), source.len()),
                };
                children.push(child);
            }
            Ok(Arc::new(StructArray::try_new(target_fields.clone(), children, source.nulls().cloned())?))
        }
        (DataType::Array(element), ArrowType::List(_) | ArrowType::LargeList(_)) => {
            let list = match array.data_type() {
                ArrowType::LargeList(_) => cast_with_options(
                    array,
                    &ArrowType::List(Arc::new(Field::new("element", array_child_type(array), true))),
                    &CastOptions::default(),
                )?,
                _ => array.clone(),
            };
            let list = list.as_list::<i32>();
            let values = adapt_array(list.values(), &element.element_type, mode)?;
            let ArrowType::List(target_field) = &target_type else { unreachable_type()? };
            Ok(Arc::new(ListArray::try_new(
                target_field.clone(),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?))
        }
        (DataType::Map(map_type), ArrowType::Map(_, _)) => {
            let map = array.as_map();
            let keys = adapt_array(map.keys(), &map_type.key_type, mode)?;
            let values = adapt_array(map.values(), &map_type.value_type, mode)?;
            let ArrowType::Map(entries_field, sorted) = &target_type else { unreachable_type()? };
            let ArrowType::Struct(entry_fields) = entries_field.data_type() else { unreachable_type()? };
            let entries = StructArray::try_new(entry_fields.clone(), vec![keys, values], None)?;
            Ok(Arc::new(MapArray::try_new(
                entries_field.clone(),
                map.offsets().clone(),
                entries,
                map.nulls().cloned(),
                *sorted,
            )?))
        }
        (DataType::Primitive(_), _) => {
            cast_with_options(array, &target_type, &CastOptions { safe: false, ..Default::default() })
        }
        _ => Err(arrow::error::ArrowError::CastError(format!("cannot read {} as {}", array.data_type(), target_type))),
    }
}

fn array_child_type(array: &ArrayRef) -> ArrowType {
    match array.data_type() {
        ArrowType::List(f) | ArrowType::LargeList(f) => f.data_type().clone(),
        other => other.clone(),
    }
}

fn unreachable_type<T>() -> std::result::Result<T, arrow::error::ArrowError> {
    Err(arrow::error::ArrowError::SchemaError("internal: a Delta type mapped to an unexpected Arrow type".into()))
}
