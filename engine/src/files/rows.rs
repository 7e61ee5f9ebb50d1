//! Files' rows meet a table: the columns a table lacks for them (inferred, in one `ADD COLUMNS`
//! commit), and their rows in the table's schema.
//!
//! A file column matches the table column of its name (ignoring case). Its values are cast to
//! the column's type; a value that does not fit (text where the column is a number, say) is null
//! in the column and kept in `_rescued_data`, one JSON object per row (column name -> the value
//! as text), as is a column whose name cannot be a column. Hive-style partition folders give
//! columns of their own. Every row carries `_metadata`: the file's path, name, size,
//! modification time, and the row's line (its position in a Parquet file).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, Int64Array, RecordBatch, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use super::decode::FileRows;
use super::sniff::{merge_types, timestamp_type, TypeGuess};
use crate::error::{Error, Result};

/// The column of each row's file metadata.
pub const METADATA_COLUMN: &str = "_metadata";

/// The column that keeps what did not fit (file rows, and JSON expanded by a route).
pub const RESCUED_COLUMN: &str = "_rescued_data";

/// Characters a column name may not hold (Delta tables without column mapping).
const BAD_NAME_CHARS: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];

/// Whether a name found in data can be a column (of a Delta table without column mapping).
pub fn usable_column_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(BAD_NAME_CHARS) && !name.chars().any(char::is_control)
}

/// The columns of a file source's dead-letter table, as SQL.
pub const ERRORS_COLUMNS_SQL: &str = "file_path text NOT NULL, file_modification_time timestamptz, line bigint, \
     raw_record text, error text NOT NULL";

/// The type of `_metadata`.
pub fn metadata_type() -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("file_path", DataType::Utf8, true),
        Field::new("file_name", DataType::Utf8, true),
        Field::new("file_size", DataType::Int64, true),
        Field::new("file_modification_time", timestamp_type(true), true),
        Field::new("line", DataType::Int64, true),
    ]))
}

/// The fields `schema` lacks to take `files`' rows, in the order they first appear: data
/// columns (their types inferred from all the files, and merged), partition columns,
/// `_rescued_data` and `_metadata`.
pub fn missing_fields(schema: &Schema, files: &[FileRows]) -> Vec<Field> {
    let mut taken: HashMap<String, usize> =
        schema.fields().iter().enumerate().map(|(i, f)| (f.name().to_lowercase(), i)).collect();
    let mut new: Vec<(String, DataType)> = Vec::new();
    let mut new_index: HashMap<String, usize> = HashMap::new();
    let mut add = |name: &str, data_type: DataType, new: &mut Vec<(String, DataType)>| {
        let lower = name.to_lowercase();
        if taken.contains_key(&lower) || lower == RESCUED_COLUMN || lower == METADATA_COLUMN {
            if let Some(&i) = new_index.get(&lower) {
                if let Some(field) = new.get_mut(i) {
                    field.1 = merge_types(&field.1, &data_type);
                }
            }
            return;
        }
        if !usable_column_name(name) {
            return;
        }
        taken.insert(lower.clone(), usize::MAX);
        new_index.insert(lower, new.len());
        new.push((name.to_string(), data_type));
    };
    for file in files.iter().filter(|f| f.rows() > 0) {
        for column in &file.columns {
            add(&column.name, column.new_column_type(), &mut new);
        }
    }
    for file in files.iter().filter(|f| f.rows() > 0) {
        for (key, value) in file.file.partitions() {
            let mut guess = TypeGuess::default();
            guess.add(&value);
            add(&key, guess.data_type(), &mut new);
        }
    }
    let mut fields: Vec<Field> = new.into_iter().map(|(name, data_type)| Field::new(name, data_type, true)).collect();
    if schema.field_with_name(RESCUED_COLUMN).is_err() {
        fields.push(Field::new(RESCUED_COLUMN, DataType::Utf8, true));
    }
    if schema.field_with_name(METADATA_COLUMN).is_err() {
        fields.push(Field::new(METADATA_COLUMN, metadata_type(), true));
    }
    fields
}

fn cast_options() -> CastOptions<'static> {
    CastOptions { safe: true, format_options: FormatOptions::default() }
}

