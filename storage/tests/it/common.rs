//! Helpers shared by the storage integration tests.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The Delta tables written by other engines.
pub fn fixtures() -> PathBuf {
    workspace().join("testdata/delta")
}

/// Reads every Parquet file in a folder (ignoring hidden and `_` files).
pub fn read_parquet_dir(dir: &std::path::Path) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with('.') || name.starts_with('_') || !name.ends_with(".parquet") {
            continue;
        }
        out.extend(read_parquet_file(&path));
    }
    out
}

pub fn read_parquet_file(path: &std::path::Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    reader.map(|b| b.unwrap()).collect()
}

/// A type all readers agree on: microsecond timestamps in UTC, plain strings and binaries.
fn normalized_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone.as_ref().map(|_| "UTC".into())),
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        DataType::Dictionary(_, value) => normalized_type(value),
        DataType::Struct(fields) => DataType::Struct(
            fields.iter().map(|f| Field::new(f.name(), normalized_type(f.data_type()), true)).collect::<Fields>(),
        ),
        DataType::List(item) | DataType::LargeList(item) => {
            DataType::List(Arc::new(Field::new("element", normalized_type(item.data_type()), true)))
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else { unreachable!() };
            let kv: Fields = vec![
                Field::new("key", normalized_type(kv[0].data_type()), false),
                Field::new("value", normalized_type(kv[1].data_type()), true),
            ]
            .into();
            DataType::Map(Arc::new(Field::new("key_value", DataType::Struct(kv), false)), *sorted)
        }
        other => other.clone(),
    }
}

pub fn normalize(array: &ArrayRef) -> ArrayRef {
    let target = normalized_type(array.data_type());
    if &target == array.data_type() {
        return array.clone();
    }
    cast(array, &target).unwrap_or_else(|e| panic!("cannot normalize {}: {e}", array.data_type()))
}

/// The rows of `batches` as sorted strings over `columns` (matched ignoring case).
pub fn canonical_rows(batches: &[RecordBatch], columns: &[String]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let arrays: Vec<ArrayRef> = columns
            .iter()
            .map(|name| {
                let index = batch
                    .schema()
                    .fields()
                    .iter()
                    .position(|f| f.name().eq_ignore_ascii_case(name))
                    .unwrap_or_else(|| panic!("no column {name} in {:?}", batch.schema()));
                normalize(batch.column(index))
            })
            .collect();
        let formatters: Vec<_> =
            arrays.iter().map(|a| ArrayFormatter::try_new(a.as_ref(), &options).unwrap()).collect();
        for row in 0..batch.num_rows() {
            let text: Vec<String> = formatters.iter().map(|f| f.value(row).to_string()).collect();
            rows.push(text.join(" | "));
        }
    }
    rows.sort();
    rows
}

/// The column names of the first batch, in order.
pub fn column_names(batches: &[RecordBatch]) -> Vec<String> {
    batches.first().map(|b| b.schema().fields().iter().map(|f| f.name().clone()).collect()).unwrap_or_default()
}

/// Total rows.
pub fn row_count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

/// A non-null array's length check helper.
pub fn len(array: &dyn Array) -> usize {
    array.len()
}

/// The seed of a random test: `SLUICE_SEED` when set (to replay a failure), else a new one. It is
/// printed, so a failing test shows it (the harness prints a failed test's output).
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SLUICE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("{test}: seed {seed} (replay with SLUICE_SEED={seed})");
    seed
}

/// A random generator from a seed.
pub fn rng_from(seed: u64) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    rand::rngs::StdRng::seed_from_u64(seed)
}
