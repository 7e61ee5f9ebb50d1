//! The statements that define flows: CREATE STREAMING TABLE (with PUSH INTO routes, or AS a query
//! over `STREAM(src)`), CREATE FLOW, ALTER STREAMING TABLE ... ADD/DROP PUSH INTO, ALTER FLOW ...
//! RESUME, REFRESH STREAMING TABLE, EXPLAIN FLOW and DROP FLOW.
//!
//! Every flow is checked when it is defined: its source exists, it closes no cycle, and its
//! output fits its target by name (a missing target is created with the output's columns). A new
//! flow then runs at once, so the target holds the source's existing rows when the statement
//! returns.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{ObjectName, Query, Statement};

use super::query::{change_streams, else_query, key_of, query_predicate, route_query, stream_sources, unstream};
use super::FlowRuntime;
use crate::catalog::{key, Expectation, FlowEntry, FlowMode, FlowSyntax, TableKind};
use crate::change::Operation;
use crate::error::{Error, Result};
use crate::names::table_name;
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::parser::{parse_statement_text, CreateTable, SluiceStatement};
use crate::syntax::streaming::{AlterStreaming, CreateFlow, CreateStreamingTable, PushRoute};

pub(super) fn mode_of(options: &[(String, String)]) -> Result<FlowMode> {
    match options.iter().find(|(k, _)| k.eq_ignore_ascii_case("mode")).map(|(_, v)| v.to_ascii_lowercase()) {
        None => Ok(FlowMode::Sync),
        Some(m) if m == "sync" => Ok(FlowMode::Sync),
        Some(m) if m == "async" => Ok(FlowMode::Async),
        Some(other) => Err(Error::Plan(format!("mode must be 'sync' or 'async', not '{other}'"))),
    }
}

fn flow_not_found(name: &str) -> Error {
    Error::UndefinedObject { kind: "flow", name: name.to_string() }
}

/// `SELECT * FROM (query) LIMIT 0`, with STREAM(x) read as x: the query a new target is
/// created from.
fn empty_output_query(query: &Query) -> Result<Query> {
    let mut query = query.clone();
    unstream(&mut query);
    let text = format!("SELECT * FROM ({query}) AS __flow_output LIMIT 0");
    match parse_statement_text(&text)? {
        SluiceStatement::Standard(statement) => match *statement {
            Statement::Query(query) => Ok(*query),
            _ => Err(Error::Internal("not a query".into())),
        },
        _ => Err(Error::Internal("not a query".into())),
    }
}

/// Creates a streaming table with the columns of a query's output.
pub(super) async fn create_for_output(cx: &QueryContext, name: &ObjectName, query: &Query) -> Result<()> {
    let empty = empty_output_query(query)?;
    let create = CreateTable { query: Some(Box::new(empty)), ..CreateTable::new(name.clone()) };
    cx.create_table(create).await?;
    mark_streaming(cx, &key_of(name)?, vec![], BTreeMap::new()).await
}

/// Creates a streaming table without columns (they come with its first rows).
pub(super) async fn create_empty_streaming(cx: &QueryContext, name: &ObjectName) -> Result<()> {
    cx.create_table(CreateTable { columns_later: true, ..CreateTable::new(name.clone()) }).await?;
    mark_streaming(cx, &key_of(name)?, vec![], BTreeMap::new()).await
}

async fn mark_streaming(
    cx: &QueryContext,
    table_key: &str,
    expectations: Vec<Expectation>,
    options: BTreeMap<String, String>,
) -> Result<()> {
    cx.db
        .catalog
        .update(|state| {
            let entry = state.tables.get_mut(table_key).ok_or_else(|| Error::UndefinedTable(table_key.into()))?;
            entry.kind = TableKind::StreamingTable;
            entry.expectations = expectations.clone();
            entry.options = options.clone();
            Ok(())
        })
        .await?;
    Ok(())
}

