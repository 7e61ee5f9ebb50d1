//! Writing data files: checking batches against the table schema, splitting them by partition,
//! encoding Parquet (in parallel, one file per writer, rolling over at the target size) and the
//! per-column statistics that go into `add.stats`.
//!
//! Statistics: `numRecords`, and per leaf column (nested structs included, under physical names)
//! `nullCount` and, for numbers, dates, timestamps, decimals and strings, `minValues` and
//! `maxValues`. Bounds are always safe for pruning: timestamps are truncated to milliseconds
//! downwards for minima and upwards for maxima; decimals are widened to the nearest `f64` outward;
//! strings longer than [`STATS_STRING_CHARS_MAX`] keep a truncated minimum and no maximum; a float
//! column holding NaN has no bounds.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{make_array, Array, ArrayData, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute::{cast_with_options, take, CastOptions};
use arrow::datatypes::DataType as ArrowType;
use arrow::datatypes::*;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::{Map, Value};

use crate::actions::{now_ms, Add, PartitionValues, Stats};
use crate::error::{Error, Result};
use crate::partition::{partition_directory, partition_strings};
use crate::scan::TableLayout;
use crate::schema::{ColumnMappingMode, DataType, StructType};
use crate::store::{percent_encode, TableStore};

/// Longest string kept in stats.
pub const STATS_STRING_CHARS_MAX: usize = 32;

/// Rows of one data page at most.
const DATA_PAGE_ROWS_MAX: usize = 8192;
/// Bytes of a column chunk's dictionary at most.
const DICTIONARY_PAGE_BYTES_MAX: usize = 256 * 1024;

/// How files are written.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// A file is closed once it holds about this many bytes.
    pub target_file_size_bytes: u64,
    /// Rows per Parquet row group.
    pub row_group_rows_max: usize,
    /// Files encoded at once (0: one per core).
    pub writers_max: usize,
    /// Rows a writer should get before another one is started.
    pub writer_rows_min: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size_bytes: 128 * 1024 * 1024,
            row_group_rows_max: 1024 * 1024,
            writers_max: 0,
            writer_rows_min: 1_000_000,
        }
    }
}

/// Rows of one partition, as batches of the table's data columns under physical names.
#[derive(Debug)]
pub struct PartitionGroup {
    pub values: Vec<Option<String>>,
    pub batches: Vec<RecordBatch>,
}

/// Brings a batch to the table's logical schema: columns matched by name (ignoring case), types
/// cast where the cast is lossless, missing nullable columns filled with NULL. Refuses unknown
/// columns, missing NOT NULL columns and NULLs in NOT NULL columns.
pub fn conform_batch(batch: &RecordBatch, schema: &StructType, location: &str) -> Result<RecordBatch> {
    let invalid = |message: String| Error::InvalidData { location: location.to_string(), message };
    if schema.fields.is_empty() && batch.num_rows() > 0 {
        // A Parquet file (and a Delta table's statistics) needs a column to count rows in.
        return Err(Error::Unsupported("rows in a table without columns (add a column first)".into()));
    }
    let input_schema = batch.schema();
    for field in input_schema.fields() {
        if schema.field(field.name()).is_none() {
            return Err(invalid(format!("column '{}' is not in the table", field.name())));
        }
    }
    let target = Arc::new(schema.to_arrow());
    let mut columns = Vec::with_capacity(schema.fields.len());
    for (field, arrow_field) in schema.fields.iter().zip(target.fields()) {
        let position = input_schema
            .fields()
            .iter()
            .position(|f| f.name() == &field.name)
            .or_else(|| input_schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(&field.name)));
        let column = match position {
            Some(index) => {
                let column = batch.column(index);
                if column.data_type() == arrow_field.data_type() {
                    column.clone()
                } else if arrow_field.data_type().is_nested() {
                    relabel(column, arrow_field.data_type()).map_err(|e| {
                        invalid(format!(
                            "column '{}' has type {}, the table has {}: {e}",
                            field.name,
                            column.data_type(),
                            arrow_field.data_type()
                        ))
                    })?
                } else {
                    cast_with_options(
                        column,
                        arrow_field.data_type(),
                        &CastOptions { safe: false, ..Default::default() },
                    )
                    .map_err(|e| {
                        invalid(format!(
                            "column '{}': cannot store {} as {}: {e}",
                            field.name,
                            column.data_type(),
                            arrow_field.data_type()
                        ))
                    })?
                }
            }
            None if field.nullable => arrow::array::new_null_array(arrow_field.data_type(), batch.num_rows()),
            None => return Err(invalid(format!("column '{}' is NOT NULL and has no value", field.name))),
        };
        if !field.nullable && column.null_count() > 0 {
            return Err(invalid(format!(
                "column '{}' is NOT NULL but {} rows hold NULL",
                field.name,
                column.null_count()
            )));
        }
        columns.push(column);
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(target, columns, &options)?)
}