/// The values that did not survive a cast: (row, the value as text).
fn lost_values(input: &ArrayRef, output: &ArrayRef) -> Result<Vec<(usize, String)>> {
    if input.null_count() == output.null_count() {
        return Ok(vec![]);
    }
    let formatter = ArrayFormatter::try_new(input.as_ref(), &FormatOptions::default())?;
    Ok((0..input.len())
        .filter(|&i| input.is_valid(i) && output.is_null(i))
        .map(|i| (i, formatter.value(i).to_string()))
        .collect())
}

fn metadata_array(file: &FileRows, data_type: &DataType) -> Result<ArrayRef> {
    let DataType::Struct(fields) = data_type else {
        return Err(Error::Plan(format!("column {METADATA_COLUMN} is not a struct; file sources need it for theirs")));
    };
    let rows = file.rows();
    let mut children: Vec<ArrayRef> = Vec::with_capacity(fields.len());
    for field in fields {
        let child: ArrayRef = match field.name().as_str() {
            "file_path" => Arc::new(StringArray::from(vec![file.file.location.as_str(); rows])),
            "file_name" => Arc::new(StringArray::from(vec![file.file.name(); rows])),
            "file_size" => Arc::new(Int64Array::from(vec![i64::try_from(file.file.size).unwrap_or(i64::MAX); rows])),
            "file_modification_time" => Arc::new(
                TimestampMicrosecondArray::from(vec![file.file.modified_ms.saturating_mul(1000); rows])
                    .with_timezone("UTC"),
            ),
            "line" => Arc::new(Int64Array::from(file.lines.clone())),
            _ => new_null_array(field.data_type(), rows),
        };
        children.push(cast_with_options(&child, field.data_type(), &cast_options())?);
    }
    Ok(Arc::new(StructArray::try_new(fields.clone(), children, None)?))
}

/// The rows of `files` in `schema` (which has every column [`missing_fields`] named), a batch
/// per file that has rows.
pub fn table_rows(schema: &SchemaRef, files: &[&FileRows]) -> Result<Vec<RecordBatch>> {
    files.iter().filter(|f| f.rows() > 0).map(|file| file_rows(schema, file)).collect()
}