/// Checks that a query's output fits an existing target by name.
async fn check_fits(cx: &QueryContext, target_key: &str, query: &Query) -> Result<()> {
    let mut query = query.clone();
    unstream(&mut query);
    let schema = cx.plan_statement(Statement::Query(Box::new(query))).await?.schema().as_arrow().clone();
    let state = cx.db.catalog.current();
    let entry = state.tables.get(target_key).ok_or_else(|| Error::UndefinedTable(target_key.into()))?;
    let target = cx.db.open_table(entry).await?.snapshot().await?;
    let target_schema = target.schema();
    let missing: Vec<String> =
        schema.fields().iter().map(|f| f.name().clone()).filter(|n| target_schema.field(n).is_none()).collect();
    if !missing.is_empty() {
        return Err(Error::Plan(format!(
            "the flow's output does not fit {target_key}: it has no column{} {}",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", ")
        )));
    }
    let target_arrow = target.arrow_schema();
    for field in schema.fields() {
        let Ok(column) = target_arrow.field_with_name(field.name()) else { continue };
        if !arrow::compute::can_cast_types(field.data_type(), column.data_type()) {
            return Err(Error::Plan(format!(
                "the flow's output does not fit {target_key}: column {} is {} but the flow makes {}",
                field.name(),
                column.data_type(),
                field.data_type()
            )));
        }
    }
    Ok(())
}

pub(crate) async fn create_streaming_table(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    create: CreateStreamingTable,
) -> Result<StatementResult> {
    let name = table_name(&create.name)?;
    let table_key = key(&name.schema, &name.name);
    let exists = cx.db.catalog.current().tables.contains_key(&table_key);
    if exists && create.if_not_exists {
        return Ok(StatementResult::command("CREATE STREAMING TABLE"));
    }
    if exists && !create.or_replace {
        return Err(Error::DuplicateTable(name.to_string()));
    }
    let mode = mode_of(&create.options)?;
    // A per-value route's template, checked before anything is made.
    let template = match &create.value_route {
        Some(route) => {
            if create.else_route.is_some() {
                return Err(Error::Plan(
                    "ELSE PUSH INTO and PUSH INTO TABLE PER cannot be combined: every row with a value goes to its table"
                        .into(),
                ));
            }
            let template = route.template.clone().unwrap_or_else(|| format!("{}_{{value}}", name.name));
            super::per_value::target_name(&template, "x")?;
            Some(template)
        }
        None => None,
    };
    let options: BTreeMap<String, String> = create.options.iter().cloned().collect();
    let expectations: Vec<Expectation> = create
        .expectations
        .iter()
        .map(|e| Expectation { name: e.name.clone(), expr: e.expr.to_string(), action: e.action.clone() })
        .collect();
    if create.from_source.is_some() && (create.query.is_some() || !create.columns.is_empty()) {
        return Err(Error::Plan(format!(
            "streaming table {name} reads a source: its columns come from the source (no column list or AS query)"
        )));
    }
    let mut cdc_flow = None;
    if let (Some(spec), Some(query)) = (&create.cdc, &create.query) {
        if !exists && !create.columns.is_empty() {
            let table = CreateTable {
                columns: create.columns.clone(),
                constraints: create.constraints.clone(),
                ..CreateTable::new(create.name.clone())
            };
            cx.create_table(table).await?;
        }
        let flow = super::cdc_ddl::define(cx, &name.name, &create.name, spec, query, mode, FlowSyntax::Pull).await?;
        cdc_flow = Some(flow);
    } else if let Some(source) = &create.from_source {
        crate::source::ddl::create_ingesting_table(cx, &create.name, source, exists).await?;
    } else if !exists {
        match &create.query {
            Some(query) => create_for_output(cx, &create.name, query).await?,
            None => {
                let table = CreateTable {
                    columns: create.columns.clone(),
                    constraints: create.constraints.clone(),
                    columns_later: create.routes.is_empty() && create.else_route.is_none(),
                    ..CreateTable::new(create.name.clone())
                };
                cx.create_table(table).await?;
            }
        }
    }
    mark_streaming(cx, &table_key, expectations.clone(), options).await?;
    if let Some(source) = &create.from_source {
        crate::source::ddl::set_ingested_source(cx, &table_key, Some(source.clone())).await?;
    }
    create_quarantine_tables(cx, &table_key, &expectations).await?;
    let mut flows = Vec::new();
    if let Some(flow) = cdc_flow {
        flows.push(flow);
    } else if let Some(query) = &create.query {
        let sources = stream_sources(query)?;
        let change_feeds = change_streams(query)?;
        if sources.is_empty() {
            return Err(Error::Plan(format!(
                "the query of streaming table {name} must read a source with STREAM(...)"
            )));
        }
        for source in &sources {
            let flow_name = if sources.len() == 1 {
                name.name.clone()
            } else {
                format!("{}_from_{}", name.name, source.rsplit('.').next().unwrap_or(source))
            };
            flows.push(FlowEntry {
                name: flow_name,
                source: source.clone(),
                target: table_key.clone(),
                query: query.to_string(),
                syntax: FlowSyntax::Pull,
                mode,
                by_name: true,
                else_route: false,
                predicate: None,
                expand_json: None,
                cdc: None,
                changes: change_feeds.contains(source),
                evolve: false,
                created_ms: super::now_ms(),
            });
        }
    }
    for route in &create.routes {
        flows.push(route_flow(cx, &table_key, route, mode).await?);
    }
    if let Some(target) = &create.else_route {
        flows.push(else_flow(cx, &table_key, target, mode, &flows).await?);
    }
    let ordinary: Vec<Option<String>> =
        flows.iter().filter(|f| f.syntax == FlowSyntax::Push).map(|f| f.predicate.clone()).collect();
    let replace = exists && create.or_replace;
    match (&create.value_route, template) {
        (Some(def), Some(template)) => {
            let route = crate::catalog::ValueRoute {
                source: table_key.clone(),
                expr: def.expr.to_string(),
                template,
                predicate: super::per_value::route_predicate(def.predicate.as_ref().map(|p| p.to_string()), &ordinary),
                expand_json: def.expand_json.clone(),
                mode,
                scanned_version: -1,
                tables: BTreeMap::new(),
            };
            super::per_value::define(cx, route).await?;
        }
        _ if replace => {
            cx.db
                .catalog
                .update(|state| {
                    state.value_routes.remove(&table_key);
                    Ok(())
                })
                .await?;
        }
        _ => {}
    }
    commit_flows(cx, flows_rt, &table_key, flows, replace).await?;
    if create.value_route.is_some() && super::per_value::discover(flows_rt, &table_key, None).await? {
        let state = cx.db.catalog.current();
        for flow in state.flows_from(&table_key).cloned().collect::<Vec<_>>() {
            run_now(flows_rt, &flow).await?;
        }
    }
    Ok(StatementResult::command("CREATE STREAMING TABLE"))
}