/// Gives an array a type that has the same layout but other field names (nested relabelling).
fn relabel(array: &ArrayRef, target: &ArrowType) -> std::result::Result<ArrayRef, arrow::error::ArrowError> {
    fn walk(data: ArrayData, target: &ArrowType) -> std::result::Result<ArrayData, arrow::error::ArrowError> {
        let children: Vec<ArrayData> = match target {
            ArrowType::Struct(fields) => {
                if data.child_data().len() != fields.len() {
                    return Err(arrow::error::ArrowError::SchemaError("struct fields differ".into()));
                }
                data.child_data()
                    .iter()
                    .zip(fields.iter())
                    .map(|(c, f)| walk(c.clone(), f.data_type()))
                    .collect::<std::result::Result<_, _>>()?
            }
            ArrowType::List(f) | ArrowType::LargeList(f) | ArrowType::Map(f, _) => {
                let child = data
                    .child_data()
                    .first()
                    .cloned()
                    .ok_or_else(|| arrow::error::ArrowError::SchemaError("list without values".into()))?;
                vec![walk(child, f.data_type())?]
            }
            _ => {
                if data.data_type() != target {
                    let array = make_array(data);
                    return Ok(cast_with_options(&array, target, &CastOptions { safe: false, ..Default::default() })?
                        .to_data());
                }
                return Ok(data);
            }
        };
        data.into_builder().data_type(target.clone()).child_data(children).build()
    }
    Ok(make_array(walk(array.to_data(), target)?))
}

/// Splits conformed batches into partition groups of physical data batches.
pub fn split_partitions(batches: &[RecordBatch], layout: &TableLayout) -> Result<Vec<PartitionGroup>> {
    let data_schema = crate::schema::data_schema(&layout.schema, &layout.partition_columns);
    let physical = Arc::new(data_schema.to_physical_arrow(layout.column_mapping));
    let data_indexes: Vec<usize> = data_schema.fields.iter().filter_map(|f| layout.schema.index_of(&f.name)).collect();
    let partition_indexes: Vec<usize> = layout
        .partition_columns
        .iter()
        .map(|p| {
            layout
                .schema
                .index_of(p)
                .ok_or_else(|| Error::Schema(format!("partition column '{p}' is not in the schema")))
        })
        .collect::<Result<_>>()?;
    let to_physical = |batch: &RecordBatch| -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = data_indexes
            .iter()
            .zip(physical.fields())
            .map(|(&i, f)| {
                let column = batch.column(i);
                if layout.column_mapping != ColumnMappingMode::None && f.data_type().is_nested() {
                    relabel(column, f.data_type()).map_err(Error::from)
                } else if column.data_type() != f.data_type() {
                    // A time of day is stored as its microseconds (see `crate::schema`).
                    relabel(column, f.data_type()).map_err(Error::from)
                } else {
                    Ok(column.clone())
                }
            })
            .collect::<Result<_>>()?;
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(physical.clone(), columns, &options)?)
    };
    if partition_indexes.is_empty() {
        let batches = batches.iter().filter(|b| b.num_rows() > 0).map(to_physical).collect::<Result<Vec<_>>>()?;
        return Ok(vec![PartitionGroup { values: vec![], batches }]);
    }
    let mut groups: Vec<PartitionGroup> = Vec::new();
    let mut group_of: HashMap<Vec<Option<String>>, usize> = HashMap::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let keys: Vec<Vec<Option<String>>> =
            partition_indexes.iter().map(|&i| partition_strings(batch.column(i).as_ref())).collect::<Result<_>>()?;
        let mut rows_of: HashMap<Vec<Option<String>>, Vec<u32>> = HashMap::new();
        for row in 0..batch.num_rows() {
            let key: Vec<Option<String>> = keys.iter().map(|k| k.get(row).cloned().flatten()).collect();
            rows_of.entry(key).or_default().push(row as u32);
        }
        for (key, rows) in rows_of {
            let indexes = UInt32Array::from(rows);
            let physical_batch = to_physical(batch)?;
            let columns = physical_batch
                .columns()
                .iter()
                .map(|c| take(c.as_ref(), &indexes, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(indexes.len()));
            let taken = RecordBatch::try_new_with_options(physical.clone(), columns, &options)?;
            let next = groups.len();
            let index = *group_of.entry(key.clone()).or_insert(next);
            if index == next {
                groups.push(PartitionGroup { values: key, batches: vec![taken] });
            } else if let Some(group) = groups.get_mut(index) {
                group.batches.push(taken);
            }
        }
    }
    Ok(groups)
}

