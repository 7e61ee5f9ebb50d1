//! One flow run's SQL work, done through the flow's own session: the flow's query over the rows a
//! run read from its source, and the write of its output to the target with the run's txn.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::datasource::MemTable;
use sluice_storage::actions::Txn;
use sluice_storage::write::SaveMode;

use super::query::{bind_source, SOURCE_RELATION};
use crate::catalog::FlowEntry;
use crate::change::{ColumnMatch, WriteContext, Written};
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;
use crate::syntax::parser::{parse_statement_text, SluiceStatement};

/// Runs a flow's query over `rows` of its source.
pub(crate) async fn flow_output(
    cx: &QueryContext,
    flow: &FlowEntry,
    source_schema: SchemaRef,
    rows: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    cx.clear_statement_state();
    let SluiceStatement::Standard(statement) = parse_statement_text(&flow.query)? else {
        return Err(Error::Internal(format!("flow {} has no query", flow.name)));
    };
    let mut statement = *statement;
    let others = bind_source(&mut statement, &flow.source)?;
    cx.temp.insert(SOURCE_RELATION, Arc::new(MemTable::try_new(source_schema, vec![rows])?));
    let state = cx.db.catalog.current();
    for (key, relation) in others {
        let entry = state.tables.get(&key).ok_or_else(|| Error::UndefinedTable(key.clone()))?;
        let schema = cx.db.open_table(entry).await?.snapshot().await?.arrow_schema();
        cx.temp.insert(&relation, Arc::new(MemTable::try_new(schema, vec![vec![]])?));
    }
    let plan = cx.plan_statement(statement).await?;
    let output = cx.ctx.execute_logical_plan(plan).await?.collect().await;
    cx.clear_statement_state();
    Ok(output?)
}

/// Appends a flow's output to its target in one commit carrying `txn`, then runs the target's
/// own flows. `applied` is the flow's txn version the run started from.
pub(crate) async fn write_flow_output(
    cx: &QueryContext,
    target_key: &str,
    output: Vec<RecordBatch>,
    by_name: bool,
    txn: Txn,
    applied: Option<i64>,
    source_version: u64,
) -> Result<Written> {
    cx.clear_statement_state();
    let name = crate::names::parse_table_name(target_key)?;
    let object = crate::names::object_name(&name.schema, &name.name);
    let target = cx.target(&object).await?;
    // The run decided what to apply from `applied`; if the target's log says otherwise now,
    // another runner got there first: retry from the log.
    if target.snapshot.txn_version(&txn.app_id) != applied {
        cx.clear_statement_state();
        return Err(Error::SerializationFailure(format!(
            "flow {} was applied concurrently to {target_key}",
            txn.app_id
        )));
    }
    let columns = if by_name {
        ColumnMatch::ByName
    } else {
        ColumnMatch::Position(target.snapshot.schema().fields.iter().map(|f| f.name.clone()).collect())
    };
    let context = WriteContext { txns: vec![txn], source_version: Some(source_version), commit_empty: false };
    let written = cx.write_rows_with(&target, output, columns, SaveMode::Append, context).await;
    cx.clear_statement_state();
    written
}