async fn create_quarantine_tables(cx: &QueryContext, table_key: &str, expectations: &[Expectation]) -> Result<()> {
    for expectation in expectations {
        let crate::catalog::ViolationAction::Quarantine(target) = &expectation.action else { continue };
        let target_name = crate::names::parse_table_name(target)?;
        if cx.db.catalog.current().table(&target_name.schema, &target_name.name).is_some() {
            continue;
        }
        let text = format!(
            "SELECT *, CAST(NULL AS TEXT) AS {}, CAST(NULL AS BIGINT) AS {} FROM {}",
            crate::sql::quality::CONSTRAINT_COLUMN,
            crate::sql::quality::SOURCE_VERSION_COLUMN,
            super::query::quoted_key(table_key)
        );
        let SluiceStatement::Standard(statement) = parse_statement_text(&text)? else { continue };
        let Statement::Query(query) = *statement else { continue };
        let object = crate::names::object_name(&target_name.schema, &target_name.name);
        create_for_output(cx, &object, &query).await?;
    }
    Ok(())
}

/// The flow of a `PUSH INTO` route from `source`; creates a missing target.
async fn route_flow(cx: &QueryContext, source: &str, route: &PushRoute, mode: FlowMode) -> Result<FlowEntry> {
    let target = key_of(&route.target)?;
    let (query_text, predicate) = match &route.query {
        Some(query) => (query.to_string(), query_predicate(query)),
        None => (route_query(source, route.predicate.as_ref()), route.predicate.as_ref().map(|p| p.to_string())),
    };
    let source_name = source.rsplit('.').next().unwrap_or(source).to_string();
    let target_name = target.rsplit('.').next().unwrap_or(&target).to_string();
    match &route.expand_json {
        Some(column) => {
            let shape = super::expand::expanded_shape(cx, &query_text, column).await?;
            if cx.db.catalog.current().tables.contains_key(&target) {
                super::expand::add_missing_columns(cx, &target, &shape).await?;
            }
            flow_target(cx, &route.target, &target, &shape).await?;
        }
        None => flow_target(cx, &route.target, &target, &query_text).await?,
    }
    Ok(FlowEntry {
        name: format!("{source_name}_to_{target_name}"),
        source: source.to_string(),
        target,
        query: query_text,
        syntax: FlowSyntax::Push,
        mode,
        by_name: true,
        else_route: false,
        predicate,
        expand_json: route.expand_json.clone(),
        cdc: None,
        changes: false,
        evolve: false,
        created_ms: super::now_ms(),
    })
}

