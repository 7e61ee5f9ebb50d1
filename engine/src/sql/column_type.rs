//! `ALTER TABLE t ALTER COLUMN c [SET DATA] TYPE type [USING expr]`.
//!
//! As PostgreSQL does: without USING, only a change a value converts by itself is allowed
//! (between numeric types, between date and time types, to text, or the same type with another
//! length); anything else is 42804 with the USING hint. A change of the Delta type rewrites the
//! table in one commit (an overwrite whose files and metadata have the new type); a change of
//! the declared type alone (`varchar(5)` → `varchar(20)`, `text` → `varchar(3)` after checking
//! the lengths) commits new metadata only. Keys on the column are checked on the new values.
//! A change to or from `time` or `timetz` rewrites the values through the cast to the new type
//! (PostgreSQL's text of a time, a `timetz`'s offset, a precision's rounding).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use datafusion::sql::sqlparser::ast::{DataType as SqlType, Expr as SqlExpr, ObjectName};
use serde_json::Value;
use sluice_storage::schema::{DataType, PrimitiveType, StructField};
use sluice_storage::table::Table;
use sluice_storage::write::{SaveMode, WriteRequest};

use super::context::QueryContext;
use crate::catalog::TableEntry;
use crate::error::{Error, Result};
use crate::types::DECLARED_TYPE_KEY;

/// The name of the rewritten column in the rewrite's query.
const NEW_VALUE_COLUMN: &str = "__sluice_new_value";

impl QueryContext {
    pub(crate) async fn set_column_type(
        &self,
        object: &ObjectName,
        entry: &TableEntry,
        table: &Arc<Table>,
        column: &str,
        sql_type: &SqlType,
        using: Option<&SqlExpr>,
    ) -> Result<()> {
        let declared = crate::types::declared_type(sql_type)?;
        let guard = self.lock_table_keys(&entry.id, table).await?;
        let snapshot = guard.snapshot().clone();
        let old =
            snapshot.schema().field(column).cloned().ok_or_else(|| Error::undefined_column_of(column, &entry.name))?;
        if snapshot.partition_columns().iter().any(|p| p == column) {
            return Err(Error::NotSupported(format!("ALTER COLUMN ... TYPE of partition column \"{column}\"")));
        }
        if crate::identity::Identity::of(&old).is_some() {
            return Err(Error::NotSupported(format!("ALTER COLUMN ... TYPE of identity column \"{column}\"")));
        }
        let mut new = old.clone();
        new.data_type = declared.data_type.clone();
        match &declared.declared {
            Some(name) => new.metadata.insert(DECLARED_TYPE_KEY.into(), Value::String(name.clone())),
            None => new.metadata.remove(DECLARED_TYPE_KEY),
        };
        let time_change = time_kind(&old).is_some() || time_kind(&new).is_some();
        let converts = if time_change {
            time_converts_by_itself(&old, &new)
        } else {
            converts_by_itself(&old.data_type, &new.data_type)
        };
        if using.is_none() && !converts {
            return Err(Error::data(
                "42804",
                format!(
                    "column \"{column}\" cannot be cast automatically to type {} (you might need to specify \"USING \
                     {column}::{}\")",
                    crate::types::pg_type_name(&new),
                    crate::types::pg_type_name(&new)
                ),
            ));
        }
        let mut schema = snapshot.schema().clone();
        if let Some(field) = schema.fields.iter_mut().find(|f| f.name == column) {
            *field = new.clone();
        }
        let quoted = datafusion::sql::sqlparser::ast::Ident::with_quote('"', column).to_string();
        let same_values = !time_change || time_kind(&old) == time_kind(&new) && precision(&old) == precision(&new);
        if old.data_type == new.data_type && using.is_none() && same_values {
            // Same values: only a shorter length limit needs a look at them.
            if let Some((limit, _)) = crate::types::length_limit(&new) {
                let sql = format!("SELECT {quoted} FROM {object} WHERE char_length({quoted}) > {limit} LIMIT 1");
                let rows = self.run_sql_text(&sql).await?;
                for batch in rows.iter().filter(|b| b.num_rows() > 0) {
                    crate::types::enforce_length(&new, batch.column(0))?;
                }
            }
            let partitions = snapshot.partition_columns().to_vec();
            let configuration = snapshot.configuration().clone();
            let outcome = table.update_metadata(&snapshot, schema, partitions, configuration, "CHANGE COLUMN").await?;
            self.metadata_committed(entry, outcome).await?;
            return guard.committed().await;
        }
        let mut expression = using.map(|e| e.to_string()).unwrap_or_else(|| quoted.clone());
        if time_change {
            // A time's text, a `timetz`'s offset, a precision's rounding: as the cast makes them.
            expression = format!("CAST(({expression}) AS {sql_type})");
        }
        let sql = format!("SELECT *, ({expression}) AS {NEW_VALUE_COLUMN} FROM {object}");
        let batches = self.run_sql_text(&sql).await?;
        let arrow_schema = Arc::new(schema.to_arrow());
        let position = schema.index_of(column).ok_or_else(|| Error::Internal("the column went".into()))?;
        let mut rewritten = Vec::with_capacity(batches.len());
        for batch in &batches {
            let value = batch
                .column_by_name(NEW_VALUE_COLUMN)
                .ok_or_else(|| Error::Internal("the rewrite lost its value".into()))?;
            let target = arrow_schema.field(position).data_type();
            let cast = if target.is_integer() && value.data_type().is_numeric() {
                // Rounded as PostgreSQL rounds, 22003 when out of range.
                crate::functions::arithmetic::to_integer(value, target)?
            } else {
                let options = arrow::compute::CastOptions { safe: false, ..Default::default() };
                arrow::compute::cast_with_options(value, target, &options)?
            };
            let cast = crate::types::enforce_length(&new, &cast)?;
            if !new.nullable && cast.null_count() > 0 {
                return Err(Error::NotNullViolation { table: entry.name.clone(), column: column.to_string() });
            }
            // The table's columns as read, the changed one replaced (the write conforms them).
            let width = arrow_schema.fields().len();
            let read = batch.schema();
            let fields: Vec<arrow::datatypes::FieldRef> =
                (0..width)
                    .map(|i| {
                        if i == position {
                            Arc::new(arrow_schema.field(i).clone())
                        } else {
                            read.field(i).clone().into()
                        }
                    })
                    .collect();
            let columns: Vec<ArrayRef> =
                (0..width).map(|i| if i == position { cast.clone() } else { batch.column(i).clone() }).collect();
            rewritten.push(RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)?);
        }
        let unique = crate::keys::unique_defs(snapshot.configuration());
        if unique.iter().any(|k| k.columns.iter().any(|c| c == column)) {
            crate::keys::TableKeys::for_schema(&schema, unique)?.check(&entry.name, None, &rewritten)?;
        }
        let request = WriteRequest {
            batches: rewritten,
            mode: SaveMode::Overwrite,
            operation: Some("CHANGE COLUMN".into()),
            schema: Some(schema),
            reads_data: true,
            ..Default::default()
        };
        let outcome = table.write_on(&snapshot, request).await?;
        self.db.writer.commit(&entry.qualified_name(), crate::change::Operation::Write, None, outcome).await?;
        guard.committed().await
    }
}

