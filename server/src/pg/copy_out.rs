//! COPY TO: rows encoded in Postgres' text, CSV or binary COPY formats (values encoded by
//! arrow-pg; times in PostgreSQL's text, and `uuid`, `jsonb` and `timetz` in their binary forms),
//! to the client or to a server-side file; and the typed side of COPY FROM (text columns cast to
//! the table's types).

use std::io::Write;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BinaryBuilder, RecordBatch, StringArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow_pg::datatypes::arrow_schema_to_pg_fields;
use arrow_pg::encoder::{encode_value, Encoder};
use bytes::Bytes;
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyCsvOptions, CopyEncoder, CopyResponse, CopyTextOptions, Response};
use pgwire::error::PgWireResult;
use pgwire::messages::copy::CopyData;

use super::copy::{normalize_text, CopyFormat, CopyOptions};
use super::encode::user_error;

/// Encodes rows as COPY data messages (a header line first for CSV with HEADER).
pub fn encode(schema: &SchemaRef, batches: &[RecordBatch], options: &CopyOptions) -> PgWireResult<Vec<CopyData>> {
    let format = if options.format == CopyFormat::Binary { Format::UnifiedBinary } else { Format::UnifiedText };
    let fields =
        Arc::new(super::wire_types::with_declared_types(schema, arrow_schema_to_pg_fields(schema, &format, None)?));
    let mut encoder = match options.format {
        CopyFormat::Text => CopyEncoder::new_text(
            fields.clone(),
            CopyTextOptions {
                delimiter: (options.delimiter as char).to_string().into(),
                null_string: options.null.clone().into(),
            },
        ),
        CopyFormat::Csv => CopyEncoder::new_csv(
            fields.clone(),
            CopyCsvOptions {
                delimiter: (options.delimiter as char).to_string().into(),
                quote: (options.quote as char).to_string().into(),
                escape: (options.escape as char).to_string().into(),
                null_string: options.null.clone().into(),
                force_quote: vec![],
            },
        ),
        CopyFormat::Binary => CopyEncoder::new_binary(fields.clone()),
    };
    let mut out = Vec::new();
    if options.format == CopyFormat::Csv && options.header {
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        out.push(CopyData::new(Bytes::from(format!("{}\n", names.join(&(options.delimiter as char).to_string())))));
    }
    for batch in batches {
        let batch = match options.format {
            CopyFormat::Binary => super::wire_types::binary_forms(batch.clone(), &format),
            CopyFormat::Text | CopyFormat::Csv => text_forms(batch),
        }
        .map_err(|e| user_error("22P03", e.to_string()))?;
        let batch_schema = batch.schema();
        for row in 0..batch.num_rows() {
            for (index, (column, pg_field)) in batch.columns().iter().zip(fields.iter()).enumerate() {
                encode_value(&mut encoder, column, row, batch_schema.field(index), pg_field)?;
            }
            out.push(Encoder::take_row(&mut encoder));
        }
    }
    Ok(out)
}

/// `batch` with its `time` columns as PostgreSQL's text (`12:57:18.5`; arrow-pg keeps six digits)
/// and its numerics as `text::numerics` prints them.
fn text_forms(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let schema = batch.schema();
    let rendered = |t: &DataType| matches!(t, DataType::Time32(_) | DataType::Time64(_) | DataType::Decimal128(..));
    if !schema.fields().iter().any(|f| rendered(f.data_type())) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if let DataType::Decimal128(..) = field.data_type() {
            fields.push(field.as_ref().clone().with_data_type(DataType::Utf8));
            columns.push(sluice::types::decimal_column_text(column)?);
        } else if matches!(field.data_type(), DataType::Time32(_) | DataType::Time64(_)) {
            let text = sluice::time_of_day::time_column_text(column)
                .map_err(|e| arrow::error::ArrowError::CastError(e.to_string()))?;
            fields.push(field.as_ref().clone().with_data_type(DataType::Utf8));
            columns.push(text);
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
}

/// The response to `COPY ... TO STDOUT`.
pub fn response(schema: &SchemaRef, batches: Vec<RecordBatch>, options: &CopyOptions) -> PgWireResult<Response> {
    let data = encode(schema, &batches, options)?;
    let code = if options.format == CopyFormat::Binary { 1 } else { 0 };
    Ok(Response::CopyOut(CopyResponse::new(
        code,
        schema.fields().len(),
        futures::stream::iter(data.into_iter().map(Ok)),
    )))
}

/// `COPY ... TO 'file'`; returns the rows written.
pub fn write_file(
    path: &std::path::Path,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    options: &CopyOptions,
) -> PgWireResult<usize> {
    let data = encode(schema, &batches, options)?;
    let mut file = std::fs::File::create(path)
        .map_err(|e| user_error("58P01", format!("could not open file \"{}\": {e}", path.display())))?;
    for chunk in &data {
        file.write_all(&chunk.data)
            .map_err(|e| user_error("58030", format!("could not write \"{}\": {e}", path.display())))?;
    }
    if options.format == CopyFormat::Binary {
        file.write_all(&[0xFF, 0xFF]).map_err(|e| user_error("58030", e.to_string()))?;
    }
    Ok(batches.iter().map(|b| b.num_rows()).sum())
}

/// Casts a batch of text columns (as parsed from COPY data) to the target schema. Dates, times
/// and timestamps stay text: the engine reads them as PostgreSQL's input does, in the session's
/// DateStyle order (`02/01/2024` is January 2 with MDY, February 1 with DMY).
pub fn cast_text_batch(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, String> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    let mut fields = Vec::with_capacity(target.fields().len());
    for (column, field) in batch.columns().iter().zip(target.fields()) {
        let text = column.as_string::<i32>();
        if matches!(field.data_type(), DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)) {
            columns.push(column.clone());
            fields.push(field.as_ref().clone().with_data_type(DataType::Utf8));
            continue;
        }
        fields.push(field.as_ref().clone());
        let typed = match field.data_type() {
            DataType::Utf8 => column.clone(),
            DataType::Binary => Arc::new(decode_bytea(text)?),
            DataType::Null => new_null_array(&DataType::Null, column.len()),
            data_type => {
                let normalized: StringArray = text.iter().map(|v| v.map(|s| normalize_text(s, data_type))).collect();
                let normalized: ArrayRef = Arc::new(normalized);
                cast_with_options(&normalized, data_type, &CastOptions { safe: false, ..Default::default() })
                    .map_err(|e| format!("column \"{}\": {e}", field.name()))?
            }
        };
        columns.push(typed);
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    let schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, target.metadata().clone()));
    RecordBatch::try_new_with_options(schema, columns, &options).map_err(|e| e.to_string())
}

fn decode_bytea(text: &arrow::array::StringArray) -> Result<arrow::array::BinaryArray, String> {
    let mut builder = BinaryBuilder::new();
    for value in text.iter() {
        match value {
            None => builder.append_null(),
            Some(v) => match v.strip_prefix("\\x") {
                Some(hex) => {
                    let bytes: Result<Vec<u8>, _> = (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
                        .collect();
                    builder.append_value(bytes.map_err(|_| format!("invalid bytea \"{v}\""))?);
                }
                None => builder.append_value(v.as_bytes()),
            },
        }
    }
    Ok(builder.finish())
}
