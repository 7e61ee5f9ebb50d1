//! The statements that define AUTO CDC flows: `CREATE FLOW f AS AUTO CDC INTO target ...` and
//! `CREATE STREAMING TABLE target FLOW AUTO CDC ...` (see [`super::cdc`] for what a run does).
//!
//! At CREATE the clauses are checked against the source (the keys and listed columns exist, the
//! sequence can be ordered, TRUNCATE only with SCD 1), a missing target is created with the
//! chosen columns (and `__START_AT`, `__END_AT` for SCD 2), an existing one gains the columns it
//! lacks (a streaming table declared without columns), and the target's state table is created.

use datafusion::sql::sqlparser::ast::{ObjectName, Query, Statement};

use super::cdc::{
    check_spec, data_columns, layout_check, state_table_name, END_AT, START_AT, STATE_DELETED, STATE_SEQUENCE,
    STATE_UPDATED,
};
use super::cdc_history::STATE_HISTORY;
use super::query::{key_of, stream_sources, unstream};
use crate::catalog::{CdcSpec, FlowEntry, FlowMode, FlowSyntax};
use crate::error::{Error, Result};
use crate::names::{quoted, table_name};
use crate::sql::context::QueryContext;
use crate::syntax::cdc::SEQUENCE_COLUMN;
use crate::syntax::parser::{parse_statement_text, CreateTable, SluiceStatement};

fn parse_query(text: &str) -> Result<Query> {
    match parse_statement_text(text)? {
        SluiceStatement::Standard(statement) => match *statement {
            Statement::Query(query) => Ok(*query),
            _ => Err(Error::Internal("not a query".into())),
        },
        _ => Err(Error::Internal("not a query".into())),
    }
}

/// The arrow schema of a flow query's output (STREAM(x) read as x).
async fn output_schema(cx: &QueryContext, query: &Query) -> Result<arrow::datatypes::Schema> {
    let mut query = query.clone();
    unstream(&mut query);
    let planned = cx.plan_statement(Statement::Query(Box::new(query))).await;
    cx.clear_statement_state();
    Ok(planned?.schema().as_arrow().clone())
}

/// Checks an AUTO CDC flow, creates or completes its target and creates its state table;
/// returns the flow to commit.
pub(crate) async fn define(
    cx: &QueryContext,
    flow_name: &str,
    target: &ObjectName,
    spec: &CdcSpec,
    query: &Query,
    mode: FlowMode,
    syntax: FlowSyntax,
) -> Result<FlowEntry> {
    let sources = stream_sources(query)?;
    let [source] = sources.as_slice() else {
        return Err(Error::Internal(format!("AUTO CDC flow {flow_name} must read one source")));
    };
    let input = output_schema(cx, query).await?;
    check_spec(&input, spec)?;
    let chosen = data_columns(&input, spec)?;
    let mut shape: Vec<String> = chosen.iter().map(|c| quoted(c)).collect();
    if spec.scd_type == 2 {
        shape.push(format!("{SEQUENCE_COLUMN} AS {}", quoted(START_AT)));
        shape.push(format!("{SEQUENCE_COLUMN} AS {}", quoted(END_AT)));
    }
    let shape = format!("SELECT {} FROM ({query}) AS __cdc_input", shape.join(", "));
    let target_key = key_of(target)?;
    if cx.db.catalog.current().tables.contains_key(&target_key) {
        super::expand::add_missing_columns(cx, &target_key, &shape).await?;
    } else {
        super::ddl::create_for_output(cx, target, &parse_query(&shape)?).await?;
    }
    let name = table_name(target)?;
    let object = crate::names::object_name(&name.schema, &name.name);
    let checked = cx.target(&object).await;
    cx.clear_statement_state();
    layout_check(&checked?.snapshot.arrow_schema(), &input, spec)?;
    let state = crate::names::object_name(&name.schema, &state_table_name(&name.name));
    let state_key = key_of(&state)?;
    if !cx.db.catalog.current().tables.contains_key(&state_key) {
        let keys: Vec<String> = spec.keys.iter().map(|k| quoted(k)).collect();
        // SCD 2 keeps each key's events beside its latest sequence (see cdc_history).
        let history = if spec.scd_type == 2 { format!(", NULL::bytea AS {STATE_HISTORY}") } else { String::new() };
        let mut state_query = parse_query(&format!(
            "SELECT {}, {SEQUENCE_COLUMN} AS {STATE_SEQUENCE}, true AS {STATE_DELETED}, 0::bigint AS {STATE_UPDATED}{history} \
             FROM ({query}) AS __cdc_input LIMIT 0",
            keys.join(", ")
        ))?;
        unstream(&mut state_query);
        cx.create_table(CreateTable { query: Some(Box::new(state_query)), ..CreateTable::new(state) }).await?;
    }
    Ok(FlowEntry {
        name: flow_name.to_string(),
        source: source.clone(),
        target: target_key,
        query: query.to_string(),
        syntax,
        mode,
        by_name: true,
        else_route: false,
        predicate: None,
        expand_json: None,
        cdc: Some(spec.clone()),
        changes: super::query::change_streams(query)?.contains(source),
        evolve: false,
        created_ms: super::now_ms(),
    })
}