fn writer_properties(options: &WriteOptions) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(options.row_group_rows_max))
        .set_statistics_enabled(EnabledStatistics::Page)
        // Small pages and dictionaries, so that reading a few rows (a lookup through a key
        // index, with the page index) decodes little: a page holds at most 8,192 rows, and a
        // column whose dictionary outgrows 256 KiB is written plain (its later pages are
        // anyway, and every read of the chunk would decode the dictionary).
        .set_data_page_row_count_limit(DATA_PAGE_ROWS_MAX)
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES_MAX)
        .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Writes partition groups as Parquet files and returns their `add` actions.
pub async fn write_groups(
    store: &TableStore,
    layout: &TableLayout,
    groups: Vec<PartitionGroup>,
    options: &WriteOptions,
    data_change: bool,
) -> Result<Vec<Add>> {
    let cores = crate::cores();
    let writers_max = if options.writers_max == 0 { cores } else { options.writers_max };
    let mut jobs = Vec::new();
    for group in groups {
        let rows: usize = group.batches.iter().map(|b| b.num_rows()).sum();
        if rows == 0 {
            continue;
        }
        let writers = (rows / options.writer_rows_min.max(1)).clamp(1, writers_max);
        let directory = partition_directory(&layout.partition_columns_physical(), &group.values);
        let values: PartitionValues =
            layout.partition_columns_physical().into_iter().zip(group.values.iter().cloned()).collect();
        // Deal the batches out to the writers in contiguous runs, keeping row order per file.
        let per_writer = rows.div_ceil(writers);
        let mut current: Vec<RecordBatch> = Vec::new();
        let mut current_rows = 0;
        for batch in group.batches {
            current_rows += batch.num_rows();
            current.push(batch);
            if current_rows >= per_writer {
                jobs.push((directory.clone(), values.clone(), std::mem::take(&mut current)));
                current_rows = 0;
            }
        }
        if !current.is_empty() {
            jobs.push((directory, values, current));
        }
    }
    let properties = writer_properties(options);
    let target = options.target_file_size_bytes;
    let mut tasks = Vec::new();
    for (directory, values, batches) in jobs {
        let properties = properties.clone();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        // A few rows are encoded here: the blocking pool's thread switches cost more.
        let encoded = if rows <= crate::recent::RECENT_FILE_ROWS_MAX {
            Encoding::Done(encode_files(batches, properties, target))
        } else {
            Encoding::Running(tokio::task::spawn_blocking(move || encode_files(batches, properties, target)))
        };
        tasks.push((directory, values, encoded));
    }
    let mut adds = Vec::new();
    for (directory, values, encoded) in tasks {
        let files = match encoded {
            Encoding::Done(files) => files?,
            Encoding::Running(task) => {
                task.await.map_err(|e| Error::Internal(format!("a writer thread failed: {e}")))??
            }
        };
        for (bytes, stats, rows) in files {
            let name = format!("part-{:05}-{}-c000.snappy.parquet", adds.len(), uuid::Uuid::new_v4());
            let relative = if directory.is_empty() { name } else { format!("{directory}/{name}") };
            let size = bytes.len() as i64;
            let path = store.path(&relative);
            store.put(&path, bytes).await?;
            if let Some(rows) = rows {
                store.keep_rows(&path, rows);
            }
            adds.push(Add {
                path: percent_encode(&relative),
                partition_values: values.clone(),
                size,
                modification_time: now_ms(),
                data_change,
                stats: Some(serde_json::to_string(&stats).map_err(|e| Error::Internal(e.to_string()))?),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            });
        }
    }
    Ok(adds)
}