/// Whether PostgreSQL converts a value of type `from` to `to` in ALTER COLUMN TYPE without a
/// USING clause (an implicit or assignment cast).
fn converts_by_itself(from: &DataType, to: &DataType) -> bool {
    use PrimitiveType as P;
    let (DataType::Primitive(from), DataType::Primitive(to)) = (from, to) else { return from == to };
    let numeric =
        |p: &P| matches!(p, P::Byte | P::Short | P::Integer | P::Long | P::Float | P::Double | P::Decimal { .. });
    let time = |p: &P| matches!(p, P::Date | P::Timestamp | P::TimestampNtz);
    from == to || matches!(to, P::String) || (numeric(from) && numeric(to)) || (time(from) && time(to))
}

/// Whether a column holds times of day: `Some(false)` for `time`, `Some(true)` for `timetz`.
fn time_kind(field: &StructField) -> Option<bool> {
    let declared = field.metadata.get(DECLARED_TYPE_KEY).and_then(Value::as_str);
    if field.is_time_of_day() {
        Some(false)
    } else {
        declared.filter(|d| crate::time_of_day::is_timetz(d)).map(|_| true)
    }
}

fn precision(field: &StructField) -> Option<u32> {
    field.metadata.get(DECLARED_TYPE_KEY).and_then(Value::as_str).and_then(crate::time_of_day::precision_of)
}

/// [`converts_by_itself`] where `time` or `timetz` is one side: to text, between the two, and
/// from timestamps (PostgreSQL's assignment casts).
fn time_converts_by_itself(old: &StructField, new: &StructField) -> bool {
    use PrimitiveType as P;
    let text = new.data_type == DataType::Primitive(P::String) && time_kind(new).is_none();
    let timestamp = matches!(old.data_type, DataType::Primitive(P::Timestamp | P::TimestampNtz));
    text || (time_kind(old).is_some() && time_kind(new).is_some()) || (timestamp && time_kind(new).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_conversions_postgres_makes_by_itself_need_no_using() {
        let p = |p| DataType::Primitive(p);
        assert!(converts_by_itself(&p(PrimitiveType::Integer), &p(PrimitiveType::Long)));
        assert!(converts_by_itself(&p(PrimitiveType::Double), &p(PrimitiveType::Integer)));
        assert!(converts_by_itself(&p(PrimitiveType::Boolean), &p(PrimitiveType::String)));
        assert!(converts_by_itself(&p(PrimitiveType::Date), &p(PrimitiveType::TimestampNtz)));
        assert!(!converts_by_itself(&p(PrimitiveType::String), &p(PrimitiveType::Integer)));
        assert!(!converts_by_itself(&p(PrimitiveType::Boolean), &p(PrimitiveType::Integer)));
        assert!(!converts_by_itself(&p(PrimitiveType::Date), &p(PrimitiveType::Integer)));
    }
}