/// Creates a flow's missing target from the flow's output, or checks an existing one.
async fn flow_target(cx: &QueryContext, target: &ObjectName, target_key: &str, query_text: &str) -> Result<()> {
    let SluiceStatement::Standard(statement) = parse_statement_text(query_text)? else {
        return Err(Error::Plan("a route needs a query".into()));
    };
    let Statement::Query(query) = *statement else { return Err(Error::Plan("a route needs a query".into())) };
    if cx.db.catalog.current().tables.contains_key(target_key) {
        check_fits(cx, target_key, &query).await
    } else {
        create_for_output(cx, target, &query).await
    }
}

async fn else_flow(
    cx: &QueryContext,
    source: &str,
    target: &ObjectName,
    mode: FlowMode,
    siblings: &[FlowEntry],
) -> Result<FlowEntry> {
    let target_key = key_of(target)?;
    let predicates: Vec<Option<String>> =
        siblings.iter().filter(|f| f.syntax == FlowSyntax::Push).map(|f| f.predicate.clone()).collect();
    let query = else_query(source, &predicates);
    flow_target(cx, target, &target_key, &query).await?;
    let source_name = source.rsplit('.').next().unwrap_or(source);
    let target_name = target_key.rsplit('.').next().unwrap_or(&target_key);
    Ok(FlowEntry {
        name: format!("{source_name}_to_{target_name}"),
        source: source.to_string(),
        target: target_key.clone(),
        query,
        syntax: FlowSyntax::Push,
        mode,
        by_name: true,
        else_route: true,
        predicate: None,
        expand_json: None,
        cdc: None,
        changes: false,
        evolve: false,
        created_ms: super::now_ms(),
    })
}

/// Commits new flows in one catalog change (replacing the push routes of `table_key` and the
/// flows into it when `replace`), rejecting cycles and taken names, then runs them.
pub(super) async fn commit_flows(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    table_key: &str,
    flows: Vec<FlowEntry>,
    replace: bool,
) -> Result<()> {
    cx.db
        .catalog
        .update(|state| {
            if replace {
                state.flows.retain(|_, f| {
                    !(f.target == table_key && f.syntax == FlowSyntax::Pull
                        || f.source == table_key && f.syntax == FlowSyntax::Push)
                });
            }
            for flow in &flows {
                if state.flows.contains_key(&flow.name) {
                    return Err(Error::DuplicateObject { kind: "flow", name: flow.name.clone() });
                }
                if state.would_cycle(&flow.source, &flow.target) {
                    return Err(Error::Plan(format!(
                        "flow {} from {} into {} would make a cycle",
                        flow.name, flow.source, flow.target
                    )));
                }
                state.flows.insert(flow.name.clone(), flow.clone());
            }
            Ok(())
        })
        .await?;
    for flow in &flows {
        run_now(flows_rt, flow).await?;
    }
    Ok(())
}

/// Runs a flow now (its write into the target runs the target's own flows).
async fn run_now(flows_rt: &Arc<FlowRuntime>, flow: &FlowEntry) -> Result<()> {
    super::run_flow(flows_rt, flow, None).await.map(|_| ())
}

pub(crate) async fn create_flow(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    create: CreateFlow,
) -> Result<StatementResult> {
    let target_key = key_of(&create.target)?;
    if !cx.db.catalog.current().tables.contains_key(&target_key) {
        return Err(Error::UndefinedTable(create.target.to_string()));
    }
    let mode = mode_of(&create.options)?;
    let flow = match &create.cdc {
        Some(spec) => {
            super::cdc_ddl::define(cx, &create.name, &create.target, spec, &create.query, mode, FlowSyntax::Flow)
                .await?
        }
        None => {
            let sources = stream_sources(&create.query)?;
            let [source] = sources.as_slice() else {
                return Err(Error::Plan(format!(
                    "flow {} must read exactly one source with STREAM(...), found {}",
                    create.name,
                    sources.len()
                )));
            };
            if create.by_name {
                check_fits(cx, &target_key, &create.query).await?;
            }
            FlowEntry {
                name: create.name.clone(),
                source: source.clone(),
                target: target_key.clone(),
                query: create.query.to_string(),
                syntax: FlowSyntax::Flow,
                mode,
                by_name: create.by_name,
                else_route: false,
                predicate: None,
                expand_json: None,
                cdc: None,
                changes: change_streams(&create.query)?.contains(source),
                evolve: false,
                created_ms: super::now_ms(),
            }
        }
    };
    if create.or_replace {
        cx.db
            .catalog
            .update(|state| {
                state.flows.remove(&create.name);
                Ok(())
            })
            .await?;
    }
    commit_flows(cx, flows_rt, &target_key, vec![flow], false).await?;
    Ok(StatementResult::command("CREATE FLOW"))
}