impl TableLayout {
    /// Partition column names as they appear in the log (physical names under column mapping).
    pub fn partition_columns_physical(&self) -> Vec<String> {
        self.partition_columns
            .iter()
            .map(|p| match (self.column_mapping, self.schema.field(p)) {
                (ColumnMappingMode::None, _) | (_, None) => p.clone(),
                (_, Some(field)) => field.physical_name().to_string(),
            })
            .collect()
    }
}

/// The files of one writer: encoded already, or being encoded on the blocking pool.
enum Encoding {
    Done(Result<Vec<EncodedFile>>),
    Running(tokio::task::JoinHandle<Result<Vec<EncodedFile>>>),
}

/// A file's bytes, its stats, and the rows it was written from when it is one small file
/// (for [`TableStore::keep_rows`]).
type EncodedFile = (Bytes, Stats, Option<RecordBatch>);

/// Encodes batches into one or more Parquet files of about `target_bytes`, with their stats.
fn encode_files(
    batches: Vec<RecordBatch>,
    properties: WriterProperties,
    target_bytes: u64,
) -> Result<Vec<EncodedFile>> {
    let Some(first) = batches.first() else { return Ok(vec![]) };
    let schema = first.schema();
    let mut files = Vec::new();
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties.clone()))?;
    let mut stats = StatsCollector::new(&schema);
    for batch in &batches {
        writer.write(batch)?;
        stats.update(batch);
        if writer.bytes_written() as u64 + writer.in_progress_size() as u64 >= target_bytes {
            let finished = std::mem::replace(
                &mut writer,
                ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties.clone()))?,
            );
            files.push((
                Bytes::from(finished.into_inner()?),
                std::mem::replace(&mut stats, StatsCollector::new(&schema)).finish(),
                None,
            ));
        }
    }
    if stats.rows > 0 {
        // One small file of all the batches: its rows can be kept as they are.
        let rows = (files.is_empty() && stats.rows <= crate::recent::RECENT_FILE_ROWS_MAX as i64)
            .then(|| arrow::compute::concat_batches(&schema, &batches).ok())
            .flatten();
        files.push((Bytes::from(writer.into_inner()?), stats.finish(), rows));
    }
    Ok(files)
}

/// A comparable stats value.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Bound {
    Int(i128),
    Float(f64),
    Text(String),
}

#[derive(Debug, Default)]
struct ColumnStats {
    min: Option<Bound>,
    max: Option<Bound>,
    nulls: i64,
    /// A value that cannot be bounded (NaN, an over-long string maximum) was seen.
    unbounded_max: bool,
    unbounded_min: bool,
}

/// Accumulates the stats of one file over its batches.
struct StatsCollector {
    schema: SchemaRef,
    /// One entry per leaf path (names from the root).
    columns: HashMap<Vec<String>, ColumnStats>,
    rows: i64,
}

impl StatsCollector {
    fn new(schema: &SchemaRef) -> Self {
        Self { schema: schema.clone(), columns: HashMap::new(), rows: 0 }
    }

    fn update(&mut self, batch: &RecordBatch) {
        self.rows += batch.num_rows() as i64;
        for (field, column) in self.schema.clone().fields().iter().zip(batch.columns()) {
            self.update_column(vec![field.name().clone()], column);
        }
    }

