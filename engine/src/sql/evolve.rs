//! Columns that data brings: a table gains the fields it lacks as nullable columns, in one
//! `ADD COLUMNS` commit (JSON expanded by a route, file sources, per-value routes, AUTO CDC).

use sluice_storage::schema::{DataType as DeltaType, StructField};

use super::context::QueryContext;
use crate::change::Operation;
use crate::error::Result;

/// Adds to a table the `fields` it lacks, as nullable columns, in one `ADD COLUMNS` commit.
pub(crate) async fn add_columns(cx: &QueryContext, target_key: &str, fields: &arrow::datatypes::Fields) -> Result<()> {
    let name = crate::names::parse_table_name(target_key)?;
    let target = cx.target(&crate::names::object_name(&name.schema, &name.name)).await;
    cx.clear_statement_state();
    let target = target?;
    let mut schema = target.snapshot.schema().clone();
    let before = schema.fields.len();
    for field in fields {
        if schema.field(field.name()).is_none() {
            let data_type = DeltaType::from_arrow(field.data_type())?;
            schema.fields.push(StructField::new(field.name().clone(), data_type, true));
        }
    }
    if schema.fields.len() > before {
        let outcome = target.table.set_schema(&target.snapshot, schema, "ADD COLUMNS").await?;
        cx.db.writer.commit(target_key, Operation::Metadata, None, outcome).await?;
    }
    Ok(())
}
