//! Turning Sluice results and errors into Postgres protocol responses (row encoding itself is
//! arrow-pg's): row descriptions and data rows in text or binary, command tags, and errors with
//! their SQLSTATE.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use futures::stream;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::types::format::FormatOptions;
use sluice::StatementResult;

/// A Sluice error as the client sees it.
pub fn error(e: &sluice::Error) -> PgWireError {
    let mut info = ErrorInfo::new("ERROR".into(), e.sqlstate().into(), e.to_string());
    info.detail = e.detail();
    PgWireError::UserError(Box::new(info))
}

/// An error with an explicit SQLSTATE.
pub fn user_error(sqlstate: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".into(), sqlstate.into(), message.into())))
}

/// The row description of a schema in the requested formats.
pub fn fields(
    schema: &SchemaRef,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
) -> Result<Vec<FieldInfo>, PgWireError> {
    let fields = arrow_schema_to_pg_fields(&one_dimensional(schema), format, options)?;
    Ok(super::wire_types::with_declared_types(schema, fields))
}

/// The schema with each list of lists (a multidimensional array) described as a list of its
/// innermost type: PostgreSQL's array types do not count dimensions (`text[][]` is `_text`).
fn one_dimensional(schema: &SchemaRef) -> SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    let nested = |t: &DataType| matches!(t, DataType::List(e) if matches!(e.data_type(), DataType::List(_)));
    if !schema.fields().iter().any(|f| nested(f.data_type())) {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut element = f.data_type().clone();
            while let DataType::List(inner) = &element {
                if !matches!(inner.data_type(), DataType::List(_)) {
                    break;
                }
                element = inner.data_type().clone();
            }
            f.as_ref().clone().with_data_type(element)
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Rows as a query response.
pub fn rows(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
) -> Result<Response, PgWireError> {
    let text_options = options.clone().unwrap_or_default();
    let fields = Arc::new(fields(schema, format, options)?);
    // A multidimensional array is sent as its text (see text::render), which the encoder must
    // not quote as it quotes a string element of an array type.
    let field_ref = Arc::new(
        fields
            .iter()
            .zip(schema.fields())
            .enumerate()
            .map(|(i, (info, field))| match field.data_type() {
                arrow::datatypes::DataType::List(e)
                    if matches!(e.data_type(), arrow::datatypes::DataType::List(_))
                        && super::text::is_text(format, i) =>
                {
                    FieldInfo::new(
                        info.name().to_string(),
                        info.table_id(),
                        info.column_id(),
                        pgwire::api::Type::TEXT,
                        info.format(),
                    )
                    .with_format_options(info.format_options().clone())
                }
                _ => info.clone(),
            })
            .collect::<Vec<_>>(),
    );
    let format = format.clone();
    let rows = batches.into_iter().flat_map(move |batch| {
        // PostgreSQL's text forms where arrow-pg's differ; arrow-pg's own if that fails.
        let batch = super::text::render(batch.clone(), &format, &text_options).unwrap_or(batch);
        let batch = match super::wire_types::binary_forms(batch, &format) {
            Ok(batch) => batch,
            Err(e) => {
                return Box::new(std::iter::once(Err(PgWireError::ApiError(Box::new(e)))))
                    as Box<dyn Iterator<Item = Result<pgwire::messages::data::DataRow, PgWireError>> + Send>
            }
        };
        Box::new(encode_recordbatch(field_ref.clone(), batch))
    });
    Ok(Response::Query(QueryResponse::new(fields, stream::iter(rows))))
}

/// A command's tag (`INSERT 0 3`, `UPDATE 2`, `CREATE TABLE`, ...).
pub fn tag(text: &str) -> Tag {
    let mut words = text.split_whitespace();
    let command = words.next().unwrap_or("OK");
    let numbers: Vec<usize> = words.filter_map(|w| w.parse().ok()).collect();
    match (command, numbers.as_slice()) {
        ("INSERT", [oid, rows]) => Tag::new("INSERT").with_oid(*oid as u32).with_rows(*rows),
        (_, [rows]) => Tag::new(command).with_rows(*rows),
        _ => Tag::new(text),
    }
}

/// The response to a statement's result; `in_block`: whether the session is in a transaction
/// block after it (a transaction-control statement's response tells pgwire the client's state).
pub fn response(
    result: StatementResult,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
    in_block: bool,
) -> Result<Response, PgWireError> {
    match result {
        StatementResult::Rows { schema, batches } => rows(&schema, batches, format, options),
        StatementResult::Returned { tag: text, schema, batches } => {
            let mut response = rows(&schema, batches, format, options)?;
            if let Response::Query(query) = &mut response {
                // pgwire appends the count of rows sent, which RETURNING makes the count of rows
                // the command affected.
                let command = text.rsplit_once(' ').map(|(head, _)| head).unwrap_or(&text);
                query.set_command_tag(command);
            }
            Ok(response)
        }
        StatementResult::Command { tag: text, .. } => Ok(match text.as_str() {
            // ROLLBACK TO SAVEPOINT, COMMIT AND CHAIN and a BEGIN inside a block leave the
            // client in one.
            "BEGIN" | "START TRANSACTION" | "COMMIT" | "ROLLBACK" if in_block => {
                Response::TransactionStart(Tag::new(&text))
            }
            "BEGIN" | "START TRANSACTION" | "COMMIT" | "ROLLBACK" => Response::TransactionEnd(Tag::new(&text)),
            _ => Response::Execution(tag(&text)),
        }),
    }
}