pub(crate) async fn alter_streaming(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    table: &ObjectName,
    change: AlterStreaming,
) -> Result<StatementResult> {
    let source = key_of(table)?;
    let state = cx.db.catalog.current();
    let entry = state.tables.get(&source).ok_or_else(|| Error::UndefinedTable(table.to_string()))?;
    let mode = mode_of(&entry.options.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>())?;
    match change {
        AlterStreaming::AddPush(route) => {
            let flow = route_flow(cx, &source, &route, mode).await?;
            commit_flows(cx, flows_rt, &source, vec![flow], false).await?;
        }
        AlterStreaming::AddElse(target) => {
            let siblings: Vec<FlowEntry> = state.flows_from(&source).filter(|f| !f.else_route).cloned().collect();
            let flow = else_flow(cx, &source, &target, mode, &siblings).await?;
            commit_flows(cx, flows_rt, &source, vec![flow], false).await?;
        }
        AlterStreaming::DropPush(target) => {
            let target = key_of(&target)?;
            let (_, dropped) = cx
                .db
                .catalog
                .update(|state| {
                    let names: Vec<String> = state
                        .flows_from(&source)
                        .filter(|f| f.target == target && f.syntax == FlowSyntax::Push)
                        .map(|f| f.name.clone())
                        .collect();
                    if names.is_empty() {
                        return Err(Error::UndefinedObject { kind: "push route into", name: target.clone() });
                    }
                    for name in &names {
                        state.flows.remove(name);
                    }
                    Ok(names)
                })
                .await?;
            for name in dropped {
                flows_rt.forget(&name);
            }
        }
    }
    refresh_else_route(cx, &source).await?;
    Ok(StatementResult::command("ALTER STREAMING TABLE"))
}

/// Rederives the ELSE route of `source` from its other routes.
async fn refresh_else_route(cx: &QueryContext, source: &str) -> Result<()> {
    cx.db
        .catalog
        .update(|state| {
            let predicates: Vec<Option<String>> = state
                .flows_from(source)
                .filter(|f| f.syntax == FlowSyntax::Push && !f.else_route)
                .map(|f| f.predicate.clone())
                .collect();
            let query = else_query(source, &predicates);
            for flow in state.flows.values_mut().filter(|f| f.source == source && f.else_route) {
                flow.query = query.clone();
            }
            Ok(())
        })
        .await?;
    Ok(())
}

pub(crate) async fn resume_flow(cx: &QueryContext, flows_rt: &Arc<FlowRuntime>, name: &str) -> Result<StatementResult> {
    let flow = cx.db.catalog.current().flows.get(name).cloned().ok_or_else(|| flow_not_found(name))?;
    flows_rt.resume(&cx.db.events, name);
    run_now(flows_rt, &flow).await?;
    Ok(StatementResult::command("ALTER FLOW"))
}

pub(crate) async fn refresh_streaming(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    table: &ObjectName,
    full: bool,
) -> Result<StatementResult> {
    let target = key_of(table)?;
    let state = cx.db.catalog.current();
    if !state.tables.contains_key(&target) {
        return Err(Error::UndefinedTable(table.to_string()));
    }
    let flows: Vec<FlowEntry> = state.flows_into(&target).cloned().collect();
    if full {
        truncate_for_replay(cx, flows_rt, &target, &flows).await?;
    }
    for flow in &flows {
        flows_rt.resume(&cx.db.events, &flow.name);
        run_now(flows_rt, flow).await?;
    }
    Ok(StatementResult::command("REFRESH STREAMING TABLE"))
}