    fn update_column(&mut self, path: Vec<String>, column: &ArrayRef) {
        if let ArrowType::Struct(fields) = column.data_type() {
            let structs = column.as_struct();
            let parent_nulls = structs.nulls();
            for (field, child) in fields.iter().zip(structs.columns()) {
                let mut child_path = path.clone();
                child_path.push(field.name().clone());
                // A child is null where it or its parent is.
                let child = match parent_nulls {
                    Some(nulls) if child.null_count() < column.len() => {
                        let combined = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                        make_array(
                            child.to_data().into_builder().nulls(combined).build().unwrap_or_else(|_| child.to_data()),
                        )
                    }
                    _ => child.clone(),
                };
                self.update_column(child_path, &child);
            }
            return;
        }
        let entry = self.columns.entry(path).or_default();
        entry.nulls += column.null_count() as i64;
        let (min, max) = bounds(column, entry);
        merge(&mut entry.min, min, |new, old| new < old);
        merge(&mut entry.max, max, |new, old| new > old);
    }

    fn finish(self) -> Stats {
        let mut stats = Stats { num_records: Some(self.rows), ..Default::default() };
        let mut paths: Vec<_> = self.columns.into_iter().collect();
        paths.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, column) in paths {
            let data_type = leaf_type(&self.schema, &path);
            insert_path(&mut stats.null_count, &path, Value::from(column.nulls));
            if let (Some(min), false) = (&column.min, column.unbounded_min) {
                if let Some(value) = render(min, &data_type, false) {
                    insert_path(&mut stats.min_values, &path, value);
                }
            }
            if let (Some(max), false) = (&column.max, column.unbounded_max) {
                if let Some(value) = render(max, &data_type, true) {
                    insert_path(&mut stats.max_values, &path, value);
                }
            }
        }
        stats
    }
}

fn merge(slot: &mut Option<Bound>, candidate: Option<Bound>, better: impl Fn(&Bound, &Bound) -> bool) {
    if let Some(candidate) = candidate {
        match slot {
            Some(current) if !better(&candidate, current) => {}
            _ => *slot = Some(candidate),
        }
    }
}

fn leaf_type(schema: &SchemaRef, path: &[String]) -> ArrowType {
    let mut fields = schema.fields().clone();
    let mut data_type = ArrowType::Null;
    for name in path {
        let Some(field) = fields.iter().find(|f| f.name() == name) else { return ArrowType::Null };
        data_type = field.data_type().clone();
        if let ArrowType::Struct(children) = &data_type {
            fields = children.clone();
        }
    }
    data_type
}

fn bounds(column: &ArrayRef, entry: &mut ColumnStats) -> (Option<Bound>, Option<Bound>) {
    use arrow::compute::{max, max_string, min, min_string};
    macro_rules! ints {
        ($t:ty) => {{
            let a = column.as_primitive::<$t>();
            (min(a).map(|v| Bound::Int(v as i128)), max(a).map(|v| Bound::Int(v as i128)))
        }};
    }
    match column.data_type() {
        ArrowType::Int8 => ints!(Int8Type),
        ArrowType::Int16 => ints!(Int16Type),
        ArrowType::Int32 => ints!(Int32Type),
        ArrowType::Int64 => ints!(Int64Type),
        ArrowType::Date32 => ints!(Date32Type),
        ArrowType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType),
        ArrowType::Decimal128(_, _) => {
            let a = column.as_primitive::<Decimal128Type>();
            (min(a).map(Bound::Int), max(a).map(Bound::Int))
        }
        ArrowType::Float32 | ArrowType::Float64 => {
            let a = match cast_with_options(column, &ArrowType::Float64, &CastOptions::default()) {
                Ok(a) => a,
                Err(_) => return (None, None),
            };
            let a = a.as_primitive::<Float64Type>();
            if a.iter().flatten().any(f64::is_nan) {
                entry.unbounded_min = true;
                entry.unbounded_max = true;
                return (None, None);
            }
            (min(a).map(Bound::Float), max(a).map(Bound::Float))
        }
        ArrowType::Utf8 => {
            let a = column.as_string::<i32>();
            let low = min_string(a).map(|s| Bound::Text(truncate(s)));
            let high = max_string(a).and_then(|s| {
                if s.chars().count() > STATS_STRING_CHARS_MAX {
                    entry.unbounded_max = true;
                    None
                } else {
                    Some(Bound::Text(s.to_string()))
                }
            });
            (low, high)
        }
        _ => (None, None),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(STATS_STRING_CHARS_MAX).collect()
}