fn file_rows(schema: &SchemaRef, file: &FileRows) -> Result<RecordBatch> {
    let rows = file.rows();
    let mut rescued: Vec<Option<serde_json::Map<String, serde_json::Value>>> = vec![None; rows];
    let mut keep = |lost: Vec<(usize, String)>, name: &str| {
        for (row, text) in lost {
            if let Some(slot) = rescued.get_mut(row) {
                slot.get_or_insert_with(Default::default).insert(name.to_string(), serde_json::Value::String(text));
            }
        }
    };
    let by_name: HashMap<String, usize> =
        file.columns.iter().enumerate().map(|(i, c)| (c.name.to_lowercase(), i)).collect();
    let partitions = file.file.partitions();
    let mut used = vec![false; file.columns.len()];
    let mut columns: Vec<Option<ArrayRef>> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let lower = field.name().to_lowercase();
        if lower == RESCUED_COLUMN {
            columns.push(None);
            continue;
        }
        if lower == METADATA_COLUMN {
            columns.push(Some(metadata_array(file, field.data_type())?));
            continue;
        }
        if let Some((index, column)) = by_name.get(&lower).and_then(|&i| Some((i, file.columns.get(i)?))) {
            if let Some(flag) = used.get_mut(index) {
                *flag = true;
            }
            let cast = cast_with_options(&column.values, field.data_type(), &cast_options())
                .unwrap_or_else(|_| new_null_array(field.data_type(), rows));
            keep(lost_values(&column.values, &cast)?, &column.name);
            columns.push(Some(cast));
            continue;
        }
        if let Some((key, value)) = partitions.iter().find(|(k, _)| k.to_lowercase() == lower) {
            let text: ArrayRef = Arc::new(StringArray::from(vec![value.as_str(); rows]));
            let cast = cast_with_options(&text, field.data_type(), &cast_options())
                .unwrap_or_else(|_| new_null_array(field.data_type(), rows));
            keep(lost_values(&text, &cast)?, key);
            columns.push(Some(cast));
            continue;
        }
        columns.push(Some(new_null_array(field.data_type(), rows)));
    }
    for (column, _) in file.columns.iter().zip(&used).filter(|(_, used)| !**used) {
        let nothing = new_null_array(column.values.data_type(), rows);
        keep(lost_values(&column.values, &nothing)?, &column.name);
    }
    let rescued: ArrayRef = Arc::new(StringArray::from(
        rescued.into_iter().map(|r| r.map(|m| serde_json::Value::Object(m).to_string())).collect::<Vec<_>>(),
    ));
    let columns: Vec<ArrayRef> = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, field)| match c {
            Some(c) => Ok(c),
            None => Ok(cast_with_options(&rescued, field.data_type(), &cast_options())?),
        })
        .collect::<Result<_>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The dead letters of `files` as rows of the dead-letter table (`schema`, the table's).
pub fn dead_letter_rows(schema: &SchemaRef, files: &[&FileRows]) -> Result<Vec<RecordBatch>> {
    let letters: Vec<(&FileRows, &super::decode::DeadLetter)> =
        files.iter().flat_map(|f| f.dead.iter().map(move |d| (*f, d))).collect();
    if letters.is_empty() {
        return Ok(vec![]);
    }
    let mut columns: Vec<ArrayRef> = Vec::new();
    for field in schema.fields() {
        let column: ArrayRef = match field.name().as_str() {
            "file_path" => {
                Arc::new(StringArray::from_iter_values(letters.iter().map(|(f, _)| f.file.location.as_str())))
            }
            "file_modification_time" => Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    letters.iter().map(|(f, _)| f.file.modified_ms.saturating_mul(1000)),
                )
                .with_timezone("UTC"),
            ),
            "line" => Arc::new(Int64Array::from(letters.iter().map(|(_, d)| d.line).collect::<Vec<_>>())),
            "raw_record" => Arc::new(StringArray::from(letters.iter().map(|(_, d)| d.raw.clone()).collect::<Vec<_>>())),
            "error" => Arc::new(StringArray::from_iter_values(letters.iter().map(|(_, d)| d.error.as_str()))),
            _ => new_null_array(field.data_type(), letters.len()),
        };
        columns.push(cast_with_options(&column, field.data_type(), &cast_options())?);
    }
    Ok(vec![RecordBatch::try_new(schema.clone(), columns)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::decode::decode;
    use crate::files::listing::FoundFile;
    use crate::files::options::FileOptions;
    use arrow::array::AsArray;

    fn text_at(array: &ArrayRef, row: usize) -> Option<String> {
        (array.is_valid(row)).then(|| array.as_string::<i32>().value(row).to_string())
    }

    #[test]
    fn rows_fit_the_table_and_keep_what_does_not() {
        let options = FileOptions::parse(
            &[("path", "x"), ("format", "csv")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        )
        .unwrap();
        let file = FoundFile {
            relative: "day=2026-12-01/a.csv".into(),
            location: "/l/day=2026-12-01/a.csv".into(),
            size: 10,
            modified_ms: 1_000,
        };
        let first = decode(file.clone(), bytes::Bytes::from_static(b"id,name\n1,ann\n2,bob\n"), &options);
        let fields = missing_fields(&Schema::empty(), std::slice::from_ref(&first));
        let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name", "day", RESCUED_COLUMN, METADATA_COLUMN]);
        assert_eq!(fields[0].data_type(), &DataType::Int64);
        assert_eq!(fields[2].data_type(), &DataType::Date32);
        let schema = Arc::new(Schema::new(fields));
        // A later file: a value that is not a number, and a new column.
        let second = decode(file, bytes::Bytes::from_static(b"id,name,extra\nx,cy,1\n"), &options);
        let more = missing_fields(&schema, std::slice::from_ref(&second));
        assert_eq!(more.iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["extra"]);
        let batches = table_rows(&schema, &[&first, &second]).unwrap();
        let rows = arrow::compute::concat_batches(&schema, &batches).unwrap();
        assert_eq!(rows.num_rows(), 3);
        let ids = rows.column(0).as_primitive::<arrow::datatypes::Int64Type>();
        assert!(ids.is_null(2));
        assert_eq!(text_at(rows.column(3), 2).as_deref(), Some(r#"{"extra":"1","id":"x"}"#));
        let metadata = rows.column(4).as_struct();
        let lines = metadata.column_by_name("line").unwrap().as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(lines.values().to_vec(), vec![2, 3, 2]);
    }
}