/// Empties a table and sets every flow into it back to before version 0 (txn version -1), so
/// the flows replay their sources from the start.
async fn truncate_for_replay(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    target_key: &str,
    flows: &[FlowEntry],
) -> Result<()> {
    let name = crate::names::parse_table_name(target_key)?;
    let object = crate::names::object_name(&name.schema, &name.name);
    let mut overwrite = true;
    let reset: Vec<Option<&FlowEntry>> = if flows.is_empty() { vec![None] } else { flows.iter().map(Some).collect() };
    for flow in reset {
        cx.clear_statement_state();
        let target = cx.target(&object).await?;
        let request = sluice_storage::write::WriteRequest {
            batches: vec![],
            mode: if overwrite {
                sluice_storage::write::SaveMode::Overwrite
            } else {
                sluice_storage::write::SaveMode::Append
            },
            txns: flow
                .map(|f| sluice_storage::actions::Txn {
                    app_id: f.name.clone(),
                    version: -1,
                    last_updated: Some(super::now_ms()),
                })
                .into_iter()
                .collect(),
            operation: Some("REFRESH FULL".into()),
            ..Default::default()
        };
        let outcome = target.table.write_on(&target.snapshot, request).await?;
        let operation = if overwrite { Operation::Truncate } else { Operation::Write };
        cx.db.writer.commit(target_key, operation, None, outcome).await?;
        overwrite = false;
        if let Some(flow) = flow {
            flows_rt.reset_progress(&flow.name);
        }
    }
    cx.clear_statement_state();
    Ok(())
}

pub(crate) async fn explain_flow(cx: &QueryContext, name: &str) -> Result<StatementResult> {
    let flow = cx.db.catalog.current().flows.get(name).cloned().ok_or_else(|| flow_not_found(name))?;
    let SluiceStatement::Standard(statement) = parse_statement_text(&flow.query)? else {
        return Err(Error::Internal(format!("flow {name} has no query")));
    };
    let Statement::Query(mut query) = *statement else {
        return Err(Error::Internal(format!("flow {name} has no query")));
    };
    unstream(&mut query);
    let explain = Statement::Explain {
        describe_alias: datafusion::sql::sqlparser::ast::DescribeAlias::Explain,
        analyze: false,
        verbose: false,
        query_plan: false,
        estimate: false,
        statement: Box::new(Statement::Query(query)),
        format: None,
        options: None,
    };
    // Boxed: EXPLAIN FLOW plans a statement itself.
    let mut results = vec![Box::pin(cx.run_datafusion(explain)).await?];
    let header = format!(
        "flow {name}: {} -> {} ({}, {}): {}",
        flow.source,
        flow.target,
        match flow.syntax {
            FlowSyntax::Push => "push",
            FlowSyntax::Pull => "pull",
            FlowSyntax::Flow => "flow",
        },
        match flow.mode {
            FlowMode::Sync => "sync",
            FlowMode::Async => "async",
        },
        flow.query
    );
    match results.pop() {
        Some(StatementResult::Rows { schema, mut batches }) => {
            let first = arrow::array::RecordBatch::try_new(
                schema.clone(),
                vec![
                    std::sync::Arc::new(arrow::array::StringArray::from(vec!["flow"])),
                    std::sync::Arc::new(arrow::array::StringArray::from(vec![header])),
                ],
            )?;
            batches.insert(0, first);
            Ok(StatementResult::Rows { schema, batches })
        }
        _ => Err(Error::Internal("EXPLAIN returned no rows".into())),
    }
}

pub(crate) async fn drop_flow(
    cx: &QueryContext,
    flows_rt: &Arc<FlowRuntime>,
    name: &str,
    if_exists: bool,
) -> Result<StatementResult> {
    if if_exists && !cx.db.catalog.current().flows.contains_key(name) {
        cx.notice(format!("flow \"{name}\" does not exist, skipping"));
    }
    let (_, dropped) = cx
        .db
        .catalog
        .update(|state| match state.flows.remove(name) {
            Some(flow) => Ok(Some(flow)),
            None if if_exists => Ok(None),
            None => Err(flow_not_found(name)),
        })
        .await?;
    if let Some(flow) = dropped {
        flows_rt.forget(&flow.name);
        if flow.syntax == FlowSyntax::Push {
            refresh_else_route(cx, &flow.source).await?;
        }
    }
    Ok(StatementResult::command("DROP FLOW"))
}
