//! File skipping: the statistics of a snapshot's files (min, max, null count, row count from
//! `add.stats`; partition values as min = max) in the shape DataFusion's `PruningPredicate` asks
//! for, so a filter can rule out whole files before any is opened.
//!
//! Bounds from other writers may be truncated (timestamps to milliseconds, strings to a prefix),
//! so maxima of timestamps are widened by a millisecond and string bounds are only used when
//! Sluice can trust them to be whole (`tightBounds` and not truncated by length).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, UInt64Array};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType as ArrowType, SchemaRef, TimeUnit};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use serde_json::Value;
use sluice_storage::actions::{Add, Stats};
use sluice_storage::schema::StructType;

/// The statistics of a list of files, one "container" per file.
pub struct FileStatistics<'a> {
    files: &'a [Arc<Add>],
    stats: Vec<Option<Stats>>,
    schema: &'a StructType,
    arrow_schema: SchemaRef,
    partition_columns: HashSet<String>,
}

/// Longest string bound trusted for pruning (Sluice and Spark truncate at 32).
const STRING_BOUND_CHARS_MAX: usize = 31;

impl<'a> FileStatistics<'a> {
    pub fn new(
        files: &'a [Arc<Add>],
        schema: &'a StructType,
        arrow_schema: SchemaRef,
        partition_columns: &[String],
    ) -> Self {
        Self {
            files,
            stats: files.iter().map(|f| f.parsed_stats()).collect(),
            schema,
            arrow_schema,
            partition_columns: partition_columns.iter().map(|c| c.to_lowercase()).collect(),
        }
    }

    fn arrow_type(&self, column: &Column) -> Option<ArrowType> {
        self.arrow_schema.field_with_name(&column.name).ok().map(|f| f.data_type().clone())
    }

    fn is_partition(&self, column: &Column) -> bool {
        self.partition_columns.contains(&column.name.to_lowercase())
    }

    fn physical_name(&self, column: &Column) -> String {
        self.schema.field(&column.name).map(|f| f.physical_name().to_string()).unwrap_or_else(|| column.name.clone())
    }

    /// Per-file text values, cast to the column's type (unparseable values become unknown).
    fn bound(&self, column: &Column, maximum: bool) -> Option<ArrayRef> {
        let data_type = self.arrow_type(column)?;
        if !matches!(
            data_type,
            ArrowType::Int8
                | ArrowType::Int16
                | ArrowType::Int32
                | ArrowType::Int64
                | ArrowType::Float32
                | ArrowType::Float64
                | ArrowType::Date32
                | ArrowType::Time64(_)
                | ArrowType::Timestamp(_, _)
                | ArrowType::Decimal128(_, _)
                | ArrowType::Utf8
        ) {
            return None;
        }
        let physical = self.physical_name(column);
        let texts: Vec<Option<String>> = if self.is_partition(column) {
            self.files
                .iter()
                .map(|f| f.partition_values.get(&physical).cloned().flatten().filter(|v| !v.is_empty()))
                .collect()
        } else {
            self.stats
                .iter()
                .map(|s| {
                    let stats = s.as_ref()?;
                    let values = if maximum { &stats.max_values } else { &stats.min_values };
                    match values.get(&physical)? {
                        Value::String(text)
                            if data_type == ArrowType::Utf8 && text.chars().count() > STRING_BOUND_CHARS_MAX =>
                        {
                            None
                        }
                        Value::String(text) => Some(text.clone()),
                        Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    }
                })
                .collect()
        };
        if texts.iter().all(Option::is_none) {
            return None;
        }
        let strings: ArrayRef = Arc::new(StringArray::from(texts));
        let lenient = CastOptions { safe: true, ..Default::default() };
        let values = match &data_type {
            // Numbers in stats are JSON numbers; decimals may carry more digits than the scale.
            ArrowType::Int8 | ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64 => {
                let floats = cast_with_options(&strings, &ArrowType::Float64, &lenient).ok()?;
                cast_with_options(&floats, &data_type, &lenient).ok()?
            }
            // A time of day's bounds are its microseconds (the column is a Delta long).
            ArrowType::Time64(_) => {
                let floats = cast_with_options(&strings, &ArrowType::Float64, &lenient).ok()?;
                let micros = cast_with_options(&floats, &ArrowType::Int64, &lenient).ok()?;
                let micros = cast_with_options(&micros, &sluice_storage::schema::TIME_OF_DAY, &lenient).ok()?;
                cast_with_options(&micros, &data_type, &lenient).ok()?
            }
            ArrowType::Timestamp(unit, zone) => {
                let micros =
                    cast_with_options(&strings, &ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone()), &lenient)
                        .ok()?;
                let micros =
                    if maximum && !self.is_partition(column) { widen_by_a_millisecond(&micros)? } else { micros };
                cast_with_options(&micros, &ArrowType::Timestamp(*unit, zone.clone()), &lenient).ok()?
            }
            _ => cast_with_options(&strings, &data_type, &lenient).ok()?,
        };
        Some(values)
    }
}

fn widen_by_a_millisecond(array: &ArrayRef) -> Option<ArrayRef> {
    let delta = ScalarValue::Int64(Some(1000)).to_array_of_size(array.len()).ok()?;
    let as_int = cast_with_options(array, &ArrowType::Int64, &CastOptions::default()).ok()?;
    let widened = arrow::compute::kernels::numeric::add(&as_int, &delta).ok()?;
    cast_with_options(&widened, array.data_type(), &CastOptions::default()).ok()
}

impl PruningStatistics for FileStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, true)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let physical = self.physical_name(column);
        let counts: Vec<Option<u64>> = if self.is_partition(column) {
            self.files
                .iter()
                .zip(&self.stats)
                .map(|(f, s)| {
                    let rows = s.as_ref().and_then(|s| s.num_records)? as u64;
                    let is_null = f.partition_values.get(&physical).cloned().flatten().is_none_or(|v| v.is_empty());
                    Some(if is_null { rows } else { 0 })
                })
                .collect()
        } else {
            self.stats
                .iter()
                .zip(self.files)
                .map(|(s, f)| {
                    let count = s.as_ref()?.null_count.get(&physical)?.as_u64()?;
                    // With a deletion vector the count covers deleted rows too: the live rows'
                    // is unknown, unless there was no NULL at all (so `x IS NULL` still skips
                    // the file; a count above zero could wrongly skip it for `x IS NOT NULL`).
                    if f.deletion_vector.is_some() && count > 0 {
                        return None;
                    }
                    Some(count)
                })
                .collect()
        };
        Some(Arc::new(UInt64Array::from(counts)))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: Vec<Option<u64>> = self
            .stats
            .iter()
            .zip(self.files)
            .map(|(s, f)| {
                let rows = s.as_ref()?.num_records? as u64;
                let deleted = f.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality.max(0) as u64);
                Some(rows.saturating_sub(deleted))
            })
            .collect();
        Some(Arc::new(UInt64Array::from(counts)))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<arrow::array::BooleanArray> {
        None
    }
}