/// Renders a bound as the JSON value Delta readers expect; `upper` rounds outward for maxima.
fn render(bound: &Bound, data_type: &ArrowType, upper: bool) -> Option<Value> {
    match (bound.clone(), data_type) {
        (Bound::Int(days), ArrowType::Date32) => {
            let date = chrono::NaiveDate::from_num_days_from_ce_opt(days as i32 + 719_163)?;
            Some(Value::String(date.format("%Y-%m-%d").to_string()))
        }
        (Bound::Int(micros), ArrowType::Timestamp(_, zone)) => {
            let millis = if upper {
                (micros as i64).div_euclid(1000) + i64::from((micros as i64).rem_euclid(1000) != 0)
            } else {
                (micros as i64).div_euclid(1000)
            };
            let time = chrono::DateTime::from_timestamp_millis(millis)?;
            let text = if zone.is_some() {
                time.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
            } else {
                time.naive_utc().format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
            };
            Some(Value::String(text))
        }
        (Bound::Int(unscaled), ArrowType::Decimal128(_, scale)) => {
            let value = unscaled as f64 / 10f64.powi(i32::from(*scale));
            let value = if upper { value.next_up() } else { value.next_down() };
            serde_json::Number::from_f64(value).map(Value::Number)
        }
        (Bound::Int(v), _) => Some(Value::from(v as i64)),
        (Bound::Float(v), _) => serde_json::Number::from_f64(v).map(Value::Number),
        (Bound::Text(s), _) => Some(Value::String(s)),
    }
}

fn insert_path(map: &mut Map<String, Value>, path: &[String], value: Value) {
    match path {
        [] => {}
        [leaf] => {
            map.insert(leaf.clone(), value);
        }
        [head, rest @ ..] => {
            let child = map.entry(head.clone()).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(child) = child {
                insert_path(child, rest, value);
            }
        }
    }
}

/// The Delta type of stats-bearing columns (used by tests and the engine's pruning).
pub fn has_bounds(data_type: &DataType) -> bool {
    use crate::schema::PrimitiveType as P;
    matches!(
        data_type,
        DataType::Primitive(
            P::Byte
                | P::Short
                | P::Integer
                | P::Long
                | P::Float
                | P::Double
                | P::Date
                | P::Timestamp
                | P::TimestampNtz
                | P::Decimal { .. }
                | P::String
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};

    #[test]
    fn collects_stats() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", ArrowType::Int64, true),
            Field::new("s", ArrowType::Utf8, true),
            Field::new("f", ArrowType::Float64, true),
            Field::new("t", ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(3), None, Some(-1)])),
                Arc::new(StringArray::from(vec!["b", "a", &"z".repeat(40)])),
                Arc::new(Float64Array::from(vec![1.0, f64::NAN, 2.0])),
                Arc::new(TimestampMicrosecondArray::from(vec![1_500, 2_000, 2_001]).with_timezone("UTC")),
            ],
        )
        .unwrap();
        let mut collector = StatsCollector::new(&schema);
        collector.update(&batch);
        let stats = collector.finish();
        assert_eq!(stats.num_records, Some(3));
        assert_eq!(stats.min_values["a"], Value::from(-1));
        assert_eq!(stats.max_values["a"], Value::from(3));
        assert_eq!(stats.null_count["a"], Value::from(1));
        assert_eq!(stats.min_values["s"], Value::from("a"));
        assert!(!stats.max_values.contains_key("s"), "over-long maxima are dropped");
        assert!(!stats.min_values.contains_key("f"), "NaN makes a float column unbounded");
        assert_eq!(stats.min_values["t"], Value::from("1970-01-01T00:00:00.001Z"));
        assert_eq!(stats.max_values["t"], Value::from("1970-01-01T00:00:00.003Z"));
    }
}
